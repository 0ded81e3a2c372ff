"""Swish (SiLU, QuickGELU), Gelu (erf and tanh), HardSwish and Mish in the float32 epilogues of Conv, Gemm
and MatMul (codegen/kernels/epilogue.py, runtime_c/onnxc_act.h): spelled out op by op after the product
(passes/name_activations.py names them, passes/fuse_epilogues.py folds them), every kernel path gives
onnxruntime's numbers with one kernel in the model; the activations themselves are checked against float64
on an identity product (exact, so only the activation's rounding is left)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from passes.test_name_activations import EXACT, NAMED, gated  # tests/passes (pytest puts tests/ on sys.path)

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

RNG = np.random.default_rng(23)
F = TensorProto.FLOAT
FORMS = ["silu", "quickgelu", "gelu_erf", "gelu_tanh", "hardswish", "mish", "op_gelu", "op_gelu_tanh"]

# path -> (product nodes writing "t", graph inputs, constants, a marker of the path in the C or None)

def _w(*shape):
    return RNG.uniform(-0.5, 0.5, shape).astype(np.float32)


PATHS = {
    "conv_pointwise": ([helper.make_node("Conv", ["x", "w", "b"], ["t"])],
                       {"x": ["N", 7, 5, 6]}, {"w": _w(13, 7, 1, 1), "b": _w(13)}, "X[n, g] is the B operand"),
    "conv_rows": ([helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1])],
                  {"x": ["N", 5, 9, 8]}, {"w": _w(11, 5, 3, 3), "b": _w(11)}, None),
    "conv_im2col": ([helper.make_node("Conv", ["x", "w"], ["t"], strides=[3, 3], pads=[1, 1, 1, 1])],
                    {"x": [1, 4, 13, 13]}, {"w": _w(6, 4, 3, 3)}, None),
    "conv_depthwise": ([helper.make_node("Conv", ["x", "w", "b"], ["t"], group=7, pads=[1, 1, 1, 1])],
                       {"x": ["N", 7, 9, 8]}, {"w": _w(7, 1, 3, 3), "b": _w(7)}, "taps (kd, kh, kw)"),
    "conv_winograd": ([helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1])],
                      {"x": [1, 128, 16, 16]}, {"w": _w(128, 128, 3, 3) * 0.1, "b": _w(128)}, "onnxc_wino_conv("),
    "conv_small_map": ([helper.make_node("Conv", ["x", "w", "b"], ["t"])],
                       {"x": [1, 48, 5, 5]}, {"w": _w(40, 48, 1, 1), "b": _w(40)}, None),
    "gemv": ([helper.make_node("Gemm", ["x", "w", "b"], ["t"], transB=1)],
             {"x": [3, 37]}, {"w": _w(50, 37), "b": _w(50)}, "onnxc_gemv("),
    "gemm_blocked": ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["t"])],
                     {"x": ["N", 37]}, {"w": _w(37, 70), "b": _w(70)}, "onnxc_sgemm_ex("),
    "matmul_batched": ([helper.make_node("MatMul", ["x", "w"], ["t"])],
                       {"x": [2, 9, 30], "w": [2, 30, 21]}, {}, None),
    "matmul_bias_3d": ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["t"])],
                       {"x": ["B", 9, 30]}, {"w": _w(30, 19), "b": _w(19)}, None),
}


def _act(form: str, consts: dict) -> tuple[list, int]:
    """The activation nodes from t to y and the opset they need."""
    if form == "op_gelu":
        return [helper.make_node("Gelu", ["t"], ["y"])], 20
    if form == "op_gelu_tanh":
        return [helper.make_node("Gelu", ["t"], ["y"], approximate="tanh")], 20
    return gated(form, "t", "y", consts), 17


def build(path: str, form: str) -> onnx.ModelProto:
    prod, inputs, consts, _ = PATHS[path]
    consts = dict(consts)
    act, opset = _act(form, consts)
    g = helper.make_graph(prod + act, "g", [helper.make_tensor_value_info(k, F, s) for k, s in inputs.items()],
                          [helper.make_tensor_value_info("y", F, None)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def feeds(m: onnx.ModelProto, batch: int) -> dict[str, np.ndarray]:
    out = {}
    for i in m.graph.input:
        shape = [d.dim_value or batch for d in i.type.tensor_type.shape.dim]
        out[i.name] = RNG.uniform(-3, 3, shape).astype(np.float32)
    return out


def expected_act(form: str) -> str:
    if form.startswith("op_gelu"):
        return "Gelu:tanh" if form.endswith("tanh") else "Gelu"
    op, attrs = NAMED[form]
    return op + (":tanh" if attrs.get("approximate") == "tanh" else "")


@pytest.fixture(autouse=True)
def _no_weight_budget(monkeypatch):
    """One Conv cannot afford Winograd's 4x filter within the default weight budget
    (codegen/weight_budget.py): the conv_winograd path needs it lifted."""
    monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "inf")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("path", list(PATHS))
def test_product_then_gated_activation(path, form):
    m = build(path, form)
    (node,) = optimize(load_model(m), check=True).graph.nodes
    assert node.attr("onnxc_activation") == expected_act(form)
    cm = onnxc.compile(m, threads=1)
    marker = PATHS[path][3]
    assert cm.c_source.count("ONNXC_KERNEL int k") == 1
    if marker:
        assert marker in cm.c_source
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (2, 1) if any(isinstance(d, str) for s in PATHS[path][1].values() for d in s) else (1,):
        f = feeds(m, batch)
        np.testing.assert_allclose(cm.run(f)["y"], sess.run(None, f)[0], rtol=1e-4, atol=atol(path))


def atol(path: str) -> float:
    """Winograd's transforms round more than a direct sum over its 1152 products (as in
    tests/ops/test_conv_winograd.py)."""
    return 1e-4 if path == "conv_winograd" else 2e-5


@pytest.mark.parametrize("path", ["conv_rows", "conv_winograd", "gemm_blocked", "matmul_bias_3d", "gemv"])
@pytest.mark.parametrize("form", ["silu", "gelu_tanh", "mish"])
def test_two_threads(path, form):
    m = build(path, form)
    cm = onnxc.compile(m, threads=2)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    f = feeds(m, 5)
    np.testing.assert_allclose(cm.run(f)["y"], sess.run(None, f)[0], rtol=1e-4, atol=atol(path))


@pytest.mark.parametrize("rows", [3, 40])  # GEMV path / blocked GEMM
@pytest.mark.parametrize("form", ["silu", "quickgelu", "gelu_erf", "gelu_tanh", "hardswish", "mish"])
def test_activation_accuracy(rows, form):
    """x @ I is exact, so the output is the activation's own rounding: within a few float32 ulp of float64
    (relative 2e-6; absolute 3e-7 where 1 + erf / 1 + tanh cancel in GELU's negative tail)."""
    n = 129
    m = build("gemv", form)
    g = m.graph
    del g.node[0], g.initializer[:]
    g.node.insert(0, helper.make_node("MatMul", ["x", "w"], ["t"]))
    g.initializer.append(numpy_helper.from_array(np.eye(n, dtype=np.float32), "w"))
    for c in build("gemv", form).graph.initializer:
        if c.name not in ("w", "b"):
            g.initializer.append(c)
    g.input[0].CopyFrom(helper.make_tensor_value_info("x", F, [rows, n]))
    x = np.linspace(-12, 12, rows * n, dtype=np.float32).reshape(rows, n)
    x[0, :6] = [0.0, -0.0, 30.0, -30.0, 1e-20, -1e-20]
    cm = onnxc.compile(m)
    assert cm.c_source.count("ONNXC_KERNEL int k") == 1
    got = cm(x)
    want = EXACT[form](x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=3e-7)
    assert np.isnan(cm(np.full((rows, n), np.nan, np.float32))).all()


@pytest.mark.parametrize("op,attrs,act,params", [("Swish", {"alpha": 0.75}, "Swish", [0.75]),
                                                  ("Mish", {}, "Mish", None)])
def test_opset_ops_fold(op, attrs, act, params):
    """Swish (opset 24) and Mish (opset 18) nodes fold like any unary activation."""
    consts = {"w": _w(30, 20)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node(op, ["t"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 30])],
                          [helper.make_tensor_value_info("y", F, None)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
    (node,) = optimize(load_model(m), check=True).graph.nodes
    assert node.attr("onnxc_activation") == act and node.attr("onnxc_activation_params") == params
    x = RNG.uniform(-4, 4, (11, 30)).astype(np.float32)
    t = x.astype(np.float64) @ consts["w"].astype(np.float64)
    want = t / (1 + np.exp(-0.75 * t)) if op == "Swish" else EXACT["mish"](t)
    np.testing.assert_allclose(onnxc.compile(m)(x), want, rtol=1e-5, atol=1e-6)
