"""Depthwise Conv -> pointwise Conv pairs fused into onnxc::DepthwisePointwise
(passes/fuse_depthwise_pointwise.py, codegen/kernels/conv_dwpw.py) against onnx.reference: strides,
pads, dilations, kernel sizes, activations on either conv, bias or none, a residual, a symbolic batch, two
threads, bands that do not divide the map; and the pairs that must stay apart."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.passes import fuse_depthwise_pointwise as fdp

from .util import check_batches_two_threads

RNG = np.random.default_rng(17)
MARK = "depthwise-pointwise"
EX_MARK = "E's rows [ir0, ir1)"


def _model(n: int, c: int, m: int, hw: tuple[int, int], k: int = 3, strides=(1, 1), pads=None, dilations=(1, 1),
           dw_bias: bool = True, pw_bias: bool = True, dw_act: str | None = "Relu", pw_act: str | None = None,
           residual: bool = False, symbolic: bool = False, extra_reader: bool = False,
           dw_output: bool = False, pw_strides=(1, 1), multiplier: int = 1, expand: int = 0,
           ex_act: str | None = "Relu", ex_bias: bool = True, ex_output: bool = False) -> tuple[onnx.ModelProto, dict]:
    """depthwise (c channels at hw) -> pointwise to m; with ``expand``, a pointwise Conv from ``expand``
    channels to c (and ``ex_act``) first."""
    pads = [k // 2] * 4 if pads is None else pads
    inits = [numpy_helper.from_array((RNG.standard_normal((c * multiplier, 1, k, k)) * 0.3).astype(np.float32), "wd"),
             numpy_helper.from_array((RNG.standard_normal((m, c * multiplier, 1, 1)) * 0.2).astype(np.float32), "wp")]
    dins, pins = ["x", "wd"], ["da", "wp"]
    if dw_bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(c * multiplier).astype(np.float32), "bd"))
        dins.append("bd")
    if pw_bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(m).astype(np.float32), "bp"))
        pins.append("bp")
    nodes = [helper.make_node("Conv", dins, ["d"], kernel_shape=[k, k], strides=list(strides), pads=pads,
                              dilations=list(dilations), group=c)]
    if expand:
        inits.append(numpy_helper.from_array((RNG.standard_normal((c, expand, 1, 1)) * 0.3).astype(np.float32), "we"))
        eins = ["xe", "we"]
        if ex_bias:
            inits.append(numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "be"))
            eins.append("be")
        nodes[:0] = [helper.make_node("Conv", eins, ["e"], kernel_shape=[1, 1]),
                     helper.make_node(ex_act, ["e"], ["x"]) if ex_act else helper.make_node("Identity", ["e"], ["x"])]
    nodes.append(helper.make_node(dw_act, ["d"], ["da"]) if dw_act else helper.make_node("Identity", ["d"], ["da"]))
    nodes.append(helper.make_node("Conv", pins, ["p"], kernel_shape=[1, 1], strides=list(pw_strides)))
    out = "p"
    xin, cin = ("xe", expand) if expand else ("x", c)
    feeds = {xin: RNG.standard_normal((n, cin, *hw)).astype(np.float32)}
    ins = [helper.make_tensor_value_info(xin, TensorProto.FLOAT, ["N", cin, *hw] if symbolic else [n, cin, *hw])]
    if residual:
        oshape = ReferenceEvaluator(helper.make_model(
            helper.make_graph(nodes, "s", ins[:1], [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)], inits),
            opset_imports=[helper.make_opsetid("", 17)])).run(None, feeds)[0].shape
        feeds["r"] = RNG.standard_normal(oshape).astype(np.float32)
        ins.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", *oshape[1:]] if symbolic else oshape))
        nodes.append(helper.make_node("Add", ["p", "r"], ["s"]))
        out = "s"
    if pw_act:
        nodes.append(helper.make_node(pw_act, [out], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["da"], ["z"]))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    if dw_output:
        outs.append(helper.make_tensor_value_info("da", TensorProto.FLOAT, None))
    if ex_output:
        outs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), feeds


def check(fused: bool, threads: int | None = None, expanded: bool | None = None, **kw) -> None:
    m, feeds = _model(**kw)
    cm = onnxc.compile(m, threads=threads)
    assert (MARK in cm.c_source) == fused, "pair " + ("not fused" if fused else "fused")
    if expanded is not None:
        assert (EX_MARK in cm.c_source) == expanded, "expanding conv " + ("not fused" if expanded else "fused")
    want = ReferenceEvaluator(m).run(None, feeds)
    got = cm.run(feeds)
    for name, w in zip([o.name for o in m.graph.output], want):
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw", [
    dict(n=1, c=32, m=16, hw=(64, 64)),
    dict(n=2, c=24, m=40, hw=(131, 97), strides=(2, 2)),                                      # odd map, stride 2
    dict(n=1, c=16, m=24, hw=(50, 70), k=5, pads=[2, 1, 2, 3], dw_bias=False),                 # 5x5, asymmetric pads
    dict(n=1, c=20, m=12, hw=(60, 60), dilations=(2, 2), pads=[2, 2, 2, 2], pw_bias=False),
    dict(n=1, c=36, m=8, hw=(41, 56), strides=(1, 2), pads=[0, 1, 2, 0], dw_act=None),
    dict(n=2, c=48, m=24, hw=(40, 40), residual=True, pw_act="Relu", symbolic=True),
    dict(n=1, c=64, m=96, hw=(36, 36), dw_act="HardSwish", pw_act="Sigmoid"),
    dict(n=1, c=9, m=5, hw=(130, 129), k=7, pads=[3, 3, 3, 3]),                                  # 7x7
    # narrow maps take the stride-phase depthwise rows, in several bands (zero rows at the image's edges)
    dict(n=2, c=256, m=24, hw=(40, 40)),
    dict(n=1, c=200, m=56, hw=(90, 91), strides=(2, 2), pads=[1, 0, 0, 1], dw_act="Clip"),
    dict(n=1, c=160, m=32, hw=(47, 47), k=5, dilations=(2, 2), pads=[4, 4, 3, 3], strides=(2, 1)),
])
def test_fused(kw):
    check(True, **kw)


@pytest.mark.parametrize("kw", [
    dict(n=1, expand=16, c=96, m=24, hw=(112, 112), strides=(2, 2), ex_act="Clip"),              # wide rows, stride 2
    dict(n=2, expand=24, c=144, m=24, hw=(56, 56), residual=True, symbolic=True, ex_bias=False),
    dict(n=1, expand=20, c=72, m=40, hw=(61, 45), k=5, pads=[2, 1, 2, 3], ex_act="HardSwish"),  # 5x5, odd map
    # narrow maps (stride-phase depthwise rows), several bands; a band that reads no padding row
    dict(n=1, expand=32, c=192, m=32, hw=(40, 40), ex_act=None, dw_act="Clip"),
    dict(n=2, expand=64, c=160, m=48, hw=(37, 33), k=5, dilations=(2, 2), pads=[4, 4, 3, 3], strides=(2, 1)),
    dict(n=1, expand=24, c=128, m=24, hw=(48, 48), strides=(2, 2), pads=[0, 0, 1, 1]),
])
def test_expand_fused(kw):
    """An expanding pointwise Conv in front joins the node: its rows are computed per band."""
    check(True, expanded=True, **kw)


def _se_model(n: int, ci: int, c: int, hw: tuple[int, int], strides=(1, 1), k: int = 3, pads=None,
              symbolic: bool = False) -> tuple[onnx.ModelProto, dict]:
    """Expanding pointwise Conv -> depthwise Conv -> squeeze-excite (global pool, 1x1 Convs, scale): the depthwise
    output has two readers and no pointwise Conv."""
    pads = [k // 2] * 4 if pads is None else pads
    r = max(1, c // 4)
    inits = [numpy_helper.from_array((RNG.standard_normal((c, ci, 1, 1)) * 0.3).astype(np.float32), "we"),
             numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "be"),
             numpy_helper.from_array((RNG.standard_normal((c, 1, k, k)) * 0.3).astype(np.float32), "wd"),
             numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "bd"),
             numpy_helper.from_array((RNG.standard_normal((r, c, 1, 1)) * 0.2).astype(np.float32), "w1"),
             numpy_helper.from_array((RNG.standard_normal((c, r, 1, 1)) * 0.2).astype(np.float32), "w2")]
    nodes = [helper.make_node("Conv", ["xe", "we", "be"], ["e"], kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["e"], ["es"]), helper.make_node("Mul", ["e", "es"], ["x"]),
             helper.make_node("Conv", ["x", "wd", "bd"], ["d"], kernel_shape=[k, k], strides=list(strides), pads=pads,
                              group=c),
             helper.make_node("Relu", ["d"], ["da"]),
             helper.make_node("GlobalAveragePool", ["da"], ["g"]),
             helper.make_node("Conv", ["g", "w1"], ["g1"], kernel_shape=[1, 1]), helper.make_node("Relu", ["g1"], ["g2"]),
             helper.make_node("Conv", ["g2", "w2"], ["g3"], kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["g3"], ["g4"]), helper.make_node("Mul", ["da", "g4"], ["y"])]
    feeds = {"xe": RNG.standard_normal((n, ci, *hw)).astype(np.float32)}
    ins = [helper.make_tensor_value_info("xe", TensorProto.FLOAT, ["N", ci, *hw] if symbolic else [n, ci, *hw])]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), feeds


@pytest.mark.parametrize("kw", [
    dict(n=1, ci=16, c=96, hw=(112, 112), strides=(2, 2)),
    dict(n=2, ci=24, c=48, hw=(120, 104), symbolic=True),                         # wide rows, stride 1
    dict(n=1, ci=8, c=160, hw=(60, 58), k=5, pads=[2, 1, 2, 3]),                   # stride-phase rows (narrow map)
])
def test_expand_without_pointwise(kw):
    """Expanding Conv -> depthwise Conv whose output a squeeze-excite block reads: fused with no pointwise Conv,
    the depthwise rows written to the output; against the reference, and at 2 threads bit for bit."""
    m, feeds = _se_model(**kw)
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert EX_MARK in one.c_source and "no pointwise Conv after" in one.c_source
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    got = one.run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(two.run(feeds)["y"], got)


def test_expand_without_pointwise_small_stays_apart():
    m, _ = _se_model(n=1, ci=16, c=64, hw=(56, 56))  # 200K elements: below MIN_EXPAND_ONLY_ELEMENTS
    assert EX_MARK not in onnxc.compile(m).c_source


@pytest.mark.parametrize("kw", [
    dict(n=1, expand=16, c=32, m=16, hw=(32, 32)),                       # E's output is small
    dict(n=1, expand=16, c=96, m=24, hw=(64, 64), ex_output=True),        # ... or a graph output
])
def test_expand_apart(kw):
    check(True, expanded=False, **kw)


@pytest.mark.parametrize("kw", [
    dict(expand=16, c=96, m=24, hw=(112, 112), strides=(2, 2)),
    dict(expand=24, c=144, m=24, hw=(56, 56), residual=True),
    dict(expand=32, c=192, m=32, hw=(30, 30)),
])
def test_expand_two_threads(kw):
    """At 2 threads each thread computes the rows of E its own bands read (whole images per thread at batch 4,
    shared images at 3 and 1): the reference, and one thread bit for bit."""
    m, feeds = _model(n=4, symbolic=True, **kw)
    check_batches_two_threads(m, m, feeds, batches=(4, 3, 1), marker=EX_MARK)


def test_fused_two_threads():
    check(True, threads=2, n=3, c=40, m=20, hw=(48, 52), residual=True, symbolic=True)


def test_bands_of_whole_images():
    """At 2 threads a 14 x 14 map is cut into two bands of 7 rows (one per thread), but a batch the threads divide
    runs whole images per thread, in one band of 14 (onnxc_by_image): both against the reference and, bit for bit,
    one thread."""
    m, feeds = _model(n=4, c=384, m=64, hw=(14, 14), residual=True, symbolic=True)
    check_batches_two_threads(m, m, feeds, marker=DC_MARK)


DC_MARK = "onnxc_dc_conv(1, M, C, in3, S"


@pytest.mark.parametrize("kw", [
    dict(n=1, c=192, m=40, hw=(14, 14), residual=True, pw_act="Relu"),
    dict(n=2, c=176, m=24, hw=(15, 14), pw_act="Sigmoid", pw_bias=False, symbolic=True),   # odd map, a partial panel
    dict(n=1, c=256, m=72, hw=(27, 27), strides=(2, 2), dw_act="Clip"),                   # 14x14 out, 3 panels
    dict(n=1, expand=32, c=192, m=64, hw=(14, 14), residual=True, ex_act="HardSwish"),
])
def test_direct_pointwise(kw):
    """Bands of few positions (at most 256) run the pointwise GEMM on the direct kernel (output channels as lanes)."""
    m, feeds = _model(**kw)
    cm = onnxc.compile(m)
    assert MARK in cm.c_source and DC_MARK in cm.c_source
    want = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_allclose(cm.run(feeds)["y"], want[0], rtol=1e-4, atol=1e-4)


def test_direct_pointwise_not_on_long_bands():
    m, _ = _model(n=1, c=64, m=40, hw=(56, 56))
    src = onnxc.compile(m).c_source
    assert MARK in src and DC_MARK not in src


def test_direct_pointwise_fallback_without_avx512():
    """An x86-64-v3 build (AVX2) runs the transposed GEMM on the same packed filter, into the band of Y."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 target flags")
    m, feeds = _model(n=2, c=192, m=40, hw=(14, 14), residual=True, pw_act="Relu")
    cm = onnxc.compile(m, threads=2, flags=("-O2", "-march=x86-64-v3"))
    assert DC_MARK in cm.c_source and "onnxc_sg_conv_small_ld(" in cm.c_source
    want = ReferenceEvaluator(m).run(None, feeds)
    np.testing.assert_allclose(cm.run(feeds)["y"], want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw", [
    dict(n=1, c=16, m=16, hw=(16, 16)),                      # small map: stays in cache anyway
    dict(n=1, c=32, m=16, hw=(64, 64), extra_reader=True),   # the depthwise output has another reader
    dict(n=1, c=32, m=16, hw=(64, 64), dw_output=True),      # ... or is a graph output
    dict(n=1, c=32, m=16, hw=(64, 64), pw_strides=(2, 2)),   # strided 1x1
    dict(n=1, c=32, m=16, hw=(64, 64), multiplier=2),        # two output channels per group
])
def test_not_fused(kw):
    check(False, **kw)


