"""passes/spell_out_batchnorm.py: a lone inference BatchNormalization read by an elementwise op becomes a
per-channel Mul and Add (IR before, expected IR and constants after); a BN read by a non-elementwise op,
a public BN output, or run-time statistics stay; the compiled model matches onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.spell_out_batchnorm import spell_out_batchnorm

from .onnxutil import dump, load, model, ops, ort_run, vi

n = helper.make_node
C = 3
rng = np.random.default_rng(5)
STATS = {"s": rng.uniform(0.5, 1.5, C), "b": rng.standard_normal(C), "m": rng.standard_normal(C),
         "v": rng.uniform(0.5, 2, C)}


def _bn(reader: str = "Relu", dt=np.float32, public: bool = False, runtime_var: bool = False):
    inits = {k: a.astype(dt) for k, a in STATS.items()}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    inputs = [vi("x", ["N", C, 5], elem)]
    if runtime_var:
        del inits["v"]
        inputs.append(vi("v", [C], elem))
    tail = n("Relu", ["bn"], ["y"]) if reader == "Relu" else n("ReduceSum", ["bn"], ["y"], keepdims=1)
    nodes = [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], name="bn0", epsilon=1e-4), tail]
    outs = [vi("y", None, elem)] + ([vi("bn", None, elem)] if public else [])
    return model(nodes, inputs, outs, inits)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bn_before_relu_becomes_mul_add(dt):
    m = load(_bn(dt=dt))
    infer_shapes(m)
    assert spell_out_batchnorm(m).changed
    short = "float" if dt == np.float32 else "double"
    assert dump(m.graph).splitlines()[-7:] == [
        f"  init %bn0_scale_0: {short}[3, 1]",
        f"  init %bn0_shift_0: {short}[3, 1]",
        "  %bn_mul_0 = Mul(%x, %bn0_scale_0)",
        "  %bn = Add(%bn_mul_0, %bn0_shift_0)",
        "  %y = Relu(%bn)",
        "  return %y",
        "}"]
    s, b, mean, v = (STATS[k].astype(dt).astype(np.float64) for k in "sbmv")
    scale = s / np.sqrt(v + np.float64(np.float32(1e-4)))
    a, shift = (m.graph.initializers[k].const for k in ("bn0_scale_0", "bn0_shift_0"))
    assert a.dtype == dt and shift.dtype == dt
    np.testing.assert_allclose(a.reshape(-1), scale, rtol=1e-6)
    np.testing.assert_allclose(shift.reshape(-1), b - mean * scale, rtol=1e-5, atol=1e-6)
    check_model(m, typed=True)
    assert not spell_out_batchnorm(m).changed


@pytest.mark.parametrize("case", ["non_elementwise_reader", "public_output", "runtime_statistics"])
def test_cases_that_stay(case):
    kw = {"non_elementwise_reader": {"reader": "ReduceSum"}, "public_output": {"public": True},
          "runtime_statistics": {"runtime_var": True}}[case]
    m = load(_bn(**kw))
    infer_shapes(m)
    before = dump(m.graph)
    assert not spell_out_batchnorm(m).changed
    assert dump(m.graph) == before and ops(m.graph)[0] == "BatchNormalization"


def test_compiled_model_matches_onnxruntime():
    mp = _bn()
    compiled = onnxc.compile(mp)
    for batch in (1, 4):
        x = rng.standard_normal((batch, C, 5)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), ort_run(mp, {"x": x})[0], rtol=1e-5, atol=1e-6)
