"""Cast and CastLike between float, double, bool and 8..64-bit integers.

Conversions (the numpy twin is ``passes/shapes/cast.py``'s ``cast_array``):

- to bool: ``x != 0`` (NaN is true);
- float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0 (ONNX leaves
  out-of-range values undefined; a plain C cast would be undefined behaviour);
- integer -> narrower integer: the low bits, reinterpreted (two's complement);
- everything else: the C conversion (double -> float rounds to nearest, +-inf when out of range).

float16 and bfloat16 go through float32 (exact on load); stores round to nearest even (NaN stays
NaN), and double -> float16 rounds once (onnxc_d2h). float8/4 and strings are not supported yet.
"""

from __future__ import annotations

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.cast import CASTABLE, target_type

from . import half
from .base import KernelCtx, kernel
from .elementwise import loop


def cast_expr(src: DType, dst: DType) -> str:
    """C expression converting ``{0}`` of type ``src`` to ``dst``."""
    if src == dst:
        return "{0}"
    if src in half.HALF:
        return cast_expr(DType.FLOAT, dst).replace("{0}", half.load(src, "{0}"))
    if dst == DType.FLOAT16:
        if src == DType.FLOAT:
            return "onnxc_f2h({0})"
        return "onnxc_d2h((double){0})"  # exact for integers below 2**53: one rounding
    if dst == DType.BFLOAT16:
        return "onnxc_f2bf({0})" if src == DType.FLOAT else "onnxc_f2bf((float){0})"
    if dst == DType.BOOL:
        return "({0} != 0)"
    if src.is_float and dst.is_int:
        return f"onnxc_from_double_{dst.short}((double){{0}})"
    return f"({dst.c}){{0}}"


def unsupported(node: Node) -> str | None:
    src = node.inputs[0].dtype if node.inputs and node.inputs[0] is not None else None
    try:
        dst = target_type(node)
    except ShapeError:  # invalid 'to' or unknown CastLike target: the shape rule reports it
        return None
    for t in (src, dst):
        if t is not None and t not in CASTABLE:
            return f"casts involving {t.short} tensors are not supported yet"
    return None


@kernel("Cast", "CastLike", accepts=unsupported)
def cast(ctx: KernelCtx) -> str:
    reason = unsupported(ctx.node)
    if reason:
        raise NotImplementedError(reason)
    half.use(ctx)
    return loop(ctx, [ctx.ins[0]], cast_expr(ctx.ins[0].dtype, ctx.outs[0].dtype))
