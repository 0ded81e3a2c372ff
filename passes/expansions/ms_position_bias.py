"""onnxruntime's relative position bias contrib ops (com.microsoft) as expansions. onnxruntime has CUDA kernels
for both and no CPU kernel; onnxc follows the CUDA kernels (contrib_ops/cuda/bert/relative_attn_bias*).

RelativePositionBias (T5; the transformer optimizer fuses T5's bucketed position bias into it): inputs
bias_table (num_buckets, num_heads), query_length and key_length (int64, one element); attributes max_distance
(required, > 0) and is_bidirectional. Output (1, num_heads, query_length, key_length):

    out[0, h, i, j] = flat(bias_table)[h * num_buckets + bucket(j - i)]

(the kernel reads the table's memory as (num_heads, num_buckets): the optimizer stores the transposed table
under the declared (num_buckets, num_heads) shape). With n = num_buckets, halved when bidirectional (then
positive distances take the upper half), and the distance d = |j - i| (unidirectional: max(i - j, 0)),
bucket(d) = d when d < n/2, else min(n/2 + int(logf(d / (n/2)) / logf(max_distance / (n/2)) * (n - n/2)), n - 1),
in float32 as the kernel computes it. onnxruntime requires query_length == key_length; onnxc computes the
rectangular bias for any two lengths.

GatedRelativePositionBias (WavLM-style gated bias): query (B, S, D) + query_bias (D) split into heads (B, N, S, H),
projected by weight (H, Dg) plus bias (Dg); the halves' sums give u = sigmoid(sum of the first Dg/2),
r = sigmoid(sum of the rest), gate = u * (r * eco_a[n] - 1) + 2, and out = gate * rel_pos (1, N, S, S), shape
(B, N, S, S). The padding-removed form (token_offset given, query (tokens, D)) is refused.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Value

from .builder import Builder
from .ms_attention import F32, MS, split_heads
from .registry import expansion


def _length(b: Builder, i: int, name: str) -> Value:
    """Input ``i`` (an int64 length with one element) as a 0-d int64 value."""
    b.require_types([i], (DType.INT64,))
    shape = b.shape(i)
    if len(shape) > 1 or (shape and isinstance(shape[0], int) and shape[0] != 1):
        raise b.fail(f"{name} must have one element, got shape {list(shape)}")
    return b.reshape(b.input(i), [])


def _buckets(b: Builder, rel: Value, n: int, max_distance: int, bidirectional: bool) -> Value:
    """The int64 bucket of every relative position ``rel`` (key index - query index)."""
    i64, f32 = DType.INT64, DType.FLOAT
    zero = b.scalar(0, i64)
    offset = None
    if bidirectional:
        n //= 2
        offset = b.op("Where", b.op("Greater", rel, zero), b.scalar(n, i64), zero, tag="half")
        dist = b.op("Abs", rel, tag="dist")
    else:
        dist = b.op("Max", b.op("Neg", rel), zero, tag="dist")
    exact = n // 2
    if exact <= 0:
        raise b.fail(f"num_buckets {2 * n if bidirectional else n} is too small (at least "
                     f"{4 if bidirectional else 2} buckets)")
    # the log of a distance below `exact` is not used (Where below); Max keeps it finite
    ratio = b.op("Div", b.cast(b.op("Max", dist, b.scalar(1, i64)), f32), b.scalar(float(exact), f32))
    denom = np.log(np.float32(max_distance) / np.float32(exact)).astype(np.float32)
    scaled = b.op("Mul", b.op("Div", b.op("Log", ratio), b.scalar(denom, f32)), b.scalar(float(n - exact), f32))
    large = b.op("Min", b.op("Add", b.cast(scaled, i64), b.scalar(exact, i64)), b.scalar(n - 1, i64), tag="far")
    bucket = b.op("Where", b.op("Less", dist, b.scalar(exact, i64)), dist, large, tag="bucket")
    return bucket if offset is None else b.op("Add", bucket, offset, tag="bucket")


@expansion("RelativePositionBias", domain=MS)
def ms_relative_position_bias(b: Builder) -> None:
    """com.microsoft RelativePositionBias (see the module docstring)."""
    b.require_types([0], F32)
    max_distance = b.attr("max_distance")
    if max_distance is None or int(max_distance) <= 0:
        raise b.fail(f"max_distance must be given and positive, got {max_distance}")
    if b.rank(0) != 2 or not all(isinstance(d, int) for d in b.shape(0)):
        raise b.fail(f"bias_table must be a static (num_buckets, num_heads) tensor, got {list(b.shape(0))}")
    buckets, heads = b.shape(0)
    q, k = _length(b, 1, "query_length"), _length(b, 2, "key_length")
    i64 = DType.INT64
    zero, one = b.scalar(0, i64), b.scalar(1, i64)
    rows = b.unsqueeze(b.op("Range", zero, q, one, tag="rows"), [1])
    cols = b.unsqueeze(b.op("Range", zero, k, one, tag="cols"), [0])
    bucket = _buckets(b, b.op("Sub", cols, rows, tag="rel"), buckets, int(max_distance),
                      bool(b.attr("is_bidirectional", 0)))
    table = b.reshape(b.input(0), [heads, buckets])  # the kernel's reading of the table's memory
    b.op("Unsqueeze", b.op("Gather", table, bucket, axis=1, tag="bias"), b.ints([0]), out=b.output(0))


@expansion("GatedRelativePositionBias", domain=MS)
def ms_gated_relative_position_bias(b: Builder) -> None:
    """com.microsoft GatedRelativePositionBias (see the module docstring)."""
    if b.input(6) is not None:
        raise b.unsupported("the padding-removed form (token_offset given) is not supported")
    b.require_types([0, 1, 2, 3, 4, 5], F32)
    heads = int(b.attr("num_heads", 0))
    if heads <= 0:
        raise b.fail(f"num_heads must be positive, got {heads}")
    if b.rank(0) != 3:
        raise b.fail(f"query_layer must be 3-D (batch, sequence, hidden), got {list(b.shape(0))}")
    hidden = b.shape(0)[2]
    if not isinstance(hidden, int) or hidden % heads:
        raise b.fail(f"the hidden size {hidden} must be a static multiple of num_heads {heads}")
    head = hidden // heads
    if tuple(b.shape(1)) != (hidden,):
        raise b.fail(f"query_bias must have shape [{hidden}], got {list(b.shape(1))}")
    wshape = b.shape(3)
    if len(wshape) != 2 or wshape[0] != head or not isinstance(wshape[1], int) or wshape[1] <= 0 or wshape[1] % 2:
        raise b.fail(f"weight must be (head size {head}, an even gate size), got {list(wshape)}")
    gate_size = wshape[1]
    if tuple(b.shape(4)) != (gate_size,):
        raise b.fail(f"bias must have shape [{gate_size}], got {list(b.shape(4))}")
    rel = b.shape(2)
    if len(rel) != 4 or rel[0] != 1 or (isinstance(rel[1], int) and rel[1] != heads):
        raise b.fail(f"rel_pos must be (1, num_heads={heads}, S, S), got {list(rel)}")
    if tuple(b.shape(5)) != (1, heads, 1, 1):
        raise b.fail(f"eco_a must have shape [1, {heads}, 1, 1], got {list(b.shape(5))}")
    q = split_heads(b, b.op("Add", b.input(0), b.input(1), tag="q"), heads, [0, 2, 1, 3])
    val = b.op("Add", b.op("MatMul", q, b.input(3), tag="qw"), b.input(4), tag="gate_in")
    u, r = (b.op("Sigmoid", b.reduce("ReduceSum", half, [-1])) for half in
            b.op("Split", val, b.ints([gate_size // 2] * 2), axis=-1, n_out=2, tag="halves"))
    gate = b.op("Add", b.op("Mul", u, b.op("Sub", b.op("Mul", r, b.input(5)), b.scalar(1.0, DType.FLOAT))),
                b.scalar(2.0, DType.FLOAT), tag="gate")
    b.op("Mul", gate, b.input(2), out=b.output(0))
