"""passes/eliminate_dead_code.py: nodes and initializers nothing reads go (IR before, expected IR after);
a node with one live output stays whole, a value read only inside a body keeps its producer, dead nodes
inside a live body go, and a graph with nothing dead is left equal."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from onnxc.ir.checker import check_model
from onnxc.passes.eliminate_dead_code import eliminate_dead_code

from .onnxutil import body, dump, load, model, ops, vi

n = helper.make_node


def test_dead_chain_and_its_constants_go():
    m = load(model([n("Split", ["x"], ["s0", "s1"], axis=0), n("Relu", ["s0"], ["y"]),
                    n("Mul", ["s1", "k"], ["dead1"]), n("Neg", ["dead1"], ["dead2"])],
                   [vi("x", [4])], ["y"], {"k": np.float32([2, 3]), "unused": np.float32([1])}, opset=13))
    assert eliminate_dead_code(m).changed
    assert dump(m.graph) == """\
graph g(
    %x: float[4],
) {
  %s0, %s1 = Split(%x) {axis=0}
  %y = Relu(%s0)
  return %y
}"""  # Split stays whole though s1 is now unread
    check_model(m)
    assert not eliminate_dead_code(m).changed


def test_value_read_only_inside_a_body_keeps_its_producer():
    then = body("then", [n("Add", ["h", "x"], ["t"])], ["t"])
    els = body("else", [n("Identity", ["x"], ["e"])], ["e"])
    m = load(model([n("Abs", ["x"], ["h"]), n("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                   [vi("c", [], TP.BOOL), vi("x", [2])], ["y"]))
    before = dump(m.graph)
    assert not eliminate_dead_code(m).changed
    assert dump(m.graph) == before and ops(m.graph) == ["Abs", "If"]


def _if_with_dead_body_node():
    then = body("then", [n("Neg", ["x"], ["unread"]), n("Abs", ["x"], ["t"])], ["t"])
    els = body("else", [n("Identity", ["x"], ["e"])], ["e"])
    return load(model([n("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                      [vi("c", [], TP.BOOL), vi("x", [2])], ["y"]))


def test_dead_nodes_inside_a_live_body_go():
    m = _if_with_dead_body_node()
    eliminate_dead_code(m)
    assert ops(m.graph.nodes[0].attr("then_branch")) == ["Abs"]
    check_model(m)


def test_pruning_only_a_body_reports_a_change():
    assert eliminate_dead_code(_if_with_dead_body_node()).changed


def test_nothing_dead():
    m = load(model([n("Relu", ["x"], ["r"]), n("Add", ["r", "k"], ["y"])], [vi("x", [2])], ["y"],
                   {"k": np.float32([1, 2])}))
    before = dump(m.graph)
    assert not eliminate_dead_code(m).changed
    assert dump(m.graph) == before
