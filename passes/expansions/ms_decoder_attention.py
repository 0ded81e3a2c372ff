"""onnxruntime's DecoderMaskedMultiHeadAttention (com.microsoft) as an expansion: one decoding step (query
length 1) of an encoder-decoder or decoder-only model, as onnxruntime's generation graphs (Whisper, BART, T5
beam search) carry it. Two forms, told apart as onnxruntime's CPU kernel does:

- **self-attention** (past_key given): key and value (B, 1, D) with the projection bias (D + D + Dv). (QKV packed
  in the query, key and value absent, is refused: onnxruntime's CPU kernel fails on it.) The past K/V are (B, N, M, H) buffers shared with
  present (``past_present_share_buffer=1``, the only mode onnxruntime accepts): present is the past with row
  ``past_sequence_length`` P set to the new K/V, and the query attends to rows 0..P (T = P + 1).
- **cross-attention** (no past_key, no present outputs): key and value are the encoder's per-head cache
  (B, N, L, H), used as they are (the bias adds to the query only); no attention_bias. (An absent output is
  one that nothing reads: the IR gives unnamed outputs placeholder values.)

Both take a (B, T) int32 key padding mask (0 / ``mask_filter_value`` added to the scores), the additive
attention_bias (B|1, N|1, 1, T) (self-attention) and return the scaled, biased scores as ``qk`` when
``output_qk`` is set. The attention itself is ms_attention.attend (Softmax(Q K^T * scale + bias) V).
Beam search (cache_indirection, a beam_width above 1) is refused.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Value

from .builder import Builder
from .ms_attention import F32, MS, _columns, attend, attention_bias, default_scale, key_mask, split_heads
from .registry import expansion


def _check_beams(b: Builder) -> None:
    if b.input(9) is not None:
        raise b.unsupported("input cache_indirection (beam search) is not supported")
    beam = b.input(8)
    if beam is not None:
        if beam.const is None or np.asarray(beam.const).size != 1:
            raise b.unsupported("beam_width must be a constant (a beam width above 1 needs cache_indirection, "
                                "which is not supported)")
        if int(np.asarray(beam.const).reshape(-1)[0]) > 1:
            raise b.unsupported("a beam_width above 1 (beam search) is not supported")


def _one_token(b: Builder, x: Value, cols: int) -> Value:
    """``x`` (B, S, cols) as (B, 1, cols): unchanged when S is the static 1, else a Reshape that fails at run
    time unless S is 1 (the op decodes one token)."""
    s = b.shape(0)[1]
    if s == 1:
        return x
    if isinstance(s, int):
        raise b.fail(f"the query sequence length must be 1 (one decoding step), got {s}")
    return b.reshape(x, [0, 1, cols])


def _past_length(b: Builder) -> Value:
    """past_sequence_length (int32, one element) as a 0-d int64."""
    if b.input(7) is None:
        raise b.fail("self-attention (past_key given) needs input 7, past_sequence_length")
    b.require_types([7], (DType.INT32,))
    shape = b.shape(7)
    if len(shape) > 1 or (shape and isinstance(shape[0], int) and shape[0] != 1):
        raise b.fail(f"past_sequence_length must have one element, got shape {list(shape)}")
    return b.reshape(b.cast(b.input(7), DType.INT64), [])


def _self_kv(b: Builder, k: Value, v: Value, heads: int, head: int) -> tuple[Value, Value, Value]:
    """(K, V) heads (B, N, T, H) over rows 0..P of present, and T as a 0-d value; writes present_key/value."""
    if not b.attr("past_present_share_buffer", 0):
        raise b.unsupported("self-attention needs past_present_share_buffer=1 (past and present share one "
                            "(B, N, max_sequence_length, H) buffer; onnxruntime has no other mode)")
    if b.input(6) is None:
        raise b.fail("past_key and past_value must be given together")
    batch = b.shape(0)[0]
    for i, name in ((5, "past_key"), (6, "past_value")):
        s = b.shape(i)
        want = (batch, heads, None, head)
        if len(s) != 4 or any(isinstance(d, int) and isinstance(w, int) and d != w for d, w in zip(s, want)):
            raise b.fail(f"{name} must be (batch, num_heads={heads}, max_sequence_length, head size {head}), "
                         f"got {list(s)}")
    past = _past_length(b)
    i64 = DType.INT64
    rows = b.unsqueeze(b.op("Range", b.scalar(0, i64), b.dim(b.input(5), 2), b.scalar(1, i64), tag="rows"), [1])
    at_p = b.op("Equal", rows, past, tag="new_row")  # (M, 1): the row the new token's K/V go to
    total = b.op("Add", past, b.scalar(1, i64), tag="total")
    ends = b.unsqueeze(total, [0])
    out = []
    for i, new in ((5, k), (6, v)):
        present = b.op("Where", at_p, split_heads(b, new, heads, [0, 2, 1, 3]), b.input(i), tag="present")
        if b.output(i - 4) is not None:
            b.identity(present, b.output(i - 4))
        out.append(b.op("Slice", present, b.ints([0]), ends, b.ints([2]), tag="keys"))
    return out[0], out[1], total


@expansion("DecoderMaskedMultiHeadAttention", domain=MS)
def ms_decoder_masked_mha(b: Builder) -> None:
    """com.microsoft DecoderMaskedMultiHeadAttention (see the module docstring)."""
    _check_beams(b)
    b.require_types([0, 1, 2, 4, 5, 6, 10], F32)
    heads = int(b.attr("num_heads", 0))
    if heads <= 0:
        raise b.fail(f"num_heads must be positive, got {heads}")
    if b.rank(0) != 3:
        raise b.fail(f"query must be 3-D (batch, 1, hidden), got shape {list(b.shape(0))}")
    if b.input(1) is None or b.input(2) is None:
        raise b.unsupported("key and value must be given (QKV packed in the query is not supported; "
                            "onnxruntime's CPU kernel has no such path either)")
    hidden = b.shape(0)[2]
    if not isinstance(hidden, int) or hidden % heads:
        raise b.fail(f"the query hidden size {hidden} must be a static multiple of num_heads {heads}")
    head = hidden // heads
    cross = b.input(5) is None and not b.used(1) and not b.used(2)
    if b.input(10) is not None and tuple(b.shape(10)) != (3 * hidden,):
        raise b.fail(f"bias must have shape [{3 * hidden}] (Q, K and V biases), got {list(b.shape(10))}")
    if b.used(3) and not b.attr("output_qk", 0):
        raise b.fail("output 3 (qk) is only produced with output_qk=1")
    if b.input(3) is not None and b.rank(3) != 2:
        raise b.unsupported(f"only a (batch, total length) key padding mask is supported (as in onnxruntime), "
                            f"got shape {list(b.shape(3))}")
    q = _one_token(b, b.input(0), hidden)
    if b.input(10) is not None:
        q = b.op("Add", q, _columns(b, b.input(10), 0, hidden, 0), tag="q")
    if cross:
        if b.rank(1) != 4 or b.rank(2) != 4:
            raise b.fail("cross-attention (no past_key, no present outputs) takes key and value as the "
                         "per-head cache (batch, num_heads, L, head size)")
        if b.input(4) is not None:
            raise b.unsupported("attention_bias with cross-attention is not supported (nor by onnxruntime)")
        kh, vh = b.input(1), b.input(2)
        total = b.dim(kh, 2)
    else:
        if b.rank(1) != 3 or b.rank(2) != 3 or b.shape(1)[2] != hidden or b.shape(2)[2] != hidden:
            raise b.fail(f"key and value must be (batch, 1, {hidden}) in self-attention, got "
                         f"{list(b.shape(1))} and {list(b.shape(2))}")
        k, v = _one_token(b, b.input(1), hidden), _one_token(b, b.input(2), hidden)
        if b.input(10) is not None:
            k = b.op("Add", k, _columns(b, b.input(10), hidden, 2 * hidden, 0), tag="k")
            v = b.op("Add", v, _columns(b, b.input(10), 2 * hidden, 3 * hidden, 0), tag="v")
        kh, vh, total = _self_kv(b, k, v, heads, head)
    one = (1, b.scalar(1, DType.INT64))
    # the total length's dim: the cache's in cross-attention, else the mask's (or bias's) own, checked at run time
    given = b.shape(3)[1] if b.input(3) is not None else b.shape(4)[3] if b.input(4) is not None else 1
    td = (b.shape(1)[2] if cross else given, total)
    mask = key_mask(b, 3, b.shape(0)[0], one, td, allow_index2=False)
    bias = attention_bias(b, 4, one, td)
    if mask is not None:
        bias = mask if bias is None else b.op("Add", bias, mask, tag="bias")
    attend(b, split_heads(b, q, heads, [0, 2, 1, 3]), b.transpose(kh, [0, 1, 3, 2]), vh,
           default_scale(b, head, b.attr("scale")), bias, b.output(0), b.output(3))
