"""What the quantization ops mean, read off a node: element types, granularity, arithmetic precision.

Shared by the shape/fold rules (passes/shapes/quant.py) and the C kernels (codegen/kernels/quant.py,
codegen/kernels/qlinear.py), so the compile-time and run-time paths agree by construction.

QuantizeLinear / DequantizeLinear scale (and zero point) granularity, from the scale's shape:

- per-tensor: a scalar or a one-element 1-D tensor;
- per-axis: a 1-D tensor of length ``x.shape[axis]``;
- blocked (``block_size`` > 0): the shape of x with ``x.shape[axis]`` replaced by
  ``ceil(x.shape[axis] / block_size)``.

Arithmetic follows the ONNX reference implementation (numpy type promotion): QuantizeLinear divides in
the wider of x's and the scale's types (float64 when x or the scale is int32) unless ``precision`` is
set; float16/bfloat16 arithmetic is emulated in float32 with a rounding after each operation, which
gives the same results as native half arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType, Node
from onnxc.ir.dims import ceildiv, is_static

from .common import fail, norm_axis, shape_of, tensor_type

# saturation ranges of the integer quantized types
INT_RANGES = {
    DType.UINT8: (0, 255), DType.INT8: (-128, 127), DType.UINT16: (0, 65535), DType.INT16: (-32768, 32767),
    DType.UINT4: (0, 15), DType.INT4: (-8, 7), DType.UINT2: (0, 3), DType.INT2: (-2, 1),
}
FLOAT8 = frozenset({DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ, DType.FLOAT8E5M2, DType.FLOAT8E5M2FNUZ})
LOWP_FLOATS = FLOAT8 | {DType.FLOAT4E2M1}
QUANT_TYPES = frozenset(INT_RANGES) | LOWP_FLOATS          # QuantizeLinear outputs
DEQUANT_INPUTS = QUANT_TYPES | {DType.INT32}                # DequantizeLinear inputs
REAL_TYPES = frozenset({DType.FLOAT, DType.FLOAT16, DType.BFLOAT16})  # DequantizeLinear outputs
SCALE_TYPES = REAL_TYPES | {DType.INT32, DType.FLOAT8E8M0}
QUANT_INPUTS = REAL_TYPES | {DType.INT32}                   # QuantizeLinear inputs
BYTE_TYPES = frozenset({DType.INT8, DType.UINT8})           # QLinearMatMul / ConvInteger operands


@dataclass(frozen=True)
class QLayout:
    """Granularity of a scale / zero point: ``kind`` is "tensor", "axis" or "block"; ``axis`` is the
    normalized quantization axis (0 for per-tensor), ``block`` the block size (blocked only)."""

    kind: str
    axis: int = 0
    block: int = 0


def _dtype_attr(node: Node, name: str) -> DType | None:
    v = int(node.attr(name, 0) or 0)
    if v == 0:
        return None
    try:
        return DType(v)
    except ValueError:
        raise fail(node, f"attribute {name}={v} is not an ONNX element type") from None


def quant_layout(node: Node) -> QLayout:
    """Granularity of a QuantizeLinear/DequantizeLinear node's scale (input 1), checked against x and
    the zero point (input 2). Symbolic dims that cannot be compared here are checked by the kernel."""
    x, s = shape_of(node, 0), shape_of(node, 1)
    zp = node.input(2)
    if zp is not None:
        z = shape_of(node, 2)
        scalars = all(d == 1 for d in z) and all(d == 1 for d in s)
        if not scalars and (len(z) != len(s) or any(is_static(a) and is_static(b) and a != b
                                                    for a, b in zip(z, s))):
            raise fail(node, f"zero point shape {list(z)} differs from scale shape {list(s)}")
    block = int(node.attr("block_size", 0) or 0)
    if block < 0:
        raise fail(node, f"block_size must be >= 0, got {block}")
    if all(d == 1 for d in s):
        return QLayout("tensor")
    axis = norm_axis(node, int(node.attr("axis", 1)), len(x)) if x else 0
    if not block:
        if len(s) != 1:
            raise fail(node, f"scale of shape {list(s)} needs block_size for blocked quantization "
                             "(per-axis scales are 1-D)")
        if is_static(s[0]) and is_static(x[axis]) and s[0] != x[axis]:
            raise fail(node, f"per-axis scale has {s[0]} elements but x has {x[axis]} along axis {axis}")
        return QLayout("axis", axis)
    if len(s) != len(x):
        raise fail(node, f"blocked scale must have the rank of x ({len(x)}), got shape {list(s)}")
    for k, (a, b) in enumerate(zip(x, s)):
        want = ceildiv(a, block) if k == axis else a
        if is_static(want) and is_static(b) and want != b:
            raise fail(node, f"blocked scale shape {list(s)} does not match x shape {list(x)} with "
                             f"block_size {block} on axis {axis} (expected {want} on axis {k})")
    return QLayout("block", axis, block)


def quantize_output_type(node: Node) -> DType:
    """QuantizeLinear's element type: the zero point's, else ``output_dtype``, else uint8."""
    attr = _dtype_attr(node, "output_dtype")
    zp = node.input(2)
    out = tensor_type(node, 2).dtype if zp is not None else (attr or DType.UINT8)
    if attr is not None and attr != out:
        raise fail(node, f"output_dtype {attr.short} differs from the zero point type {out.short}")
    if out not in QUANT_TYPES:
        raise fail(node, f"cannot quantize to {out.short} (supported: "
                         f"{', '.join(sorted(t.short for t in QUANT_TYPES))})")
    return out


def dequantize_output_type(node: Node) -> DType:
    """DequantizeLinear's element type: ``output_dtype``, else the scale's."""
    out = _dtype_attr(node, "output_dtype") or tensor_type(node, 1).dtype
    if out not in REAL_TYPES:
        raise fail(node, f"output type {out.short} is not float, float16 or bfloat16 (set output_dtype "
                         "when the scale is float8e8m0)")
    xt = tensor_type(node, 0).dtype
    if xt not in DEQUANT_INPUTS:
        raise fail(node, f"cannot dequantize {xt.short} tensors")
    zp = node.input(2)
    if zp is not None and tensor_type(node, 2).dtype != xt:
        raise fail(node, f"zero point type {tensor_type(node, 2).dtype.short} differs from x type {xt.short}")
    return out


def division_type(node: Node) -> DType:
    """The precision of QuantizeLinear's ``x / y_scale``: FLOAT, DOUBLE, FLOAT16 or BFLOAT16."""
    xt, st = tensor_type(node, 0).dtype, tensor_type(node, 1).dtype
    if xt not in QUANT_INPUTS:
        raise fail(node, f"cannot quantize {xt.short} tensors")
    if st not in SCALE_TYPES:
        raise fail(node, f"scale element type {st.short} is not supported")
    p = _dtype_attr(node, "precision")
    if p is not None:
        if p not in (DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16):
            raise fail(node, f"precision {p.short} is not a floating-point type")
        return p
    if DType.INT32 in (xt, st):
        return DType.DOUBLE
    return xt if xt == st else DType.FLOAT


