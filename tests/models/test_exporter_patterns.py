"""Small shape-computing subgraphs exporters emit, on symbolic dims, against onnxruntime.

Each pattern compiles once and runs at several shapes; the IR assertions check that the shape
computation became static-in-symbols (no Shape node, constant Reshape/Expand shapes).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _c(name: str, value, dtype=np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, dtype)))


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "pattern", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, feeds_list: list[dict]) -> onnxc.CompiledModel:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(model)
    for feeds in feeds_list:
        want = sess.run(None, feeds)
        got = list(compiled.run(feeds).values())
        for w, g in zip(want, got):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return compiled


def _x(*shape: int) -> dict:
    return {"x": np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)}


def _ops(compiled) -> list[str]:
    return [n.op_type for n in compiled.ir.graph.nodes]


@pytest.mark.parametrize("axes", [[0, 2, 3], [2, 3], [0, 2], [1]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_over_several_symbolic_axes(axes, keepdims):
    """The mean divides by the product of symbolic dims (a C cast once bound tighter than the product)."""
    m = _model([helper.make_node("ReduceMean", ["x"], ["y"], axes=axes, keepdims=keepdims)],
               [("x", F, ["N", "C", "H", "W"])], [("y", F)])
    _check(m, [_x(2, 3, 8, 10), _x(1, 4, 5, 7)])


def test_slice_end_from_shape_arithmetic():
    """x[:, :x.size(1) - 1]: an end whose sign is known only at run time (negative when S = 0)."""
    m = _model([helper.make_node("Shape", ["x"], ["s"]), _c("i1", [1]), helper.make_node("Gather", ["s", "i1"], ["n"]),
                _c("one", [1]), helper.make_node("Sub", ["n", "one"], ["e"]), _c("z", [0]),
                helper.make_node("Slice", ["x", "z", "e", "i1"], ["y"])],
               [("x", F, ["B", "S", 8])], [("y", F)])
    compiled = _check(m, [_x(2, 5, 8), _x(3, 9, 8), _x(1, 1, 8), _x(1, 0, 8)])
    assert "Shape" not in _ops(compiled)


def test_gpt2_causal_bias_slice_with_key_minus_query_start():
    """bias[:, :, K - Q:K, :K] (GPT-2 exports): the start K - Q has no known sign."""
    bias = numpy_helper.from_array(np.tril(np.arange(256, dtype=np.float32).reshape(16, 16))[None, None], "bias")
    m = _model([helper.make_node("Shape", ["x"], ["s"]), _c("i1", [1]), helper.make_node("Gather", ["s", "i1"], ["q"]),
                helper.make_node("Shape", ["past"], ["ps"]), helper.make_node("Gather", ["ps", "i1"], ["k"]),
                helper.make_node("Sub", ["k", "q"], ["kq"]), _c("a23", [2, 3]), _c("z", [0]),
                helper.make_node("Concat", ["kq", "z"], ["st"], axis=0),
                helper.make_node("Concat", ["k", "k"], ["en"], axis=0),
                helper.make_node("Slice", ["bias", "st", "en", "a23"], ["y"])],
               [("x", F, ["B", "Q", 8]), ("past", F, ["B", "K"])], [("y", F)], [bias])
    feeds = [dict(_x(2, 5, 8), past=np.zeros((2, k), np.float32)) for k in (7, 5, 3)]
    for f, q in zip(feeds, (5, 5, 6)):
        f["x"] = f["x"][:, :1].repeat(q, axis=1)
    _check(m, feeds)


def test_reshape_and_expand_shapes_become_constants():
    """Run-time computed shapes that a constant can express ([0, 0, 4, 2], broadcasting 1s) replace the
    Shape -> Gather -> Concat chains; no onnxc::SymValue is left for them."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _c("i0", 0), _c("i1", 1),
             helper.make_node("Gather", ["s", "i0"], ["b"]), helper.make_node("Gather", ["s", "i1"], ["n"]),
             _c("ax", [0]), helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), _c("tail", [4, 2]),
             helper.make_node("Concat", ["b1", "n1", "tail"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             # expand the [B, S, 1, 2] mean to Shape(r) = [B, S, 4, 2]: the constant [1, 1, 4, 1] does it
             helper.make_node("ReduceMean", ["r"], ["mean"], axes=[2]),
             helper.make_node("Shape", ["r"], ["rs"]), helper.make_node("Expand", ["mean", "rs"], ["e"]),
             helper.make_node("Add", ["r", "e"], ["y"])]
    m = _model(nodes, [("x", F, ["B", "S", 8])], [("y", F)])
    compiled = _check(m, [_x(2, 5, 8), _x(1, 3, 8)])
    g = compiled.ir.graph
    assert _ops(compiled) == ["Reshape", "ReduceMean", "Expand", "Add"]
    reshape, expand = g.nodes[0], g.nodes[2]
    assert reshape.inputs[1].const.tolist() == [0, 0, 4, 2]
    assert expand.inputs[1].const.tolist() == [1, 1, 4, 1]
    assert str(reshape.outputs[0].type) == "float[B, S, 4, 2]"


def test_reshape_with_two_new_symbolic_dims_keeps_a_sym_value():
    """[B, S, 8] -> [S, B, 8] needs both symbolic values at run time: an onnxc::SymValue writes them."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _c("i", [1, 0, 2]), helper.make_node("Gather", ["s", "i"], ["t"]),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    compiled = _check(_model(nodes, [("x", F, ["B", "S", 8])], [("y", F)]), [_x(2, 5, 8), _x(3, 1, 8)])
    assert _ops(compiled) == ["SymValue", "Reshape"]
    assert str(compiled.ir.graph.nodes[1].outputs[0].type) == "float[S, B, 8]"
