"""Gated activations defined as functions: SwiGLU (28) = Swish_alpha(A) * B."""

from __future__ import annotations

from .builder import FLOATS, Builder
from .registry import expansion


@expansion("SwiGLU", versions=(28, 10**9))
def swiglu(b: Builder) -> None:
    b.require_types([0, 1], FLOATS)
    a, v = b.input(0), b.input(1)
    if b.dtype(0) != b.dtype(1):
        raise b.fail(f"A and B must have one element type, got {b.dtype(0).short} and {b.dtype(1).short}")
    sa, sb = b.shape(0), b.shape(1)
    if len(sa) != len(sb) or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(sa, sb)):
        raise b.fail(f"A and B must have identical shapes (no broadcasting), got {list(sa)} and {list(sb)}")
    gate = b.op("Swish", a, alpha=float(b.attr("alpha", 1.0)))
    b.op("Mul", gate, v, out=b.output(0))
