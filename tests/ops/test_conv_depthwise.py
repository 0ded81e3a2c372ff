"""Depthwise Conv (codegen/kernels/conv_depthwise.py) against onnx.reference: the phased 1-D/2-D path
(strides, pads, auto_pad, dilations, 3x3/5x5/1-D kernels, channel multiplier > 1, small and odd maps,
maps tiled over several accumulator tiles, symbolic batch, threads, double and float16) and the
row-vectorized fallback (3-D, kernels of more than MAX_TAPS taps), with the fused epilogue
(bias, residual, activation) set by hand on the node. Each case asserts which path generated the C."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.codegen.kernels.conv_depthwise import MAX_TAPS

RNG = np.random.default_rng(11)
PHASED = "onnxc_dw_pack_"            # the phased path's input scatter
ROWS = "for (int64_t r0 = 0; r0 < OD * OH;"  # the row-vectorized path's row loop


def _model(xs: list, ws: list, dtype: np.dtype, bias: bool, residual: bool, act: str | None,
           params: list | None, x_decl: list | None, attrs: dict):
    """(onnxc model with the epilogue attributes, plain ONNX reference model, feeds)."""
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(ws[0]).astype(dtype), "b"))
        ins.append("b")
    x = RNG.standard_normal(xs).astype(dtype)
    feeds = {"x": x}
    g_in = [helper.make_tensor_value_info("x", tp, x_decl or xs)]
    conv = helper.make_node("Conv", ins, ["c"], **attrs)
    y = ReferenceEvaluator(helper.make_model(
        helper.make_graph([conv], "r", g_in[:1], [helper.make_tensor_value_info("c", tp, None)], inits),
        opset_imports=[helper.make_opsetid("", 21)])).run(None, {"x": x})[0]
    ref_nodes, last, fused = [conv], "c", dict(attrs)
    if residual:
        feeds["r"] = RNG.standard_normal(y.shape).astype(dtype)
        g_in.append(helper.make_tensor_value_info("r", tp, [g_in[0].type.tensor_type.shape.dim[0].dim_param
                                                            or y.shape[0], *y.shape[1:]]))
        ref_nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        last = "s"
        fused["onnxc_residual"] = 1
        ins = ins + ([] if bias else [""]) + ["r"]
    if act:
        ref_ins, kw = [last], {}
        if act == "Clip":
            inits += [numpy_helper.from_array(np.asarray(p, dtype), n) for p, n in zip(params, ("lo", "hi"))]
            ref_ins += ["lo", "hi"]
        elif act == "LeakyRelu" and params:
            kw["alpha"] = params[0]
        ref_nodes.append(helper.make_node(act, ref_ins, ["y"], **kw))
        fused["onnxc_activation"] = act
        if params:
            fused["onnxc_activation_params"] = [float(p) for p in params]
    else:
        ref_nodes.append(helper.make_node("Identity", [last], ["y"]))
    out = [helper.make_tensor_value_info("y", tp, None)]
    ref = helper.make_model(helper.make_graph(ref_nodes, "r", g_in, out, inits),
                            opset_imports=[helper.make_opsetid("", 21)])
    node = helper.make_node("Conv", ins, ["y"], name="dw", **fused)
    m = helper.make_model(helper.make_graph([node], "m", g_in, out, [i for i in inits if i.name in ins]),
                          opset_imports=[helper.make_opsetid("", 21)])
    return m, ref, feeds


def check_dw(path: str, xs: list, ws: list, dtype=np.float32, bias: bool = True, residual: bool = False,
             act: str | None = None, params: list | None = None, x_decl: list | None = None,
             threads: int | None = None, tol: float = 1e-4, **attrs) -> None:
    m, ref, feeds = _model(xs, ws, dtype, bias, residual, act, params, x_decl, attrs)
    cm = onnxc.compile(m, threads=threads)
    assert (PHASED in cm.c_source) == (path == "phased"), f"expected the {path} path"
    assert (ROWS in cm.c_source) == (path == "rows"), f"expected the {path} path"
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    got = cm.run(feeds)["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 8, 7, 7], [8, 1, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 16, 14, 14], [16, 1, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 16, 14, 14], [16, 1, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ([1, 16, 14, 14], [16, 1, 3, 3], {"pads": [0, 0, 1, 1], "strides": [2, 2]}),
    ([2, 5, 13, 11], [5, 1, 3, 3], {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ([1, 6, 9, 10], [6, 1, 5, 5], {"pads": [2, 2, 2, 2]}),
    ([1, 6, 17, 15], [6, 1, 5, 5], {"pads": [2, 1, 2, 1], "strides": [2, 2]}),
    ([1, 4, 12, 12], [4, 1, 3, 3], {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ([1, 4, 15, 16], [4, 1, 3, 5], {"pads": [1, 3, 0, 2], "dilations": [2, 3], "strides": [3, 2]}),
    ([1, 4, 7, 7], [8, 1, 3, 3], {"pads": [1, 1, 1, 1]}),                   # multiplier 2
    ([2, 3, 9, 9], [9, 1, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # multiplier 3
    ([1, 3, 6, 5], [3, 1, 3, 3], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ([1, 3, 6, 5], [3, 1, 3, 3], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ([1, 3, 6, 5], [3, 1, 3, 3], {"auto_pad": "VALID"}),
    ([1, 3, 3, 3], [3, 1, 3, 3], {}),                                        # 1 x 1 output
    ([1, 2, 3, 2], [2, 1, 1, 1], {"pads": [2, 2, 2, 2]}),                   # output of padding only
    ([1, 3, 80, 75], [3, 1, 3, 3], {"pads": [1, 1, 1, 1]}),                 # several row tiles
    ([1, 2, 113, 97], [2, 1, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
], ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("bias", [True, False])
def test_phased_2d(xs, ws, attrs, bias):
    check_dw("phased", xs, ws, bias=bias, group=xs[1], **attrs)


@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 4, 30], [4, 1, 3], {"pads": [1, 1]}),
    ([2, 4, 31], [8, 1, 5], {"pads": [2, 0], "strides": [3]}),
    ([1, 3, 20], [3, 1, 3], {"dilations": [4], "strides": [2]}),
])
def test_phased_1d(xs, ws, attrs):
    check_dw("phased", xs, ws, group=xs[1], **attrs)


@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 4, 5, 6, 7], [4, 1, 3, 3, 3], {"pads": [1, 1, 1, 1, 1, 1]}),
    ([1, 3, 20, 20], [3, 1, 9, 9], {"pads": [4, 4, 4, 4], "strides": [2, 2]}),  # 81 taps > MAX_TAPS
])
def test_rows_fallback(xs, ws, attrs):
    assert np.prod(ws[2:]) > MAX_TAPS or len(ws) == 5
    check_dw("rows", xs, ws, group=xs[1], **attrs)


@pytest.mark.parametrize("residual,act,params", [
    (False, "Clip", [0.0, 6.0]), (True, "Relu", None), (True, None, None), (True, "LeakyRelu", [0.2]),
    (False, "HardSwish", None), (False, "Clip", [-0.5, 0.25]), (True, "Sigmoid", None), (False, "Sigmoid", None),
])
@pytest.mark.parametrize("xs,ws,strides", [
    ([1, 8, 7, 7], [8, 1, 3, 3], [1, 1]), ([1, 8, 14, 14], [16, 1, 3, 3], [2, 2]),
    ([1, 2, 70, 40], [2, 1, 3, 3], [1, 1]), ([1, 3, 5, 6, 6], [3, 1, 3, 3, 3], [1, 1, 1]),
])
def test_epilogue(xs, ws, strides, residual, act, params):
    path = "rows" if len(xs) == 5 else "phased"
    check_dw(path, xs, ws, residual=residual, act=act, params=params, group=xs[1],
             pads=[1] * (2 * len(strides)), strides=strides)


@pytest.mark.parametrize("act,xs,on_tile", [
    ("Clip", [1, 4, 30, 30], True), ("Sigmoid", [1, 4, 7, 7], True), ("Sigmoid", [1, 4, 14, 14], False),
])
def test_activation_on_tile(act, xs, on_tile):
    """The phased path applies a piecewise-linear activation, or any on maps at most ACT_ON_TILE_MAX_W wide, to
    its accumulator tile (codegen/kernels/conv_depthwise.py); elsewhere to Y's rows. Both agree with the reference."""
    params = [0.0, 6.0] if act == "Clip" else None
    check_dw("phased", xs, [xs[1], 1, 3, 3], act=act, params=params, group=xs[1], pads=[1, 1, 1, 1])
    m, _, _ = _model(xs, [xs[1], 1, 3, 3], np.float32, True, False, act, params, None,
                     {"group": xs[1], "pads": [1, 1, 1, 1]})
    src = onnxc.compile(m).c_source
    assert ("acc, TP);" in src) == on_tile and ("y + oh0 * OW, (oh1 - oh0) * OW);" in src) == (not on_tile)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_symbolic_batch_two_threads(n):
    check_dw("phased", [n, 12, 14, 14], [12, 1, 3, 3], x_decl=["N", 12, 14, 14], threads=2, residual=True,
             act="Clip", params=[0.0, 6.0], group=12, pads=[1, 1, 1, 1], strides=[2, 2])


