"""Attention (23, 24, 25): scaled dot-product attention with masks, causal and sliding windows,
GQA/MQA, soft capping, an internal KV cache (past/present) or an external one (``nonpad_kv_seqlen``).

Shape of the expansion (4-D layout; 3-D inputs are split into heads first and merged back after):

    present_k = Concat(past_k, K)                  scores = MatMul(Q*sqrt(s), present_k^T*sqrt(s))
    scores = softcap * tanh(scores / softcap)      scores += bias
    P = Softmax(scores)  (in softmax_precision)    P = 0 on rows whose bias is -inf everywhere
    Y = MatMul(P, present_v)

The bias adds the float mask (a bool mask as 0 / -inf, padded with -inf up to the total length) and,
as one 0 / -inf select, every structural constraint: causal ``j <= i + offset``, the opset-25 windows
``offset + i - left <= j <= offset + i + right``, and the external-cache padding ``j < nonpad[b]``.
``offset`` is the past length, ``nonpad[b] - q_len`` per batch for an external cache, else 0.
Grouped heads (q_heads = g * kv_heads) reuse each K/V head for g query heads by viewing Q as
(B, kv_heads, g * q_len, D) — no copies of K or V.
"""

from __future__ import annotations

import math

from onnxc.ir import Dim, DType, Value, as_dim

from .builder import ALL_FLOATS, Builder
from .registry import expansion

MASK_TYPES = (DType.BOOL, DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16, DType.UINT8, DType.UINT16,
              DType.UINT32, DType.UINT64, DType.INT8, DType.INT16, DType.INT32, DType.INT64)


def _heads(b: Builder, rank: int) -> tuple[int, int]:
    """(q_num_heads, kv_num_heads): attributes for 3-D inputs, the static head dims of 4-D ones."""
    qh, kvh = b.attr("q_num_heads"), b.attr("kv_num_heads")
    if rank == 3:
        if not qh or not kvh:
            raise b.fail("q_num_heads and kv_num_heads are required for 3-D inputs")
        for i, h, name in ((0, qh, "Q"), (1, kvh, "K"), (2, kvh, "V")):
            hidden = b.shape(i)[2]
            if isinstance(hidden, int) and hidden % h:
                raise b.fail(f"the hidden size {hidden} of {name} is not divisible by its {h} heads")
        return qh, kvh
    if b.node.version >= 25 and (qh is not None or kvh is not None):
        raise b.fail("q_num_heads and kv_num_heads must not be set for 4-D inputs")
    qh, kvh = b.shape(0)[1], b.shape(1)[1]
    if b.shape(2)[1] != kvh:
        raise b.fail(f"K and V must have the same number of heads, got {kvh} and {b.shape(2)[1]}")
    if qh != kvh and not (isinstance(qh, int) and isinstance(kvh, int)):
        raise b.unsupported("head counts must be static when Q and K/V have different head counts")
    return qh, kvh


def grouped_matmul(b: Builder, a: Value, m: Value, qh: Dim, kvh: Dim, tag: str, out: Value | None = None) -> Value:
    """(B, qh, L, X) @ (B, kvh, X, Y) -> (B, qh, L, Y), query head h reading K/V head h // (qh / kvh):
    ``a`` is viewed as (B, kvh, group * L, X), so K/V heads are never copied."""
    if qh == kvh:
        return b.op("MatMul", a, m, tag=tag, out=out)
    r = b.op("MatMul", b.reshape(a, [0, kvh, -1, 0]), m, tag=tag)
    return b.reshape(r, [0, qh, -1, 0], out=out)


def _to_4d(b: Builder, i: int, heads: int) -> Value:
    """(B, S, H*D) -> (B, H, S, D)."""
    return b.transpose(b.reshape(b.input(i), [0, 0, heads, -1]), [0, 2, 1, 3])


def _seq_len(b: Builder, inputs: list[tuple[Value, int]]) -> Value:
    """Sum of the given (value, axis) dims as a 0-d int64 value (folds when static)."""
    total = None
    for v, axis in inputs:
        d = b.dim(v, axis)
        total = d if total is None else b.op("Add", total, d)
    return total


