"""BatchNormalization folding (passes/fold_batchnorm.py): the IR after the pipeline and the numbers
against onnx.reference, for Conv, ConvTranspose, Gemm and MatMul producers, and the cases that must
stay as they are."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import Attr
from onnxc.passes.fold_batchnorm import fold_batchnorm
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.pipeline import optimize

rng = np.random.default_rng(7)
NP2ONNX = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}


def _bn_params(c: int, dt, names=("s", "b", "m", "v")) -> list:
    vals = [rng.uniform(0.5, 1.5, c), rng.standard_normal(c) * 0.2, rng.standard_normal(c) * 0.2,
            rng.uniform(0.3, 2.0, c)]
    return [numpy_helper.from_array(v.astype(dt), n) for v, n in zip(vals, names)]


def _model(nodes, inputs: dict, inits: list, dt=np.float32, opset: int = 17, outputs=("y",)) -> onnx.ModelProto:
    t = NP2ONNX[dt]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, t, s) for n, s in inputs.items()],
                          [helper.make_tensor_value_info(o, t, None) for o in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, feeds: dict, rtol=1e-4, atol=1e-5, ort: bool = False) -> None:
    """onnxc against onnx.reference (or onnxruntime, where the reference has a bug)."""
    if ort:
        import onnxruntime

        sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    got = onnxc.compile(model).run(feeds)
    for o, w in zip(model.graph.output, want):
        assert got[o.name].dtype == w.dtype and got[o.name].shape == w.shape
        np.testing.assert_allclose(got[o.name], w, rtol=rtol, atol=atol)


def _ops(model) -> list[str]:
    return [n.op_type for n in optimize(load_model(model)).graph.nodes]


def _bn(x="c", y="y", **attrs):
    return helper.make_node("BatchNormalization", [x, "s", "b", "m", "v"], [y], **attrs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_bn_folds(dt, bias):
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(dt), "w")
    inits = [w] + _bn_params(4, dt)
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(4).astype(dt), "cb"))
        ins.append("cb")
    nodes = [helper.make_node("Conv", ins, ["c"], pads=[1, 1, 1, 1]), _bn(epsilon=1e-3)]
    m = _model(nodes, {"x": ["N", 3, 6, 5]}, inits, dt)
    ir = optimize(load_model(m))
    assert [n.op_type for n in ir.graph.nodes] == ["Conv"]
    conv = ir.graph.nodes[0]
    assert conv.outputs[0].name == "y" and len(conv.inputs) == 3 and conv.inputs[2].const is not None
    assert conv.inputs[1].const.dtype == dt
    _check(m, {"x": rng.standard_normal((2, 3, 6, 5)).astype(dt)})


def test_fold_formula_exact():
    """W' = W * s / sqrt(v + eps), B' = (B - m) * s / sqrt(v + eps) + b, computed in float64."""
    w = rng.standard_normal((2, 1, 1, 1)).astype(np.float32)
    cb = np.array([0.5, -1.0], np.float32)
    s, b, mu, v = (np.array(a, np.float32) for a in ([2.0, 0.5], [0.1, 0.2], [1.0, -1.0], [3.0, 0.25]))
    eps = 1e-2
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (cb, "cb"), (s, "s"), (b, "b"), (mu, "m"),
                                                       (v, "v"))]
    m = _model([helper.make_node("Conv", ["x", "w", "cb"], ["c"]), _bn(epsilon=eps)], {"x": [1, 1, 2, 2]}, inits)
    ir = load_model(m)
    infer_shapes(ir)
    assert fold_batchnorm(ir).changed
    conv = ir.graph.nodes[0]
    a = s.astype(np.float64) / np.sqrt(v.astype(np.float64) + np.float32(eps).item())
    np.testing.assert_array_equal(conv.inputs[1].const, (w * a[:, None, None, None]).astype(np.float32))
    np.testing.assert_array_equal(conv.inputs[2].const, ((cb - mu.astype(np.float64)) * a + b).astype(np.float32))


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_bn_folds(group):
    w = numpy_helper.from_array(rng.standard_normal((4, 6 // group, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], group=group), _bn()]
    m = _model(nodes, {"x": [1, 4, 3, 3]}, [w] + _bn_params(6, np.float32))
    assert _ops(m) == ["ConvTranspose"]
    # onnx.reference's ConvTranspose mis-reshapes grouped weights: onnxruntime is the reference there
    _check(m, {"x": rng.standard_normal((1, 4, 3, 3)).astype(np.float32)}, ort=group > 1)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("with_c", [False, True])
def test_gemm_bn_folds(trans_b, with_c):
    shape = (5, 3) if trans_b else (3, 5)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), "w")] + _bn_params(5, np.float32)
    ins = ["x", "w"]
    if with_c:
        inits.append(numpy_helper.from_array(rng.standard_normal((1, 5)).astype(np.float32), "cc"))
        ins.append("cc")
    nodes = [helper.make_node("Gemm", ins, ["c"], transB=trans_b, alpha=0.5, beta=2.0), _bn()]
    m = _model(nodes, {"x": ["N", 3]}, inits)
    ir = optimize(load_model(m))
    assert [n.op_type for n in ir.graph.nodes] == ["Gemm"]
    assert ir.graph.nodes[0].attr("beta", 1.0) == 1.0
    _check(m, {"x": rng.standard_normal((4, 3)).astype(np.float32)})


def test_matmul_bn_becomes_matmul_add():
    inits = [numpy_helper.from_array(rng.standard_normal((3, 5)).astype(np.float32), "w")] + _bn_params(5, np.float32)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["c"]), _bn()], {"x": ["N", 3]}, inits)
    assert _ops(m) == ["Gemm"]  # MatMul + Add; passes/fuse_epilogues.py then makes the Add the Gemm's C
    _check(m, {"x": rng.standard_normal((4, 3)).astype(np.float32)})


def _conv_bn_model(extra_nodes=(), outputs=("y",), opset=17, bn_attrs=None, const_stats=True):
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "w")
    inits = [w] + (_bn_params(4, np.float32) if const_stats else [])
    ins = {"x": [1, 3, 4, 4]}
    if not const_stats:
        ins.update({n: [4] for n in ("s", "b", "m", "v")})
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), _bn(**(bn_attrs or {})), *extra_nodes]
    return _model(nodes, ins, inits, opset=opset, outputs=outputs)


def test_not_folded_when_conv_output_has_another_reader():
    m = _conv_bn_model([helper.make_node("Relu", ["c"], ["r"])], outputs=("y", "r"))
    assert "BatchNormalization" in _ops(m)
    _check(m, {"x": rng.standard_normal((1, 3, 4, 4)).astype(np.float32)})


def test_not_folded_when_conv_output_is_a_graph_output():
    m = _conv_bn_model(outputs=("y", "c"))
    assert "BatchNormalization" in _ops(m)


def test_not_folded_with_runtime_statistics():
    m = _conv_bn_model(const_stats=False)
    assert _ops(m) == ["Conv", "BatchNormalization"]
    feeds = {"x": rng.standard_normal((1, 3, 4, 4)).astype(np.float32)}
    feeds.update({k: rng.uniform(0.5, 1.5, 4).astype(np.float32) for k in "sbmv"})
    _check(m, feeds)


def test_not_folded_in_training_mode():
    m = _conv_bn_model(opset=15, bn_attrs={"training_mode": 1})
    assert "BatchNormalization" in _ops(m)


def test_not_folded_after_a_requested_epilogue():
    """A Conv already carrying an activation (an attribute outside ONNX's) applies it after the product."""
    ir = load_model(_conv_bn_model())
    infer_shapes(ir)
    ir.graph.nodes[0].attrs["onnxc_activation"] = Attr("onnxc_activation", "STRING", "Relu")
    assert not fold_batchnorm(ir).changed


def test_batchnorm_alone_stays():
    m = _model([_bn(x="x")], {"x": [2, 4, 3]}, _bn_params(4, np.float32))
    assert _ops(m) == ["BatchNormalization"]
    _check(m, {"x": rng.standard_normal((2, 4, 3)).astype(np.float32)})


def test_conv1d_bn_opset9_folds():
    w = numpy_helper.from_array(rng.standard_normal((4, 2, 3)).astype(np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"]), _bn()], {"x": [2, 2, 7]}, [w] + _bn_params(4, np.float32),
               opset=9)
    assert _ops(m) == ["Conv"]
    # onnx.reference's BatchNormalization-9 normalizes 3-D inputs over the wrong axes: onnxruntime here
    _check(m, {"x": rng.standard_normal((2, 2, 7)).astype(np.float32)}, ort=True)
