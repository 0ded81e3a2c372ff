"""onnxruntime's attention contrib ops (com.microsoft) as expansions: Attention (the BERT / GPT-2 self-attention
with packed Q/K/V weights) and MultiHeadAttention. RotaryEmbedding: ms_rotary.py; GroupQueryAttention: ms_gqa.py.

Both become the pattern passes/fuse_attention.py fuses into one kernel:

    Q = x Wq + bq,  K = x Wk + bk,  V = x Wv + bv      one MatMul + bias Add (an epilogue) per projection
    Qh = Transpose(Reshape(Q, [0, 0, N, H]), [0, 2, 1, 3]); K as Kt (perm [0, 2, 3, 1]); V as Qh
    S = MatMul(Qh, Kt) * scale + bias;  P = Softmax(S);  Y = Reshape(Transpose(MatMul(P, Vh)), [B, S, N*Hv])

``bias`` is what onnxruntime's CPU kernels (attention_cpu_base.h) add to the scaled scores, summed once:
the key mask as 0 / ``mask_filter_value``; the causal mask (``unidirectional``) as the lowest float32, set over
the key mask for keys j > P + i of query row i (P the past length), every row but the last, which
onnxruntime never masks (the same thing when the key and query lengths are equal); then ``attention_bias``.
Key mask formats (int32): (B) key lengths, (2B) end positions then start positions (Attention only),
(B, T) 0/1 per key, (B, S, T) 0/1 per query and key; Attention treats (B, 1) and (1, 1) as no mask.
Past K/V are concatenated before the new ones along the sequence axis into the present outputs.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Value, as_dim

from .builder import Builder
from .registry import expansion

MS = "com.microsoft"
F32 = (DType.FLOAT,)
LOWEST = float(np.finfo(np.float32).min)


def default_scale(b: Builder, head: Dim, scale: float | None) -> float:
    """``scale`` unless absent or 0, else 1/sqrt(head size) rounded as onnxruntime does in float32."""
    if scale:
        return float(scale)
    if not isinstance(head, int):
        raise b.unsupported("the head size must be static when the scale attribute is not given")
    return float(np.float32(1.0) / np.sqrt(np.float32(head)))


def split_heads(b: Builder, x: Value, heads: int, perm: list[int]) -> Value:
    """(B, L, heads*H) viewed as (B, L, heads, H), transposed by ``perm`` ([0, 2, 1, 3]: BNSH)."""
    return b.transpose(b.reshape(x, [0, 0, heads, -1]), perm)


def _columns(b: Builder, v: Value, start: int, stop: int, axis: int) -> Value:
    """v[..., start:stop] along ``axis``: sliced at build time for constants (the weights of a MatMul)."""
    if v.const is not None:
        idx = [slice(None)] * np.asarray(v.const).ndim
        idx[axis] = slice(start, stop)
        return b.const(np.ascontiguousarray(np.asarray(v.const)[tuple(idx)]), tag="w")
    return b.slice(v, [start], [stop], [axis])


def fit_tail(b: Builder, x: Value, want: list[tuple[Dim, Value]]) -> Value:
    """Input ``x`` with its last dims set to ``want`` ((dim, 0-d value) pairs) by a Reshape when a declared dim is
    another symbol (a mask's own "total length" name): the scores' dims then match, and Reshape checks the sizes."""
    shape = x.type.shape
    k = len(want)
    if all(s == d for s, (d, _) in zip(shape[-k:], want)):
        return x
    parts = [b.ints([0] * (len(shape) - k))] + [b.unsqueeze(v, [0]) for _, v in want]
    return b.reshape(x, b.op("Concat", *parts, axis=0, tag="shape"))


def key_mask(b: Builder, i: int, batch: Dim, q: tuple[Dim, Value], total: tuple[Dim, Value],
             allow_index2: bool) -> Value | None:
    """Input ``i`` (an int32 key mask) as 0 / mask_filter_value float32, broadcasting to (B, N, S, T);
    ``q`` and ``total`` are the query and total key lengths as (dim, 0-d int64 value)."""
    m = b.input(i)
    if m is None:
        return None
    b.require_types([i], (DType.INT32,))
    ms = b.shape(i)
    fill = float(b.attr("mask_filter_value", -10000.0))
    zero32 = b.scalar(0, DType.INT32)
    if len(ms) == 1:
        keys = b.op("Range", b.scalar(0, DType.INT64), total[1], b.scalar(1, DType.INT64), tag="keys")
        m64 = b.cast(m, DType.INT64)
        if ms[0] == batch:
            ok = b.op("Less", keys, b.reshape(m64, [-1, 1, 1, 1]))
        elif allow_index2 and ms[0] == as_dim(batch) * 2:
            ends_starts = b.reshape(m64, [2, -1, 1, 1, 1])
            ends = b.op("Gather", ends_starts, b.scalar(0, DType.INT64), axis=0)
            starts = b.op("Gather", ends_starts, b.scalar(1, DType.INT64), axis=0)
            ok = b.op("And", b.op("Less", keys, ends), b.op("GreaterOrEqual", keys, starts))
        elif not allow_index2 and ms[0] == as_dim(batch) * 3 + 2:
            raise b.unsupported("the (3 * batch_size + 2) key mask format is not supported")
        elif isinstance(ms[0], int) and isinstance(batch, int):
            forms = "batch_size or 2 * batch_size" if allow_index2 else "batch_size"
            raise b.fail(f"a 1-D mask must have length {forms} ({batch}), got {ms[0]}")
        else:
            raise b.unsupported(f"cannot tell the 1-D mask of length {ms[0]} from the batch size {batch}; "
                                "only (batch_size) key lengths and (2 * batch_size) end/start positions are supported")
    elif len(ms) == 2:
        ok = b.unsqueeze(b.op("Greater", fit_tail(b, m, [total]), zero32), [1, 2])
    elif len(ms) == 3:
        ok = b.unsqueeze(b.op("Greater", fit_tail(b, m, [q, total]), zero32), [1])
    elif len(ms) == 4:
        raise b.unsupported("4-D (Megatron) masks are not supported (onnxruntime's CPU kernel has none either)")
    else:
        raise b.fail(f"the mask must be 1-D, 2-D or 3-D, got rank {len(ms)}")
    return b.op("Where", ok, b.scalar(0.0, DType.FLOAT), b.scalar(fill, DType.FLOAT), tag="key_mask")


def attention_bias(b: Builder, i: int, q: tuple[Dim, Value], total: tuple[Dim, Value]) -> Value | None:
    """Input ``i``, the additive (B|1, N|1, S, T) attention_bias, with its last dims matched to the scores'."""
    if b.input(i) is None:
        return None
    if b.rank(i) != 4:
        raise b.fail(f"attention_bias must be 4-D (B or 1, N or 1, S, T), got shape {list(b.shape(i))}")
    return fit_tail(b, b.input(i), [q, total])


def causal_allowed(b: Builder, q_len: Value, total: Value, past: Value | None, last_row: bool) -> Value:
    """(S, T) bool: key j visible to query row i when j <= past + i (``last_row``: and all of row S-1)."""
    i64 = DType.INT64
    zero, one = b.scalar(0, i64), b.scalar(1, i64)
    rows = b.unsqueeze(b.op("Range", zero, q_len, one, tag="rows"), [1])
    keys = b.op("Range", zero, total, one, tag="keys")
    ok = b.op("LessOrEqual", keys, rows if past is None else b.op("Add", rows, past))
    if last_row:
        ok = b.op("Or", ok, b.op("Equal", rows, b.op("Sub", q_len, one)))
    return ok


def scores_bias(b: Builder, mask: Value | None, causal: Value | None, extra: Value | None) -> Value | None:
    """What onnxruntime adds to the scaled scores: attention_bias + (key mask, set to LOWEST where causal hides)."""
    bias = mask
    if causal is not None:
        bias = b.op("Where", causal, mask if mask is not None else b.scalar(0.0, DType.FLOAT),
                    b.scalar(LOWEST, DType.FLOAT), tag="causal_mask")
    if extra is not None:
        bias = extra if bias is None else b.op("Add", extra, bias, tag="bias")
    return bias


def attend(b: Builder, qh: Value, kt: Value, vh: Value, scale: float, bias: Value | None,
           out: Value, qk_out: Value | None = None) -> None:
    """out = merge_heads(Softmax(qh @ kt * scale + bias) @ vh); ``qk_out`` gets the biased scores."""
    s = b.op("Mul", b.op("MatMul", qh, kt, tag="qk"), b.scalar(scale, DType.FLOAT), tag="scaled")
    if bias is not None:
        s = b.op("Add", s, bias, tag="scores")
    if qk_out is not None:
        b.identity(s, qk_out)
    y = b.op("MatMul", b.op("Softmax", s, axis=-1, tag="probs"), vh, tag="y")
    b.reshape(b.transpose(y, [0, 2, 1, 3]), [0, 0, -1], out=out)


def _check_past(b: Builder, i: int, rank: int, dims: dict[int, Dim], name: str) -> None:
    """Input ``i`` (a past state) has ``rank`` and the given static dims."""
    s = b.shape(i)
    if len(s) != rank:
        raise b.fail(f"{name} must be {rank}-D, got shape {list(s)}")
    for axis, want in dims.items():
        if isinstance(s[axis], int) and isinstance(want, int) and s[axis] != want:
            raise b.fail(f"{name} dim {axis} must be {want}, got {s[axis]} (shape {list(s)})")


def _attention_sizes(b: Builder, heads: int) -> tuple[int, int, int]:
    """(q, k, v) hidden sizes of Attention: qkv_hidden_sizes, or the weights' columns in three."""
    cols = b.shape(1)[1]
    if not isinstance(cols, int):
        raise b.unsupported("the weights must have a static number of columns")
    sizes = b.attr("qkv_hidden_sizes")
    if sizes:
        if len(sizes) != 3:
            raise b.fail(f"qkv_hidden_sizes must have 3 elements, got {list(sizes)}")
        q, k, v = (int(s) for s in sizes)
    else:
        if cols % 3:
            raise b.fail(f"the weights' {cols} columns are not divisible by 3 (give qkv_hidden_sizes)")
        q = k = v = cols // 3
    if q != k:
        raise b.fail(f"the Q and K hidden sizes must be equal, got {q} and {k}")
    for s in (q, k, v):
        if s <= 0 or s % heads:
            raise b.fail(f"hidden size {s} is not a positive multiple of num_heads {heads}")
    if q + k + v != cols:
        raise b.fail(f"the weights have {cols} columns, the Q/K/V hidden sizes sum to {q + k + v}")
    return q, k, v


def _attention_kv(b: Builder, k: Value, v: Value, past: Value | None, heads: int) -> tuple[Value, Value]:
    """(Kt (B, N, H, T), V (B, N, T, Hv)) of Attention after the past rows, writing present (2, B, N, T, H)."""
    if past is None and b.output(1) is None:
        return split_heads(b, k, heads, [0, 2, 3, 1]), split_heads(b, v, heads, [0, 2, 1, 3])
    kh, vh = split_heads(b, k, heads, [0, 2, 1, 3]), split_heads(b, v, heads, [0, 2, 1, 3])
    if past is not None:
        zero, one = b.scalar(0, DType.INT64), b.scalar(1, DType.INT64)
        kh = b.op("Concat", b.op("Gather", past, zero, axis=0), kh, axis=2, tag="present_k")
        vh = b.op("Concat", b.op("Gather", past, one, axis=0), vh, axis=2, tag="present_v")
    if b.output(1) is not None:
        b.op("Concat", b.unsqueeze(kh, [0]), b.unsqueeze(vh, [0]), axis=0, out=b.output(1))
    return b.transpose(kh, [0, 1, 3, 2]), vh


@expansion("Attention", domain=MS)
def ms_attention(b: Builder) -> None:
    """com.microsoft Attention: self-attention of input (B, S, D_in) with merged Q/K/V weights (D_in, q+k+v),
    bias, key mask, GPT-2 past (2, B, N, P, H) and present (2, B, N, P+S, H), attention_bias (B|1, N|1, S, T).
    past_sequence_length only matters with past_present_share_buffer, as in onnxruntime."""
    if b.attr("do_rotary", 0):
        raise b.unsupported("do_rotary=1 is not supported")
    if b.attr("past_present_share_buffer", 0):
        raise b.unsupported("past_present_share_buffer=1 is not supported")
    b.require_types([0, 1, 2, 4, 5], F32)
    heads = int(b.attr("num_heads", 0))
    if heads <= 0:
        raise b.fail(f"num_heads must be positive, got {heads}")
    xs, ws = b.shape(0), b.shape(1)
    if len(xs) != 3 or len(ws) != 2:
        raise b.fail(f"input must be 3-D and weights 2-D, got shapes {list(xs)} and {list(ws)}")
    if isinstance(xs[2], int) and isinstance(ws[0], int) and xs[2] != ws[0]:
        raise b.fail(f"the weights have {ws[0]} rows, the input hidden size is {xs[2]}")
    qs, ks, vs = _attention_sizes(b, heads)
    bias = b.input(2)
    if bias is not None and tuple(b.shape(2)) != (qs + ks + vs,):
        raise b.fail(f"bias must have shape [{qs + ks + vs}], got {list(b.shape(2))}")
    x, w = b.input(0), b.input(1)
    proj = []
    for start, stop, tag in ((0, qs, "q"), (qs, qs + ks, "k"), (qs + ks, qs + ks + vs, "v")):
        p = b.op("MatMul", x, _columns(b, w, start, stop, 1), tag=tag)
        proj.append(p if bias is None else b.op("Add", p, _columns(b, bias, start, stop, 0), tag=tag))
    q, k, v = proj

    past = b.input(4)
    q_len, total_dim = b.dim(x, 1), as_dim(xs[1])
    if past is not None:
        if ks != vs:
            raise b.fail("past needs equal K and V hidden sizes")
        _check_past(b, 4, 5, {0: 2, 1: xs[0], 2: heads, 4: ks // heads}, "past")
        past_len = b.dim(past, 3)
        total = b.op("Add", past_len, q_len, tag="total")
        total_dim = total_dim + b.shape(4)[3]
    else:
        past_len, total = None, q_len
    kt, vh = _attention_kv(b, k, v, past, heads)
    mask = None
    ms = b.shape(3) if b.input(3) is not None else None
    if ms is not None and not (len(ms) == 2 and ms[1] == 1 and (ms[0] == 1 or ms[0] == xs[0])):
        mask = key_mask(b, 3, xs[0], (xs[1], q_len), (total_dim, total), allow_index2=True)
    causal = causal_allowed(b, q_len, total, past_len, False) if b.attr("unidirectional", 0) else None
    bias = scores_bias(b, mask, causal, attention_bias(b, 5, (xs[1], q_len), (total_dim, total)))
    attend(b, split_heads(b, q, heads, [0, 2, 1, 3]), kt, vh, default_scale(b, qs // heads, b.attr("scale")),
           bias, b.output(0))


def _mha_kv(b: Builder, heads: int, hidden: int) -> tuple[Value, Value, Value, Value | None]:
    """MultiHeadAttention's (Q + bias, K and V heads after the past rows (B, N, T, H), past length or None);
    writes present_key / present_value."""
    head = hidden // heads
    q, key, value, bias = b.input(0), b.input(1), b.input(2), b.input(3)
    past_k, past_v = b.input(6), b.input(7)
    if (past_k is None) != (past_v is None):
        raise b.fail("past_key and past_value must be given together")
    past_len = None
    if b.rank(1) == 4:
        if bias is not None or past_k is not None:
            raise b.fail("bias and past_key/past_value must be absent when key and value are 4-D")
        for i, name in ((1, "key"), (2, "value")):
            s = b.shape(i)
            if (isinstance(s[1], int) and s[1] != heads) or (i == 1 and isinstance(s[3], int) and s[3] != head):
                raise b.fail(f"{name} must be (B, num_heads={heads}, L, head size), got {list(b.shape(i))}")
        kh, vh = key, value
    else:
        vhid = b.shape(2)[2]
        if b.shape(1)[2] != hidden or not isinstance(vhid, int) or vhid % heads:
            raise b.fail(f"key must have the query's hidden size {hidden} and value a static multiple of "
                         f"num_heads, got shapes {list(b.shape(1))} and {list(b.shape(2))}")
        if bias is not None:
            if tuple(b.shape(3)) != (2 * hidden + vhid,):
                raise b.fail(f"bias must have shape [{2 * hidden + vhid}], got {list(b.shape(3))}")
            q = b.op("Add", q, _columns(b, bias, 0, hidden, 0), tag="q")
            key = b.op("Add", key, _columns(b, bias, hidden, 2 * hidden, 0), tag="k")
            value = b.op("Add", value, _columns(b, bias, 2 * hidden, 2 * hidden + vhid, 0), tag="v")
        kh, vh = split_heads(b, key, heads, [0, 2, 1, 3]), split_heads(b, value, heads, [0, 2, 1, 3])
        if past_k is not None:
            for i, name, hs in ((6, "past_key", head), (7, "past_value", vhid // heads)):
                _check_past(b, i, 4, {0: b.shape(0)[0], 1: heads, 3: hs}, name)
            past_len = b.dim(past_k, 2)
            kh = b.op("Concat", past_k, kh, axis=2, tag="present_k")
            vh = b.op("Concat", past_v, vh, axis=2, tag="present_v")
    for i, x in ((1, kh), (2, vh)):
        if b.output(i) is not None:
            b.identity(x, b.output(i))
    return q, kh, vh, past_len


@expansion("MultiHeadAttention", domain=MS)
def ms_multihead_attention(b: Builder) -> None:
    """com.microsoft MultiHeadAttention: query (B, S, D) against key/value (B, L, D) / (B, L, Dv) with the
    projection bias (D + D + Dv), or against per-head key/value (B, N, L, H) (cross attention, no bias or past);
    key_padding_mask, attention_bias, past/present key and value (B, N, P[+L], H), and the biased scores (qk)."""
    for i, name in ((8, "past_sequence_length"), (9, "cache_indirection")):
        if b.input(i) is not None:
            raise b.unsupported(f"input {name} (buffer sharing / beam search) is not supported")
    b.require_types([0, 1, 2, 3, 5, 6, 7], F32)
    heads = int(b.attr("num_heads", 0))
    if heads <= 0:
        raise b.fail(f"num_heads must be positive, got {heads}")
    if b.rank(0) == 5 or b.input(1) is None:
        raise b.unsupported("packed QKV (key and value absent) is not supported")
    if b.rank(0) != 3:
        raise b.fail(f"query must be 3-D, got shape {list(b.shape(0))}")
    if b.rank(1) == 5:
        raise b.unsupported("packed KV (a 5-D key) is not supported")
    if b.input(2) is None or b.rank(1) != b.rank(2) or b.rank(1) not in (3, 4):
        raise b.fail("key and value must both be 3-D (B, L, D) or both 4-D (B, N, L, H)")
    qsh = b.shape(0)
    hidden = qsh[2]
    if not isinstance(hidden, int) or hidden % heads:
        raise b.fail(f"the query hidden size {hidden} must be a static multiple of num_heads {heads}")
    q, kh, vh, past_len = _mha_kv(b, heads, hidden)
    q_len, kv_axis = b.dim(b.input(0), 1), 1 if b.rank(1) == 3 else 2
    kv_len = b.shape(1)[kv_axis]
    total, total_dim = b.dim(b.input(1), kv_axis), as_dim(kv_len)
    if past_len is not None:
        total = b.op("Add", past_len, total, tag="total")
        total_dim = total_dim + b.shape(6)[2]
    qd, td = (qsh[1], q_len), (total_dim, total)
    mask = key_mask(b, 4, qsh[0], qd, td, allow_index2=False)
    causal = None
    if b.attr("unidirectional", 0):
        causal = causal_allowed(b, q_len, total, past_len, last_row=kv_len != qsh[1])
    bias = scores_bias(b, mask, causal, attention_bias(b, 5, qd, td))
    attend(b, split_heads(b, q, heads, [0, 2, 1, 3]), b.transpose(kh, [0, 1, 3, 2]), vh,
           default_scale(b, hidden // heads, b.attr("scale")), bias, b.output(0), b.output(3))
