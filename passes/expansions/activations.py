"""Gated activations defined as functions: SwiGLU (28) = Swish_alpha(A) * B.

On float16/bfloat16 the gate follows the reference's rounding: ``alpha * A`` and the sigmoid are
evaluated in float32 (the float attribute promotes them) and the sigmoid is rounded to the input
type before the products, each of which rounds to the input type.
"""

from __future__ import annotations

from onnxc.ir import DType

from .builder import ALL_FLOATS, Builder
from .registry import expansion


@expansion("SwiGLU", versions=(28, 10**9))
def swiglu(b: Builder) -> None:
    b.require_types([0, 1], ALL_FLOATS)
    a, v = b.input(0), b.input(1)
    dt = b.dtype(0)
    if dt != b.dtype(1):
        raise b.fail(f"A and B must have one element type, got {b.dtype(0).short} and {b.dtype(1).short}")
    sa, sb = b.shape(0), b.shape(1)
    if len(sa) != len(sb) or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(sa, sb)):
        raise b.fail(f"A and B must have identical shapes (no broadcasting), got {list(sa)} and {list(sb)}")
    alpha = float(b.attr("alpha", 1.0))
    if dt in (DType.FLOAT, DType.DOUBLE):
        gate = b.op("Swish", a, alpha=alpha)
    else:
        x = b.cast(a, DType.FLOAT)
        if alpha != 1:
            x = b.op("Mul", x, b.scalar(alpha, DType.FLOAT))
        gate = b.op("Mul", a, b.cast(b.op("Sigmoid", x), dt), tag="gate")
    b.op("Mul", gate, v, out=b.output(0))
