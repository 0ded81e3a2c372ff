"""Dynamically quantized convolutions (onnxruntime's ``quantize_dynamic``): the native
DynamicQuantizeLinear (runtime_c/onnxc_dynq.h) and onnxc::ConvIntegerToFloat (ConvInteger -> Cast -> Mul
[-> Add] [-> activation] folded into the integer kernels' output loops by passes/fuse_integer_dequant.py),
against onnxruntime on models its own quantizer writes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ir import DType
from onnxc.passes.fuse_integer_dequant import fuse_integer_dequant
from onnxc.passes.shapes.dynamic_quant import dynamic_quantize

RNG = np.random.default_rng(5)


def _ort(model: onnx.ModelProto, feeds: dict, threads: int = 1) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _dql_model(shape) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "dql",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(n, t, None) for n, t in
                           (("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,shift", [((3, 5, 7), 1.0), ((2, 300001), -2.0), ((4, 33), 50.0), ((5, 3), -9.0)])
def test_dynamic_quantize_linear_native(shape, shift, threads):
    x = (RNG.standard_normal(shape) * 3 + shift).astype(np.float32)
    model = _dql_model(list(shape))
    c = onnxc.compile(model, threads=threads)
    assert "onnxc_dynq(" in c.c_source  # the native kernel, not the function body
    got = c.run({"x": x})
    want = _ort(model, {"x": x}, threads)
    for name, w in zip(("y", "s", "z"), want):
        np.testing.assert_array_equal(got[name], w, err_msg=name)
    twin = dynamic_quantize(x)
    for name, w in zip(("y", "s", "z"), twin):
        np.testing.assert_array_equal(got[name], w, err_msg=f"numpy twin {name}")


def test_dynamic_quantize_linear_edges():
    """All zeros: the reference's scale 1/255 (onnxruntime writes 1.0); NaN: ignored by the range,
    quantized to 0, as onnxruntime does; empty: scale 1/255."""
    model = _dql_model(["A", "B"])
    c = onnxc.compile(model)
    zeros = np.zeros((4, 6), np.float32)
    got = c.run({"x": zeros})
    ref = ReferenceEvaluator(model).run(None, {"x": zeros})
    for name, w in zip(("y", "s", "z"), ref):
        np.testing.assert_array_equal(got[name], w, err_msg=name)
    x = np.array([[np.nan, 1.0], [-2.0, 0.5]], np.float32)
    got, want = c.run({"x": x}), _ort(model, {"x": x})
    for name, w in zip(("y", "s", "z"), want):
        np.testing.assert_array_equal(got[name], w, err_msg=name)
    got = c.run({"x": np.zeros((0, 3), np.float32)})
    assert got["y"].shape == (0, 3) and got["s"] == np.float32(1 / 255) and got["z"] == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_dynamic_quantize_linear_near_halves(threads):
    """The kernel multiplies by 1 / scale and redoes with the division a block where an element comes
    near a half step: elements at, and 1-3 ulp around, (k + 1/2) * scale, where the product and the
    quotient can round apart, still quantize as the division (the numpy twin and onnxruntime)."""
    span = np.float32(7.3)
    s = np.float32(span / np.float32(255))
    k = np.arange(-40, 200, dtype=np.float32)
    mid = ((k + np.float32(0.5)) * s).astype(np.float32)
    near = [mid]
    for steps in (1, 2, 3):
        up, down = mid.copy(), mid.copy()
        for _ in range(steps):
            up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        near += [up, down]
    x = np.concatenate([np.array([-40 * s, span - 40 * s], np.float32), *near,
                        (RNG.standard_normal(20000) * 2).clip(-40 * s, span - 40 * s).astype(np.float32)])
    model = _dql_model([x.size])
    got = onnxc.compile(model, threads=threads).run({"x": x})
    twin = dynamic_quantize(x)
    for name, w in zip(("y", "s", "z"), twin):
        np.testing.assert_array_equal(got[name], w, err_msg=f"numpy twin {name}")
    for name, w in zip(("y", "s", "z"), _ort(model, {"x": x}, threads)):
        np.testing.assert_array_equal(got[name], w, err_msg=name)


def _conv_model(c_in: int, c_out: int, k: int, group: int, act: str | None, **attrs) -> onnx.ModelProto:
    w = (RNG.standard_normal((c_out, c_in // group, k, k)) * 0.3).astype(np.float32)
    b = RNG.standard_normal(c_out).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, kernel_shape=[k, k], **attrs)]
    out = "c"
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
        out = "y"
    elif act == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        out = "y"
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.float32(0.0), "lo"), numpy_helper.from_array(np.float32(1.5), "hi")]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c_in, None, None])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _quantize_dynamic(model: onnx.ModelProto, tmp_path, per_channel: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import quantize_dynamic

    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(model, src)
    quantize_dynamic(str(src), str(dst), per_channel=per_channel)
    return onnx.load(dst)


CONVS = [  # (C in, C out, kernel, group, activation, attributes, x spatial) : pointwise and dense go to the
    # integer GEMM (>= 4 output channels per group), depthwise to the depthwise kernel
    (7, 12, 1, 1, "Clip", {}, (9, 11)),
    (5, 13, 3, 1, "Relu", {"pads": [1, 1, 1, 1], "strides": [2, 2]}, (10, 9)),
    (9, 9, 3, 9, "Clip", {"pads": [1, 1, 1, 1]}, (8, 13)),
    (11, 11, 3, 11, None, {"pads": [1, 0, 1, 2], "strides": [2, 2]}, (15, 14)),
    (6, 6, 3, 6, "Relu", {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, (7, 9)),
    (8, 16, 3, 2, None, {"pads": [1, 1, 1, 1]}, (6, 6)),
]


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_dynamic_conv_against_onnxruntime(case, tmp_path):
    c_in, c_out, k, group, act, attrs, hw = CONVS[case]
    # (per_channel is ignored for Conv by onnxruntime 1.32's dynamic quantizer: one weight scale)
    q = _quantize_dynamic(_conv_model(c_in, c_out, k, group, act, **attrs), tmp_path, per_channel=False)
    x = RNG.standard_normal((2, c_in, *hw)).astype(np.float32)
    compiled = onnxc.compile(q, threads=2)
    got = compiled.run({"x": x})
    want = _ort(q, {"x": x})[0]
    name = q.graph.output[0].name
    # the integer accumulators are exact on both sides; the float epilogue may differ by a rounding
    np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
    assert "ConvInteger" in {n.op_type for n in q.graph.node}
    src = compiled.c_source
    # the float epilogue runs in the integer GEMM's tiles or at the end of the depthwise kernel's planes
    path = "ONNXC_IG_DEQUANT" if group == 1 or c_out // group >= 4 else "the float epilogue of the plane"
    assert path in src and "onnxc_dynq(" in src


def _chain(public_cast: bool, per_channel: bool, group: int) -> onnx.ModelProto:
    """DQL -> ConvInteger -> Cast -> Mul -> Add -> Relu by hand; with ``public_cast`` the Cast's output is
    also a graph output, so nothing may fold; with ``per_channel`` the Mul is by a constant [1, M, 1, 1]
    (as lower_qdq writes for a QDQ Conv with a float output); ``group`` 1 (dense, M = 8) or 4 (depthwise)."""
    m = 8 if group == 1 else group  # dense, or depthwise
    w = RNG.integers(-127, 128, (m, 4 // group, 3, 3)).astype(np.int8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], group=group, pads=[1, 0, 1, 2]),
             helper.make_node("Cast", ["acc"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["f", "wc" if per_channel else "s"], ["m"]),
             helper.make_node("Add", ["bias", "m"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.int8(3), "wz"),
             numpy_helper.from_array(np.float32(0.01), "ws"),
             numpy_helper.from_array((RNG.random((1, m, 1, 1)) * 0.01).astype(np.float32), "wc"),
             numpy_helper.from_array(RNG.standard_normal((1, m, 1, 1)).astype(np.float32), "bias")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if public_cast:
        outs.append(helper.make_tensor_value_info("f", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 6])],
                          outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("public_cast,per_channel,group", [(False, False, 1), (True, False, 1), (False, True, 1),
                                                           (False, True, 4)])
def test_fuse_integer_dequant_rewrite(public_cast, per_channel, group):
    from onnxc.frontend import load_model
    from onnxc.passes.fold_constants import fold_constants
    from onnxc.passes.infer_shapes import infer_shapes

    model = _chain(public_cast, per_channel, group)
    ir = fold_constants(infer_shapes(load_model(model.SerializeToString())).model).model
    res = fuse_integer_dequant(ir)
    ops = [n.op_type for n in res.model.graph.nodes]
    if public_cast:
        assert not res.changed and "ConvInteger" in ops and "Cast" in ops
    else:
        assert res.changed and ops.count("ConvIntegerToFloat") == 1
        assert not {"ConvInteger", "Cast", "Add", "Relu"} & set(ops)
        node = next(n for n in res.model.graph.nodes if n.op_type == "ConvIntegerToFloat")
        assert node.outputs[0].name == "y" and node.outputs[0].dtype == DType.FLOAT
        scale = node.inputs[4]
        if per_channel:  # the constant, as a vector of the channels' scales
            assert scale.const is not None and scale.const.shape == (8 if group == 1 else group,)
        else:  # the run-time product xs * ws
            assert scale.name == "s" and scale.const is None
    x = RNG.standard_normal((1, 4, 5, 6)).astype(np.float32)
    got = onnxc.compile(model).run({"x": x})
    want = _ort(model, {"x": x})
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-6)


def test_runtime_weight_zero_point_stays_unfused():
    """The integer GEMM packs the weights' zero points at compile time: with a run-time one the chain is
    left as written (ConvInteger's own path), and still computes the right values."""
    nodes = [helper.make_node("ConvInteger", ["x", "w", "", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["s", "f"], ["y"])]
    inits = [numpy_helper.from_array(RNG.integers(0, 256, (8, 5, 1, 1)).astype(np.uint8), "w"),
             numpy_helper.from_array(np.float32(0.003), "s")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 5, 7, 6]),
                                       helper.make_tensor_value_info("wz", TensorProto.UINT8, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"x": RNG.integers(0, 256, (2, 5, 7, 6)).astype(np.uint8), "wz": np.array(7, np.uint8)}
    c = onnxc.compile(model)
    assert "ONNXC_IG_DEQUANT" not in c.c_source
    np.testing.assert_array_equal(c.run(feeds)["y"], _ort(model, feeds)[0])
