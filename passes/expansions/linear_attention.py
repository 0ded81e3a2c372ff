"""LinearAttention (27): recurrent linear attention (linear, gated, delta, gated_delta update rules),
with GQA/MQA and a (B, H_kv, d_k, d_v) carry state.

The recurrence runs sequentially over the T tokens; with no loop support yet, the expansion unrolls
it when T is static and at most MAX_STEPS (decode steps and short prefills). Per token, on 4-D heads:

    S = S * exp(g_t)                         (gated rules; g per head or per key dim)
    v_t = beta_t * (v_t - k_t @ S)           (delta rules)
    S = S + k_t^T * v_t                      (outer product)
    o_t = q_t @ S                            (query heads grouped per KV head)

and the output is ``scale`` times the concatenated o_t. The first token without a past state starts
from zeros, which the expansion folds away instead of materializing a zero state.

As in the reference, the recurrence runs in float32 whatever the input types (float16/bfloat16
inputs are widened first); the output is rounded to the query's type and the present state to the
past state's type (the query's when there is no past state).
"""

from __future__ import annotations

import math

from onnxc.ir import DType, Value

from .builder import Builder
from .registry import expansion

RULES = ("linear", "gated", "delta", "gated_delta")
TYPES = (DType.FLOAT, DType.FLOAT16, DType.BFLOAT16)
MAX_STEPS = 64


def _to_4d(b: Builder, x: Value, heads: int) -> Value:
    """(B, T, H*D) -> (B, H, T, D)."""
    return b.transpose(b.reshape(x, [0, 0, heads, -1]), [0, 2, 1, 3])


def _widen(b: Builder, x: Value | None) -> Value | None:
    """``x`` as float32 (the recurrence's precision)."""
    if x is None or x.type.dtype == DType.FLOAT:
        return x
    return b.cast(x, DType.FLOAT)


def _step(b: Builder, x: Value, t: int, axis: int) -> Value:
    return b.slice(x, [t], [t + 1], [axis])


@expansion("LinearAttention", versions=(27, 10**9))
def linear_attention(b: Builder) -> None:
    b.require_types([0, 1, 2, 3, 4, 5], TYPES)
    out_dt = b.dtype(0)
    for i in (1, 2, 4, 5):
        if b.input(i) is not None and b.dtype(i) != out_dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, query has {out_dt.short}; "
                         "query, key, value, decay and beta share one type")
    state_dt = b.dtype(3) if b.input(3) is not None else out_dt
    rule = b.attr("update_rule", "gated_delta")
    if rule not in RULES:
        raise b.fail(f"update_rule must be one of {', '.join(RULES)}, got {rule!r}")
    qh, kvh = b.attr("q_num_heads"), b.attr("kv_num_heads")
    if not qh or not kvh or qh <= 0 or kvh <= 0 or qh % kvh:
        raise b.fail(f"q_num_heads ({qh}) must be a positive multiple of kv_num_heads ({kvh}); both are required")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    past, decay, beta = (_widen(b, b.input(i)) for i in (3, 4, 5))
    for present, needed, name in ((decay, gated, "decay"), (beta, delta, "beta")):
        if needed and present is None:
            raise b.fail(f"update_rule {rule!r} requires the {name} input")
        if not needed and present is not None:
            raise b.fail(f"update_rule {rule!r} does not take the {name} input")
    shapes = [b.shape(i) for i in range(3)]
    if any(len(s) != 3 for s in shapes):
        raise b.fail(f"query, key and value must be 3-D (B, T, H*D), got {[list(s) for s in shapes]}")
    steps, qd, vd = shapes[0][1], shapes[0][2], shapes[2][2]
    if not (isinstance(steps, int) and isinstance(qd, int) and isinstance(vd, int)):
        raise b.unsupported("the sequence length and hidden sizes must be static")
    if steps < 1:
        raise b.unsupported("an empty sequence (T = 0) is not supported yet")
    if steps > MAX_STEPS:
        raise b.unsupported(f"{steps} tokens need a loop; the recurrence is unrolled for at most {MAX_STEPS}")
    dk, dv, group = qd // qh, vd // kvh, qh // kvh
    scale = b.attr("scale", 0.0) or 1.0 / math.sqrt(dk)

    query, key, value = (_widen(b, b.input(i)) for i in (0, 1, 2))
    q = _to_4d(b, query, qh)                                             # (B, Hq, T, dk)
    kt = b.transpose(b.reshape(key, [0, 0, kvh, -1]), [0, 2, 3, 1])      # (B, Hkv, dk, T)
    k = _to_4d(b, key, kvh) if delta else None                           # (B, Hkv, T, dk)
    v = _to_4d(b, value, kvh)                                            # (B, Hkv, T, dv)
    if gated:  # exp(decay) as (B, Hkv, dk or 1, T): scales the rows of S
        ds = b.shape(4)
        per_dim = ds[-1] != kvh
        g = b.transpose(b.reshape(b.op("Exp", decay), [0, 0, kvh, -1]), [0, 2, 3, 1])
        if per_dim and ds[-1] != kvh * dk:
            raise b.fail(f"decay's last dim {ds[-1]} must be kv_num_heads ({kvh}) or kv_num_heads * d_k "
                         f"({kvh * dk})")
    if delta:  # (B, h, T, 1) with h = Hkv or 1
        bl = b.shape(5)[-1]
        if bl not in (kvh, 1):
            raise b.fail(f"beta's last dim {bl} must be kv_num_heads ({kvh}) or 1")
        beta4 = b.transpose(b.unsqueeze(beta, [3]), [0, 2, 1, 3])

    state = past
    outs = []
    for t in range(steps):
        kt_t, v_t = _step(b, kt, t, 3), _step(b, v, t, 2)
        if gated and state is not None:
            state = b.op("Mul", state, _step(b, g, t, 3))
        if delta:
            if state is not None:
                v_t = b.op("Sub", v_t, b.op("MatMul", _step(b, k, t, 2), state))
            v_t = b.op("Mul", _step(b, beta4, t, 2), v_t)
        update = b.op("Mul", kt_t, v_t)  # outer product (B, Hkv, dk, dv)
        state = update if state is None else b.op("Add", state, update)
        q_t = b.reshape(_step(b, q, t, 2), [0, kvh, group, dk])
        outs.append(b.reshape(b.op("MatMul", q_t, state), [0, qh, 1, dv]))
    o = outs[0] if len(outs) == 1 else b.op("Concat", *outs, axis=2)
    o = b.op("Mul", o, b.scalar(scale, DType.FLOAT))
    o = b.transpose(o, [0, 2, 1, 3])
    if out_dt == DType.FLOAT:
        b.reshape(o, [0, 0, -1], out=b.output(0))
    else:
        b.cast(b.reshape(o, [0, 0, -1]), out_dt, out=b.output(0))
    if b.output(1) is not None:
        if state_dt == DType.FLOAT:
            b.identity(state, b.output(1))
        else:
            b.cast(state, state_dt, out=b.output(1))