def _mask_bias(b: Builder, dt: DType, total: Dim) -> Value | None:
    """attn_mask as an additive bias of type ``dt``, padded with -inf to the total key length."""
    mask = b.input(3)
    if mask is None:
        return None
    b.require_types([3], MASK_TYPES)
    mdt, ms = b.dtype(3), b.shape(3)
    if not ms:
        raise b.fail("attn_mask must have rank >= 1")
    if mdt == DType.BOOL:
        bias = b.op("Where", mask, b.scalar(0, dt), b.scalar(-math.inf, dt), tag="mask_bias")
    else:
        bias = mask if mdt == dt else b.cast(mask, dt)
    short = ms[-1]
    if short != total:
        if not (isinstance(short, int) and isinstance(total, int)):
            raise b.unsupported(f"attn_mask key length {short} differs from the total length {total}; "
                                "padding needs static lengths")
        if short > total:
            raise b.fail(f"attn_mask key length {short} exceeds the total key length {total}")
        r = len(ms)
        pads = [0] * (2 * r)
        pads[2 * r - 1] = total - short
        bias = b.op("Pad", bias, b.ints(pads), b.scalar(-math.inf, dt), mode="constant", tag="mask_bias")
    return bias


def _structural_bias(b: Builder, dt: DType, q_len: Value, total: Value, past: Value | None,
                     nonpad: Value | None) -> Value | None:
    """0 / -inf for the causal, window and padding constraints (None when there are none)."""
    causal = bool(b.attr("is_causal", 0))
    left = b.attr("left_window_size", -1) if b.node.version >= 25 else -1
    right = b.attr("right_window_size", -1) if b.node.version >= 25 else -1
    if left < -1 or right < -1:
        raise b.fail(f"window sizes must be -1 or nonnegative, got left {left}, right {right}")
    window = causal or left >= 0 or right >= 0
    if not window and nonpad is None:
        return None
    i64 = DType.INT64
    zero, one = b.scalar(0, i64), b.scalar(1, i64)
    keys = b.op("Range", zero, total, one, tag="keys")  # j: (total,)
    conds = []
    if window:
        pos = b.unsqueeze(b.op("Range", zero, q_len, one, tag="queries"), [1])  # i: (q, 1)
        if past is not None:
            pos = b.op("Add", pos, b.dim(past, 2))
        elif nonpad is not None:
            offset = b.reshape(b.op("Sub", nonpad, q_len), [-1, 1, 1, 1])
            pos = b.op("Add", pos, offset)  # (B, 1, q, 1)
        diff = b.op("Sub", pos, keys, tag="diff")  # offset + i - j
        if causal:
            conds.append(b.op("GreaterOrEqual", diff, zero))
        if left >= 0:
            conds.append(b.op("LessOrEqual", diff, b.scalar(left, i64)))
        if right >= 0:
            conds.append(b.op("GreaterOrEqual", diff, b.scalar(-right, i64)))
    if nonpad is not None:
        conds.append(b.op("Less", keys, b.reshape(nonpad, [-1, 1, 1, 1])))  # (B, 1, 1, total)
    allowed = conds[0]
    for c in conds[1:]:
        allowed = b.op("And", allowed, c)
    return b.op("Where", allowed, b.scalar(0, dt), b.scalar(-math.inf, dt), tag="struct_bias")


