"""The pipelines: the compile steps (onnxc/pipeline.py), the pass manager's use of ``changed`` (fixed
points, passes/base.py), truthful ``changed`` flags, and control-flow bodies through the same manager,
IR checker and dumps as the main graph (passes/bodies.py)."""

from __future__ import annotations

import io
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import Model
from onnxc.ir.checker import IRCheckError
from onnxc.passes import pipeline
from onnxc.passes.base import FixedPointError, PassManager, PassResult, Step
from onnxc.passes.infer_shapes import infer_graph
from onnxc.pipeline import STEP_NAMES, Options, compile_pipeline, resolve_threads

F = TP.FLOAT


def _if_model() -> onnx.ModelProto:
    """y = If(flag, Relu(x) + 1, x * 3) on x [n, 4]: bodies with an op each, reading outer x."""
    one = helper.make_tensor("one", F, [], [1.0])
    three = helper.make_tensor("three", F, [], [3.0])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "one"], ["t"])],
                             "then", [], [helper.make_tensor_value_info("t", F, None)], [one])
    other = helper.make_graph([helper.make_node("Mul", ["x", "three"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, None)], [three])
    g = helper.make_graph([helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other, name="pick")],
                          "g", [helper.make_tensor_value_info("x", F, ["n", 4]),
                                helper.make_tensor_value_info("flag", TP.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, ["n", 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _add_model() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info(n, F, ["n", 4]) for n in "ab"],
                          [helper.make_tensor_value_info("y", F, ["n", 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_compile_steps_in_order_and_threads() -> None:
    assert STEP_NAMES == ["load", "support_check", "optimize", "lower", "emit", "build"]
    c = compile_pipeline(_add_model().SerializeToString(), Options(threads=2), until="emit")
    assert c.done == STEP_NAMES[:5] and set(c.timings) == set(STEP_NAMES[:5])
    assert c.threads == 2 and "_run(" in c.source
    assert [n.op_type for n in c.model.graph.nodes] == ["Add"] and c.program.steps
    assert ("", "infer_shapes", True) in c.passes.trace
    assert resolve_threads(None) == (os.cpu_count() or 1) and resolve_threads(3) == 3
    with pytest.raises(ValueError, match="no step 'plan'; the steps are load, support_check"):
        compile_pipeline(_add_model(), until="plan")
    with pytest.raises(ValueError, match="the build step needs Options.build"):
        compile_pipeline(_add_model(), Options())


def test_pass_steps_listed_and_changed_truthful_on_a_no_op() -> None:
    names = pipeline.step_names()
    assert names[:5] == ["inline_functions", "lift_captures", "eliminate_dead_code", "lower_qdq", "infer_shapes"]
    m = pipeline.optimize(load_model(_add_model()))
    for step in pipeline.steps():  # nothing is left to do: every pass says so
        assert not step.fn(m).changed, step.name
    assert [n.op_type for n in m.graph.nodes] == ["Add"]


def test_infer_shapes_counts_its_named_rewrites() -> None:
    """The side transformations of inference are counted by name: a constant-condition If taken, a function
    op expanded, a fold; a second run changes nothing."""
    cond = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TP.BOOL, [], [True]))
    then = helper.make_graph([helper.make_node("Softsign", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, None)])
    g = helper.make_graph([cond, helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                          [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])])
    m = load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    for step in pipeline.steps()[:4]:
        m = step.fn(m).model
    stats = infer_graph(m.graph)
    assert stats["inline_constant_if"] == 1 and stats["types"] > 0
    assert stats["expand_function_ops"] == (0 if any(n.op_type == "Softsign" for n in m.graph.nodes) else 1)
    assert not pipeline.infer_shapes(m).changed


def _counting(name: str, changes: int, log: list) -> Step:
    left = [changes]

    def fn(m: Model) -> PassResult:
        log.append(name)
        left[0] -= 1
        return PassResult(m, left[0] >= 0)
    return Step(name, fn)


def test_fixed_point_repeats_until_quiet_and_is_bounded() -> None:
    m = load_model(_add_model())
    log: list = []
    steps = [_counting("a", 2, log), _counting("b", 2, log), _counting("c", 0, log)]
    PassManager().run(m, steps, [("a", "b")])
    # a runs again after each change of b; the group ends when every other step ran quietly since the last
    # change (a pass reaches its own fixed point in one run), then c runs once
    assert log == ["a", "b", "a", "b", "a", "c"]
    log.clear()
    PassManager().run(m, [_counting("a", 1, log), _counting("b", 0, log)], [("a", "b")])
    assert log == ["a", "b"]
    with pytest.raises(FixedPointError, match="passes a, b still change the IR after 8 rounds"):
        PassManager().run(m, [_counting("a", 100, []), _counting("b", 100, [])], [("a", "b")])
    with pytest.raises(FixedPointError, match="not a run of consecutive pipeline steps"):
        PassManager().run(m, steps, [("a", "c")])


def _break_bodies(m: Model) -> PassResult:
    """A deliberately broken rewrite: in a body, the node producing the output is dropped."""
    g = m.graph
    if g.parent is None or not g.nodes:
        return PassResult(m, False)
    g.nodes.remove(g.outputs[0].producer)
    return PassResult(m, True)


def test_bodies_go_through_the_checker_and_dumps(monkeypatch) -> None:
    out = io.StringIO()
    pm = PassManager(check=True, dump_after={"fuse_elementwise"}, out=out)
    m = pipeline.optimize(load_model(_if_model()), manager=pm)
    dumps = out.getvalue()
    assert "--- IR after fuse_elementwise (unchanged) ---" in dumps  # the main graph holds the If alone
    assert "--- IR after fuse_elementwise in If 'pick' (outputs 'y').then_branch ---" in dumps
    assert "ElementwiseChain(%x_1) {expr=Add(Relu(%0), 1.0)" in dumps
    assert "in If 'pick' (outputs 'y').else_branch (unchanged) ---" in dumps
    assert {w for w, _, _ in pm.trace} == {"", "If 'pick' (outputs 'y').then_branch",
                                           "If 'pick' (outputs 'y').else_branch"}
    (node,) = m.graph.nodes
    assert all(v.type is not None for b in node.subgraphs() for n in b.nodes for v in n.outputs)
    monkeypatch.setattr(pipeline, "steps", lambda: [*_real_steps(), Step("break_bodies", _break_bodies)])
    with pytest.raises(IRCheckError, match="not defined"):
        pipeline.optimize(load_model(_if_model()), check=True)


_real_steps = pipeline.steps


def test_compile_with_checked_bodies_matches_onnxruntime(capfd) -> None:
    model = _if_model()
    cm = onnxc.compile(model, check_ir=True, dump_ir={"infer_shapes"})
    err = capfd.readouterr().err
    assert "--- IR after infer_shapes in If 'pick' (outputs 'y').then_branch (unchanged) ---" in err
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for flag in (True, False):
        feeds = {"x": x, "flag": np.array(flag)}
        np.testing.assert_allclose(cm.run(feeds)["y"], sess.run(None, feeds)[0], rtol=1e-6)
