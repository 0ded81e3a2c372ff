"""passes/fuse_input_scale.py: a squeeze-excite Mul folded into the pointwise Conv after it, which scales its
filter per image (codegen/kernels/conv.py) — against the reference on every pointwise path."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

MARK = "W diag(S[n])"


def _se_model(n, c: int, m: int, hw: tuple[int, int], residual: bool = False, act: str | None = None,
              const_scale: bool = False, extra_reader: bool = False, seed: int = 0):
    """x -> [GAP -> 1x1 -> Relu -> 1x1 -> Sigmoid] = s; Mul(x, s) -> 1x1 Conv to m (-> + r, -> act)."""
    rng = np.random.default_rng(seed)
    r = c // 4 or 1
    inits = [numpy_helper.from_array((rng.standard_normal((m, c, 1, 1)) * 0.2).astype(np.float32), "wp"),
             numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "bp")]
    nodes = []
    if const_scale:
        inits.append(numpy_helper.from_array(rng.uniform(0.1, 1.0, (1, c, 1, 1)).astype(np.float32), "s"))
    else:
        inits += [numpy_helper.from_array((rng.standard_normal((r, c, 1, 1)) * 0.3).astype(np.float32), "w1"),
                  numpy_helper.from_array((rng.standard_normal((c, r, 1, 1)) * 0.3).astype(np.float32), "w2")]
        nodes += [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
                  helper.make_node("Conv", ["g", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["hr"]),
                  helper.make_node("Conv", ["hr", "w2"], ["q"]), helper.make_node("Sigmoid", ["q"], ["s"])]
    nodes += [helper.make_node("Mul", ["s", "x"], ["t"]), helper.make_node("Conv", ["t", "wp", "bp"], ["p"])]
    out = "p"
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, *hw])]
    bs = 2 if isinstance(n, str) else n
    feeds = {"x": rng.standard_normal((bs, c, *hw)).astype(np.float32)}
    if residual:
        ins.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [n, m, *hw]))
        feeds["r"] = rng.standard_normal((bs, m, *hw)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["p", "r"], ["pr"]))
        out = "pr"
    nodes.append(helper.make_node(act, [out], ["y"]) if act else helper.make_node("Identity", [out], ["y"]))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        outs.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "se", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), feeds


def _check(model, feeds, folded: bool, threads: int | None = None, flags=None):
    cm = onnxc.compile(model, threads=threads, flags=flags)
    assert (MARK in cm.c_source) == folded
    want = ReferenceEvaluator(model).run(None, feeds)
    got = cm.run(feeds)
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-4)
    return cm


@pytest.mark.parametrize("kw", [
    dict(n=1, c=32, m=16, hw=(56, 56)),                                        # packed GEMM
    dict(n="N", c=96, m=24, hw=(28, 28), residual=True, act="Relu"),           # implicit GEMM, a batch of 2
    dict(n=2, c=240, m=80, hw=(14, 14), act="Sigmoid"),                        # small map: direct kernel
    dict(n=1, c=40, m=50, hw=(10, 11), residual=True),                         # small map, partial panels
    dict(n=3, c=24, m=40, hw=(20, 20), const_scale=True),                      # a scale shared by the batch
])
def test_folded(kw):
    _check(*_se_model(**kw), folded=True)


def test_folded_two_threads():
    _check(*_se_model(n=4, c=64, m=24, hw=(28, 28), residual=True), folded=True, threads=2)


def test_folded_without_avx512():
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 target flags")
    for kw in (dict(n=2, c=240, m=80, hw=(14, 14)), dict(n=1, c=96, m=24, hw=(28, 28))):
        _check(*_se_model(**kw), folded=True, flags=("-O2", "-march=x86-64-v3"))


@pytest.mark.parametrize("kw", [
    dict(n=1, c=96, m=160, hw=(7, 7)),              # more output channels than positions: the Mul is cheaper
    dict(n=1, c=32, m=16, hw=(28, 28), extra_reader=True),   # the scaled tensor is also a graph output
])
def test_not_folded(kw):
    _check(*_se_model(**kw), folded=False)


def test_request_without_its_input_rejected():
    """A model file that carries the request without the scale input gets an error naming it."""
    m, _ = _se_model(n=1, c=8, m=8, hw=(8, 8))
    conv = [n for n in m.graph.node if n.op_type == "Conv" and n.input[1] == "wp"][0]
    conv.attribute.append(helper.make_attribute("onnxc_input_scale", 1))
    with pytest.raises(onnxc.UnsupportedOpError, match="scale"):
        onnxc.compile(m)


def test_folded_conv_stays_float32_under_bf16():
    """precision="bf16" leaves the scaled Conv on its float32 path (the bfloat16 convolution has no scale)."""
    model, feeds = _se_model(n=1, c=64, m=32, hw=(28, 28))
    cm = onnxc.compile(model, precision="bf16")
    assert MARK in cm.c_source
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(cm.run(feeds)["y"], want, rtol=3e-2, atol=3e-2)


def test_switch_off(monkeypatch):
    monkeypatch.setenv("ONNXC_INPUT_SCALE", "0")
    _check(*_se_model(n=1, c=32, m=16, hw=(56, 56)), folded=False)
