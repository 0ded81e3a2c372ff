"""Shape, type and fold rules of DynamicQuantizeLinear (opset 11), and the shape rule of
onnxc::ConvIntegerToFloat (passes/fuse_integer_dequant.py).

A native op (its kernel: codegen/kernels/dynamic_quant.py, runtime_c/onnxc_dynq.h): with a shape rule
here, the op is no longer replaced by its function body (passes/expansions/quantize.py), which would
run as a ReduceMax, a ReduceMin and an elementwise pass writing float32 before the uint8 cast. The
numpy twin below computes the same float32 steps as the kernel and the expansion.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import fail, tensor_type
from .quant import qconv_geometry
from .quant_layout import check_per_channel, check_scalar
from .registry import fold_rule, shape_rule

CONV_TO_FLOAT = ("onnxc", "ConvIntegerToFloat")  # (domain, op)


@shape_rule("DynamicQuantizeLinear", versions=(11, 10**9))
def _dynamic_quantize(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype != DType.FLOAT:
        raise fail(node, f"input element type {t.dtype.short} is not float (DynamicQuantizeLinear takes float32)")
    return [TensorType(DType.UINT8, t.shape), TensorType(DType.FLOAT, ()), TensorType(DType.UINT8, ())]


def dynamic_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, scale, zero point) in float32 steps: the range extended to 0 (NaN ignored), scale =
    range / 255 (1 / 255 for an empty range), rounding half to even, saturation to [0, 255]."""
    x = np.asarray(x, np.float32)
    finite = x[~np.isnan(x)]
    f = np.float32
    hi = max(f(finite.max()) if finite.size else f(0), f(0))
    lo = min(f(finite.min()) if finite.size else f(0), f(0))
    span = f(hi - lo)
    scale = f(f(1) if span == 0 else span) / f(255)
    zp = np.rint(np.clip(f(-lo) / scale, f(0), f(255)))
    with np.errstate(invalid="ignore"):
        q = np.clip(np.nan_to_num(np.rint(x / scale) + zp, nan=0.0), 0, 255)
    return q.astype(np.uint8), np.asarray(scale, np.float32), np.asarray(zp, np.float32).astype(np.uint8)


@fold_rule("DynamicQuantizeLinear")
def _fold_dynamic_quantize(node: Node, xs: list) -> list:
    return list(dynamic_quantize(xs[0]))


@shape_rule(CONV_TO_FLOAT[1], domain=CONV_TO_FLOAT[0])
def _conv_integer_to_float(node: Node) -> list:
    """ConvInteger's inputs and geometry, then the float scale (one value or one per output channel)
    and bias (one per output channel); a float32 output."""
    x, w, _, win = qconv_geometry(node, 0, 1)
    check_scalar(node, 2, "x_zero_point")
    check_per_channel(node, 3, "w_zero_point", w[0])
    for i, what in ((4, "scale"), (5, "bias")):
        if tensor_type(node, i).dtype != DType.FLOAT:
            raise fail(node, f"{what} (input {i}) must be float32")
        check_per_channel(node, i, what, w[0])
    return [TensorType(DType.FLOAT, (x[0], w[0], *win.out))]