@expansion("Attention", versions=(23, 10**9))
def attention(b: Builder) -> None:
    version = b.node.version
    b.require_types([0, 1, 2, 4, 5], ALL_FLOATS)
    dt = b.dtype(0)
    for i in (1, 4):  # type T1, like Q
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, Q has {dt.short}; they must match")
    for i in (2, 5):  # type T2 (V) may differ from T1
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.unsupported(f"input {i} has element type {b.dtype(i).short}, Q has {dt.short}; "
                                "mixed types are not supported yet")
    rank = b.rank(0)
    if rank not in (3, 4) or b.rank(1) != rank or b.rank(2) != rank:
        raise b.fail(f"Q, K and V must all be 3-D or all 4-D, got ranks {b.rank(0)}, {b.rank(1)}, {b.rank(2)}")
    past_k, past_v = b.input(4), b.input(5)
    nonpad = b.input(6) if version >= 24 else None
    if (past_k is None) != (past_v is None):
        raise b.fail("past_key and past_value must be given together")
    if nonpad is not None:
        if past_k is not None:
            raise b.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
        b.require_types([6], (DType.INT64,))
    qh, kvh = _heads(b, rank)
    if qh != kvh and qh % kvh:
        raise b.fail(f"q_num_heads {qh} must be a multiple of kv_num_heads {kvh}")

    if rank == 3:
        q, k, v = _to_4d(b, 0, qh), _to_4d(b, 1, kvh), _to_4d(b, 2, kvh)
        head = b.shape(0)[2] // qh if isinstance(b.shape(0)[2], int) else None
        q_seq, kv_seq = (b.input(0), 1), (b.input(1), 1)
    else:
        q, k, v = b.input(0), b.input(1), b.input(2)
        head = b.shape(0)[3]
        q_seq, kv_seq = (b.input(0), 2), (b.input(1), 2)
    scale = b.attr("scale")
    if scale is None:
        if not isinstance(head, int):
            raise b.unsupported("the head size must be static when scale is not given")
        scale = 1.0 / math.sqrt(head)

    # KV cache: present = Concat(past, new) along the sequence axis
    if past_k is not None:
        k = b.op("Concat", past_k, k, axis=2, out=b.output(1))
        v = b.op("Concat", past_v, v, axis=2, out=b.output(2))
    else:
        for i, x in ((1, k), (2, v)):
            if b.output(i) is not None:
                b.identity(x, b.output(i))
    q_len = b.dim(*q_seq)
    total = _seq_len(b, [kv_seq] + ([(past_k, 2)] if past_k is not None else []))
    total_dim = as_dim(b.shape(1)[kv_seq[1]])
    if past_k is not None:
        total_dim = total_dim + b.shape(4)[2]

    # scores (B, qh, Sq, Skv); grouped heads: Q viewed as (B, kvh, group*Sq, D)
    root = b.scalar(math.sqrt(scale), dt)
    qs = b.op("Mul", q, root)
    kt = b.transpose(b.op("Mul", k, root), [0, 1, 3, 2])
    raw = grouped_matmul(b, qs, kt, qh, kvh, "qk")
    capped = raw
    softcap = float(b.attr("softcap", 0.0))
    if softcap > 0:
        cap = b.scalar(softcap, dt)
        capped = b.op("Mul", b.op("Tanh", b.op("Div", raw, cap)), cap, tag="softcap")
    biases = [x for x in (_mask_bias(b, dt, total_dim),
                          _structural_bias(b, dt, q_len, total, past_k, nonpad)) if x is not None]
    bias = biases[0] if biases else None
    if len(biases) == 2:
        bias = b.op("Add", biases[0], biases[1], tag="bias")
    scores = capped if bias is None else b.op("Add", capped, bias, tag="scores")

    # softmax, in softmax_precision when given, with the fully-masked-row guard
    precision = b.attr("softmax_precision")
    work = dt
    if precision is not None and precision != int(dt):
        if precision not in tuple(int(t) for t in ALL_FLOATS):
            raise b.fail(f"softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), "
                         f"got {precision}")
        work = DType(precision)
    probs = b.op("Softmax", scores if work == dt else b.cast(scores, work), axis=-1, tag="probs")
    if work != dt:
        probs = b.cast(probs, dt)
    windowed = version >= 25 and (b.attr("left_window_size", -1) >= 0 or b.attr("right_window_size", -1) >= 0)
    if bias is not None and (b.input(3) is not None or nonpad is not None or windowed):
        # a causal-only bias always lets query i see key 0, so only masks, windows and padding need this
        row_max = b.reduce("ReduceMax", bias, [-1], keepdims=1)
        masked = b.op("Equal", row_max, b.scalar(-math.inf, dt), tag="masked_rows")
        probs = b.op("Where", masked, b.scalar(0, dt), probs, tag="probs")

    mode = b.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise b.fail(f"qk_matmul_output_mode must be 0..3, got {mode}")
    if b.output(3) is not None:
        b.identity((raw, capped, scores, probs)[mode], b.output(3))

    if rank == 3:
        y = grouped_matmul(b, probs, v, qh, kvh, "y")
        b.reshape(b.transpose(y, [0, 2, 1, 3]), [0, 0, -1], out=b.output(0))
    else:
        grouped_matmul(b, probs, v, qh, kvh, "y", out=b.output(0))