# -- QLinearMatMul / MatMulInteger parameters ----------------------------------------------------------

def matmul_param(node: Node, i: int, side: str, operand: tuple) -> str:
    """Granularity of scale/zero-point input ``i`` of a (Q)MatMul: "tensor", "row" (side "a": one value
    per row of A, shape [M], [M, 1] or [..., M, 1]) or "col" (side "b": one per column of B, shape [N],
    [1, N] or [..., 1, N]); side "y" allows per-tensor only. ``operand`` is A's or B's shape."""
    s = shape_of(node, i)
    if len(s) == 0 or all(d == 1 for d in s):
        return "tensor"
    name = node.inputs[i].name
    if side == "a" and len(operand) >= 1:
        m = operand[-2] if len(operand) >= 2 else 1
        if (len(s) == 1 and _eq(s[0], m)) or (len(s) >= 2 and s[-1] == 1 and _eq(s[-2], m)):
            return "row"
    if side == "b" and len(operand) >= 1:
        n = operand[-1] if len(operand) >= 2 else 1
        if (len(s) == 1 and _eq(s[0], n)) or (len(s) >= 2 and s[-2] == 1 and _eq(s[-1], n)):
            return "col"
    what = {"a": "per-row ([M] or [..., M, 1])", "b": "per-column ([N] or [..., 1, N])", "y": "per-tensor"}
    raise fail(node, f"input {i} ({name!r}) of shape {list(s)} is neither per-tensor nor {what[side]}")


def _eq(a, b) -> bool:
    return a == b or not (is_static(a) and is_static(b))


def check_scalar(node: Node, i: int, what: str) -> None:
    """Input ``i`` must hold one value (a per-tensor scale or zero point)."""
    v = node.input(i)
    if v is None:
        return
    s = shape_of(node, i)
    if not all(d == 1 for d in s):
        raise fail(node, f"{what} (input {i}, {v.name!r}) must be a scalar, got shape {list(s)}")


def check_per_channel(node: Node, i: int, what: str, m) -> None:
    """Input ``i`` holds one value or one per output channel ([M])."""
    v = node.input(i)
    if v is None:
        return
    s = shape_of(node, i)
    if all(d == 1 for d in s):
        return
    if len(s) != 1 or (is_static(s[0]) and is_static(m) and s[0] != m):
        raise fail(node, f"{what} (input {i}, {v.name!r}) must be a scalar or have shape [{m}], got {list(s)}")
