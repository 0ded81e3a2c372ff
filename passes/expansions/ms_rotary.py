"""onnxruntime's contrib op com.microsoft RotaryEmbedding as an expansion into the standard RotaryEmbedding
(opset 23, passes/expansions/rotary.py), which onnxc expands in turn; ``rope`` also serves GroupQueryAttention's
``do_rotary`` (ms_gqa.py).

The contrib op differs from the standard one in its input order (input, position_ids, cos_cache, sin_cache),
its position_ids, which may be one offset p (row s of every batch then has position p + s), and how it finds
the head size (onnxruntime's rotary_embedding_helper.h): with ``rotary_embedding_dim`` 0 it is twice the caches'
last dim and ``num_heads`` follows from the hidden size; otherwise ``num_heads`` is required and the head size
is hidden / num_heads. float16 runs in float32 and is rounded back once.
"""

from __future__ import annotations

from onnxc.ir import DType, Value

from .builder import Builder
from .registry import expansion

MS = "com.microsoft"
HALF_TYPES = (DType.FLOAT, DType.FLOAT16)


def rope(b: Builder, x: Value, cos: Value, sin: Value, positions: Value, *, dtype: DType, heads: int, rd: int,
         head: int, interleaved: bool, out: Value | None = None) -> Value:
    """Standard RotaryEmbedding of ``x`` ((B, S, heads*head) or (B, heads, S, head)) at int64 ``positions``
    ((B, S) or (1, S)), rotating the first ``rd`` dims of each head; float16 in float32."""
    wide = dtype != DType.FLOAT
    if wide:
        x, cos, sin = (b.cast(v, DType.FLOAT) for v in (x, cos, sin))
    y = b.op("RotaryEmbedding", x, cos, sin, positions, version=23, interleaved=int(interleaved),
             num_heads=heads, rotary_embedding_dim=rd if rd < head else None, out=None if wide else out, tag="rope")
    return b.cast(y, dtype, out=out) if wide else y


def _sizes(b: Builder, hidden) -> tuple[int, int, int]:
    """(num_heads, head size, rotary dim) by onnxruntime's rules (module doc), checked against the caches."""
    half = b.shape(2)[1]
    if not isinstance(half, int) or not isinstance(hidden, int):
        raise b.unsupported("the hidden size and the caches' last dim must be static")
    rd_attr, heads_attr = int(b.attr("rotary_embedding_dim", 0)), int(b.attr("num_heads", 0))
    if rd_attr > 0 and heads_attr <= 0:
        raise b.fail("num_heads must be given with rotary_embedding_dim")
    head = 2 * half if rd_attr == 0 else hidden // heads_attr
    if head <= 0 or hidden % head:
        raise b.fail(f"the hidden size {hidden} is not a multiple of the head size {head}")
    rd = rd_attr or head
    if rd > head or rd % 2:
        raise b.fail(f"rotary_embedding_dim {rd} must be even and at most the head size {head}")
    if half != rd // 2:
        if half == head // 2:
            raise b.unsupported(f"caches of head_size / 2 = {half} columns with rotary_embedding_dim {rd} are not "
                                "supported (give rotary_embedding_dim / 2 columns)")
        raise b.fail(f"the caches' last dim {half} must be rotary_embedding_dim / 2 = {rd // 2}")
    return heads_attr or hidden // head, head, rd


def _positions(b: Builder, seq_axis: int) -> Value:
    """position_ids as (B, S), or the (1, S) positions p + s of a single offset p."""
    pos = b.input(1)
    ps = b.shape(1)
    if len(ps) == 2:
        return pos
    if len(ps) > 1 or (ps and ps[0] != 1):
        raise b.fail(f"position_ids must be (batch_size, sequence_length) or one offset, got shape {list(ps)}")
    i64 = DType.INT64
    steps = b.op("Range", b.scalar(0, i64), b.dim(b.input(0), seq_axis), b.scalar(1, i64), tag="positions")
    return b.unsqueeze(b.op("Add", steps, b.reshape(pos, [1])), [0])


@expansion("RotaryEmbedding", domain=MS)
def ms_rotary_embedding(b: Builder) -> None:
    """com.microsoft RotaryEmbedding: RoPE of input (B, S, hidden) or (B, N, S, H) at position_ids (B, S) or
    offset (1), with (max_seq, rd/2) caches; split-half or ``interleaved`` pairs; partial ``rotary_embedding_dim``."""
    if b.attr("is_packed_batching", 0):
        raise b.unsupported("is_packed_batching=1 is not supported")
    if float(b.attr("scale", 1.0)) != 1.0:
        raise b.unsupported("scale other than 1 is not supported (onnxruntime's CPU kernel ignores it)")
    b.require_types([0, 2, 3], HALF_TYPES)
    b.require_types([1], (DType.INT64,))
    dt = b.dtype(0)
    if b.dtype(2) != dt or b.dtype(3) != dt:
        raise b.fail(f"the caches must have the input's element type {dt.short}")
    xs, cs = b.shape(0), b.shape(2)
    if len(xs) not in (3, 4):
        raise b.fail(f"input must be 3-D or 4-D, got shape {list(xs)}")
    if len(cs) != 2 or tuple(b.shape(3)) != tuple(cs):
        raise b.fail(f"cos_cache and sin_cache must be 2-D of one shape, got {list(cs)} and {list(b.shape(3))}")
    hidden = xs[2] if len(xs) == 3 else (xs[1] * xs[3] if isinstance(xs[1], int) and isinstance(xs[3], int) else None)
    heads, head, rd = _sizes(b, hidden)
    if len(xs) == 4 and xs[3] != head:
        raise b.fail(f"the head size from the caches ({head}) differs from the input's last dim {xs[3]}")
    rope(b, b.input(0), b.input(2), b.input(3), _positions(b, 1 if len(xs) == 3 else 2), dtype=dt, heads=heads,
         rd=rd, head=head, interleaved=bool(b.attr("interleaved", 0)), out=b.output(0))
