"""DynamicQuantizeLinear (11): per-tensor uint8 quantization with a scale and zero point computed
from the data range (extended to include 0), rounding half to even and saturating to [0, 255].

A constant input (all zeros) has an empty range; like the reference implementation, the scale is
then 1/255 instead of a division by zero.
"""

from __future__ import annotations

from onnxc.ir import DType

from .builder import Builder
from .registry import expansion


@expansion("DynamicQuantizeLinear", versions=(11, 10**9))
def dynamic_quantize_linear(b: Builder) -> None:
    b.require_types([0], (DType.FLOAT,))
    x = b.input(0)
    f = DType.FLOAT
    zero, qmax = b.scalar(0.0, f), b.scalar(255.0, f)
    hi = b.op("Max", b.reduce("ReduceMax", x, None, keepdims=0), zero)
    lo = b.op("Min", b.reduce("ReduceMin", x, None, keepdims=0), zero)
    span = b.op("Sub", hi, lo)
    span = b.op("Where", b.op("Equal", span, zero), b.scalar(1.0, f), span)
    scale = b.op("Div", span, qmax, out=b.output(1))
    zp = b.op("Round", b.op("Clip", b.op("Neg", b.op("Div", lo, scale)), zero, qmax))
    b.cast(zp, DType.UINT8, out=b.output(2))
    q = b.op("Clip", b.op("Add", b.op("Round", b.op("Div", x, scale)), zp), zero, qmax)
    b.cast(q, DType.UINT8, out=b.output(0))
