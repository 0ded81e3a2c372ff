"""Dims a model leaves unknown (dim_value -1, '?', '', tf2onnx's 'unk__N') are unrelated: one compiled model
runs every size, as in onnxruntime (issue #18: a PaddleOCR classifier declares [-1, 3, '?', '?'])."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import onnxc


def _classifier() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "ocr_cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 8, "?", "?"])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_question_mark_dims_take_any_height_and_width():
    m = _classifier()
    cm = onnxc.compile(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for shape in ((1, 3, 48, 192), (2, 3, 48, 320), (1, 3, 31, 7)):
        x = rng.standard_normal(shape).astype(np.float32)
        got = cm.run({"x": x})["y"]
        want = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
