"""Elementwise family: unary math and activations, broadcasting binary/variadic ops, Where, Clip, Pow.

Cases compile one-node models and compare with onnx.reference, or with the numpy twins of the kernels
(passes/shapes/elementwise_np.py) where ONNX leaves the result undefined (integer division by zero,
INT_MIN / -1, shifts past the width). Also covers legacy opset variants, symbolic dims with run-time
broadcasting, empty tensors, constant folding agreeing with the C kernels, and the loop nest shape.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxc
from onnxc.ir import RuntimeFailure, ShapeError, UnsupportedOpError
from onnxc.passes.shapes.elementwise_np import NUMPY

from .util import check_node, node_model

RNG = np.random.default_rng(0)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]


def rand(shape, dtype=np.float32, lo=-5.0, hi=5.0) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.uniform(lo, hi, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return RNG.random(shape) > 0.5
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def run(op: str, inputs: dict, opset: int = 21, const_inputs: tuple = (), **attrs) -> np.ndarray:
    model = node_model(op, inputs, opset=opset, const_inputs=const_inputs, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in const_inputs}
    return onnxc.compile(model).run(feeds)["y0"]


def twin(op: str, *xs, opset: int = 21, **attrs) -> np.ndarray:
    """The numpy twin of the kernel (the fold rule) on ``xs``."""
    model = node_model(op, {f"i{k}": x for k, x in enumerate(xs)}, opset=opset, **attrs)
    from onnxc.frontend import load_model

    node = load_model(model).graph.nodes[0]
    with np.errstate(all="ignore"):
        return np.asarray(NUMPY[op](node, *xs))


# ---- unary ---------------------------------------------------------------------------------------------

DOMAIN = {"Log": (0.01, 10), "Sqrt": (0, 10), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99),
          "Atanh": (-0.99, 0.99), "Acosh": (1.01, 10), "Reciprocal": (0.1, 5)}
FLOAT_UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sigmoid",
               "HardSigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Softplus",
               "Softsign", "HardSwish", "Mish", "Gelu", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
               "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Shrink"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary(op, dtype):
    lo, hi = DOMAIN.get(op, (-6, 6))
    x = rand((3, 17), dtype, lo, hi)
    if op in ("Round", "Floor", "Ceil"):
        x = np.concatenate([x, np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 3.0] * 2 + [7.5]], dtype)])
    opset = 22 if op not in ("Gelu", "Shrink") else (20 if op == "Gelu" else 9)
    check_node(op, {"x": x}, opset=opset, rtol=2e-6 if dtype == np.float32 else 1e-12, atol=1e-7)


@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh", "Erf", "Softplus", "Mish", "Gelu", "Relu",
                                "Elu", "Floor", "Ceil", "Round", "Abs", "Sign", "Sqrt"])
def test_special_values(op):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.5, -88.5, 100.0, -100.0, 1e-40, -1e-40, 3.4e38,
                  1e-3, -1e-3, 20.0, -20.0], np.float32)
    with np.errstate(all="ignore"):
        check_node(op, {"x": x}, opset=20, rtol=3e-6, atol=1e-37)


@pytest.mark.parametrize("x", [np.linspace(-30, 30, 4001, dtype=np.float32),
                               np.linspace(-1, 1, 4001, dtype=np.float32)])
@pytest.mark.parametrize("op", ["Exp", "Sigmoid", "Tanh", "Erf", "Softplus", "Log", "Elu"])
def test_vector_math_accuracy(op, x):
    """The polynomial float kernels stay within a few ulp of the double-precision reference."""
    if op == "Log":
        x = np.abs(x) + np.float32(1e-3)
    got = run(op, {"x": x}, opset=22).astype(np.float64)
    want = check_node(op, {"x": x.astype(np.float64)}, opset=22, rtol=1e-12)["y0"]
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / ulp) < 4


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu"])
def test_int_unary(op, dtype):
    info = np.iinfo(dtype)
    x = np.concatenate([rand((20,), dtype), np.array([info.min, info.max, 0, -1, 1], dtype)])
    check_node(op, {"x": x}, opset=14 if op == "Relu" else 13)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("op", ["Abs", "Sign"])
def test_uint_unary(op, dtype):
    check_node(op, {"x": rand((20,), dtype)}, opset=13)


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_not(dtype):
    check_node("BitwiseNot", {"x": rand((4, 5), dtype)}, opset=18)


def test_not_isnan_isinf():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -2.0], np.float32)
    check_node("IsNaN", {"x": x}, opset=13)
    check_node("IsNaN", {"x": x.astype(np.float64)}, opset=20)
    for pos, neg in [(1, 1), (1, 0), (0, 1), (0, 0)]:
        check_node("IsInf", {"x": x}, opset=20, detect_positive=pos, detect_negative=neg)
    check_node("Not", {"x": rand((3, 4), np.bool_)}, opset=1)


@pytest.mark.parametrize("op, attrs", [
    ("LeakyRelu", {"alpha": 0.3}), ("Elu", {"alpha": 0.7}), ("Selu", {"alpha": 1.5, "gamma": 2.0}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Celu", {"alpha": 2.0}), ("ThresholdedRelu", {"alpha": 0.5}),
    ("Shrink", {"lambd": 1.5, "bias": 0.5}), ("Shrink", {"lambd": -0.5, "bias": -1.0}),
    ("Gelu", {"approximate": "tanh"}), ("Swish", {"alpha": 0.5}),
])
def test_activation_attrs(op, attrs):
    opset = {"Gelu": 20, "Shrink": 9, "Swish": 24}.get(op, 22)
    check_node(op, {"x": rand((2, 3, 5))}, opset=opset, rtol=2e-6, atol=1e-7, **attrs)


@pytest.mark.parametrize("opset", [1, 6])
def test_selu_defaults_by_opset(opset):
    check_node("Selu", {"x": rand((10,))}, opset=opset, rtol=2e-6)
    check_node("Relu", {"x": rand((10,))}, opset=opset)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.int64])
def test_shrink_int(dtype):
    x = rand((30,), dtype)
    check_node("Shrink", {"x": x}, opset=9, lambd=20.0, bias=3.0,
               expected=[twin("Shrink", x, opset=9, lambd=20.0, bias=3.0)])


# ---- binary, broadcasting -------------------------------------------------------------------------------

SHAPES = [((3, 4), (3, 4)), ((3, 4), ()), ((), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4, 5), (3, 1, 1)),
          ((2, 3, 4, 5), (5,)), ((1, 3, 1, 5), (2, 1, 4, 1)), ((0, 3), (3,)), ((2, 1, 6), (2, 5, 6))]


@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "GreaterOrEqual"])
def test_binary_broadcast(op, sa, sb):
    a, b = rand(sa), rand(sb)
    if op == "Equal":
        b = np.broadcast_to(a, np.broadcast_shapes(sa, sb))[tuple(slice(0, n) for n in b.shape)].copy() \
            if a.size else b
    check_node(op, {"a": a, "b": b}, opset=14 if op not in ("Max", "Min") else 13)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_int_arith_wraps(op, dtype):
    a, b = rand((5, 6), dtype), rand((6,), dtype)
    check_node(op, {"a": a, "b": b}, opset=14)


@pytest.mark.parametrize("dtype", INTS)
def test_int_div_mod(dtype):
    info = np.iinfo(dtype)
    a = np.concatenate([rand((40,), dtype), np.array([info.min, info.min, info.max, 7, 0, 5], dtype)])
    b = np.concatenate([rand((40,), dtype) // 3, np.array([-1 if info.min else 1, 0, 0, 2, 0, 7], dtype)])
    b[b == 0] = 0  # keep the zeros: the kernel defines x / 0 = 0 and x % 0 = 0
    check_node("Div", {"a": a, "b": b}, opset=14, expected=[twin("Div", a, b)])
    for fmod in (0, 1):
        check_node("Mod", {"a": a, "b": b}, opset=13, fmod=fmod, expected=[twin("Mod", a, b, opset=13, fmod=fmod)])
    nz = np.where(b == 0, 3, b).astype(dtype)
    if info.min:
        nz = np.where(a == info.min, 3, nz).astype(dtype)
    check_node("Div", {"a": a, "b": nz}, opset=14)  # defined cases agree with the reference (C truncation)
    check_node("Mod", {"a": a, "b": nz}, opset=13)
    check_node("Mod", {"a": a, "b": nz}, opset=13, fmod=1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod(dtype, fmod):
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, 1.0, np.inf, 2.0], dtype)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, 2.0, 0.0], dtype)
    with np.errstate(all="ignore"):
        check_node("Mod", {"a": a, "b": b}, opset=28 if fmod == 0 else 13, fmod=fmod)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INTS)
def test_bitshift(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = rand((12,), dtype)
    y = np.array([0, 1, 3, bits - 1, bits, bits + 5, 2, 7, 1, 0, bits // 2, 1], dtype)
    if np.dtype(dtype).kind == "i":
        y[-1] = -1
    opset = 28 if np.dtype(dtype).kind == "i" else 11
    check_node("BitShift", {"x": x, "y": y}, opset=opset, direction=direction)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise(op, dtype):
    check_node(op, {"a": rand((3, 4), dtype), "b": rand((4,), dtype)}, opset=18)


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
def test_logical(op):
    check_node(op, {"a": rand((2, 3, 4), np.bool_), "b": rand((3, 1), np.bool_)}, opset=13)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float64])
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare_types(op, dtype):
    a = rand((6, 5), dtype, -3, 3) if np.dtype(dtype).kind == "f" else rand((6, 5), dtype) % 4
    b = (a[0] if np.dtype(dtype).kind == "f" else rand((5,), dtype) % 4).astype(dtype)
    check_node(op, {"a": a, "b": b}, opset=16 if "Or" in op else 13)


def test_compare_nan():
    a = np.array([np.nan, 1.0, np.nan, 2.0], np.float32)
    b = np.array([np.nan, np.nan, 1.0, 2.0], np.float32)
    for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
        check_node(op, {"a": a, "b": b}, opset=16)


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Div", "Pow", "Equal", "Less", "Greater", "And"])
def test_legacy_broadcast_axis(op):
    dt = np.bool_ if op == "And" else np.float32
    a, b = rand((2, 3, 4, 5), dt), rand((3, 4), dt)
    if op == "Pow":
        a = np.abs(a) + 0.5
    got = run(op, {"a": a, "b": b}, opset=6 if op != "And" else 1, broadcast=1, axis=1)
    want = NUMPY[op](None, a, b.reshape(3, 4, 1)) if op != "And" else np.logical_and(a, b.reshape(3, 4, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    check_node(op, {"a": a, "b": rand((5,), dt) if op != "Pow" else np.abs(rand((5,))) + 0.5},
               opset=6 if op != "And" else 1, broadcast=1)


# ---- Pow ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bt, et", [(np.float32, np.float32), (np.float64, np.float64), (np.float32, np.int64),
                                    (np.float32, np.float64), (np.int32, np.int32), (np.int64, np.int64),
                                    (np.int64, np.uint8), (np.int32, np.float32), (np.float64, np.int32)])
def test_pow_types(bt, et):
    x = rand((4, 6), bt, 0.5, 3) if np.dtype(bt).kind == "f" else rand((4, 6), bt) % 7 - (3 if bt != np.uint8 else 0)
    y = rand((6,), et, -2, 3) if np.dtype(et).kind == "f" else (rand((6,), et) % 5).astype(et)
    check_node("Pow", {"x": x.astype(bt), "y": y}, opset=15, rtol=1e-5)


def test_pow_int_edge_cases():
    x = np.array([2, 3, -1, -1, 2, 0, 1, 7, -2], np.int64)
    y = np.array([62, 41, 3, -3, -1, 0, -5, 0, 63], np.int64)
    check_node("Pow", {"x": x, "y": y}, opset=15, expected=[twin("Pow", x, y, opset=15)])


@pytest.mark.parametrize("e", [1.0, 2.0, 3.0, 0.5, -1.0])
def test_pow_const_exponent(e):
    x = rand((3, 5), np.float32, 0.1, 3)
    model_src = onnxc.compile(node_model("Pow", {"x": x, "e": np.array(e, np.float32)}, opset=15,
                                         const_inputs=("e",))).c_source
    assert ("pow" in model_src.split("static int k0")[1].split("}")[0]) == (e not in (1.0, 2.0, 3.0))
    check_node("Pow", {"x": x, "e": np.array(e, np.float32)}, opset=15, const_inputs=("e",))
    check_node("Pow", {"x": rand((3, 5), np.int64) % 9, "e": np.array(2, np.int64)}, opset=15, const_inputs=("e",))


# ---- variadic, PRelu, Where, Clip -----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1), (1,), (2, 3, 4)]])
def test_variadic(op, shapes):
    inputs = {f"x{k}": rand(s) for k, s in enumerate(shapes)}
    check_node(op, inputs, opset=13, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_variadic_int(op, dtype):
    check_node(op, {"a": rand((3, 4), dtype), "b": rand((4,), dtype), "c": rand((3, 1), dtype)}, opset=13)


def test_max_min_nan_propagates():
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    check_node("Max", {"a": a, "b": b}, opset=13)
    check_node("Min", {"a": a, "b": b}, opset=13)


@pytest.mark.parametrize("sx, ss", [((2, 3, 4, 5), (3, 1, 1)), ((2, 3), (1,)), ((4, 5), (4, 5)), ((2, 3, 4), (4,))])
def test_prelu(sx, ss):
    check_node("PRelu", {"x": rand(sx), "s": rand(ss)}, opset=16)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_prelu_int(dtype):
    check_node("PRelu", {"x": rand((3, 4), dtype) % 100, "s": (rand((4,), dtype) % 5).astype(dtype)}, opset=16)


def test_prelu_slope_must_broadcast_to_x():
    with pytest.raises(ShapeError, match="slope"):
        run("PRelu", {"x": rand((2, 3)), "s": rand((4, 3))}, opset=16)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint8, np.float64])
@pytest.mark.parametrize("sc, sx, sy", [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()), ((2, 1, 1), (3, 1), (4,))])
def test_where(dtype, sc, sx, sy):
    check_node("Where", {"c": rand(sc, np.bool_), "x": rand(sx, dtype), "y": rand(sy, dtype)}, opset=16)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64])
@pytest.mark.parametrize("which", ["both", "min", "max", "none", "swapped"])
@pytest.mark.parametrize("const", [True, False])
def test_clip_inputs(dtype, which, const):
    x = rand((4, 5), dtype, -5, 5) if np.dtype(dtype).kind == "f" else rand((4, 5), dtype)
    lo, hi = np.sort(x.reshape(-1)[:2])
    if which == "swapped":
        lo, hi = hi, lo
    inputs = {"x": x, "lo": np.array(lo, dtype) if which in ("both", "min", "swapped") else None,
              "hi": np.array(hi, dtype) if which in ("both", "max", "swapped") else None}
    if which == "max":  # an absent min followed by a present max
        inputs = {"x": x, "lo": None, "hi": inputs["hi"]}
    check_node("Clip", inputs, opset=13, const_inputs=("lo", "hi") if const else ())


@pytest.mark.parametrize("opset, attrs", [(6, {"min": -0.5, "max": 0.5}), (6, {"min": 0.1}), (6, {}),
                                          (1, {"max": 0.2})])
def test_clip_attrs(opset, attrs):
    check_node("Clip", {"x": rand((3, 7))}, opset=opset, **attrs)


def test_clip_min_shape_one():
    check_node("Clip", {"x": rand((3, 4)), "lo": np.array([-0.5], np.float32)}, opset=13)
    with pytest.raises(ShapeError, match="scalar"):
        run("Clip", {"x": rand((3, 4)), "lo": np.zeros(2, np.float32)}, opset=13)
