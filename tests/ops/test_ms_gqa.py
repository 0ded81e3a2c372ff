"""onnxruntime's contrib op com.microsoft GroupQueryAttention, compared with onnxruntime: token generation with a
right-padded batch, first prompts (padded rows included), a shared max-length cache, a later prompt chunk,
rotary embeddings (split-half and interleaved, with and without position_ids), local windows, softcap,
smooth_softmax and head_sink, causal=0, packed QKV, no past, float16; symbolic dims, each model run on several
steps; and the error cases.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc

MS = "com.microsoft"
N, NKV, H = 4, 2, 16
NAMES = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
         "sin_cache", "position_ids", "attention_bias", "head_sink"]
SHAPES = dict(query=["B", "S", N * H], key=["B", "S", NKV * H], value=["B", "S", NKV * H],
              past_key=["B", NKV, "P", H], past_value=["B", NKV, "P", H], seqlens_k=["B"], total_sequence_length=[],
              cos_cache=["M", 8], sin_cache=["M", 8], position_ids=["B", "S"], head_sink=[N],
              qkv=["B", "S", (N + 2 * NKV) * H])
INT_TYPES = dict(seqlens_k=TP.INT32, total_sequence_length=TP.INT32, position_ids=TP.INT64)


def gqa_model(nodes: list[tuple[dict, dict]], dt: int = TP.FLOAT) -> onnx.ModelProto:
    """One GroupQueryAttention node per (attributes, {input slot: graph input}) pair, outputs o{i}, pk{i}, pv{i}."""
    made, used = [], {}
    for i, (attrs, ins) in enumerate(nodes):
        slots = [ins.get(n, "") for n in NAMES]
        while not slots[-1]:
            slots.pop()
        made.append(helper.make_node("GroupQueryAttention", slots, [f"o{i}", f"pk{i}", f"pv{i}"], domain=MS,
                                     **(dict(num_heads=N, kv_num_heads=NKV) | attrs)))
        used.update({v: n for n, v in ins.items()})
    inputs = [helper.make_tensor_value_info(v, INT_TYPES.get(n, dt), SHAPES[v if v in SHAPES else n])
              for v, n in used.items()]
    outs = [helper.make_tensor_value_info(f"{k}{i}", dt, None) for i in range(len(nodes)) for k in ("o", "pk", "pv")]
    graph = helper.make_graph(made, "t", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


STD = {n: n for n in NAMES[:7]}
ROT = STD | dict(cos_cache="cos_cache", sin_cache="sin_cache")


def step(rng, batch, seq, past, seqlens, total, dt=np.float32, pos=None):
    """Feeds of one call: random Q/K/V/past (and packed QKV, caches), the given lengths."""
    f = dict(query=rng.standard_normal((batch, seq, N * H)), key=rng.standard_normal((batch, seq, NKV * H)),
             value=rng.standard_normal((batch, seq, NKV * H)), past_key=rng.standard_normal((batch, NKV, past, H)),
             past_value=rng.standard_normal((batch, NKV, past, H)),
             qkv=rng.standard_normal((batch, seq, (N + 2 * NKV) * H)))
    f = {k: v.astype(dt) for k, v in f.items()}
    angles = rng.random((32, 8)) * 5
    f.update(seqlens_k=np.array(seqlens, np.int32), total_sequence_length=np.array(total, np.int32),
             cos_cache=np.cos(angles).astype(dt), sin_cache=np.sin(angles).astype(dt),
             head_sink=rng.standard_normal(N).astype(dt))
    if pos is not None:
        f["position_ids"] = np.array(pos, np.int64)
    return f


def check(m: onnx.ModelProto, feeds: list[dict], tol: float = 1e-4) -> None:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    compiled = onnxc.compile(m)
    for f in feeds:
        feed = {n: f[n] for n in names}
        got = compiled.run(feed)
        for o, w in zip(sess.get_outputs(), sess.run(None, feed)):
            assert got[o.name].shape == w.shape and got[o.name].dtype == w.dtype, (o.name, got[o.name].shape, w.shape)
            np.testing.assert_allclose(got[o.name].astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol,
                                       err_msg=o.name)


# (batch, sequence, past rows, seqlens_k, total_sequence_length) of the calls every model runs
STEPS = [(2, 1, 4, [4, 2], 5),  # token generation, entry 1 right-padded in the cache
         (2, 4, 0, [3, 1], 4),  # first prompt, entry 1 padded
         (2, 1, 6, [3, 4], 5),  # shared max-length cache: present keeps 6 rows
         (1, 3, 4, [6], 7)]  # a later prompt chunk


def test_group_query_attention():
    """Plain, causal=0, and local window + softcap + smooth_softmax + head_sink nodes."""
    rng = np.random.default_rng(0)
    m = gqa_model([({}, STD), (dict(causal=0), STD),
                   (dict(local_window_size=2, softcap=3.0, smooth_softmax=1), STD),
                   (dict(local_window_size=3, scale=0.2), STD | dict(head_sink="head_sink"))])
    check(m, [step(rng, *s) for s in STEPS])


def test_group_query_attention_rotary():
    """do_rotary with positions from seqlens_k (split-half, interleaved) or position_ids (whose first element
    starts a first prompt)."""
    rng = np.random.default_rng(1)
    m = gqa_model([(dict(do_rotary=1), ROT), (dict(do_rotary=1, rotary_interleaved=1), ROT),
                   (dict(do_rotary=1), ROT | dict(position_ids="position_ids"))])
    pos = [[[7], [9]], [[3, 5, 1, 2], [4, 4, 4, 4]], [[3], [4]], [[4, 5, 6]]]
    check(m, [step(rng, *s, pos=p) for s, p in zip(STEPS, pos)])


def test_group_query_attention_packed_and_no_past():
    """Packed QKV (key and value absent) with rotary, and a first prompt without past."""
    rng = np.random.default_rng(2)
    packed = dict(query="qkv", past_key="past_key", past_value="past_value", seqlens_k="seqlens_k",
                  total_sequence_length="total_sequence_length", cos_cache="cos_cache", sin_cache="sin_cache")
    no_past = {k: v for k, v in STD.items() if not k.startswith("past")}
    m = gqa_model([(dict(do_rotary=1), packed)])
    check(m, [step(rng, *s) for s in STEPS])
    m = gqa_model([({}, no_past)])
    check(m, [step(rng, 2, 4, 0, [3, 1], 4), step(rng, 1, 6, 0, [5], 6)])


def test_group_query_attention_float16():
    rng = np.random.default_rng(3)
    m = gqa_model([(dict(do_rotary=1), ROT)], dt=TP.FLOAT16)
    check(m, [step(rng, *s, dt=np.float16) for s in STEPS], tol=2e-3)


@pytest.mark.parametrize("attrs, extra, match", [
    (dict(local_window_size=0), {}, "local_window_size 0 is not supported"),
    (dict(sliding_window_cache=1), {}, "sliding_window_cache=1 is not supported"),
    (dict(qk_output=1), {}, "qk_output other than 0"),
    (dict(k_quant_type="PER_TENSOR"), {}, "k_quant_type other than NONE"),
    (dict(causal=0, local_window_size=4), {}, "local_window_size must be -1 when causal is 0"),
    (dict(smooth_softmax=1), dict(head_sink="head_sink"), "head_sink must not be given with smooth_softmax"),
    (dict(do_rotary=1), {}, "do_rotary=1 needs cos_cache and sin_cache"),
    (dict(kv_num_heads=3), {}, "must be a positive multiple of kv_num_heads 3"),
])
def test_group_query_attention_errors(attrs, extra, match):
    m = gqa_model([(attrs, STD | extra)])
    with pytest.raises(onnxc.OnnxcError, match=match):
        onnxc.compile(m)


def test_group_query_attention_unsupported_inputs():
    m = gqa_model([({}, STD)])
    node = m.graph.node[0]
    node.input.extend(["", "", "", "ab"])  # slot 10: attention_bias
    m.graph.input.append(helper.make_tensor_value_info("ab", TP.FLOAT, ["B", N, "S", "T"]))
    with pytest.raises(onnxc.OnnxcError, match="attention_bias is not supported"):
        onnxc.compile(m)
