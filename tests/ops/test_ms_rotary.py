"""onnxruntime's contrib op com.microsoft RotaryEmbedding, compared with onnxruntime: 3-D and 4-D inputs,
(B, S) position ids and a single offset, split-half and interleaved, partial rotary_embedding_dim, the head
size taken from the caches, float16; one model per element type with symbolic dims, run at two sizes; and
the error cases.
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
N, H, MAX = 2, 8, 16


def rope_model(dt: int) -> onnx.ModelProto:
    """Several RotaryEmbedding nodes over inputs x3 (B, S, N*H), x4 (B, N, S, H), position ids (B, S) and an
    offset, with full (H/2 columns) and partial (2 columns) caches."""
    def node(x, pos, cache, out, **attrs):
        return helper.make_node("RotaryEmbedding", [x, pos, f"cos{cache}", f"sin{cache}"], [out], domain=MS, **attrs)

    nodes = [node("x3", "pos", "", "y0"),
             node("x3", "off", "", "y1", interleaved=1),
             node("x4", "pos", "", "y2", interleaved=1),
             node("x4", "off", "", "y3"),
             node("x3", "pos", "p", "y4", rotary_embedding_dim=4, num_heads=N),
             node("x4", "off", "p", "y5", rotary_embedding_dim=4, num_heads=N, interleaved=1),
             node("x3", "pos", "p", "y6")]  # head size 4 from the caches: 4 heads
    ins = [helper.make_tensor_value_info("x3", dt, ["B", "S", N * H]),
           helper.make_tensor_value_info("x4", dt, ["B", N, "S", H]),
           helper.make_tensor_value_info("pos", TP.INT64, ["B", "S"]),
           helper.make_tensor_value_info("off", TP.INT64, [1])]
    ins += [helper.make_tensor_value_info(f"{k}{c}", dt, [MAX, H // 2 if c == "" else 2])
            for k in ("cos", "sin") for c in ("", "p")]
    outs = [helper.make_tensor_value_info(f"y{i}", dt, None) for i in range(len(nodes))]
    graph = helper.make_graph(nodes, "t", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


@pytest.mark.parametrize("dt, tol", [(np.float32, 1e-5), (np.float16, 2e-3)])
def test_rotary_embedding(dt, tol):
    rng = np.random.default_rng(0)
    m = rope_model(helper.np_dtype_to_tensor_dtype(np.dtype(dt)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(m)
    angles = rng.random((MAX, H // 2)) * 6
    for batch, seq in ((2, 3), (3, 7)):
        feed = dict(x3=rng.standard_normal((batch, seq, N * H)).astype(dt),
                    x4=rng.standard_normal((batch, N, seq, H)).astype(dt),
                    pos=rng.integers(0, MAX, (batch, seq)).astype(np.int64),
                    off=np.array([MAX - seq - 1], np.int64),
                    cos=np.cos(angles).astype(dt), sin=np.sin(angles).astype(dt),
                    cosp=np.cos(angles[:, :2]).astype(dt), sinp=np.sin(angles[:, :2]).astype(dt))
        got = compiled.run(feed)
        for o, w in zip(sess.get_outputs(), sess.run(None, feed)):
            assert got[o.name].dtype == w.dtype and got[o.name].shape == w.shape, o.name
            np.testing.assert_allclose(got[o.name].astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol,
                                       err_msg=o.name)


@pytest.mark.parametrize("attrs, cache_cols, pos_shape, match", [
    (dict(is_packed_batching=1), 4, ["B", "S"], "is_packed_batching=1 is not supported"),
    (dict(scale=0.5), 4, ["B", "S"], "scale other than 1 is not supported"),
    (dict(rotary_embedding_dim=4), 2, ["B", "S"], "num_heads must be given with rotary_embedding_dim"),
    (dict(rotary_embedding_dim=4, num_heads=N), 4, ["B", "S"], "caches of head_size / 2 = 4 columns"),
    (dict(rotary_embedding_dim=10, num_heads=N), 5, ["B", "S"], "at most the head size 8"),
    (dict(), 4, [2], "position_ids must be"),
    (dict(), 3, ["B", "S"], "not a multiple of the head size 6"),
])
def test_rotary_embedding_errors(attrs, cache_cols, pos_shape, match):
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, **attrs)
    ins = [helper.make_tensor_value_info("x", TP.FLOAT, ["B", "S", N * H]),
           helper.make_tensor_value_info("pos", TP.INT64, pos_shape),
           helper.make_tensor_value_info("cos", TP.FLOAT, [MAX, cache_cols]),
           helper.make_tensor_value_info("sin", TP.FLOAT, [MAX, cache_cols])]
    graph = helper.make_graph([node], "t", ins, [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(onnxc.OnnxcError, match=match):
        onnxc.compile(m)
