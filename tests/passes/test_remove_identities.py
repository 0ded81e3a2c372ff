"""passes/remove_identities.py: Identity and inference Dropout go (IR before, expected IR after); a graph
output's Identity, a Dropout in training mode or whose mask is read, and a graph with nothing to remove
stay as they are. Bodies are rewritten too."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from onnxc.ir.checker import check_model
from onnxc.passes.remove_identities import remove_identities

from .onnxutil import body, dump, load, model, ops, vi

n = helper.make_node


def test_identities_and_inference_dropouts_go():
    m = load(model([n("Identity", ["x"], ["i"]), n("Relu", ["i"], ["r"]), n("Dropout", ["r"], ["d", "mask"]),
                    n("Dropout", ["d", "ratio", "tm"], ["d2"]), n("Identity", ["d2"], ["y"])],
                   [vi("x", [2, 3])], ["y"], {"ratio": np.float32(0.5), "tm": np.array(False)}, opset=13))
    assert ops(m.graph) == ["Identity", "Relu", "Dropout", "Dropout", "Identity"]
    assert remove_identities(m).changed
    assert dump(m.graph) == """\
graph g(
    %x: float[2, 3],
) {
  init %ratio: float[]
  init %tm: bool[]
  %r = Relu(%x)
  %y = Identity(%r)
  return %y
}"""  # the last Identity names the graph output: kept
    check_model(m)


@pytest.mark.parametrize("case", ["training_const", "training_input", "mask_read", "mask_output"])
def test_dropouts_that_are_not_identities_stay(case):
    inputs, outputs = [vi("x", [4])], ["y"]
    inits = {"ratio": np.float32(0.5), "tm": np.array(True)}
    if case == "training_input":
        inputs.append(vi("tm", [], TP.BOOL))
        del inits["tm"]
    nodes = [n("Dropout", ["x", "ratio", "tm"] if case.startswith("training") else ["x"],
               ["d", "mask"] if case.startswith("mask") else ["d"]), n("Relu", ["d"], ["y"])]
    if case == "mask_read":
        nodes.append(n("Cast", ["mask"], ["mf"], to=TP.FLOAT))
        outputs.append("mf")
    if case == "mask_output":
        outputs.append(helper.make_tensor_value_info("mask", TP.BOOL, None))
    m = load(model(nodes, inputs, outputs, inits, opset=13))
    before = dump(m.graph)
    assert not remove_identities(m).changed
    assert dump(m.graph) == before


def test_identity_inside_a_branch_goes_unless_it_is_the_branch_output():
    then = body("then", [n("Identity", ["x"], ["ti"]), n("Neg", ["ti"], ["t"])], ["t"])
    els = body("else", [n("Identity", ["x"], ["e"])], ["e"])
    m = load(model([n("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                   [vi("c", [], TP.BOOL), vi("x", [2])], ["y"]))
    assert remove_identities(m).changed
    then_g, else_g = (m.graph.nodes[0].attr(k) for k in ("then_branch", "else_branch"))
    assert repr(then_g.nodes) == "[%t = Neg(%x)]"
    assert repr(else_g.nodes) == "[%e = Identity(%x)]"
    check_model(m)


def test_nothing_to_remove():
    m = load(model([n("Relu", ["x"], ["r"]), n("Identity", ["r"], ["y"])], [vi("x", [2])], ["y"]))
    before = dump(m.graph)
    assert not remove_identities(m).changed
    assert dump(m.graph) == before
