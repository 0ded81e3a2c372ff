"""float16 / bfloat16 elements: stored as uint16_t bit patterns, computed in float32.

Kernels that support these types read each element through ``load(dtype, expr)`` (a float value)
and write through ``store(dtype, expr)`` (the bit pattern, rounded to nearest even, NaN kept); for
other types both are the identity. The C conversions live in runtime_c/onnxc_half.h; their numpy
twins are in passes/shapes/cast.py (``half_to_float``/``float_to_half``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import replace

from onnxc.ir import DType
from onnxc.passes.shapes.cast import half_to_float

from .base import WHO, KernelCtx, Operand

HALF = frozenset({DType.FLOAT16, DType.BFLOAT16})

_LOAD = {DType.FLOAT16: "onnxc_h2f", DType.BFLOAT16: "onnxc_bf2f"}
_STORE = {DType.FLOAT16: "onnxc_f2h", DType.BFLOAT16: "onnxc_f2bf"}


def compute_type(dt: DType) -> DType:
    """The type arithmetic on ``dt`` elements runs in: float for half types, ``dt`` otherwise."""
    return DType.FLOAT if dt in HALF else dt


def load(dt: DType, expr: str) -> str:
    """C expression of element ``expr`` (stored as ``dt``) in its compute type."""
    return f"{_LOAD[dt]}({expr})" if dt in HALF else expr


def store(dt: DType, expr: str) -> str:
    """C expression storing compute-type value ``expr`` as a ``dt`` element."""
    return f"{_STORE[dt]}({expr})" if dt in HALF else expr


def wrap(expr: str, ins: list[DType], out: DType) -> str:
    """``expr`` over compute-type values ``{0}``, ``{1}``... made to read stored inputs ``ins`` and
    produce a stored ``out`` element."""
    return store(out, expr.format(*[load(dt, f"{{{k}}}") for k, dt in enumerate(ins)]))


def use(ctx: KernelCtx) -> None:
    """Include the conversion helpers in the kernel's translation unit."""
    ctx.include("onnxc_half.h")


def via_float32(fn: Callable[[KernelCtx], str]) -> Callable[[KernelCtx], str]:
    """Make a float32 lowering serve float16/bfloat16 nodes too (for kernels too involved to convert
    per element, e.g. GEMM): half inputs are converted into float32 scratch copies, the float32 body
    runs as a static helper function, and its float32 outputs are rounded into the half outputs.
    Nodes without half operands lower unchanged."""

    @functools.wraps(fn)
    def run(ctx: KernelCtx) -> str:
        ops = [op for op in list(ctx.ins) + list(ctx.outs) if op is not None]
        if not any(op.dtype in HALF for op in ops):
            return fn(ctx)
        use(ctx)

        def as_float(op: Operand | None) -> Operand | None:
            if op is None or op.dtype not in HALF:
                return op
            const = None if op.const is None else half_to_float(op.const, op.dtype)
            return replace(op, dtype=DType.FLOAT, const=const)

        fctx = replace(ctx, ins=[as_float(op) for op in ctx.ins], outs=[as_float(op) for op in ctx.outs])
        body = fn(fctx)
        params = ["onnxc_rt *rt", "const int64_t *D"]
        params += [f"const {op.ctype} *restrict {op.ptr}" for op in fctx.ins if op is not None]
        params += [f"{op.ctype} *restrict {op.ptr}" for op in fctx.outs]
        uses_who = re.search(rf"\b{WHO}\b", body) is not None  # the node's name, passed on (KernelCtx.who)
        params += [f"const char *{WHO}"] if uses_who else []
        sig = ", ".join(params)
        name = "onnxc_f32_" + hashlib.sha1(f"{sig}\n{body}".encode()).hexdigest()[:16]
        ctx.helper(name, f"static int {name}({sig}) {{\n(void)rt; (void)D;\n{body}\n}}")
        half_ops = [(o, f) for o, f in zip(list(ctx.ins) + list(ctx.outs), list(fctx.ins) + list(fctx.outs))
                    if o is not None and o.dtype in HALF]
        lines = []
        for o, _ in half_ops:
            lines.append(f"float *f_{o.ptr} = onnxc_alloc((size_t)({o.numel()}) * sizeof(float));")
        fail = ("return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory converting half-precision "
                "tensors\");")
        lines.append("int rc = 0;")
        lines.append("if (" + " || ".join(f"!f_{o.ptr}" for o, _ in half_ops) + ") rc = -1;")
        lines.append("if (rc == 0) {")
        for o in ctx.ins:
            if o is not None and o.dtype in HALF:
                lines.append(f"for (int64_t i = 0; i < {o.numel()}; i++) f_{o.ptr}[i] = {load(o.dtype, f'{o.ptr}[i]')};")
        args = ["rt", "D"] + [(f"f_{o.ptr}" if o.dtype in HALF else o.ptr) for o in ctx.ins if o is not None]
        args += [(f"f_{o.ptr}" if o.dtype in HALF else o.ptr) for o in ctx.outs]
        args += [ctx.who] if uses_who else []
        lines.append(f"rc = {name}({', '.join(args)});")
        for o in ctx.outs:
            if o.dtype in HALF:
                lines.append(f"if (rc == 0) for (int64_t i = 0; i < {o.numel()}; i++) "
                             f"{o.ptr}[i] = {store(o.dtype, f'f_{o.ptr}[i]')};")
        lines.append("}")
        lines += [f"free(f_{o.ptr});" for o, _ in half_ops]
        lines.append(f"if (rc < 0) {fail}")
        lines.append("return rc;")
        return "\n".join(lines)

    return run
