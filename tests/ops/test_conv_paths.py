"""The float Conv paths of codegen/kernels/conv.py against onnx.reference: shapes that hit each path
(pointwise GEMM, "rows" from a zero-padded copy with unit or phase-split stride 2 along W, the
small-output transposed GEMM, chunked im2col, depthwise), with strides, pads, dilations, groups, a
symbolic batch, bias or not, and the fused epilogue (activation, residual) set by hand on the node.
Each case also asserts that the intended path is the one in the generated C."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

from .util import check_batches_two_threads

RNG = np.random.default_rng(5)

# a marker of each path in the generated C
PATHS = {
    "pointwise": "X[n, g] is the B operand",
    "rows": "onnxc_sg_conv_rows(",
    "phased": "onnxc_sg_pad_input_phased(",
    "small": "onnxc_sg_conv_small(",
    "im2col": "onnxc_sg_im2col_packed(",
    "depthwise": "taps (kd, kh, kw)",
    "implicit": "onnxc_ci_conv(",
    "one_position": "one GEMM for the batch",
}
# the rows paths run only with the implicit GEMM switched off (where AVX-512 would take it first)
ROWS_ONLY = {"rows", "phased"}


@pytest.fixture(autouse=True)
def _no_direct(monkeypatch):
    """These tests pin the GEMM-based paths: the direct kernel (tests/ops/test_conv_direct.py), which takes many
    of their shapes first on AVX-512, is switched off."""
    monkeypatch.setenv("ONNXC_DIRECT_CONV", "0")


def _conv_model(xs: list, ws: list, bias: bool, residual: bool, act: str | None, act_params: list | None,
                x_decl: list | None, attrs: dict) -> tuple[onnx.ModelProto, onnx.ModelProto, dict]:
    """(model with the onnxc epilogue attributes, plain ONNX reference model, feeds)."""
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    consts = {"w": w}
    ins = ["x", "w"]
    if bias:
        consts["b"] = RNG.standard_normal(ws[0]).astype(np.float32)
        ins.append("b")
    x = RNG.standard_normal(xs).astype(np.float32)
    conv = helper.make_node("Conv", ins, ["c"], **attrs)
    y = ReferenceEvaluator(helper.make_model(
        helper.make_graph([conv], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()]),
        opset_imports=[helper.make_opsetid("", 21)])).run(None, {"x": x})[0]
    feeds = {"x": x}
    ref_nodes, ref_out = [conv], "c"
    g_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_decl or xs)]
    fused = dict(attrs)
    if residual:
        feeds["r"] = RNG.standard_normal(y.shape).astype(np.float32)
        ref_nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        ref_out = "s"
        r_decl = list(y.shape) if x_decl is None else [x_decl[0], *y.shape[1:]]
        g_in.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, r_decl))
        fused["onnxc_residual"] = 1
        ins = ins + ([] if bias else [""]) + ["r"]
    if act:
        kw = {"alpha": float(act_params[0])} if act == "LeakyRelu" and act_params else {}
        ref_ins = [ref_out]
        if act == "Clip":
            consts["lo"] = np.float32(act_params[0])
            consts["hi"] = np.float32(act_params[1])
            ref_ins += ["lo", "hi"]
        ref_nodes.append(helper.make_node(act, ref_ins, ["y"], **kw))
        fused["onnxc_activation"] = act
        if act_params:
            fused["onnxc_activation_params"] = [float(p) for p in act_params]
    else:
        ref_nodes.append(helper.make_node("Identity", [ref_out], ["y"]))
    init = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    ref = helper.make_model(helper.make_graph(ref_nodes, "r", g_in, out, init),
                            opset_imports=[helper.make_opsetid("", 21)])
    node = helper.make_node("Conv", ins, ["y"], **fused)
    m = helper.make_model(helper.make_graph([node], "m", g_in, out, init),
                          opset_imports=[helper.make_opsetid("", 21)])
    return m, ref, feeds


@contextlib.contextmanager
def _implicit(on: bool):
    old = os.environ.get("ONNXC_IMPLICIT_CONV")
    os.environ["ONNXC_IMPLICIT_CONV"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["ONNXC_IMPLICIT_CONV"]
        else:
            os.environ["ONNXC_IMPLICIT_CONV"] = old


def check_conv(path: str, xs: list, ws: list, bias: bool = True, residual: bool = False, act: str | None = None,
               act_params: list | None = None, x_decl: list | None = None, threads: int | None = None,
               **attrs) -> None:
    m, ref, feeds = _conv_model(xs, ws, bias, residual, act, act_params, x_decl, attrs)
    with _implicit(path not in ROWS_ONLY):
        cm = onnxc.compile(m, threads=threads)
    assert PATHS[path] in cm.c_source, f"expected the {path} path"
    if path in ROWS_ONLY:
        assert PATHS["implicit"] not in cm.c_source
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    got = cm.run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# -- rows: zero-padded copy, unit stride along W ---------------------------------------------------

@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 6, 9, 8], [10, 6, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([2, 5, 40, 37], [13, 5, 3, 3], {"pads": [1, 2, 0, 1]}),
    ([1, 4, 20, 21], [7, 4, 3, 5], {"pads": [2, 2, 2, 2], "dilations": [2, 1]}),
    ([1, 3, 17, 19], [25, 3, 7, 7], {"pads": [3, 3, 3, 3], "strides": [2, 1]}),
    ([1, 8, 12, 12], [16, 4, 3, 3], {"pads": [1, 1, 1, 1], "group": 2}),
    ([2, 3, 50], [5, 3, 3], {"pads": [1, 1]}),
    ([1, 2, 5, 6, 7], [4, 2, 3, 3, 3], {"pads": [1, 1, 1, 1, 1, 1]}),
])
def test_rows_unit_stride(xs, ws, attrs):
    check_conv("rows", xs, ws, **attrs)


# -- rows with stride 2 along W: the padded rows split by column phase ----------------------------

@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 6, 15, 15], [9, 6, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ([1, 3, 45, 46], [16, 3, 7, 7], {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ([2, 4, 16, 17], [6, 4, 3, 3], {"pads": [0, 1, 2, 0], "strides": [1, 2]}),
    ([1, 4, 19, 23], [5, 4, 3, 3], {"pads": [2, 2, 2, 2], "strides": [2, 2], "dilations": [2, 2]}),
    ([1, 4, 11, 12], [6, 2, 2, 4], {"strides": [2, 2], "group": 2}),
    ([1, 3, 41], [4, 3, 5], {"pads": [2, 1], "strides": [2]}),
    ([1, 2, 6, 8, 9], [3, 2, 3, 3, 3], {"pads": [1, 1, 1, 1, 1, 1], "strides": [2, 2, 2]}),
])
def test_rows_stride2_phased(xs, ws, attrs):
    check_conv("phased", xs, ws, **attrs)


@pytest.mark.parametrize("cin,kernel,strides", [(1, [3, 3], [2, 2]), (8, [3, 5], [1, 1]), (24, [3, 5], [1, 1])])
def test_rows_grouped_tiles(cin, kernel, strides):
    """A short reduction (K = 9 or 120, at most ONNXC_SG_KC / 2) builds the B panels of several tiles at once and
    runs each row panel of A over them (long output rows); K = 360 goes one tile at a time. Both with residual
    and activation, against the reference, and the same bits at 1 and 2 threads (chunks of tiles and channels).
    (3x5 kernels: a 3x3 one at stride 1 would take Winograd.)"""
    xs, ws, attrs = [1, cin, 48, 45], [64, cin, *kernel], {"pads": [1, 2, 1, 2], "strides": strides}
    check_conv("phased" if strides[-1] == 2 else "rows", xs, ws, residual=True, act="Relu", **attrs)
    m, _, feeds = _conv_model(xs, ws, True, True, "Relu", None, None, attrs)
    with _implicit(False):
        one, two = (onnxc.compile(m, threads=t).run(feeds)["y"] for t in (1, 2))
    np.testing.assert_array_equal(one, two)


def test_rows_symbolic_batch_no_bias():
    check_conv("rows", [3, 4, 10, 11], [6, 4, 3, 3], bias=False, x_decl=["N", 4, 10, 11], pads=[1, 1, 1, 1])
    check_conv("phased", [2, 4, 10, 11], [6, 4, 3, 3], bias=False, x_decl=["N", 4, 10, 11], pads=[1, 1, 1, 1],
               strides=[2, 2])


def test_rows_empty_batch():
    m, _, _ = _conv_model([1, 3, 8, 8], [4, 3, 3, 3], True, False, None, None, ["N", 3, 8, 8], {"pads": [1] * 4})
    y = onnxc.compile(m).run({"x": np.zeros((0, 3, 8, 8), np.float32)})["y"]
    assert y.shape == (0, 4, 8, 8)


# -- implicit GEMM: B rows read straight from a phase-split padded copy (AVX-512) -----------------

def _has_avx512() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    out = subprocess.run(["cc", "-march=native", "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True)
    return "__AVX512F__" in out.stdout


needs_avx512 = pytest.mark.skipif(not _has_avx512(), reason="the implicit GEMM needs AVX-512 on the build machine")


@needs_avx512
@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 6, 9, 8], [10, 6, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([2, 5, 40, 37], [13, 5, 3, 3], {"pads": [1, 2, 0, 1]}),                        # asymmetric pads, batch 2
    ([1, 4, 20, 21], [7, 4, 3, 5], {"pads": [2, 2, 2, 2], "dilations": [2, 1]}),
    ([1, 3, 45, 46], [16, 3, 7, 7], {"pads": [3, 3, 3, 3], "strides": [2, 2]}),     # a stem
    ([1, 4, 19, 23], [5, 4, 3, 3], {"pads": [2, 2, 2, 2], "strides": [2, 2], "dilations": [2, 2]}),
    ([1, 5, 25, 26], [8, 5, 4, 4], {"pads": [1, 2, 2, 1], "strides": [3, 2]}),      # stride 3: im2col otherwise
    ([1, 48, 12, 13], [20, 48, 3, 3], {"pads": [1, 1, 1, 1]}),                      # K = 432: two K slices
    ([1, 8, 12, 12], [16, 4, 3, 3], {"pads": [1, 1, 1, 1], "group": 2}),
    ([2, 3, 50], [5, 3, 3], {"pads": [1, 1]}),                                      # 1-D
    ([1, 6, 4, 3], [9, 6, 3, 3], {"pads": [1, 1, 1, 1]}),                           # a map narrower than a tile
    ([1, 16, 30, 30], [64, 16, 5, 5], {"pads": [2, 2, 2, 2]}),                      # 5x5 with 64 outputs
])
def test_implicit(xs, ws, attrs):
    check_conv("implicit", xs, ws, **attrs)


@needs_avx512
@pytest.mark.parametrize("residual,act,params", [
    (True, "Relu", None), (False, "Clip", [0.0, 6.0]), (True, "LeakyRelu", [0.1]), (True, "Sigmoid", None),
    (False, None, None),
])
def test_implicit_epilogue(residual, act, params):
    """In-register epilogue (Relu, Clip, LeakyRelu) and the separate one (Sigmoid), both with the
    residual read through the compressed tile layout; two K slices."""
    check_conv("implicit", [2, 48, 11, 13], [30, 48, 3, 3], residual=residual, act=act, act_params=params,
               pads=[1, 1, 1, 1], x_decl=["N", 48, 11, 13], threads=2)


@needs_avx512
def test_implicit_equals_rows_bit_for_bit():
    """Same K slices, same sums: the implicit GEMM and the rows path give identical floats."""
    m, _, feeds = _conv_model([1, 40, 23, 29], [24, 40, 3, 3], True, True, "Relu", None, None,
                              {"pads": [1, 1, 1, 1], "strides": [2, 2]})
    outs = []
    for on in (True, False):
        with _implicit(on):
            cm = onnxc.compile(m)
        assert (PATHS["implicit"] in cm.c_source) == on
        outs.append(cm.run(feeds)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])


def test_implicit_not_for_many_channels_3x3():
    """64+ output channels with a 3x3 kernel keep the copied-panel rows path."""
    with _implicit(True):
        m, _, _ = _conv_model([1, 8, 20, 20], [64, 8, 3, 3], True, False, None, None, None,
                              {"pads": [1, 1, 1, 1], "strides": [2, 2]})
        assert PATHS["implicit"] not in onnxc.compile(m).c_source


@needs_avx512
def test_implicit_small_map_many_channels():
    """A small map at stride 1 takes the implicit GEMM whatever the channel count (IMPLICIT_SMALL_MAP)."""
    with _implicit(True):
        m, _, _ = _conv_model([1, 64, 14, 14], [96, 64, 3, 3], True, False, None, None, None, {"pads": [1, 1, 1, 1]})
        assert PATHS["implicit"] in onnxc.compile(m).c_source
        m, _, _ = _conv_model([1, 64, 20, 20], [96, 64, 3, 3], True, False, None, None, None, {"pads": [1, 1, 1, 1]})
        assert PATHS["implicit"] not in onnxc.compile(m).c_source


@pytest.mark.parametrize("implicit,xs,ws,attrs", [
    (True, [1, 64, 14, 14], [256, 64, 3, 3], {"pads": [1, 1, 1, 1]}),     # 7 tiles: output channels cut
    (True, [2, 12, 30, 31], [40, 12, 3, 3], {"pads": [1, 1, 1, 1]}),      # tiles in groups, the last cut
    (False, [1, 48, 14, 14], [200, 48, 3, 3], {"pads": [1, 1, 1, 1]}),    # rows path, 7 tiles
    (False, [1, 32, 29, 27], [64, 32, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
])
def test_cut_threads_same_bits(implicit, xs, ws, attrs):
    """However runtime_c/onnxc_cut.h cuts tiles and output channels among threads, each output is computed by
    one chunk with its K slices in order: 2 threads give the bits of 1."""
    if implicit and not _has_avx512():
        pytest.skip("the implicit GEMM needs AVX-512")
    m, ref, feeds = _conv_model(xs, ws, True, True, "Relu", None, None, attrs)
    outs = []
    for threads in (1, 2):
        with _implicit(implicit):
            cm = onnxc.compile(m, threads=threads)
        assert (PATHS["implicit"] in cm.c_source) == implicit
        outs.append(cm.run(feeds)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


# -- small output maps: the GEMM transposed (positions as its rows) ---------------------------------

@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 40, 7, 7], [48, 40, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([2, 64, 7, 7], [96, 64, 1, 1], {}),
    ([1, 24, 14, 14], [40, 24, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ([1, 36, 14, 14], [33, 36, 1, 1], {"strides": [2, 2]}),
    ([1, 16, 9, 5], [64, 8, 3, 3], {"pads": [1, 0, 1, 2], "dilations": [2, 1], "group": 2}),
    ([1, 20, 23], [50, 20, 3], {"pads": [1, 1]}),
])
def test_small_output(xs, ws, attrs):
    check_conv("small", xs, ws, **attrs)


def test_small_output_transpose_edges():
    """tmp (positions x channels) goes into Y in 8 x 8 blocks transposed in registers: 37 channels and 49
    positions leave edges both ways, and the residual is added in that copy (bias and activation in the GEMM)."""
    check_conv("small", [2, 40, 7, 7], [37, 40, 1, 1], residual=True, act="Relu")


def test_small_output_weights_as_input():
    """A filter that is a graph input (not packed at compile time) is read transposed in place."""
    x = RNG.standard_normal([2, 32, 5, 5]).astype(np.float32)
    w = RNG.standard_normal([40, 32, 3, 3]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32, 5, 5]),
                      helper.make_tensor_value_info("w", TensorProto.FLOAT, [40, 32, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 21)])
    cm = onnxc.compile(m)
    assert PATHS["small"] in cm.c_source
    want = ReferenceEvaluator(m).run(None, {"x": x, "w": w})[0]
    np.testing.assert_allclose(cm.run({"x": x, "w": w})["y"], want, rtol=1e-4, atol=1e-4)


def test_small_output_not_taken_for_fitting_maps():
    """A 14 x 14 map fills the GEMM's columns well (196 of 208): the normal rows path runs."""
    check_conv("rows", [1, 32, 14, 14], [48, 32, 3, 3], pads=[1, 1, 1, 1])


