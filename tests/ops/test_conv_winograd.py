"""The Winograd F(4x4, 3x3) Conv path (codegen/kernels/conv_winograd.py, runtime_c/onnxc_winograd.h)
against onnx.reference and numpy: maps that are not multiples of the tile, pads 0/1/asymmetric, batch
2, symbolic N/H/W, channels not multiples of 16, bias or not, the fused epilogue set by hand, 2
threads; the float32 error on realistic data; and the dispatch (which shapes take the path)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.codegen.kernels import conv_winograd as cw

RNG = np.random.default_rng(11)
MARK = "onnxc_wino_conv("


@pytest.fixture(autouse=True)
def _no_weight_budget(monkeypatch):
    """A one-Conv model cannot afford the 4x filter within the default weight budget
    (codegen/weight_budget.py, tests/test_weight_budget.py): these tests pin the path itself."""
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "inf")


def _model(xs: list, ws: list, bias: bool, residual: bool, act: str | None, params: list | None,
           x_decl: list | None, attrs: dict) -> tuple[onnx.ModelProto, onnx.ModelProto, dict]:
    """(model with the onnxc epilogue attributes, plain ONNX reference model, feeds)."""
    w = (RNG.standard_normal(ws) * np.sqrt(2.0 / np.prod(ws[1:]))).astype(np.float32)
    consts = {"w": w}
    ins = ["x", "w"]
    if bias:
        consts["b"] = RNG.standard_normal(ws[0]).astype(np.float32)
        ins.append("b")
    x = RNG.standard_normal(xs).astype(np.float32)
    feeds = {"x": x}
    g_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_decl or xs)]
    ref_nodes = [helper.make_node("Conv", ins, ["c"], **attrs)]
    out, fused = "c", dict(attrs)
    if residual:
        oshape = ReferenceEvaluator(helper.make_model(
            helper.make_graph(ref_nodes, "s", g_in[:1], [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()]),
            opset_imports=[helper.make_opsetid("", 21)])).run(None, feeds)[0].shape
        feeds["r"] = RNG.standard_normal(oshape).astype(np.float32)
        g_in.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", *oshape[1:]] if x_decl else oshape))
        ref_nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        out = "s"
        fused["onnxc_residual"] = 1
        ins = ins + ([] if bias else [""]) + ["r"]
    if act:
        ref_ins = [out]
        if act == "Clip":
            consts["lo"], consts["hi"] = np.float32(params[0]), np.float32(params[1])
            ref_ins += ["lo", "hi"]
        kw = {"alpha": float(params[0])} if act == "LeakyRelu" else {}
        ref_nodes.append(helper.make_node(act, ref_ins, ["y"], **kw))
        fused["onnxc_activation"] = act
        if params:
            fused["onnxc_activation_params"] = [float(p) for p in params]
    else:
        ref_nodes.append(helper.make_node("Identity", [out], ["y"]))
    init = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    ref = helper.make_model(helper.make_graph(ref_nodes, "r", g_in, outs, init),
                            opset_imports=[helper.make_opsetid("", 21)])
    m = helper.make_model(helper.make_graph([helper.make_node("Conv", ins, ["y"], **fused)], "m", g_in, outs, init),
                          opset_imports=[helper.make_opsetid("", 21)])
    return m, ref, feeds


def check(xs: list, ws: list, bias: bool = True, residual: bool = False, act: str | None = None,
          params: list | None = None, x_decl: list | None = None, threads: int | None = None,
          winograd: bool = True, **attrs) -> None:
    m, ref, feeds = _model(xs, ws, bias, residual, act, params, x_decl, attrs)
    cm = onnxc.compile(m, threads=threads)
    assert (MARK in cm.c_source) == winograd, "Winograd path " + ("not taken" if winograd else "taken")
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    got = cm.run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 64, 28, 28], [64, 64, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 128, 14, 14], [128, 128, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 65, 30, 27], [72, 65, 3, 3], {"pads": [1, 1, 1, 1]}),        # not multiples of the tile / of 16
    ([2, 66, 29, 33], [70, 66, 3, 3], {}),                            # no padding, batch 2
    ([1, 64, 31, 30], [66, 64, 3, 3], {"pads": [0, 2, 1, 0]}),        # asymmetric pads
    ([1, 64, 28, 30], [64, 64, 3, 3], {"pads": [2, 1, 2, 1]}),        # pads wider than the kernel's reach
    ([1, 72, 29, 31], [68, 72, 3, 3], {"auto_pad": "SAME_UPPER"}),
    ([1, 72, 29, 31], [68, 72, 3, 3], {"auto_pad": "SAME_LOWER"}),
    ([1, 70, 40, 37], [65, 70, 3, 3], {"pads": [1, 1, 1, 1]}),         # several tile blocks
])
def test_shapes(xs, ws, attrs):
    check(xs, ws, **attrs)


def test_no_bias_symbolic_batch():
    check([3, 64, 28, 29], [72, 64, 3, 3], bias=False, x_decl=["N", 64, 28, 29], pads=[1, 1, 1, 1])


def test_symbolic_spatial():
    check([2, 64, 22, 19], [64, 64, 3, 3], x_decl=["N", 64, "H", "W"], pads=[1, 1, 1, 1])


def test_symbolic_spatial_small_input():
    """A symbolic map takes the path; at run time it may be smaller than a tile (1x1 output)."""
    m, ref, feeds = _model([1, 64, 3, 3], [64, 64, 3, 3], True, False, None, None, ["N", 64, "H", "W"], {})
    cm = onnxc.compile(m)
    assert MARK in cm.c_source
    for shape in ([1, 64, 3, 3], [2, 64, 5, 4], [1, 64, 9, 13]):
        x = RNG.standard_normal(shape).astype(np.float32)
        want = ReferenceEvaluator(ref).run(None, {"x": x})[0]
        np.testing.assert_allclose(cm.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_empty_batch():
    m, _, _ = _model([1, 64, 28, 28], [64, 64, 3, 3], True, False, None, None, ["N", 64, 28, 28], {"pads": [1] * 4})
    cm = onnxc.compile(m)
    assert MARK in cm.c_source
    assert cm.run({"x": np.zeros((0, 64, 28, 28), np.float32)})["y"].shape == (0, 64, 28, 28)


@pytest.mark.parametrize("residual,act,params", [
    (True, "Relu", None), (False, "Relu", None), (True, None, None), (False, "Clip", [0.0, 6.0]),
    (True, "LeakyRelu", [0.1]), (False, "Sigmoid", None),
])
def test_epilogue(residual, act, params):
    check([1, 64, 30, 27], [72, 64, 3, 3], residual=residual, act=act, params=params, pads=[1, 1, 1, 1])


def test_epilogue_two_threads_no_bias():
    check([2, 64, 30, 29], [80, 64, 3, 3], bias=False, residual=True, act="Relu", threads=2,
          x_decl=["N", 64, 30, 29], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("xs,ws", [
    ([1, 128, 14, 14], [128, 128, 3, 3]),   # one panel of tiles: the output channels cut among the threads
    ([1, 64, 40, 40], [64, 64, 3, 3]),      # 3 full panels and a partial one
    ([3, 40, 45, 43], [76, 40, 3, 3]),      # many panels in several groups, tiles across images
])
def test_threads_same_bits(xs, ws):
    """Whatever the pool does with the work (groups of tiles, parts of the output channels: onnxc_wino_plan),
    every output is computed by one task in the same order, so 2 threads give the bits of 1."""
    m, ref, feeds = _model(xs, ws, True, True, "Relu", None, None, {"pads": [1, 1, 1, 1]})
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert MARK in one.c_source and MARK in two.c_source
    got = two.run(feeds)["y"]
    np.testing.assert_array_equal(got, one.run(feeds)["y"])
    np.testing.assert_allclose(got, ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 12, 32, 32], [64, 12, 3, 3], {"pads": [1, 1, 1, 1]}),        # too few input channels
    ([1, 64, 32, 32], [12, 64, 3, 3], {"pads": [1, 1, 1, 1]}),        # too few output channels
    ([1, 16, 32, 32], [16, 16, 3, 3], {"pads": [1, 1, 1, 1]}),        # too few channel pairs
    ([1, 64, 10, 10], [64, 64, 3, 3], {"pads": [1, 1, 1, 1]}),        # 9 tiles: a third of a B panel
    ([1, 64, 16, 16], [64, 64, 3, 3], {"pads": [1, 1, 1, 1]}),        # half a panel, few channel pairs
    ([1, 64, 32, 32], [64, 64, 3, 3], {"strides": [2, 2]}),
    ([1, 64, 32, 32], [64, 64, 3, 3], {"dilations": [2, 2]}),
    ([1, 128, 32, 32], [128, 64, 3, 3], {"group": 2}),
    ([1, 64, 32, 32], [64, 64, 5, 5], {}),
    ([1, 64, 7, 7], [64, 64, 3, 3], {"pads": [1, 1, 1, 1]}),          # static map too small to pay
    ([1, 512, 7, 7], [512, 512, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 264, 14, 14], [264, 264, 3, 3], {"pads": [1, 1, 1, 1]}),     # small map, many channel pairs
    ([1, 100, 14, 14], [100, 100, 3, 3], {"pads": [1, 1, 1, 1]}),     # small map, few channel pairs
    ([1, 16, 40], [16, 16, 3], {"pads": [1, 1]}),                     # 1-D
])
def test_not_taken(xs, ws, attrs):
    check(xs, ws, winograd=False, **attrs)


@pytest.mark.parametrize("xs,ws,threads", [
    ([1, 70, 34, 33], [66, 70, 3, 3], None),     # input channels past one transform block (64)
    ([2, 16, 40, 40], [32, 16, 3, 3], 2),        # few channels, batch 2, two threads
    ([1, 130, 32, 32], [24, 130, 3, 3], 2),
])
def test_runtime_transform(monkeypatch, xs, ws, threads):
    """Without weight budget, maps from RUNTIME_MIN_POSITIONS on transform the filter per call
    (onnxc_wino_filter), with the results of the stored transform up to rounding."""
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "0")
    m, ref, feeds = _model(xs, ws, True, False, "Relu", None, None, {"pads": [1, 1, 1, 1]})
    cm = onnxc.compile(m, threads=threads)
    assert MARK in cm.c_source and "onnxc_wino_filter(" in cm.c_source
    got = cm.run(feeds)["y"]
    np.testing.assert_allclose(got, ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "inf")
    stored = onnxc.compile(m, threads=threads)
    assert MARK in stored.c_source and "onnxc_wino_filter(" not in stored.c_source
    np.testing.assert_allclose(got, stored.run(feeds)["y"], rtol=1e-5, atol=1e-5)


def test_runtime_transform_symbolic_map(monkeypatch):
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "0")
    m, ref, feeds = _model([1, 32, 21, 26], [32, 32, 3, 3], False, False, None, None, ["N", 32, "H", "W"],
                           {"pads": [1, 1, 1, 1]})
    cm = onnxc.compile(m)
    assert "onnxc_wino_filter(" in cm.c_source
    np.testing.assert_allclose(cm.run(feeds)["y"], ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_small_map_needs_budget(monkeypatch):
    """Under RUNTIME_SMALL_POSITIONS (or with more channel pairs than RUNTIME_SMALL_PAIRS under
    RUNTIME_MIN_POSITIONS) the per-call transform does not pay: no budget, no Winograd."""
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "0")
    check([1, 128, 16, 16], [128, 128, 3, 3], winograd=False, pads=[1, 1, 1, 1])
    check([1, 144, 20, 20], [144, 144, 3, 3], winograd=False, pads=[1, 1, 1, 1])
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "inf")
    check([1, 128, 16, 16], [128, 128, 3, 3], winograd=True, pads=[1, 1, 1, 1])


def test_small_map_few_pairs_runtime_transform(monkeypatch):
    """From RUNTIME_SMALL_POSITIONS on, few channel pairs transform the filter per call."""
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "0")
    m, ref, feeds = _model([1, 80, 20, 20], [96, 80, 3, 3], True, False, "Relu", None, None, {"pads": [1, 1, 1, 1]})
    cm = onnxc.compile(m, threads=2)
    assert MARK in cm.c_source and "onnxc_wino_filter(" in cm.c_source
    np.testing.assert_allclose(cm.run(feeds)["y"], ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_map_use():
    assert cw.map_use(20, 20) == pytest.approx(25 / 32)
    assert cw.map_use(16, 16) == pytest.approx(0.5)
    assert cw.map_use(14, 14) == pytest.approx(196 / 256 * 0.5)
    assert cw.map_use(128, 128) == pytest.approx(1.0)


def test_weights_as_input_not_taken():
    x = RNG.standard_normal([1, 64, 28, 28]).astype(np.float32)
    w = RNG.standard_normal([64, 64, 3, 3]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 28, 28]),
                      helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 64, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 21)])
    cm = onnxc.compile(m)
    assert MARK not in cm.c_source
    np.testing.assert_allclose(cm.run({"x": x, "w": w})["y"], ReferenceEvaluator(m).run(None, {"x": x, "w": w})[0],
                               rtol=1e-4, atol=1e-4)


def test_env_switch_off(monkeypatch, tmp_path):
    """The debug switch is read at code generation (a fresh cache: the model cache does not key on it)."""
    monkeypatch.setenv(cw.ENV_SWITCH, "0")
    m, ref, feeds = _model([1, 64, 28, 28], [64, 64, 3, 3], True, False, None, None, None, {"pads": [1, 1, 1, 1]})
    cm = onnxc.compile(m, cache_dir=str(tmp_path))
    assert MARK not in cm.c_source
    np.testing.assert_allclose(cm.run(feeds)["y"], ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_transform_identity_exact():
    """A^T [(G g) .* (B^T d)] = the 1-D correlation of d (6) with g (3), exactly (rationals)."""
    for d, g in [((1, 2, 3, 4, 5, 6), (7, 8, 9)), ((0, -1, 5, 2, 0, 3), (1, -2, 4))]:
        gg = [sum(Fraction(row[k]) * g[k] for k in range(3)) for row in cw.G]
        bd = [sum(Fraction(row[k]) * d[k] for k in range(6)) for row in cw.BT]
        y = [sum(Fraction(row[k]) * gg[k] * bd[k] for k in range(6)) for row in cw.AT]
        assert y == [sum(d[i + k] * g[k] for k in range(3)) for i in range(4)]


def test_numpy_reference_algorithm():
    x = RNG.standard_normal([2, 5, 11, 9])
    w = RNG.standard_normal([3, 5, 3, 3])
    pads = (1, 0, 2, 1)
    ref = ReferenceEvaluator(helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[pads[0], pads[1], pads[2], pads[3]])], "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, x.shape),
         helper.make_tensor_value_info("w", TensorProto.DOUBLE, w.shape)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)]),
        opset_imports=[helper.make_opsetid("", 21)])).run(None, {"x": x, "w": w})[0]
    np.testing.assert_allclose(cw.reference(x, w, pads), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("c,m,hw", [(16, 32, 64), (64, 64, 28), (256, 128, 14), (512, 512, 28)])
def test_error_realistic(c, m, hw):
    """He-initialized weights on ReLU activations: the float32 error stays around 1e-5 of the output's
    magnitude (the im2col path is near 1e-7)."""
    x = np.maximum(RNG.standard_normal([1, c, hw, hw]), 0).astype(np.float32)
    w = (RNG.standard_normal([m, c, 3, 3]) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    mdl = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")]),
        opset_imports=[helper.make_opsetid("", 21)])
    cm = onnxc.compile(mdl)
    assert MARK in cm.c_source
    got = cm.run({"x": x})["y"].astype(np.float64)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(xd, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(got)
    for i, j in itertools.product(range(3), range(3)):
        want += np.einsum("mc,nchw->nmhw", wd[:, :, i, j], xp[:, :, i:i + hw, j:j + hw])
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-5