def test_switch_off(monkeypatch):
    monkeypatch.setenv(fdp.ENV_SWITCH, "0")
    check(False, n=1, c=32, m=16, hw=(64, 64))


def test_empty_batch():
    m, _ = _model(n=1, c=32, m=16, hw=(64, 64), symbolic=True)
    cm = onnxc.compile(m)
    assert MARK in cm.c_source
    assert cm.run({"x": np.zeros((0, 32, 64, 64), np.float32)})["y"].shape == (0, 16, 64, 64)


def test_pipeline_checked():
    """The fused node passes the IR checker, and the pair's value between the convs is gone."""
    from onnxc.frontend import load_model
    from onnxc.passes.pipeline import optimize
    m, _ = _model(n=1, c=32, m=16, hw=(64, 64), residual=True, pw_act="Relu")
    nodes = list(optimize(load_model(m), check=True).graph.nodes)
    assert [n.op_type for n in nodes] == ["DepthwisePointwise"]
    node = nodes[0]
    assert node.domain == fdp.DOMAIN and node.attr("onnxc_dw_activation") == "Relu"
    assert node.attr("onnxc_activation") == "Relu" and node.attr("onnxc_residual") == 1 and len(node.inputs) == 6


def test_pipeline_checked_expand():
    """With the expanding conv, the node reads the block's input and carries E's filter, bias and activation."""
    from onnxc.frontend import load_model
    from onnxc.passes.pipeline import optimize
    m, _ = _model(n=1, expand=16, c=96, m=24, hw=(64, 64), ex_act="HardSwish", pw_act="Relu")
    nodes = list(optimize(load_model(m), check=True).graph.nodes)
    assert [n.op_type for n in nodes] == ["DepthwisePointwise"]
    node = nodes[0]
    assert node.inputs[0].name == "xe" and node.attr("onnxc_ex_activation") == "HardSwish"
    assert [v.const.shape for v in node.inputs[6:8]] == [(96, 16, 1, 1), (96,)]
