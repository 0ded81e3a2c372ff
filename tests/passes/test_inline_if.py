"""passes/inline_if.py: an If on a constant condition is replaced by the nodes of the branch it takes
(IR before, expected IR after): captures rebound to the outer values, branch initializers moved out, a
graph output keeps its name through an Identity; a run-time condition is left alone; a branch of the
wrong arity is a ShapeError; and through shape inference the untaken, shape-invalid branch is never
inferred, the compiled model matching onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir import ShapeError
from onnxc.ir.checker import check_model
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.inline_if import inline_constant_if
from onnxc.passes.lift_captures import lift_captures

from .onnxutil import body, dump, load, model, ops, ort_run, vi

n = helper.make_node


def _if_model(cond, then_outs: int = 1):
    then = body("then", [n("Mul", ["x", "w"], ["t1"]), n("Add", ["t1", "h"], ["t"])], ["t"] * then_outs)
    then.initializer.append(helper.make_tensor("w", TP.FLOAT, [2], [2.0, 3.0]))
    els = body("else", [n("Neg", ["x"], ["e"])], ["e"])
    inputs, inits = [vi("x", [2])], {}
    if cond is None:
        inputs.append(vi("c", [], TP.BOOL))
    else:
        inits["c"] = np.array(cond)
    m = load(model([n("Abs", ["x"], ["h"]), n("If", ["c"], ["z"], then_branch=then, else_branch=els),
                    n("Relu", ["z"], ["y"])], inputs, ["y"], inits))
    lift_captures(m)
    return m


def test_true_condition_takes_the_then_branch():
    m = _if_model(True)
    assert "  %z = If(%c, %x, %h) {else_branch=<graph else>, then_branch=<graph then>, onnxc_n_inputs=1}" \
        in dump(m.graph)
    moved = inline_constant_if(m.graph.nodes[1])
    assert repr(moved) == "[%t1 = Mul(%x, %w), %t = Add(%t1, %h)]"
    assert dump(m.graph) == """\
graph g(
    %x: float[2],
) {
  init %c: bool[]
  init %w: float[2]
  %h = Abs(%x)
  %t1 = Mul(%x, %w)
  %t = Add(%t1, %h)
  %y = Relu(%t)
  return %y
}"""
    check_model(m)


def test_false_condition_and_a_public_output_keep_the_output_name():
    m = load(model([n("If", ["c"], ["y"], then_branch=body("then", [n("Abs", ["x"], ["t"])], ["t"]),
                      else_branch=body("else", [n("Neg", ["x"], ["e"])], ["e"]))],
                   [vi("x", [2])], ["y"], {"c": np.array([False])}))
    lift_captures(m)
    moved = inline_constant_if(m.graph.nodes[0])
    assert [k.op_type for k in moved] == ["Neg", "Identity"]
    assert repr(m.graph.nodes) == "[%e = Neg(%x), %y = Identity(%e)]"
    assert [v.name for v in m.graph.outputs] == ["y"] and m.graph.outputs[0].producer is moved[1]
    check_model(m)


def test_runtime_condition_and_other_nodes_are_left_alone():
    m = _if_model(None)
    before = dump(m.graph)
    assert inline_constant_if(m.graph.nodes[1]) is None
    assert inline_constant_if(m.graph.nodes[0]) is None  # not an If
    assert dump(m.graph) == before


def test_branch_of_the_wrong_arity_is_refused():
    m = _if_model(True, then_outs=2)
    with pytest.raises(ShapeError, match=r"If .*'z'.*then_branch returns 2 values, the node has 1 outputs"):
        inline_constant_if(m.graph.nodes[1])


def test_moved_nodes_bodies_are_reparented():
    inner = body("inner", [n("Neg", ["x"], ["q"])], ["q"])
    then = body("then", [n("If", ["c2"], ["t"], then_branch=inner, else_branch=inner)], ["t"])
    m = load(model([n("If", ["c"], ["y"], then_branch=then, else_branch=body("else", [n("Abs", ["x"], ["e"])], ["e"]))],
                   [vi("x", [2]), vi("c2", [], TP.BOOL)], ["y"], {"c": np.array(True)}))
    lift_captures(m)
    inline_constant_if(m.graph.nodes[0])
    assert ops(m.graph) == ["If", "Identity"]
    assert all(sg.parent is m.graph for sg in m.graph.nodes[0].subgraphs())


def _rank_dispatch():
    """If on a constant: the untaken branch Reshapes x to a size it does not have."""
    then = body("then", [n("Relu", ["x"], ["t"])], ["t"])
    els = body("else", [n("Reshape", ["x", "bad"], ["e"])], ["e"])
    return model([n("If", ["c"], ["y"], then_branch=then, else_branch=els)], [vi("x", ["N", 3])], ["y"],
                 {"c": np.array(True), "bad": np.array([5, 7], np.int64)})


def test_shape_inference_inlines_before_inferring_the_branches():
    m = load(_rank_dispatch())
    infer_shapes(m)
    assert ops(m.graph) == ["Relu", "Identity"]
    assert str(m.graph.outputs[0].type) == "float[N, 3]"
    mp = _rank_dispatch()
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(onnxc.compile(mp)(x), ort_run(mp, {"x": x})[0])
