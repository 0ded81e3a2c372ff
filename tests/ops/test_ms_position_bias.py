"""onnxruntime's contrib ops com.microsoft RelativePositionBias (T5) and GatedRelativePositionBias (WavLM).

onnxruntime has only CUDA kernels for these, so the reference is numpy written from those kernels' arithmetic
(ms_position_bias.py's docstring); RelativePositionBias's buckets are also checked against Hugging Face T5's own
bucketing (the graph the transformer optimizer fuses into this op), when transformers is installed. Lengths come
in as run-time inputs and as shape values, so both the compiled kernels and the compile-time folding run.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from onnxc.ir import ShapeError, UnsupportedOpError

MS = "com.microsoft"


def model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def ref_buckets(rel: np.ndarray, n: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    """The CUDA kernel's bucket of each relative position (key - query), in float32 as it computes them."""
    rel = rel.astype(np.int64)
    out = np.zeros_like(rel)
    if bidirectional:
        n //= 2
        out += np.where(rel > 0, n, 0)
        dist = np.abs(rel)
    else:
        dist = np.maximum(-rel, 0)
    exact = n // 2
    with np.errstate(divide="ignore"):
        logs = np.log(dist.astype(np.float32) / np.float32(exact))
    denom = np.log(np.float32(max_distance) / np.float32(exact))
    large = exact + (logs / denom * np.float32(n - exact)).astype(np.int64)
    return out + np.where(dist < exact, dist, np.minimum(large, n - 1))


