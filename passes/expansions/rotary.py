"""RotaryEmbedding (23): rotary positional embeddings (RoPE) on 4-D (B, H, S, D) or 3-D (B, S, H*D)
inputs, full or partial (``rotary_embedding_dim``), split-half or interleaved pairs.

Works in the input's layout (no transposes): the caches, gathered by ``position_ids`` when given, are
(B, S, rd/2) and get a head axis of size 1 that broadcasts against the heads. The head size must be
static (it fixes the slices).
"""

from __future__ import annotations

from onnxc.ir import DType, Value

from .builder import FLOATS, Builder
from .registry import expansion


def _caches(b: Builder, half: int) -> tuple[Value, Value]:
    """cos and sin as (B, S, rd/2), gathered by position_ids when present."""
    cos, sin = b.input(1), b.input(2)
    pos = b.input(3)
    want = 2 if pos is not None else 3
    for i, name in ((1, "cos_cache"), (2, "sin_cache")):
        s = b.shape(i)
        if len(s) != want:
            raise b.fail(f"{name} must have rank {want} {'with' if pos is not None else 'without'} position_ids, "
                         f"got shape {list(s)}")
        if isinstance(s[-1], int) and s[-1] != half:
            raise b.fail(f"the last dim of {name} ({s[-1]}) must be rotary_embedding_dim / 2 = {half}")
    if pos is not None:
        b.require_types([3], (DType.INT64,))
        cos = b.op("Gather", cos, pos, axis=0, tag="cos")
        sin = b.op("Gather", sin, pos, axis=0, tag="sin")
    return cos, sin


@expansion("RotaryEmbedding", versions=(23, 10**9))
def rotary_embedding(b: Builder) -> None:
    b.require_types([0, 1, 2], FLOATS)
    x = b.input(0)
    shape = b.shape(0)
    num_heads = b.attr("num_heads", 0)
    if len(shape) == 3:
        if not num_heads:
            raise b.fail("num_heads is required for a 3-D input")
        x4 = b.reshape(x, [0, 0, num_heads, -1])  # (B, S, H, D)
        head_axis = 2
        hidden = shape[2]
        head = hidden // num_heads if isinstance(hidden, int) else None
    elif len(shape) == 4:
        x4, head_axis, head = x, 1, shape[3]  # (B, H, S, D)
    else:
        raise b.fail(f"input must be 3-D or 4-D, got rank {len(shape)}")
    if not isinstance(head, int):
        raise b.unsupported("the head size must be static")
    rd = b.attr("rotary_embedding_dim", 0) or head
    if rd % 2 or rd > head:
        raise b.fail(f"rotary_embedding_dim {rd} must be even and at most the head size {head}")
    half = rd // 2
    cos, sin = _caches(b, half)
    cos, sin = b.unsqueeze(cos, [head_axis]), b.unsqueeze(sin, [head_axis])
    rot = b.slice(x4, [0], [rd], [3]) if rd < head else x4
    if b.attr("interleaved", 0):
        x1 = b.slice(rot, [0], [rd], [3], [2])
        x2 = b.slice(rot, [1], [rd], [3], [2])
    else:
        x1 = b.slice(rot, [0], [half], [3])
        x2 = b.slice(rot, [half], [rd], [3])
    real = b.op("Sub", b.op("Mul", cos, x1), b.op("Mul", sin, x2))
    imag = b.op("Add", b.op("Mul", sin, x1), b.op("Mul", cos, x2))
    if b.attr("interleaved", 0):
        pairs = b.op("Concat", b.unsqueeze(real, [4]), b.unsqueeze(imag, [4]), axis=4)  # (..., rd/2, 2)
        rotated = b.reshape(pairs, [0, 0, 0, rd])
    else:
        rotated = b.op("Concat", real, imag, axis=3)
    if rd < head:
        rotated = b.op("Concat", rotated, b.slice(x4, [rd], [head], [3]), axis=3)
    if len(shape) == 3:
        b.reshape(rotated, [0, 0, -1], out=b.output(0))
    else:
        b.identity(rotated, b.output(0))
