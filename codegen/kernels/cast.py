"""Cast and CastLike between every numeric element type; BitCast.

Conversions (the numpy twin is ``passes/shapes/cast.py``'s ``cast_array``):

- to bool: ``x != 0`` (NaN is true);
- float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0 (ONNX leaves
  out-of-range values undefined; a plain C cast would be undefined behaviour);
- integer -> narrower integer: the low bits, reinterpreted (two's complement);
- everything else: the C conversion (double -> float rounds to nearest, +-inf when out of range).

float16 and bfloat16 go through float32 (exact on load); stores round to nearest even (NaN stays
NaN), and double -> float16 rounds once (onnxc_d2h). float8, float4e2m1 and float8e8m0 load exactly
to float32 and store through runtime_c/onnxc_lowp.h from double (one rounding for every source) with
the node's ``saturate`` and ``round_mode``; int4/uint4/int2/uint2 are stored one value a byte, so
they read as int8/uint8 and store as the low bits (floats rounded half to even first).
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.cast import CASTABLE, bit_width, cast_attrs
from onnxc.passes.shapes.lowp_np import FORMATS, LOWP_FLOATS, ROUND_MODES, SUBBYTE_INTS

from . import half
from .base import KernelCtx, kernel
from .elementwise import loop
from .typesets import ANY, STRING

_C_NAME = {DType.FLOAT8E4M3FN: "f8e4m3fn", DType.FLOAT8E4M3FNUZ: "f8e4m3fnuz", DType.FLOAT8E5M2: "f8e5m2",
           DType.FLOAT8E5M2FNUZ: "f8e5m2fnuz", DType.FLOAT4E2M1: "f4e2m1", DType.FLOAT8E8M0: "f8e8m0"}
# the stored values of the sub-byte integers read as these types
_INT_STORAGE = {DType.INT4: DType.INT8, DType.INT2: DType.INT8, DType.UINT4: DType.UINT8, DType.UINT2: DType.UINT8}


def cast_expr(src: DType, dst: DType, saturate: bool = True, round_mode: str = "up") -> str:
    """C expression converting ``{0}`` of type ``src`` to ``dst``."""
    if src == dst and not (dst == DType.FLOAT8E5M2 and saturate):  # saturating e5m2 maps +-inf to +-max
        return "{0}"
    if src in LOWP_FLOATS:
        load = f"onnxc_{_C_NAME[src]}_to_float({{0}})"
        return cast_expr(DType.FLOAT, dst, saturate, round_mode).replace("{0}", load)
    if src in _INT_STORAGE:
        return cast_expr(_INT_STORAGE[src], dst, saturate, round_mode)
    if src in half.HALF:
        return cast_expr(DType.FLOAT, dst, saturate, round_mode).replace("{0}", half.load(src, "{0}"))
    if dst in FORMATS:
        return f"onnxc_double_to_{_C_NAME[dst]}((double){{0}}, {int(saturate)})"
    if dst == DType.FLOAT8E8M0:
        return f"onnxc_double_to_f8e8m0((double){{0}}, {int(saturate)}, {ROUND_MODES[round_mode]})"
    if dst in SUBBYTE_INTS:
        if src.is_float:
            return f"onnxc_double_to_{dst.short}((double){{0}})"
        return f"onnxc_wrap_{dst.short}((int64_t){{0}})"
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
    """The source type (the target's is declared with types=)."""
    src = node.inputs[0].dtype if node.inputs and node.inputs[0] is not None else None
    if src is not None and src not in CASTABLE:
        return f"casts from {src.short} tensors are not supported yet"
    return None


# types: the target type (the output's), Cast's T2 and CastLike's target
@kernel("Cast", "CastLike", accepts=unsupported, types=CASTABLE, typed="out0")
def cast(ctx: KernelCtx) -> str:
    src, dst = ctx.ins[0].dtype, ctx.outs[0].dtype
    if src in LOWP_FLOATS or dst in LOWP_FLOATS or dst in SUBBYTE_INTS:
        ctx.include("onnxc_lowp.h")
    half.use(ctx)
    saturate, mode = cast_attrs(ctx.node)
    return loop(ctx, [ctx.ins[0]], cast_expr(src, dst, saturate, mode))


@kernel("BitCast", types=ANY - STRING)
def bitcast(ctx: KernelCtx) -> str:
    """The input's bytes copied unchanged, except where storage differs from the bits: sub-byte
    elements keep their low bits (int4/int2 sign-extended), and a bool target normalizes nonzero
    bytes to 1 (the twin is ``bitcast_array``)."""
    x, y = ctx.ins[0], ctx.outs[0]
    src, dst = x.dtype, y.dtype
    n = x.numel()
    if dst == DType.BOOL and src != DType.BOOL:
        expr = "(((const uint8_t *){p})[i] != 0)"
    elif src != dst and bit_width(src) < 8:
        low = f"((uint8_t){{p}}[i] & 0x{(1 << bit_width(src)) - 1:x}u)"
        expr = f"onnxc_wrap_{dst.short}({low})" if dst in SUBBYTE_INTS else low
        ctx.include("onnxc_lowp.h")
    else:
        return f"memcpy({y.ptr}, {x.ptr}, (size_t)({n}) * sizeof({y.ctype}));\nreturn 0;"
    return f"for (int64_t i = 0; i < {n}; i++) {y.ptr}[i] = {expr.format(p=x.ptr)};\nreturn 0;"