# -- the fused epilogue on every path --------------------------------------------------------------

EPI_CASES = {  # path -> (x shape, w shape, attributes)
    "pointwise": ([2, 8, 6, 8], [12, 8, 1, 1], {}),
    "rows": ([1, 6, 30, 33], [14, 6, 3, 3], {"pads": [1, 1, 1, 1]}),
    "phased": ([1, 6, 30, 33], [14, 6, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "im2col": ([1, 4, 13, 13], [7, 4, 3, 3], {"strides": [3, 3]}),
    "depthwise": ([1, 6, 9, 9], [6, 1, 3, 3], {"pads": [1, 1, 1, 1], "group": 6}),
    "small": ([1, 40, 7, 7], [56, 40, 3, 3], {"pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("path", sorted(EPI_CASES))
@pytest.mark.parametrize("residual,act,params", [
    (True, "Relu", None), (False, "Relu", None), (True, None, None), (False, "Clip", [0.0, 6.0]),
    (True, "LeakyRelu", [0.1]),
])
def test_epilogue(path, residual, act, params):
    xs, ws, attrs = EPI_CASES[path]
    check_conv(path, xs, ws, residual=residual, act=act, act_params=params, **attrs)


@pytest.mark.parametrize("path", ["rows", "phased", "pointwise", "small"])
def test_epilogue_two_threads_no_bias(path):
    xs, ws, attrs = EPI_CASES[path]
    xs = [2, *xs[1:]]
    check_conv(path, xs, [40, *ws[1:]], bias=False, residual=True, act="Relu", threads=2,
               x_decl=["N", *xs[1:]], **attrs)


def _plain_gemm_model(op: str, xs: list, ws: list, dtype, x_decl: list | None, **attrs):
    """A one-node Conv / ConvTranspose model (weights and bias initializers) and its feed."""
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    nb = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(RNG.standard_normal(nb).astype(dtype), "b")]
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)], "m",
        [helper.make_tensor_value_info("x", tp, x_decl or xs)], [helper.make_tensor_value_info("y", tp, None)],
        inits), opset_imports=[helper.make_opsetid("", 21)])
    return m, {"x": RNG.standard_normal(xs).astype(dtype)}


