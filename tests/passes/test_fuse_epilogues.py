"""passes/fuse_epilogues.py on the IR: a Conv's bias, residual and activation, and a 3-D MatMul's bias and
LeakyRelu, become epilogue requests (IR before, expected IR after, attribute names from
passes/shapes/epilogue_spec.py); an Add that broadcasts the product, a public product output and an
integer product stay; the compiled model matches onnxruntime. Every kernel path of the epilogues is
covered in tests/test_fuse_epilogues.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.fuse_epilogues import fuse_epilogues
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.shapes.epilogue_spec import ACT_ATTR, BIAS_ATTR, PARAMS_ATTR, RESIDUAL_ATTR

from .onnxutil import dump, load, model, ops, ort_run, vi

n = helper.make_node
rng = np.random.default_rng(13)
INITS = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "b": rng.standard_normal((4, 1, 1)).astype(np.float32),
         "wm": rng.standard_normal((8, 6)).astype(np.float32), "bm": rng.standard_normal(6).astype(np.float32)}
INPUTS = [vi("x", ["N", 3, 5, 5]), vi("r", ["N", 4, 5, 5]), vi("a", ["N", "S", 8])]


def _model():
    return model([n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), n("Add", ["c", "b"], ["cb"]),
                  n("Add", ["r", "cb"], ["cr"]), n("Relu", ["cr"], ["y"]),
                  n("MatMul", ["a", "wm"], ["mm"]), n("Add", ["mm", "bm"], ["mb"]),
                  n("LeakyRelu", ["mb"], ["z"], alpha=0.25)], INPUTS, ["y", "z"], INITS)


def test_bias_residual_and_activation_fold_into_the_products():
    m = load(_model())
    infer_shapes(m)
    assert ops(m.graph) == ["Conv", "Add", "Add", "Relu", "MatMul", "Add", "LeakyRelu"]
    assert fuse_epilogues(m).changed
    assert dump(m.graph).split(") {\n")[1].splitlines()[4:] == [
        "  init %const_0: float[4]",
        f"  %y = Conv(%x, %w, %const_0, %r) {{pads=[1, 1, 1, 1], {RESIDUAL_ATTR}=1, {ACT_ATTR}='Relu'}}",
        f"  %z = MatMul(%a, %wm, _, %bm) {{{BIAS_ATTR}=1, {ACT_ATTR}='LeakyRelu', {PARAMS_ATTR}=[0.25]}}",
        "  return %y, %z",
        "}"]
    np.testing.assert_array_equal(m.graph.initializers["const_0"].const, INITS["b"].reshape(-1))
    check_model(m, typed=True)
    assert not fuse_epilogues(m).changed


@pytest.mark.parametrize("case", ["add_broadcasts_product", "public_product", "integer_product"])
def test_cases_that_stay(case):
    if case == "add_broadcasts_product":  # [N, 6] + [2, N, 6]: the Add makes the product's output larger
        mp = model([n("MatMul", ["a", "wm"], ["mm"]), n("Add", ["mm", "big"], ["y"])],
                   [vi("a", ["N", 8]), vi("big", [2, "N", 6])], ["y"], {"wm": INITS["wm"]})
    elif case == "public_product":
        mp = model([n("MatMul", ["a", "wm"], ["mm"]), n("Relu", ["mm"], ["y"])], [vi("a", ["N", 8])], ["y", "mm"],
                   {"wm": INITS["wm"]})
    else:
        mp = model([n("MatMul", ["a", "wi"], ["mm"]), n("Relu", ["mm"], ["y"])], [vi("a", ["N", 8], TP.INT32)],
                   [vi("y", None, TP.INT32)], {"wi": np.ones((8, 6), np.int32)})
    m = load(mp)
    infer_shapes(m)
    before = dump(m.graph)
    assert not fuse_epilogues(m).changed
    assert dump(m.graph) == before


def test_compiled_model_matches_onnxruntime():
    mp = _model()
    compiled = onnxc.compile(mp)
    for batch, seq in ((1, 1), (2, 3)):
        feeds = {"x": rng.standard_normal((batch, 3, 5, 5)).astype(np.float32),
                 "r": rng.standard_normal((batch, 4, 5, 5)).astype(np.float32),
                 "a": rng.standard_normal((batch, seq, 8)).astype(np.float32)}
        got, want = compiled.run(feeds), ort_run(mp, feeds)
        for name, w in zip(("y", "z"), want):
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5)
