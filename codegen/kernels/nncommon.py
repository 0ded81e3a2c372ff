"""Helpers shared by the neural-net kernel families (matmul, conv, pool, norm, softmax).

Element-type acceptance checks, the GEMM call (runtime_c/onnxc_gemm.h) and C literals (parallel loops:
codegen/kernels/parfor.py).
"""

from __future__ import annotations

from collections.abc import Callable

from onnxc.ir import DType, Node, TensorType, UnsupportedOpError
from onnxc.ir.types import EMULATED_FLOATS

from .base import KernelCtx

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})
GEMM_INTS = frozenset({DType.INT32, DType.INT64, DType.UINT32, DType.UINT64})


def dtype_accepts(allowed: frozenset, inputs: tuple[int, ...] = (0,)) -> Callable[[Node], str | None]:
    """An ``accepts=`` check: the element type of the given inputs must be in ``allowed``."""

    def accepts(node: Node) -> str | None:
        for i in inputs:
            v = node.input(i)
            t = None if v is None else v.type
            if not isinstance(t, TensorType) or t.dtype in allowed:
                continue
            if t.dtype in EMULATED_FLOATS:
                return f"element type {t.dtype.short} is not supported yet (emulated float types come later)"
            return f"element type {t.dtype.short} is not supported (supported: " \
                   f"{', '.join(sorted(d.short for d in allowed))})"
        return None

    return accepts


def same_type_accepts(*inputs: int) -> Callable[[Node], str | None]:
    """An ``accepts=`` check: the listed inputs (when present and typed) have input 0's element type
    (whose supported values the kernel declares with ``types=``)."""

    def accepts(node: Node) -> str | None:
        x = node.input(0)
        for i in inputs:
            v = node.input(i)
            if x is not None and v is not None and None not in (x.dtype, v.dtype) and v.dtype != x.dtype:
                return f"input {i} of type {v.dtype.short} with input 0 of type {x.dtype.short} is not supported"
        return None

    return accepts


def unsupported(ctx: KernelCtx, why: str) -> UnsupportedOpError:
    n = ctx.node
    return UnsupportedOpError(f"{n.describe()}: {why}", [(n.domain or "ai.onnx", n.op_type, n.version)])


def is_used(v) -> bool:
    """Whether an output value is read by a node or is a graph output."""
    if v is None:
        return False
    return bool(v.uses()) or (v.graph is not None and any(o is v for o in v.graph.outputs))


def mfn(name: str, dt: DType) -> str:
    """The <math.h> function ``name`` for ``dt`` (expf for float, exp for double)."""
    return name + "f" if dt == DType.FLOAT else name


def use_gemm(ctx: KernelCtx) -> None:
    ctx.include("onnxc_gemm.h")


def gemm_expr(ctx: KernelCtx, dt: DType, ta: str, tb: str, m: str, n: str, k: str, alpha: str, a: str,
              lda: str, b: str, ldb: str, beta: str, c: str, ldc: str, threads: str = "rt->threads") -> str:
    """A C expression calling the blocked GEMM (nonzero on allocation failure)."""
    use_gemm(ctx)
    fn = "onnxc_sgemm" if dt == DType.FLOAT else "onnxc_dgemm"
    return f"{fn}({threads}, {ta}, {tb}, {m}, {n}, {k}, {alpha}, {a}, {lda}, {b}, {ldb}, {beta}, {c}, {ldc})"


def gemm_call(ctx: KernelCtx, dt: DType, *args: str, threads: str = "rt->threads") -> str:
    """A C statement calling the blocked GEMM (arguments as for :func:`gemm_expr`); returns from the
    kernel on allocation failure."""
    return (f"if ({gemm_expr(ctx, dt, *args, threads=threads)}) "
            "return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in GEMM\");")


