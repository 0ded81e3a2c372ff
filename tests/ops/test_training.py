"""Training ops: the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum) and Gradient, and
BatchNormalization with training_mode=1 — against onnx.reference, numpy and finite differences."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc.ir import ShapeError, UnsupportedOpError

from .util import check_node, node_model, reference

TRAINING = "ai.onnx.preview.training"
rng = np.random.default_rng(5)


def _f(*shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def _check_training(op: str, inputs: dict, n_out: int, rtol: float = 1e-5, atol: float = 1e-6,
                    input_shapes: dict | None = None, **attrs) -> None:
    m = node_model(op, inputs, n_out, opset=21, domain=TRAINING, input_shapes=input_shapes, **attrs)
    want = reference(m, inputs)
    got = onnxc.compile(m).run(inputs)
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        assert g.shape == w.shape, f"output {i}: {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w.astype(g.dtype), rtol=rtol, atol=atol)


# -- optimizers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(5,), (2, 3, 2), ()]])
def test_adagrad(t, shapes) -> None:
    n = len(shapes)
    ins = {"R": np.array(0.1, np.float32), "T": np.array(t, np.int64)}
    for g in "XGH":
        for j, s in enumerate(shapes):
            ins[f"{g}{j}"] = np.abs(_f(*s)) if g == "H" else _f(*s)
    _check_training("Adagrad", ins, 2 * n, norm_coefficient=0.01, decay_factor=0.1, epsilon=1e-5)


@pytest.mark.parametrize("t", [0, 7])
def test_adam_multiple(t) -> None:
    shapes = [(4, 3), (6,)]
    ins = {"R": np.array(0.05, np.float32), "T": np.array(t, np.int64)}
    for g in "XGVH":
        for j, s in enumerate(shapes):
            ins[f"{g}{j}"] = np.abs(_f(*s)) if g == "H" else _f(*s)
    _check_training("Adam", ins, 6, alpha=0.85, beta=0.95, norm_coefficient=0.001, norm_coefficient_post=0.02,
                    epsilon=1e-4)


def test_adam_double_symbolic() -> None:
    ins = {"R": np.array(0.05, np.float64), "T": np.array(2, np.int64)}
    for g in "XGVH":
        ins[g] = np.abs(_f(5, 2, dt=np.float64)) if g == "H" else _f(5, 2, dt=np.float64)
    _check_training("Adam", ins, 3, rtol=1e-6, atol=1e-6, input_shapes={k: ["N", 2] for k in "XGVH"})


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("t", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_momentum(mode, t, dt) -> None:
    ins = {"R": np.array(0.1, dt), "T": np.array(t, np.int64), "X": _f(3, 5, dt=dt), "G": _f(3, 5, dt=dt),
           "V": _f(3, 5, dt=dt)}
    _check_training("Momentum", ins, 2, alpha=0.9, beta=0.7, norm_coefficient=0.02, mode=mode)


def test_optimizer_errors() -> None:
    ins = {"R": np.array(0.1, np.float32), "T": np.array(0, np.int64), "X": _f(3), "G": _f(3)}
    with pytest.raises(ShapeError, match="groups of n tensors"):
        onnxc.compile(node_model("Adagrad", ins, 1, domain=TRAINING))
    ins["V"] = _f(3)
    with pytest.raises(ShapeError, match="mode"):
        onnxc.compile(node_model("Momentum", ins, 2, domain=TRAINING, alpha=0.9, beta=0.1, norm_coefficient=0.0,
                                 mode="heavy"))
    ins["V"] = _f(1)
    with pytest.raises(UnsupportedOpError, match="broadcast"):
        onnxc.compile(node_model("Momentum", ins, 2, domain=TRAINING, alpha=0.9, beta=0.1, norm_coefficient=0.0,
                                 mode="standard"))


# -- BatchNormalization, training mode -----------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (4, 3, 5), (2, 3, 2, 2, 3)])
@pytest.mark.parametrize("opset", [14, 15])
def test_batchnorm_training(shape, opset) -> None:
    c = shape[1]
    ins = {"x": _f(*shape), "s": _f(c), "b": _f(c), "mean": _f(c), "var": np.abs(_f(c)) + 0.5}
    check_node("BatchNormalization", ins, n_outputs=3, opset=opset, rtol=1e-4, atol=1e-5,
               input_shapes={"x": ["N", *shape[1:]]}, training_mode=1, momentum=0.8, epsilon=1e-3)


def test_batchnorm_training_double_y_only() -> None:
    ins = {"x": _f(3, 4, 6, dt=np.float64), "s": _f(4, dt=np.float64), "b": _f(4, dt=np.float64),
           "mean": _f(4, dt=np.float64), "var": np.abs(_f(4, dt=np.float64))}
    check_node("BatchNormalization", ins, n_outputs=1, opset=15, rtol=1e-10, atol=1e-12, training_mode=1)


def test_batchnorm_training_float16_mixed_stats() -> None:
    """opset 15: X float16, statistics float (T and T2 differ)."""
    x = _f(4, 3, 5).astype(np.float16)
    ins = {"x": x, "s": _f(3).astype(np.float16), "b": _f(3).astype(np.float16), "mean": _f(3),
           "var": np.abs(_f(3))}
    x64 = x.astype(np.float64)
    mu, var = x64.mean(axis=(0, 2)), x64.var(axis=(0, 2))
    y = (x64 - mu[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5) * \
        ins["s"].astype(np.float64)[None, :, None] + ins["b"].astype(np.float64)[None, :, None]
    expected = [y.astype(np.float16), (ins["mean"] * 0.9 + mu * 0.1).astype(np.float32),
                (ins["var"] * 0.9 + var * 0.1).astype(np.float32)]
    check_node("BatchNormalization", ins, n_outputs=3, opset=15, rtol=2e-3, atol=2e-3, expected=expected,
               training_mode=1)


# -- Gradient ------------------------------------------------------------------------------------

def _grad_model(nodes: list, inputs: dict, xs: list[str], y: str, zs: tuple = (), grad_inputs: list | None = None,
                grad_outputs: list | None = None) -> onnx.ModelProto:
    grad_outputs = grad_outputs if grad_outputs is not None else [f"d_{x}" for x in xs]
    gnode = helper.make_node("Gradient", grad_inputs or [*xs, *zs], grad_outputs, domain=TRAINING, xs=xs, y=y,
                             **({"zs": list(zs)} if zs else {}))
    g = helper.make_graph(
        [*nodes, gnode], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in [y, *grad_outputs] if o])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(TRAINING, 1)])


def _numeric_grad(f, inputs: dict, x: str, eps: float = 1e-6) -> np.ndarray:
    """d sum(f(inputs)) / d inputs[x] by central differences (double)."""
    base = {k: v.astype(np.float64) for k, v in inputs.items()}
    g = np.zeros_like(base[x])
    for i in np.ndindex(g.shape):
        hi, lo = {k: v.copy() for k, v in base.items()}, {k: v.copy() for k, v in base.items()}
        hi[x][i] += eps
        lo[x][i] -= eps
        g[i] = (np.sum(f(hi)) - np.sum(f(lo))) / (2 * eps)
    return g


def _ref(model: onnx.ModelProto, y: str):
    """y as a function of the model inputs, evaluated in double by onnx.reference (no Gradient node)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.node[-1]
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info(y, TensorProto.UNDEFINED, None))
    for i in m.graph.input:
        i.type.tensor_type.elem_type = TensorProto.DOUBLE
    return lambda feeds: reference(m, feeds)[0]


