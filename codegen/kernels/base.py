"""The kernel interface: what a lowering function sees and the registry that maps ops to lowerings.

A lowering turns one IR node into the body of a C function

    static int kN(onnxc_rt *rt, const int64_t *D, <in0>, <in1>, ..., <out0>, ...)

whose parameters are typed data pointers (``const float *restrict in0``). Shapes are not passed at
run time: every dim is a C expression over the dimension variables ``D[]`` (a literal when static),
so kernels specialize on static sizes for free. A body returns 0 on success or
``onnxc_fail(rt, ONNXC_ERR_RUNTIME, ...)``.

Lowerings register with ``@kernel("Op", ...)``. A lowering marked ``alias=True`` emits no code: its
single output is a view of input 0 (Reshape, Squeeze, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import Dim, DType, Node, Value, to_c
from onnxc.ir.dims import evaluate, is_static


@dataclass
class Operand:
    """One tensor argument of a kernel."""

    ptr: str            # C name of the pointer parameter inside the kernel body
    value: Value
    dtype: DType
    shape: tuple        # tuple of Dim
    dims: list[str]     # C expressions for each dim
    const: np.ndarray | None = None

    @property
    def ctype(self) -> str:
        return self.dtype.c

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def static(self) -> bool:
        return all(is_static(d) for d in self.shape)

    def numel(self) -> str:
        """C expression for the element count."""
        if not self.dims:
            return "1"
        return " * ".join(f"({d})" if not d.isdigit() else d for d in self.dims)

    def strides(self) -> list[str]:
        """Row-major element strides as C expressions."""
        out, acc = [], "1"
        for d in reversed(self.dims):
            out.append(acc)
            acc = d if acc == "1" else (str(int(acc) * int(d)) if acc.isdigit() and d.isdigit()
                                        else f"({acc}) * ({d})")
        return list(reversed(out))


@dataclass
class KernelCtx:
    """Everything a lowering may read, plus a sink for shared helper functions."""

    node: Node
    ins: list[Operand | None]
    outs: list[Operand]
    dim_c: Callable[[Dim], str]
    helpers: dict[str, str] = field(default_factory=dict)
    threads: int = 1

    def dim(self, d: Dim) -> str:
        return self.dim_c(d)

    def attr(self, name: str, default=None):
        return self.node.attr(name, default)

    def helper(self, name: str, code: str) -> str:
        """Register a static helper function once per translation unit; returns its name."""
        self.helpers.setdefault(name, code)
        return name

    def const_input(self, i: int) -> np.ndarray | None:
        op = self.ins[i] if i < len(self.ins) else None
        return None if op is None else op.const


@dataclass
class KernelDef:
    ops: tuple[str, ...]
    domain: str
    fn: Callable[[KernelCtx], str] | None
    alias: bool = False
    accepts: Callable[[Node], str | None] | None = None  # returns a reason when the node is unsupported


KERNELS: dict[tuple[str, str], KernelDef] = {}


def kernel(*ops: str, domain: str = "", alias: bool = False,
           accepts: Callable[[Node], str | None] | None = None):
    """Register a lowering for ``ops`` (ONNX op types) of ``domain``."""

    def deco(fn):
        kd = KernelDef(ops, domain, None if alias else fn, alias, accepts)
        for op in ops:
            KERNELS[(domain, op)] = kd
        return fn

    return deco


def alias_kernel(*ops: str, domain: str = "") -> None:
    """Ops whose single output is a view of input 0 with another shape."""
    kd = KernelDef(ops, domain, None, True)
    for op in ops:
        KERNELS[(domain, op)] = kd


def lookup(node: Node) -> KernelDef | None:
    return KERNELS.get((node.domain, node.op_type))


def unsupported_reason(node: Node) -> str | None:
    """None when a kernel can lower ``node``, else why not."""
    kd = lookup(node)
    if kd is None:
        return "no kernel"
    if kd.accepts is not None:
        return kd.accepts(node)
    return None


def c_dims(shape: tuple, dim_c: Callable[[Dim], str]) -> list[str]:
    return [dim_c(d) for d in shape]


def static_value(d: Dim) -> int | None:
    return d if is_static(d) else None


__all__ = ["Operand", "KernelCtx", "KernelDef", "KERNELS", "kernel", "alias_kernel", "lookup",
           "unsupported_reason", "c_dims", "static_value", "to_c", "evaluate"]