@pytest.mark.parametrize("op,xs,ws,dtype,attrs", [
    # sizes: at least PAR_WORK_MIN (1 << 18) of work per parallel loop (KG * ncol, Mg * KK * ncol)
    ("Conv", [1, 16, 48, 48], [24, 16, 3, 3], np.float64, {"pads": [1, 1, 1, 1]}),
    ("Conv", [1, 32, 60, 64], [12, 16, 3, 3], np.float64, {"pads": [1, 0, 1, 2], "strides": [1, 2], "group": 2}),
    ("ConvTranspose", [1, 16, 32, 32], [16, 32, 3, 3], np.float32, {"strides": [2, 2], "pads": [1, 1, 0, 0]}),
    ("ConvTranspose", [2, 8, 44, 44], [8, 16, 3, 3], np.float64, {"dilations": [2, 1]}),
])
@pytest.mark.parametrize("symbolic", [False, True])
def test_plain_gemm_paths_two_threads(op, xs, ws, dtype, attrs, symbolic):
    """The im2col rows (Conv on the plain GEMM: double) and ConvTranspose's col2im channels on the runtime's
    pool: two threads match onnx.reference and, bit for bit, one thread."""
    m, feeds = _plain_gemm_model(op, xs, ws, dtype, ["N", *xs[1:]] if symbolic else None, **attrs)
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    got = two.run(feeds)["y"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(got, one.run(feeds)["y"])


@needs_avx512
@pytest.mark.parametrize("xs,ws,kw", [
    ([1, 96, 9, 7], [24, 96, 1, 1], {}),                                   # 63 positions: a masked last tile
    ([2, 144, 14, 14], [40, 144, 1, 1], {"residual": True, "act": "Clip", "act_params": [0.0, 6.0]}),
    ([1, 400, 5, 5], [12, 400, 1, 1], {"threads": 2}),                     # K = 400: two K slices
    ([3, 64, 20, 21], [48, 64, 1, 1], {"bias": False, "x_decl": ["N", 64, "H", "W"], "threads": 2}),
])
def test_implicit_pointwise(xs, ws, kw):
    """1x1 convolutions with few outputs and a long K read X in place (no copy, no packing); the last
    tile of each image loads only the positions that exist."""
    check_conv("implicit", xs, ws, **kw)


@pytest.mark.parametrize("xs,ws,kw", [
    ([4, 96, 1, 1], [24, 96, 1, 1], {"act": "Relu"}),                              # squeeze-excite's reduce
    ([3, 24, 1, 1], [96, 24, 1, 1], {"act": "Sigmoid", "x_decl": ["N", 24, 1, 1]}),  # ... and expand, any batch
    ([2, 40, 1, 1], [40, 40, 1, 1], {"residual": True, "bias": False, "threads": 2}),
    ([1, 1152, 1, 1], [48, 1152, 1, 1], {}),
])
def test_one_position(xs, ws, kw):
    """1x1 convolutions on a 1x1 map run as one GEMM over the batch (Y = X W^T), epilogue included."""
    check_conv("one_position", xs, ws, **kw)


# -- whole images per thread (onnxc_by_image, templates/conv_images.c.j2) --------------------------

IMAGE_CASES = {  # path -> (x shape at batch 4, w shape, attributes, implicit GEMM on)
    "pointwise": ([4, 32, 12, 12], [64, 32, 1, 1], {}, True),
    "implicit_pointwise": ([4, 64, 10, 10], [24, 64, 1, 1], {}, True),
    "rows": ([4, 8, 20, 21], [16, 8, 3, 5], {"pads": [1, 2, 1, 2]}, False),
    "phased": ([4, 6, 30, 33], [14, 6, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, False),
    "implicit": ([4, 6, 30, 33], [14, 6, 3, 5], {"pads": [1, 2, 1, 2]}, True),
    "im2col": ([4, 4, 25, 25], [16, 4, 3, 3], {"strides": [3, 3]}, True),
    # 56-64 channels: the implicit GEMM (at stride 2 only when images are whole per thread: batch 4; rows for 3)
    "implicit_stride2": ([4, 8, 20, 21], [64, 8, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, True),
    "implicit_rows": ([4, 8, 20, 21], [56, 8, 1, 3], {"pads": [0, 1, 0, 1]}, True),
    "small_pointwise": ([4, 40, 7, 7], [56, 40, 1, 1], {}, True),
    "small": ([4, 64, 7, 7], [64, 32, 3, 3], {"pads": [1, 1, 1, 1], "group": 2}, True),
}


@pytest.mark.parametrize("path", sorted(IMAGE_CASES))
def test_images_per_thread(path):
    """At 2 threads a batch of 4 runs whole images per thread (one region over the images, each image's
    kernels on one thread), a batch of 3 splits every image among the threads: both match the reference
    and, bit for bit, 1 thread (residual and activation included, so the epilogue's offsets are checked)."""
    xs, ws, attrs, implicit = IMAGE_CASES[path]
    m, ref, feeds = _conv_model(xs, ws, True, True, "Relu", None, ["N", *xs[1:]], attrs)
    marker = PATHS["implicit" if path.startswith("implicit") else "small" if path.startswith("small") else path]
    with _implicit(implicit):
        check_batches_two_threads(m, ref, feeds, marker=marker)
