"""onnxruntime's contrib op com.microsoft DecoderMaskedMultiHeadAttention, compared with onnxruntime: self-attention
over a shared past/present buffer at several past lengths (projection bias, key padding mask, attention_bias, scale, the qk output), cross-attention over a per-head encoder cache, and the refusals.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from onnxc.ir import ShapeError, UnsupportedOpError

MS = "com.microsoft"
B, N, H, M, L = 2, 2, 4, 6, 5  # batch, heads, head size, past buffer length, encoder length
D = N * H
OP = "DecoderMaskedMultiHeadAttention"


def model(node, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def check(m: onnx.ModelProto, feeds: list[dict]) -> None:
    """onnxc (one compile) gives onnxruntime's outputs for every feed."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    compiled = onnxc.compile(m)
    for feed in feeds:
        for name, w in zip(names, sess.run(None, feed)):
            got = compiled.run(feed)[name]
            assert got.shape == w.shape, (name, got.shape, w.shape)
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5, err_msg=name)


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f32(name, *shape):
    return (name, TP.FLOAT, list(shape))


def self_feeds(rng, past: int, mask: bool, bias4: bool) -> dict:
    feeds = {"q": rand(rng, B, 1, D), "k": rand(rng, B, 1, D), "v": rand(rng, B, 1, D),
             "pk": rand(rng, B, N, M, H), "pv": rand(rng, B, N, M, H), "psl": np.array([past], np.int32)}
    if mask:
        m = np.ones((B, past + 1), np.int32)
        m[-1, : max(1, past // 2)] = 0  # left padding of the last row
        feeds["mask"] = m
    if bias4:
        feeds["ab"] = rand(rng, 1, N, 1, past + 1)
    return feeds


@pytest.mark.parametrize(("with_bias", "mask", "bias4", "scale", "qk"), [
    (False, False, False, None, False),
    (True, True, False, None, True),
    (True, False, True, 0.3, True),
    (False, True, True, None, False),
])
def test_self_attention(with_bias, mask, bias4, scale, qk):
    rng = np.random.default_rng(1)
    ins = ["q", "k", "v", "mask" if mask else "", "ab" if bias4 else "", "pk", "pv", "psl", "", "",
           "bias" if with_bias else ""]
    outs = ["y", "present_k", "present_v"] + (["qk"] if qk else [])
    node = helper.make_node(OP, ins, outs, domain=MS, num_heads=N, past_present_share_buffer=1,
                            output_qk=int(qk), scale=scale)
    inputs = [f32(n, "batch", 1, D) for n in ("q", "k", "v")]
    if mask:
        inputs.append(("mask", TP.INT32, ["batch", "total"]))
    if bias4:
        inputs.append(f32("ab", 1, N, 1, "total"))
    inputs += [f32("pk", "batch", N, "max_seq", H), f32("pv", "batch", N, "max_seq", H), ("psl", TP.INT32, [1])]
    inits = [("bias", rand(rng, 3 * D))] if with_bias else []
    m = model(node, inputs, outs, inits)
    check(m, [self_feeds(np.random.default_rng(p), p, mask, bias4) for p in (0, 3, M - 1)])


@pytest.mark.parametrize(("mask", "with_bias", "qk"), [(False, False, False), (True, True, True)])
def test_cross_attention(mask, with_bias, qk):
    rng = np.random.default_rng(2)
    ins = ["q", "k", "v", "mask" if mask else "", "", "", "", "", "", "", "bias" if with_bias else ""]
    outs = ["y"] + (["", "", "qk"] if qk else [])
    node = helper.make_node(OP, ins, outs, domain=MS, num_heads=N, output_qk=int(qk))
    inputs = [f32("q", "batch", 1, D), f32("k", "batch", N, "enc", H), f32("v", "batch", N, "enc", H)]
    if mask:
        inputs.append(("mask", TP.INT32, ["batch", "enc"]))
    m = model(node, inputs, [o for o in outs if o], [("bias", rand(rng, 3 * D))] if with_bias else [])
    feeds = []
    for enc in (L, 2):
        f = {"q": rand(rng, B, 1, D), "k": rand(rng, B, N, enc, H), "v": rand(rng, B, N, enc, H)}
        if mask:
            f["mask"] = np.ones((B, enc), np.int32)
            f["mask"][0, -1] = 0
        feeds.append(f)
    check(m, feeds)


def _self_model(**attrs) -> onnx.ModelProto:
    ins = attrs.pop("ins", ["q", "k", "v", "", "", "pk", "pv", "psl"])
    q_len = attrs.pop("q_len", 1)
    node = helper.make_node(OP, ins, ["y", "pk_out", "pv_out"], domain=MS, **{"num_heads": N, **attrs})
    inputs = [f32("q", B, q_len, D), f32("k", B, q_len, D), f32("v", B, q_len, D), f32("pk", B, N, M, H),
              f32("pv", B, N, M, H), ("psl", TP.INT32, [1]), ("ci", TP.INT32, [B, 1, M])]
    return model(node, [i for i in inputs if i[0] in ins], ["y", "pk_out", "pv_out"])


@pytest.mark.parametrize(("m", "err", "msg"), [
    (_self_model(), UnsupportedOpError, "past_present_share_buffer=1"),
    (_self_model(past_present_share_buffer=1, ins=["q", "k", "v", "", "", "pk", "pv", "psl", "", "ci"]),
     UnsupportedOpError, "cache_indirection"),
    (_self_model(past_present_share_buffer=1, q_len=2), ShapeError, "sequence length must be 1"),
    (_self_model(past_present_share_buffer=1, ins=["q", "k", "v", "", "", "pk", "pv"]), ShapeError,
     "past_sequence_length"),
    (_self_model(num_heads=3, past_present_share_buffer=1), ShapeError, "multiple of num_heads"),
    (_self_model(past_present_share_buffer=1, ins=["q", "", "", "", "", "pk", "pv", "psl"]), UnsupportedOpError,
     "packed in the query"),
])
def test_refusals(m, err, msg):
    with pytest.raises(err, match=msg):
        onnxc.compile(m)


def test_cross_attention_bias_refused():
    node = helper.make_node(OP, ["q", "k", "v", "", "ab"], ["y"], domain=MS, num_heads=N)
    m = model(node, [f32("q", B, 1, D), f32("k", B, N, L, H), f32("v", B, N, L, H), f32("ab", 1, N, 1, L)], ["y"])
    with pytest.raises(UnsupportedOpError, match="attention_bias with cross-attention"):
        onnxc.compile(m)
