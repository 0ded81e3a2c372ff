"""passes/lift_captures.py: outer values read by If/Loop bodies become explicit inputs (IR before and
expected IR after), outer constants are copied in, a value read two levels down is threaded through the
level between, and the compiled nested-If model still computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.lift_captures import captures, lift_captures, onnx_inputs

from .onnxutil import body, dump, load, model, ort_run, vi


def _nested_if():
    inner_then = body("inner_then", [helper.make_node("Add", ["x", "w"], ["it"])], ["it"])
    inner_else = body("inner_else", [helper.make_node("Neg", ["a"], ["ie"])], ["ie"])
    then = body("then", [helper.make_node("Abs", ["x"], ["a"]),
                         helper.make_node("If", ["c2"], ["ti"], then_branch=inner_then, else_branch=inner_else)],
                ["ti"])
    els = body("else", [helper.make_node("Identity", ["x"], ["e"])], ["e"])
    return model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                 [vi("c", [], TP.BOOL), vi("c2", [], TP.BOOL), vi("x", [2])], ["y"], {"w": np.float32([1, 2])})


NESTED_AFTER = """\
graph g(
    %c: bool[],
    %c2: bool[],
    %x: float[2],
) {
  init %w: float[2]
  %y = If(%c, %x, %c2) {else_branch=<graph else>, then_branch=<graph then>, onnxc_n_inputs=1}
  return %y
}
graph else(
    %x_2: float[2],
    %c2_0: bool[],
) {
  %e = Identity(%x_2)
  return %e
}
graph then(
    %x_3: float[2],
    %c2_1: bool[],
) {
  %a = Abs(%x_3)
  %ti = If(%c2_1, %a, %x_3) {else_branch=<graph inner_else>, then_branch=<graph inner_then>, onnxc_n_inputs=1}
  return %ti
}
graph inner_else(
    %a_0: None,
    %x_0: float[2],
) {
  init %w_0: float[2]
  %ie = Neg(%a_0)
  return %ie
}
graph inner_then(
    %a_1: None,
    %x_1: float[2],
) {
  init %w_1: float[2]
  %it = Add(%x_1, %w_1)
  return %it
}"""


def test_nested_if_captures_thread_through_every_level():
    m = load(_nested_if())
    assert "onnxc_n_inputs" not in dump(m.graph) and "(%c)" in dump(m.graph)
    assert lift_captures(m).changed
    assert dump(m.graph) == NESTED_AFTER
    check_model(m)
    node = m.graph.nodes[0]
    assert [v.name for v in onnx_inputs(node)] == ["c"] and [v.name for v in captures(node)] == ["x", "c2"]
    assert not lift_captures(m).changed  # bodies are closed now
    assert dump(m.graph) == NESTED_AFTER


def test_loop_body_gets_captures_after_its_carried_values():
    b = body("loop_body", [helper.make_node("Mul", ["s", "k"], ["s2"]), helper.make_node("Add", ["s2", "x"], ["s3"]),
                           helper.make_node("Identity", ["cond"], ["cond_out"])],
             ["cond_out", "s3"], [vi("i", [], TP.INT64), vi("cond", [], TP.BOOL), vi("s", [2])])
    m = load(model([helper.make_node("Loop", ["n", "", "s0"], ["y"], body=b)],
                   [vi("n", [], TP.INT64), vi("s0", [2]), vi("x", [2])], ["y"], {"k": np.float32([2, 3])}))
    assert lift_captures(m).changed
    text = dump(m.graph)
    assert "  %y = Loop(%n, _, %s0, %x) {body=<graph loop_body>, onnxc_n_inputs=3}" in text
    assert text.split("graph loop_body(")[1] == """
    %i: int64[],
    %cond: bool[],
    %s: float[2],
    %x_0: float[2],
) {
  init %k_0: float[2]
  %s2 = Mul(%s, %k_0)
  %s3 = Add(%s2, %x_0)
  %cond_out = Identity(%cond)
  return %cond_out, %s3
}"""
    check_model(m)


def test_graph_without_bodies_is_left_alone():
    m = load(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], ["y"]))
    before = dump(m.graph)
    assert not lift_captures(m).changed
    assert dump(m.graph) == before


def test_closed_bodies_are_left_equal():
    const = [helper.make_node("Constant", [], ["t"], value_float=1.0)]
    m = load(model([helper.make_node("If", ["c"], ["y"], then_branch=body("t", const, ["t"]),
                                     else_branch=body("e", const, ["t"]))], [vi("c", [], TP.BOOL)], ["y"]))
    before = dump(m.graph)
    assert not lift_captures(m).changed
    assert dump(m.graph) == before


def test_compiled_nested_if_matches_onnxruntime(tmp_path):
    mp = _nested_if()
    compiled = onnxc.compile(mp)
    x = np.float32([-1.5, 2.0])
    for c in (True, False):
        for c2 in (True, False):
            feeds = {"c": np.array(c), "c2": np.array(c2), "x": x}
            np.testing.assert_allclose(compiled.run(feeds)["y"], ort_run(mp, feeds)[0], rtol=1e-6)