def ref_relative_bias(table: np.ndarray, q: int, k: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    buckets, heads = table.shape
    rel = np.arange(k)[None, :] - np.arange(q)[:, None]
    flat = table.reshape(heads, buckets)  # the kernel reads the memory as (heads, buckets)
    return flat[:, ref_buckets(rel, buckets, max_distance, bidirectional)][None]


@pytest.mark.parametrize(("buckets", "max_distance", "bidirectional"),
                         [(32, 128, True), (32, 128, False), (8, 20, True), (16, 10, False)])
def test_relative_position_bias_runtime_lengths(buckets, max_distance, bidirectional):
    heads = 3
    table = np.random.default_rng(buckets).standard_normal((buckets, heads)).astype(np.float32)
    node = helper.make_node("RelativePositionBias", ["table", "q", "k"], ["y"], domain=MS,
                            max_distance=max_distance, is_bidirectional=int(bidirectional))
    m = model([node], [("q", TP.INT64, [1]), ("k", TP.INT64, [1])], ["y"], [("table", table)])
    compiled = onnxc.compile(m)
    for q, k in ((1, 1), (7, 7), (40, 40), (300, 300), (5, 9), (9, 2)):
        got = compiled.run({"q": np.array([q], np.int64), "k": np.array([k], np.int64)})["y"]
        np.testing.assert_array_equal(got, ref_relative_bias(table, q, k, max_distance, bidirectional))


def test_relative_position_bias_from_shapes():
    """Lengths from Shape -> Gather of a symbolic input (as in T5 graphs): the output dims are the input's."""
    heads, buckets = 2, 32
    table = np.random.default_rng(0).standard_normal((buckets, heads)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "one"], ["len"], axis=0),
             helper.make_node("RelativePositionBias", ["table", "len", "len"], ["bias"], domain=MS,
                              max_distance=128, is_bidirectional=1),
             helper.make_node("Add", ["bias", "s"], ["y"])]
    m = model(nodes, [("x", TP.FLOAT, ["batch", "seq", 4]), ("s", TP.FLOAT, [1, heads, "seq", "seq"])], ["y"],
              [("table", table), ("one", np.array(1, np.int64))])
    compiled = onnxc.compile(m)
    for seq in (3, 33):
        s = np.random.default_rng(seq).standard_normal((1, heads, seq, seq)).astype(np.float32)
        got = compiled.run({"x": np.zeros((2, seq, 4), np.float32), "s": s})["y"]
        np.testing.assert_allclose(got, ref_relative_bias(table, seq, seq, 128, True) + s, rtol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_match_hugging_face_t5(bidirectional):
    """The kernel's buckets are T5's (transformers' T5Attention._relative_position_bucket) for its defaults."""
    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    rel = np.arange(-500, 501)
    want = t5.T5Attention._relative_position_bucket(torch.from_numpy(rel), bidirectional=bidirectional,
                                                    num_buckets=32, max_distance=128).numpy()
    np.testing.assert_array_equal(ref_buckets(rel, 32, 128, bidirectional), want)


def ref_gated(query, query_bias, rel_pos, weight, bias, eco_a, heads):
    b, s, d = query.shape
    q = (query + query_bias).reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
    val = q @ weight + bias
    half = weight.shape[1] // 2
    u = 1 / (1 + np.exp(-val[..., :half].sum(-1, keepdims=True)))
    r = 1 / (1 + np.exp(-val[..., half:].sum(-1, keepdims=True)))
    return (u * (r * eco_a - 1) + 2) * rel_pos


@pytest.mark.parametrize("gate_size", [2, 8])
def test_gated_relative_position_bias(gate_size):
    heads, hidden = 2, 8
    rng = np.random.default_rng(gate_size)
    inits = {"qb": rng.standard_normal(hidden), "w": rng.standard_normal((hidden // heads, gate_size)) * 0.3,
             "b": rng.standard_normal(gate_size), "eco": rng.standard_normal((1, heads, 1, 1))}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    node = helper.make_node("GatedRelativePositionBias", ["q", "qb", "rel", "w", "b", "eco"], ["y"], domain=MS,
                            num_heads=heads)
    m = model([node], [("q", TP.FLOAT, ["batch", "seq", hidden]), ("rel", TP.FLOAT, [1, heads, "seq", "seq"])],
              ["y"], list(inits.items()))
    compiled = onnxc.compile(m)
    for batch, seq in ((1, 5), (3, 2)):
        q = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
        rel = rng.standard_normal((1, heads, seq, seq)).astype(np.float32)
        got = compiled.run({"q": q, "rel": rel})["y"]
        want = ref_gated(q, inits["qb"], rel, inits["w"], inits["b"], inits["eco"], heads)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _rpb(**attrs):
    table = np.zeros((8, 2), np.float32)
    node = helper.make_node("RelativePositionBias", ["table", "q", "k"], ["y"], domain=MS, **attrs)
    return model([node], [("q", TP.INT64, [1]), ("k", TP.INT64, [1])], ["y"], [("table", table)])


def _gated(token_offset=False, weight=(4, 2), eco=(1, 2, 1, 1)):
    node = helper.make_node("GatedRelativePositionBias", ["q", "qb", "rel", "w", "b", "eco"]
                            + (["off"] if token_offset else []), ["y"], domain=MS, num_heads=2)
    ins = [("q", TP.FLOAT, [2, 3, 8]), ("rel", TP.FLOAT, [1, 2, 3, 3])] + \
        ([("off", TP.INT32, [2, 3])] if token_offset else [])
    inits = [("qb", np.zeros(8, np.float32)), ("w", np.zeros(weight, np.float32)),
             ("b", np.zeros(weight[1], np.float32)), ("eco", np.zeros(eco, np.float32))]
    return model([node], ins, ["y"], inits)


@pytest.mark.parametrize(("m", "err", "msg"), [
    (_rpb(max_distance=0), ShapeError, "max_distance must be given and positive"),
    (_gated(token_offset=True), UnsupportedOpError, "padding-removed"),
    (_gated(weight=(4, 3)), ShapeError, "even gate size"),
    (_gated(eco=(1, 2, 1)), ShapeError, "eco_a must have shape"),
])
def test_refusals(m, err, msg):
    with pytest.raises(err, match=msg):
        onnxc.compile(m)
