"""passes/merge_bn_affine.py: per-channel Mul/Add after an inference BatchNormalization fold into its scale
and bias (IR before, expected IR and coefficients after), the cases that must stay, and the compiled
model against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.merge_bn_affine import merge_affine

from .onnxutil import dump, load, model, ops, ort_run, vi

n = helper.make_node
C = 3
rng = np.random.default_rng(3)
STATS = {"s": rng.uniform(0.5, 1.5, C), "b": rng.standard_normal(C), "m": rng.standard_normal(C),
         "v": rng.uniform(0.5, 2, C)}
K = rng.uniform(0.5, 2, (C, 1, 1)).astype(np.float32)       # right-aligned per-channel
D = rng.standard_normal((1, C, 1, 1)).astype(np.float32)


def _bn_mul_add(k=K, d=D, extra_out: bool = False, runtime_k: bool = False):
    inits = {name: a.astype(np.float32) for name, a in STATS.items()} | {"d": d}
    inputs = [vi("x", ["N", C, 4, 4])]
    if runtime_k:
        inputs.append(vi("k", list(k.shape)))
    else:
        inits["k"] = k
    nodes = [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
             n("Mul", ["bn", "k"], ["mu"]), n("Add", ["d", "mu"], ["ad"]), n("Relu", ["ad"], ["y"])]
    return model(nodes, inputs, ["y"] + (["bn"] if extra_out else []), inits)


def test_mul_and_add_fold_into_the_bn():
    m = load(_bn_mul_add())
    infer_shapes(m)
    assert ops(m.graph) == ["BatchNormalization", "Mul", "Add", "Relu"]
    assert merge_affine(m).changed
    text = dump(m.graph)
    assert text.splitlines()[-4:] == [
        "  %ad = BatchNormalization(%x, %s_aff_0_aff_0, %b_aff_0_aff_0, %m, %v) {epsilon=0.0010000000474974513}",
        "  %y = Relu(%ad)",
        "  return %y",
        "}"]
    bn = m.graph.nodes[0]
    s, b = (STATS[k].astype(np.float32).astype(np.float64) for k in "sb")
    k, d = K.reshape(-1).astype(np.float64), D.reshape(-1).astype(np.float64)
    np.testing.assert_allclose(bn.inputs[1].const, s * k, rtol=1e-6)
    np.testing.assert_allclose(bn.inputs[2].const, b * k + d, rtol=1e-6, atol=1e-7)
    assert bn.outputs[0].producer is bn and bn.outputs[0].name == "ad"
    check_model(m, typed=True)
    assert not merge_affine(m).changed
    assert dump(m.graph) == text


@pytest.mark.parametrize("case", ["spatial_const", "rank_grows", "bn_output_public", "runtime_operand"])
def test_cases_that_stay(case):
    kw = {"spatial_const": {"k": K.reshape(1, 1, C, 1)[:, :, :1, :].repeat(4, axis=2)},
          "rank_grows": {"k": K.reshape(1, 1, C, 1, 1)},
          "bn_output_public": {"extra_out": True},
          "runtime_operand": {"runtime_k": True}}[case]
    m = load(_bn_mul_add(**kw))
    infer_shapes(m)
    before = dump(m.graph)
    # the Add still qualifies in none of these: it reads the Mul, not the BN
    assert not merge_affine(m).changed
    assert dump(m.graph) == before


def test_compiled_model_matches_onnxruntime():
    mp = _bn_mul_add()
    compiled = onnxc.compile(mp)
    for batch in (1, 3):
        x = rng.standard_normal((batch, C, 4, 4)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), ort_run(mp, {"x": x})[0], rtol=1e-5, atol=1e-5)
