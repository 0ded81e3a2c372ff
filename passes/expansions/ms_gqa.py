"""onnxruntime's contrib op com.microsoft GroupQueryAttention (decoder self-attention with a KV cache and grouped
K/V heads) as an expansion, following onnxruntime's CPU kernel (gqa_attention_base.h, group_query_attention_helper.h):

* ``seqlens_k[b] + 1`` is the total length t_b of batch entry b after this step and T (total_sequence_length)
  the batch maximum. A first prompt (sequence length S == T) starts at p_b = 0; otherwise (token generation,
  or a later prompt chunk) at p_b = t_b - S.
* present (B, N_kv, max(T, P), H) holds rows [0, p_b) of past (P rows, BNSH, right-padded), then the S new rows,
  then zeros: one Gather from Concat(past, new, a zero row) with per-entry row indices (max(T, P) is known at run
  time only; it is P + S with separate past and present buffers, P with a shared max-length buffer).
* query row s of entry b sees keys j with j <= p_b + s and j < t_b (causal=0: j < t_b), and with
  ``local_window_size`` w > 0 only the last w of them (j > min(p_b + s, t_b - 1) - w). The softmax has an extra
  logit per head with ``smooth_softmax`` (0) or ``head_sink``; ``softcap`` c maps the scaled scores x to
  c * tanh(x / c) first. Rows of padding (p_b + s >= t_b) follow the same rule, as in onnxruntime.
* ``do_rotary``: RoPE of Q and the new K (cos/sin caches (max, rd/2)) at positions p_b + s, or position_ids —
  whose first element p gives p + s in a first prompt.

Query heads are grouped onto K/V heads without copying K/V: Q (B, N, S, H) is viewed as (B, N_kv, g*S, H), the
key mask repeated g times along the rows, so the scores feed passes/fuse_attention.py's pattern. float16 inputs
keep a float16 cache and attend in float32, like onnxruntime.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Value

from .builder import Builder
from .ms_attention import LOWEST, default_scale
from .ms_rotary import HALF_TYPES, rope
from .registry import expansion

MS = "com.microsoft"
I64 = DType.INT64
UNSUPPORTED_INPUTS = ((12, "k_scale"), (13, "v_scale"), (14, "q_norm_weight"), (15, "k_norm_weight"),
                      (16, "query_seqlens"))


def _check_attributes(b: Builder) -> None:
    for i, name in UNSUPPORTED_INPUTS:
        if b.input(i) is not None:
            raise b.unsupported(f"input {name} is not supported")
    if b.attr("sliding_window_cache", 0):
        raise b.unsupported("sliding_window_cache=1 is not supported")
    if b.attr("qk_output", 0):
        raise b.unsupported("qk_output other than 0 is not supported")
    for name in ("k_quant_type", "v_quant_type"):
        q = b.attr(name, "NONE")
        if (q.decode() if isinstance(q, bytes) else q) != "NONE":
            raise b.unsupported(f"{name} other than NONE (a quantized cache) is not supported")
    w = int(b.attr("local_window_size", -1))
    if w == 0 or w < -1:
        raise b.unsupported(f"local_window_size {w} is not supported (-1 or positive)")
    if b.attr("causal", 1) not in (0, 1):
        raise b.fail(f"causal must be 0 or 1, got {b.attr('causal')}")
    if not b.attr("causal", 1) and w != -1:
        raise b.fail("local_window_size must be -1 when causal is 0")
    if b.attr("smooth_softmax", 0) and b.input(11) is not None:
        raise b.fail("head_sink must not be given with smooth_softmax=1")


def _qkv(b: Builder, heads: int, kv_heads: int) -> tuple[Value, Value, Value, int]:
    """(Q (B, S, N*H), K and V (B, S, N_kv*H), H): separate inputs or sliced from a packed query."""
    qs = b.shape(0)
    if len(qs) != 3 or not isinstance(qs[2], int):
        raise b.fail(f"query must be 3-D with a static hidden size, got shape {list(qs)}")
    if b.input(1) is None:
        if b.input(2) is not None:
            raise b.fail("key and value must both be given or both be absent (packed QKV)")
        parts = heads + 2 * kv_heads
        if qs[2] % parts:
            raise b.fail(f"packed QKV hidden size {qs[2]} is not a multiple of num_heads + 2 * kv_num_heads = {parts}")
        head = qs[2] // parts
        q, kv = heads * head, kv_heads * head
        x = b.input(0)
        return (b.slice(x, [0], [q], [2]), b.slice(x, [q], [q + kv], [2]), b.slice(x, [q + kv], [q + 2 * kv], [2]),
                head)
    if b.input(2) is None:
        raise b.fail("key and value must both be given or both be absent (packed QKV)")
    if qs[2] % heads:
        raise b.fail(f"the query hidden size {qs[2]} is not a multiple of num_heads {heads}")
    head = qs[2] // heads
    for i, name in ((1, "key"), (2, "value")):
        s = b.shape(i)
        if len(s) != 3 or s[2] != kv_heads * head:
            raise b.fail(f"{name} must be (B, S, kv_num_heads * head_size = {kv_heads * head}), got {list(s)}")
    return b.input(0), b.input(1), b.input(2), head


def _positions(b: Builder, first: Value, past_len: Value, seq: Value) -> Value:
    """Rotary positions (B, S): p_b + s, or position_ids (its first element + s in a first prompt)."""
    steps = b.unsqueeze(b.op("Range", b.scalar(0, I64), seq, b.scalar(1, I64), tag="steps"), [0])  # (1, S)
    ids = b.input(9)
    if ids is None:
        return b.op("Add", b.unsqueeze(past_len, [1]), steps, tag="positions")
    if b.rank(9) != 2:
        raise b.fail(f"position_ids must be (batch_size, sequence_length), got shape {list(b.shape(9))}")
    b.require_types([9], (I64,))
    start = b.op("Add", b.slice(ids, [0, 0], [1, 1], [0, 1]), steps)
    return b.op("Where", first, start, ids, tag="positions")


def _present(b: Builder, past: Value | None, new: Value, dt: DType, rows: dict, kv_heads: int, head: int,
             out: Value | None) -> Value:
    """present (B, N_kv, R, H): past rows [0, p_b), the S new rows at p_b, zeros after (module doc)."""
    batch, seq, past_rows, keys, past_len = rows["B"], rows["S"], rows["P"], rows["keys"], rows["p"]
    zshape = b.op("Concat", b.unsqueeze(batch, [0]), b.ints([kv_heads, 1, head]), axis=0, tag="shape")
    zero = b.op("Expand", b.const(np.zeros((1, 1, 1, head), dt.np), tag="zero"), zshape, tag="zero_row")
    c = b.op("Concat", *([past] if past is not None else []), new, zero, axis=2, tag="rows")
    j, pb = b.unsqueeze(keys, [0]), b.unsqueeze(past_len, [1])  # (1, R), (B, 1)
    end = b.op("Add", pb, seq)
    fresh = b.op("Where", b.op("Less", j, end), b.op("Add", b.op("Sub", j, pb), past_rows), b.op("Add", past_rows, seq))
    src = b.op("Where", b.op("Less", j, pb), j, fresh, tag="src_row")  # (B, R) row of c
    per_entry = b.op("Add", past_rows, b.op("Add", seq, b.scalar(1, I64)))
    entry = b.op("Add", b.unsqueeze(b.op("Mul", b.op("Range", b.scalar(0, I64), batch, b.scalar(1, I64)),
                                            b.scalar(kv_heads, I64)), [1]), b.ints(list(range(kv_heads))))
    index = b.op("Add", b.unsqueeze(b.op("Mul", entry, per_entry), [2]), b.unsqueeze(src, [1]), tag="rows_index")
    return b.op("Gather", b.reshape(c, [-1, head]), index, axis=0, out=out, tag="present")


def _key_bias(b: Builder, rows: dict, tot: Value, group: int) -> Value:
    """(B, 1, g*S, R) float32: 0 where the key is visible (module doc), else the lowest float."""
    zero, one = b.scalar(0, I64), b.scalar(1, I64)
    s = b.unsqueeze(b.op("Range", zero, rows["S"], one, tag="rows"), [0, 2])  # (1, S, 1)
    j = rows["keys"]
    last = b.op("Add", b.reshape(rows["p"], [-1, 1, 1]), s)  # (B, S, 1): p_b + s
    ok = b.op("Less", j, b.reshape(tot, [-1, 1, 1]))
    if b.attr("causal", 1):
        ok = b.op("And", ok, b.op("LessOrEqual", j, last))
    w = int(b.attr("local_window_size", -1))
    if w > 0:  # the last w keys up to min(p_b + s, t_b - 1)
        end = b.op("Min", last, b.op("Sub", b.reshape(tot, [-1, 1, 1]), b.scalar(1, I64)))
        ok = b.op("And", ok, b.op("Greater", j, b.op("Sub", end, b.scalar(w, I64))))
    bias = b.op("Where", b.unsqueeze(ok, [1]), b.scalar(0.0, DType.FLOAT), b.scalar(LOWEST, DType.FLOAT))
    if group == 1 or not b.attr("causal", 1):  # without the causal rule the (B, 1, 1, R) bias broadcasts
        return bias
    return b.op("Tile", bias, b.ints([1, 1, group, 1]), tag="key_bias")


def _probs(b: Builder, scores: Value, heads: int, kv_heads: int) -> Value:
    """Softmax over keys, with the sink logit of smooth_softmax (0) or head_sink (per head) when set."""
    sink = b.input(11)
    if sink is None and not b.attr("smooth_softmax", 0):
        return b.op("Softmax", scores, axis=-1, tag="probs")
    if sink is not None:
        b.require_types([11], HALF_TYPES)
        if tuple(b.shape(11)) != (heads,):
            raise b.fail(f"head_sink must have shape [{heads}], got {list(b.shape(11))}")
        sink = b.reshape(sink if b.dtype(11) == DType.FLOAT else b.cast(sink, DType.FLOAT), [1, heads, 1, 1])
    else:
        sink = b.const(np.zeros((1, 1, 1, 1), np.float32), tag="sink")
    per_head = b.reshape(scores, [0, heads, -1, 0])  # (B, N, S, R)
    shape = b.op("Concat", b.op("Shape", per_head, start=0, end=3), b.ints([1]), axis=0)
    full = b.op("Concat", per_head, b.op("Expand", sink, shape), axis=3)
    probs = b.slice(b.op("Softmax", full, axis=-1), [0], [-1], [3])
    return b.reshape(probs, [0, kv_heads, -1, 0])


@expansion("GroupQueryAttention", domain=MS)
def ms_group_query_attention(b: Builder) -> None:
    """com.microsoft GroupQueryAttention (module doc): output (B, S, N*H), present_key/value (B, N_kv, R, H)."""
    _check_attributes(b)
    heads, kv_heads = int(b.attr("num_heads", 0)), int(b.attr("kv_num_heads", 0))
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        raise b.fail(f"num_heads {heads} must be a positive multiple of kv_num_heads {kv_heads}")
    b.require_types([0, 1, 2, 3, 4, 7, 8], HALF_TYPES)
    dt = b.dtype(0)
    for i in (1, 2, 3, 4, 7, 8):
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, query has {dt.short}")
    if b.input(10) is not None:
        raise b.unsupported("input attention_bias is not supported")
    b.require_types([5, 6], (DType.INT32,))
    q, k, v, head = _qkv(b, heads, kv_heads)
    past_k, past_v = b.input(3), b.input(4)
    if (past_k is None) != (past_v is None):
        raise b.fail("past_key and past_value must be given together")
    for i, name in ((3, "past_key"), (4, "past_value")):
        if b.input(i) is not None and (b.rank(i) != 4 or b.shape(i)[1] != kv_heads or b.shape(i)[3] != head):
            raise b.fail(f"{name} must be (B, kv_num_heads={kv_heads}, P, head_size={head}), got {list(b.shape(i))}")
    if tuple(b.shape(6)) not in ((), (1,)) or b.rank(5) != 1:
        raise b.fail("seqlens_k must be 1-D and total_sequence_length a scalar")

    seq, total = b.dim(b.input(0), 1), b.reshape(b.cast(b.input(6), I64), [])
    tot = b.op("Add", b.cast(b.input(5), I64), b.scalar(1, I64), tag="totals")  # t_b
    first = b.op("Equal", seq, total, tag="first_prompt")
    past_len = b.op("Where", first, b.scalar(0, I64), b.op("Sub", tot, seq), tag="past_len")  # p_b
    if b.attr("do_rotary", 0):
        if b.input(7) is None or b.input(8) is None:
            raise b.fail("do_rotary=1 needs cos_cache and sin_cache")
        half = b.shape(7)[1] if b.rank(7) == 2 else None
        if not isinstance(half, int) or 2 * half > head or tuple(b.shape(8)) != tuple(b.shape(7)):
            raise b.fail(f"cos_cache and sin_cache must be (max_sequence_length, <= head_size / 2), got "
                         f"{list(b.shape(7))} and {list(b.shape(8))}")
        pos = _positions(b, first, past_len, seq)
        rot = dict(dtype=dt, rd=2 * half, head=head, interleaved=bool(b.attr("rotary_interleaved", 0)))
        q = rope(b, q, b.input(7), b.input(8), pos, heads=heads, **rot)
        k = rope(b, k, b.input(7), b.input(8), pos, heads=kv_heads, **rot)
    past_rows = b.dim(past_k, 2) if past_k is not None else b.scalar(0, I64)
    keys = b.op("Range", b.scalar(0, I64), b.op("Max", total, past_rows), b.scalar(1, I64), tag="keys")  # (R,)
    rows = dict(B=b.dim(b.input(0), 0), S=seq, P=past_rows, keys=keys, p=past_len)
    new_k, new_v = (b.transpose(b.reshape(x, [0, 0, kv_heads, head]), [0, 2, 1, 3]) for x in (k, v))
    pk = _present(b, past_k, new_k, dt, rows, kv_heads, head, b.output(1))
    pv = _present(b, past_v, new_v, dt, rows, kv_heads, head, b.output(2))

    group = heads // kv_heads
    qh = b.transpose(b.reshape(q, [0, 0, heads, head]), [0, 2, 1, 3])
    if dt != DType.FLOAT:
        qh, pk, pv = (b.cast(x, DType.FLOAT) for x in (qh, pk, pv))
    if group > 1:
        qh = b.reshape(qh, [0, kv_heads, -1, head])  # (B, N_kv, g*S, H)
    scores = b.op("Mul", b.op("MatMul", qh, b.transpose(pk, [0, 1, 3, 2]), tag="qk"),
                  b.scalar(default_scale(b, head, b.attr("scale")), DType.FLOAT), tag="scaled")
    softcap = float(b.attr("softcap", 0.0))
    if softcap > 0:
        cap = b.scalar(softcap, DType.FLOAT)
        scores = b.op("Mul", b.op("Tanh", b.op("Div", scores, cap)), cap, tag="softcap")
    scores = b.op("Add", scores, _key_bias(b, rows, tot, group), tag="scores")
    y = b.op("MatMul", _probs(b, scores, heads, kv_heads), pv, tag="y")
    if group > 1:
        y = b.reshape(y, [0, heads, -1, head])
    y = b.reshape(b.transpose(y, [0, 2, 1, 3]), [0, 0, -1], out=None if dt != DType.FLOAT else b.output(0))
    if dt != DType.FLOAT:
        b.cast(y, dt, out=b.output(0))