CASES = {
    "add_mul_broadcast": ([helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "a"], ["y"])],
                          {"a": (2, 3), "b": (3,)}),
    "div_sub_scalar": ([helper.make_node("Div", ["a", "b"], ["c"]), helper.make_node("Sub", ["c", "b"], ["y"])],
                       {"a": (4,), "b": ()}),
    "unary_chain": ([helper.make_node("Tanh", ["a"], ["t"]), helper.make_node("Exp", ["t"], ["e"]),
                     helper.make_node("Sigmoid", ["e"], ["s"]), helper.make_node("Sin", ["s"], ["u"]),
                     helper.make_node("Mul", ["u", "b"], ["y"])], {"a": (5,), "b": (5,)}),
    "sqrt_log_abs_pow": ([helper.make_node("Abs", ["a"], ["p"]), helper.make_node("Sqrt", ["p"], ["q"]),
                          helper.make_node("Log", ["q"], ["l"]), helper.make_node("Pow", ["b", "l"], ["y"])],
                         {"a": (3,), "b": (3,)}),
    "matmul_relu_reshape": ([helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
                             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
                             helper.make_node("Flatten", ["t"], ["y"], axis=0)], {"a": (3, 4), "b": (4, 2)}),
    "reused_value": ([helper.make_node("Mul", ["a", "a"], ["s"]), helper.make_node("Add", ["s", "a"], ["y"])],
                     {"a": (2, 2), "b": (1,)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_finite_differences(case) -> None:
    nodes, shapes = CASES[case]
    inputs = {k: np.asarray(rng.random(s) + 0.5, dtype=np.float32) for k, s in shapes.items()}
    m = _grad_model(nodes, inputs, ["a", "b"], "y")
    got = onnxc.compile(m).run(inputs)
    f = _ref(m, "y")
    for x in ("a", "b"):
        g = got[f"d_{x}"]
        assert g.shape == inputs[x].shape and g.dtype == np.float32
        np.testing.assert_allclose(g, _numeric_grad(f, inputs, x), rtol=2e-4, atol=2e-4)


def test_gradient_with_zs_and_unused_output() -> None:
    """zs are held fixed; an x that does not reach y gets zeros; an omitted output is skipped."""
    nodes = [helper.make_node("Mul", ["a", "z"], ["y"]), helper.make_node("Neg", ["b"], ["nb"])]
    inputs = {"a": _f(3), "b": _f(3), "z": _f(3)}
    m = _grad_model(nodes, inputs, ["a", "b"], "y", zs=("z",), grad_outputs=["", "d_b"])
    got = onnxc.compile(m).run(inputs)
    assert "d_a" not in got
    np.testing.assert_array_equal(got["d_b"], np.zeros(3, np.float32))
    m = _grad_model(nodes, inputs, ["a", "b"], "y", zs=("z",))
    np.testing.assert_allclose(onnxc.compile(m).run(inputs)["d_a"], inputs["z"])


def test_gradient_at_other_values() -> None:
    """Inputs other than the xs tensors: the forward part is evaluated again at those values."""
    nodes = [helper.make_node("Mul", ["a", "a"], ["y"]), helper.make_node("Neg", ["a"], ["a2"])]
    inputs = {"a": _f(4)}
    m = _grad_model(nodes, inputs, ["a"], "y", grad_inputs=["a2"])
    np.testing.assert_allclose(onnxc.compile(m).run(inputs)["d_a"], -2 * inputs["a"], rtol=1e-6)


def test_gradient_double_symbolic_batch() -> None:
    nodes = [helper.make_node("Mul", ["a", "b"], ["y"])]
    inputs = {"a": _f(3, 2, dt=np.float64), "b": _f(2, dt=np.float64)}
    m = _grad_model(nodes, inputs, ["a", "b"], "y")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    got = onnxc.compile(m).run(inputs)
    np.testing.assert_allclose(got["d_a"], np.broadcast_to(inputs["b"], (3, 2)))
    np.testing.assert_allclose(got["d_b"], inputs["a"].sum(axis=0))


def test_gradient_unsupported_op() -> None:
    nodes = [helper.make_node("Floor", ["a"], ["y"])]
    m = _grad_model(nodes, {"a": _f(3)}, ["a"], "y")
    with pytest.raises(UnsupportedOpError, match="no derivative rule for Floor"):
        onnxc.compile(m)
