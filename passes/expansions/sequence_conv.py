"""CausalConvWithState (27): stateful causal depthwise 1-D convolution (Mamba / Gated DeltaNet).

The carry state (or k-1 zeros) is prepended to the input along the length axis, a depthwise Conv with
no padding gives an output as long as the input, and the last k-1 positions of the padded sequence
are the present state. The activation ``silu``/``swish`` is Swish with alpha 1.
"""

from __future__ import annotations

from .builder import ALL_FLOATS, Builder
from .registry import expansion

ACTIVATIONS = ("none", "silu", "swish")
END = 2**62  # a Slice end past any real length


@expansion("CausalConvWithState", versions=(27, 10**9))
def causal_conv_with_state(b: Builder) -> None:
    b.require_types([0, 1, 2, 3], ALL_FLOATS)
    act = b.attr("activation", "none")
    if act not in ACTIVATIONS:
        raise b.fail(f"activation must be one of {', '.join(ACTIVATIONS)}, got {act!r}")
    xs, ws = b.shape(0), b.shape(1)
    if len(xs) != 3:
        raise b.fail(f"input must have shape (batch, channels, length), got rank {len(xs)}")
    if len(ws) != 3 or ws[1] != 1:
        raise b.fail(f"weight must have shape (channels, 1, k), got {list(ws)}")
    channels, k = ws[0], ws[2]
    if not isinstance(channels, int):
        channels = xs[1]
    if not isinstance(channels, int) or not isinstance(k, int):
        raise b.unsupported("the channel count and kernel size must be static")
    if k < 1:
        raise b.fail(f"kernel size must be at least 1, got {k}")
    x, past = b.input(0), b.input(3)
    if past is not None:
        ps = b.shape(3)
        if len(ps) != 3 or (isinstance(ps[2], int) and ps[2] != k - 1):
            raise b.fail(f"past_state must have shape (batch, channels, k - 1 = {k - 1}), got {list(ps)}")
        padded = b.op("Concat", past, x, axis=2)
    elif k > 1:
        padded = b.op("Pad", x, b.ints([0, 0, k - 1, 0, 0, 0]), b.scalar(0, b.dtype(0)), mode="constant")
    else:
        padded = x
    conv = b.op("Conv", padded, b.input(1), b.input(2), group=channels, kernel_shape=[k], pads=[0, 0],
                strides=[1], dilations=[1])
    if act == "none":
        b.identity(conv, b.output(0))
    else:
        b.op("Swish", conv, alpha=1.0, out=b.output(0))
    if b.output(1) is not None:
        start = -(k - 1) if k > 1 else END  # k == 1: an empty state (batch, channels, 0)
        b.op("Slice", padded, b.ints([start]), b.ints([END]), b.ints([2]), out=b.output(1))