def test_symbolic_spatial_dims():
    check_dw("phased", [2, 4, 9, 11], [4, 1, 3, 3], x_decl=["N", 4, "H", "W"], group=4, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float16, 2e-2)])
def test_other_dtypes(dtype, tol):
    check_dw("phased", [1, 6, 10, 9], [6, 1, 3, 3], dtype=dtype, tol=tol, act="Relu", group=6,
             pads=[1, 1, 1, 1], strides=[2, 1])


def test_against_numpy_identity_taps():
    """A centre-tap filter with no padding loss is the identity (numbers checked without onnx.reference)."""
    x = RNG.standard_normal([1, 5, 7, 7]).astype(np.float32)
    w = np.zeros([5, 1, 3, 3], np.float32)
    w[:, 0, 1, 1] = np.arange(1, 6, dtype=np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=5, pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph(
        [node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")]),
        opset_imports=[helper.make_opsetid("", 21)])
    got = onnxc.compile(m).run({"x": x})["y"]
    np.testing.assert_allclose(got, x * np.arange(1, 6, dtype=np.float32)[None, :, None, None], rtol=1e-6)


@pytest.mark.parametrize("path,xs,ws,attrs", [
    ("phased", [1, 32, 56, 56], [32, 1, 3, 3], {"pads": [1, 1, 1, 1]}),
    ("phased", [2, 24, 57, 55], [48, 1, 5, 5], {"pads": [2, 2, 2, 2], "strides": [2, 2]}),  # multiplier 2
    ("rows", [1, 8, 16, 18, 17], [8, 1, 3, 3, 3], {"pads": [1, 1, 1, 1, 1, 1]}),
])
@pytest.mark.parametrize("symbolic", [False, True])
def test_pool_threads_match_one_thread(path, xs, ws, attrs, symbolic):
    """Large enough for the runtime's pool (chunks of (batch, channel) planes, per-thread scratch): the
    2-thread build matches onnx.reference and, bit for bit, the 1-thread build."""
    decl = ["N", *xs[1:]] if symbolic else None
    m, ref, feeds = _model(xs, ws, np.float32, True, True, "Relu", None, decl, dict(attrs, group=xs[1]))
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    assert (PHASED in two.c_source) == (path == "phased")
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    got = two.run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, one.run(feeds)["y"])
