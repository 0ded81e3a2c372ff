"""Values of run-time rank (passes/sink_into_if.py): an If whose branches differ in rank, driven by an input,
and a Squeeze without axes over a dim that may be 1, compiled once and compared with onnxruntime on every
branch; a branch that is invalid for its shapes fails only when taken."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc

F = TP.FLOAT


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ort(m: onnx.ModelProto, feeds: dict) -> list:
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _branch(name: str, nodes, out: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, None)])


def _rank_if_model() -> onnx.ModelProto:
    """A voice-activity-style model: the flag picks a branch returning [b, 4] or [b, 4, 2]; the code after the
    If flattens it, multiplies by a weight and adds a value computed after the If in graph order."""
    then = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], "t")
    other = _branch("else", [helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
                             helper.make_node("Concat", ["u", "u"], ["e"], axis=2)], "e")
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(8, 1) / 8, "w")
    pad = numpy_helper.from_array(np.array([0, 0, 0, 4], dtype=np.int64), "pad")
    nodes = [helper.make_node("If", ["flag"], ["h"], then_branch=then, else_branch=other),
             helper.make_node("Flatten", ["h"], ["f"], axis=1),
             helper.make_node("Shape", ["f"], ["fs"], start=1),
             helper.make_node("Sub", ["eight", "fs"], ["rest"]),
             helper.make_node("Concat", ["zero", "rest"], ["pads"], axis=0),
             helper.make_node("Pad", ["f", "pads"], ["p"]),
             helper.make_node("MatMul", ["p", "w"], ["m"]),
             helper.make_node("Sigmoid", ["x2"], ["late"]),  # independent of the If, after it in graph order
             helper.make_node("Add", ["m", "late"], ["y"])]
    inits = [w, pad, numpy_helper.from_array(np.array([8], np.int64), "eight"),
             numpy_helper.from_array(np.array([0, 0, 0], np.int64), "zero"),
             numpy_helper.from_array(np.array([2], np.int64), "ax")]
    return _model(nodes, [helper.make_tensor_value_info("flag", TP.BOOL, []),
                          helper.make_tensor_value_info("x", F, ["b", 4]),
                          helper.make_tensor_value_info("x2", F, ["b", 1])],
                  [helper.make_tensor_value_info("y", F, ["b", 1])], inits)


def test_if_branches_of_different_rank_match_onnxruntime_on_both():
    m = _rank_if_model()
    cm = onnxc.compile(m)
    rng = np.random.default_rng(0)
    for flag in (True, False):
        for b in (1, 3):
            feeds = {"flag": np.array(flag), "x": rng.standard_normal((b, 4)).astype(np.float32),
                     "x2": rng.standard_normal((b, 1)).astype(np.float32)}
            np.testing.assert_allclose(cm.run(feeds)["y"], _ort(m, feeds)[0], rtol=1e-5, atol=1e-6)


def test_graph_output_of_different_rank_is_refused_clearly():
    then = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], "t")
    other = _branch("else", [helper.make_node("Unsqueeze", ["x", "ax"], ["e"])], "e")
    m = _model([helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)],
               [helper.make_tensor_value_info("flag", TP.BOOL, []), helper.make_tensor_value_info("x", F, [4])],
               [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(np.array([0], np.int64), "ax")])
    with pytest.raises(onnxc.UnsupportedOpError, match="output 0 has a different rank in each branch"):
        onnxc.compile(m)


def _squeeze_model(then_split: bool) -> onnx.ModelProto:
    """Squeeze without axes of x [n, 1, 3] (n from the data): [3] when n == 1, else [n, 3]; then ReduceSum over
    every axis (valid for both ranks) or a Split along axis 1 (valid only when n > 1)."""
    nodes = [helper.make_node("Squeeze", ["x"], ["s"])]
    if then_split:
        nodes += [helper.make_node("Split", ["s", "sizes"], ["a", "c"], axis=1),
                  helper.make_node("ReduceSum", ["a"], ["y"], keepdims=0)]
    else:
        nodes += [helper.make_node("ReduceSum", ["s"], ["y"], keepdims=0)]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["n", 1, 3])],
                  [helper.make_tensor_value_info("y", F, [])], [numpy_helper.from_array(np.array([1, 2], np.int64), "sizes")])


def test_squeeze_without_axes_over_a_symbolic_dim():
    m = _squeeze_model(False)
    cm = onnxc.compile(m)
    for n in (1, 2, 5):
        x = np.random.default_rng(n).standard_normal((n, 1, 3)).astype(np.float32)
        np.testing.assert_allclose(cm.run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_branch_invalid_for_its_shapes_fails_only_when_taken():
    m = _squeeze_model(True)
    cm = onnxc.compile(m)
    x = np.random.default_rng(0).standard_normal((4, 1, 3)).astype(np.float32)
    np.testing.assert_allclose(cm.run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(onnxc.OnnxcError, match="axis 1 is out of range for rank 1"):
        cm.run({"x": x[:1]})
