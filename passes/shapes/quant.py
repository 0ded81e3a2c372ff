"""Shape, type and fold rules of the quantization ops.

QuantizeLinear / DequantizeLinear (opsets 10-25: per-tensor, per-axis, blocked; ``output_dtype``,
``saturate``, ``precision``), MatMulInteger and QLinearMatMul (numpy matmul shapes, per-row /
per-column parameters), ConvInteger and QLinearConv (the Conv geometry of spatial.py). What the
parameters mean is decided in quant_layout.py; constant Q/DQ nodes fold with the numpy twins of the
kernels in quant_np.py.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType
from onnxc.ir.dims import as_dim, is_static

from .common import fail, require_equal, shape_of, tensor_type
from .conv import kernel_shape
from .matmul import matmul_shape
from .quant_layout import (
    BYTE_TYPES,
    FLOAT8,
    REAL_TYPES,
    SCALE_TYPES,
    check_per_channel,
    check_scalar,
    dequantize_output_type,
    division_type,
    matmul_param,
    quant_layout,
    quantize_output_type,
)
from .quant_np import dequantize, quantize
from .registry import fold_rule, shape_rule
from .spatial import Window, window


@shape_rule("QuantizeLinear")
def _quantize(node: Node) -> list:
    quant_layout(node)
    division_type(node)
    return [TensorType(quantize_output_type(node), shape_of(node, 0))]


@shape_rule("DequantizeLinear")
def _dequantize(node: Node) -> list:
    quant_layout(node)
    st = tensor_type(node, 1).dtype
    if st not in SCALE_TYPES - {DType.INT32}:
        raise fail(node, f"scale element type {st.short} is not float, float16, bfloat16 or float8e8m0")
    return [TensorType(dequantize_output_type(node), shape_of(node, 0))]


@fold_rule("QuantizeLinear")
def _fold_quantize(node: Node, xs: list) -> list | None:
    x, s, zp = xs[0], xs[1], xs[2] if len(xs) > 2 else None
    out = quantize(x, node.inputs[0].dtype, s, node.inputs[1].dtype, zp, quantize_output_type(node),
                   quant_layout(node), division_type(node), bool(node.attr("saturate", 1)))
    return None if out is None else [out]


@fold_rule("DequantizeLinear")
def _fold_dequantize(node: Node, xs: list) -> list | None:
    x, s, zp = xs[0], xs[1], xs[2] if len(xs) > 2 else None
    out = dequantize(x, node.inputs[0].dtype, s, node.inputs[1].dtype, zp, dequantize_output_type(node),
                     quant_layout(node))
    return None if out is None else [out]


# -- integer matrix products ------------------------------------------------------------------------

def _operand(node: Node, i: int, what: str, allowed: frozenset = BYTE_TYPES) -> tuple:
    t = tensor_type(node, i)
    if t.dtype not in allowed:
        raise fail(node, f"{what} must be int8 or uint8, got {t.dtype.short}")
    return shape_of(node, i)


def _zero_point(node: Node, i: int, of: int) -> None:
    v = node.input(i)
    if v is not None and tensor_type(node, i).dtype != tensor_type(node, of).dtype:
        raise fail(node, f"zero point {v.name!r} has type {tensor_type(node, i).dtype.short}, expected "
                         f"{tensor_type(node, of).dtype.short}")


def _scales(node: Node, idx: tuple[int, ...]) -> None:
    allowed = frozenset({DType.FLOAT}) if node.version < 21 else REAL_TYPES
    types = {tensor_type(node, i).dtype for i in idx}
    if not types <= allowed or len(types) != 1:
        raise fail(node, f"scales must all be {' or '.join(sorted(t.short for t in allowed))} "
                         f"(one type), got {sorted(t.short for t in types)}")


@shape_rule("MatMulInteger")
def _matmul_integer(node: Node) -> list:
    a, b = _operand(node, 0, "A"), _operand(node, 1, "B")
    for i, side, of, shp in ((2, "a", 0, a), (3, "b", 1, b)):
        if node.input(i) is not None:
            _zero_point(node, i, of)
            matmul_param(node, i, side, shp)
    return [TensorType(DType.INT32, matmul_shape(node, a, b))]


def _qlinear_types(node: Node) -> frozenset:
    return BYTE_TYPES | FLOAT8 if node.version >= 21 else BYTE_TYPES


@shape_rule("QLinearMatMul")
def _qlinear_matmul(node: Node) -> list:
    allowed = _qlinear_types(node)
    a, b = _operand(node, 0, "a", allowed), _operand(node, 3, "b", allowed)
    _scales(node, (1, 4, 6))
    for i, side, shp in ((1, "a", a), (2, "a", a), (4, "b", b), (5, "b", b), (6, "y", ()), (7, "y", ())):
        if node.input(i) is not None:
            matmul_param(node, i, side, shp)
    _zero_point(node, 2, 0)
    _zero_point(node, 5, 3)
    out = tensor_type(node, 7).dtype if node.input(7) is not None else tensor_type(node, 0).dtype
    if out not in allowed:
        raise fail(node, f"y_zero_point type {out.short} is not a quantized type")
    return [TensorType(out, matmul_shape(node, a, b))]


@fold_rule("MatMulInteger")
def _fold_matmul_integer(node: Node, xs: list) -> list:
    a, b = xs[0].astype(np.int64), xs[1].astype(np.int64)
    if len(xs) > 2 and xs[2] is not None:
        za = xs[2].astype(np.int64)
        a = a - (za.reshape(-1, 1) if za.ndim == 1 and za.size > 1 else za)
    if len(xs) > 3 and xs[3] is not None:
        b = b - xs[3].astype(np.int64)
    return [np.matmul(a, b).astype(np.int32)]


# -- integer convolutions ---------------------------------------------------------------------------

def qconv_geometry(node: Node, xi: int, wi: int) -> tuple[tuple, tuple, int, Window]:
    """(x shape, w shape, group, window) of a ConvInteger (x=0, w=1) / QLinearConv (x=0, w=3) node."""
    x, w = _operand(node, xi, "x"), _operand(node, wi, "w")
    if len(x) < 3 or len(w) != len(x):
        raise fail(node, f"x (shape {list(x)}) and w (shape {list(w)}) must have the same rank >= 3")
    group = int(node.attr("group", 1))
    if group <= 0:
        raise fail(node, f"group must be positive, got {group}")
    c, m, cg = x[1], w[0], w[1]
    require_equal(node, [(c, "x axis 1 (channels)"), (as_dim(cg) * group, f"w's channels x group {group}")],
                  "convolution channels")
    if is_static(m) and m % group:
        raise fail(node, f"output channels {m} are not divisible by group {group}")
    return x, w, group, window(node, tuple(x[2:]), kernel_shape(node, w))


@shape_rule("ConvInteger")
def _conv_integer(node: Node) -> list:
    x, w, _, win = qconv_geometry(node, 0, 1)
    _zero_point(node, 2, 0)
    _zero_point(node, 3, 1)
    check_scalar(node, 2, "x_zero_point")
    check_per_channel(node, 3, "w_zero_point", w[0])
    return [TensorType(DType.INT32, (x[0], w[0], *win.out))]


@shape_rule("QLinearConv")
def _qlinear_conv(node: Node) -> list:
    x, w, _, win = qconv_geometry(node, 0, 3)
    _scales(node, (1, 4, 6))
    _zero_point(node, 2, 0)
    _zero_point(node, 5, 3)
    for i, what in ((1, "x_scale"), (2, "x_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        check_scalar(node, i, what)
    check_per_channel(node, 4, "w_scale", w[0])
    check_per_channel(node, 5, "w_zero_point", w[0])
    b = node.input(8)
    if b is not None:
        bs = shape_of(node, 8)
        if tensor_type(node, 8).dtype != DType.INT32 or len(bs) != 1 or \
                (is_static(bs[0]) and is_static(w[0]) and bs[0] != w[0]):
            raise fail(node, f"bias must be int32 of shape [{w[0]}], got "
                             f"{tensor_type(node, 8).dtype.short}{list(bs)}")
    out = tensor_type(node, 7).dtype if node.input(7) is not None else tensor_type(node, 0).dtype
    return [TensorType(out, (x[0], w[0], *win.out))]
