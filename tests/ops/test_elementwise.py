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
from onnxc.ir import InputError, ShapeError, UnsupportedOpError
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
    check_node(op, {"x": rand((2, 3, 5))}, opset=opset, rtol=2e-6, atol=1e-6, **attrs)


@pytest.mark.parametrize("opset", [1, 6])
def test_selu_defaults_by_opset(opset):
    """Selu-1 has other default alpha/gamma than Selu-6 (the reference evaluator ignores that)."""
    x = rand((10,))
    alpha, gamma = (1.673200011253357, 1.0506999492645264) if opset == 1 else (1.6732632423543772, 1.0507009873554805)
    want = np.where(x > 0, x, alpha * np.expm1(x.astype(np.float64))) * gamma
    check_node("Selu", {"x": x}, opset=opset, rtol=2e-6, expected=[want.astype(np.float32)])
    check_node("Relu", {"x": x}, opset=opset)


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
    b = rand((5,), dt)
    got = run(op, {"a": a, "b": b}, opset=6 if op != "And" else 1, broadcast=1)
    want = NUMPY[op](None, a, b) if op != "And" else np.logical_and(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---- Pow ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bt, et", [(np.float32, np.float32), (np.float64, np.float64), (np.float32, np.int64),
                                    (np.float32, np.float64), (np.int32, np.int32), (np.int64, np.int64),
                                    (np.int64, np.uint8), (np.int32, np.float32), (np.float64, np.int32)])
def test_pow_types(bt, et):
    x = rand((4, 6), bt, 0.5, 3) if np.dtype(bt).kind == "f" else rand((4, 6), bt) % 7 - 3
    if np.dtype(bt).kind != "f" and np.dtype(et).kind == "f":
        x = np.abs(x) + 1  # a negative or zero base with a float exponent can give NaN/inf: undefined as int
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
    assert ("pow" in model_src.split("ONNXC_KERNEL int k0")[1].split("}")[0]) == (e not in (1.0, 2.0, 3.0))
    check_node("Pow", {"x": x, "e": np.array(e, np.float32)}, opset=15, const_inputs=("e",))
    check_node("Pow", {"x": rand((3, 5), np.int64) % 9, "e": np.array(2, np.int64)}, opset=15, const_inputs=("e",))


# ---- variadic, PRelu, Where, Clip -----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1), (1,), (2, 3, 4)]])
def test_variadic(op, shapes):
    inputs = {f"x{k}": rand(s) for k, s in enumerate(shapes)}
    xs = list(inputs.values())
    fn = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}[op]
    want = xs[0]
    for x in xs[1:]:
        want = fn(want, x)
    if op == "Mean":  # the reference evaluator cannot broadcast Mean
        want = want / np.float32(len(xs))
    check_node(op, inputs, opset=13, rtol=1e-6, expected=[want.astype(np.float32)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_variadic_int(op, dtype):
    check_node(op, {"a": rand((3, 4), dtype), "b": rand((4,), dtype), "c": rand((3, 1), dtype)}, opset=13)


def test_max_min_nan_propagates():
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    check_node("Max", {"a": a, "b": b}, opset=13)
    check_node("Min", {"a": a, "b": b}, opset=13)


@pytest.mark.parametrize("sx, ss", [((2, 3, 4, 5), (3, 1, 1)), ((2, 3), (1,)), ((4, 5), (4, 5)), ((2, 3, 4), (4,)),
                                     ((2, 3, 4), (3,)), ((2, 5, 4, 4), (5,))])  # [C] slopes: old PyTorch exports
def test_prelu(sx, ss):
    check_node("PRelu", {"x": rand(sx), "s": rand(ss)}, opset=16)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_prelu_int(dtype):
    check_node("PRelu", {"x": rand((3, 4), dtype) % 100, "s": (rand((4,), dtype) % 5).astype(dtype)}, opset=16)


def test_prelu_slope_must_broadcast_to_x():
    with pytest.raises(ShapeError, match="PRelu.*broadcast"):
        run("PRelu", {"x": rand((2, 3)), "s": rand((4, 3))}, opset=16)
    with pytest.raises(ShapeError, match="slope"):
        run("PRelu", {"x": rand((1, 3)), "s": rand((4, 3))}, opset=16)


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
    x = rand((3, 7))
    want = np.clip(x, attrs.get("min", -np.inf), attrs.get("max", np.inf))  # no reference for Clip-1
    check_node("Clip", {"x": x}, opset=opset, expected=[want], **attrs)


def test_clip_min_shape_one():
    check_node("Clip", {"x": rand((3, 4)), "lo": np.array([-0.5], np.float32)}, opset=13)
    with pytest.raises(ShapeError, match="scalar"):
        run("Clip", {"x": rand((3, 4)), "lo": np.zeros(2, np.float32)}, opset=13)


# ---- symbolic dims, run-time broadcasting, empty tensors ----------------------------------------------------

def test_symbolic_dims():
    check_node("Mul", {"a": rand((5, 6)), "b": rand((6,))}, input_shapes={"a": ["N", "C"], "b": ["C"]})
    check_node("Add", {"a": rand((5, 6)), "b": rand((1, 6))}, input_shapes={"a": ["N", 6]})
    check_node("Sigmoid", {"x": rand((0, 4))}, input_shapes={"x": ["N", 4]})
    check_node("Where", {"c": rand((5, 1), np.bool_), "x": rand((5, 3)), "y": rand((3,))},
               input_shapes={"c": ["N", 1], "x": ["N", "K"], "y": ["K"]}, opset=16)


def test_symbolic_dim_broadcasts_at_run_time():
    """A symbolic input dim other than the output's may be 1 at run time; other mismatches are errors."""
    model = node_model("Add", {"a": rand((4, 3)), "b": rand((4, 3))}, input_shapes={"a": ["N", 3], "b": ["M", 3]})
    cm = onnxc.compile(model)
    for n, m in [(4, 4), (4, 1), (1, 1), (0, 1), (7, 7)]:
        a, b = rand((n, 3)), rand((m, 3))
        np.testing.assert_allclose(cm.run({"a": a, "b": b})["y0"], a + b)
    with pytest.raises(InputError, match="cannot broadcast"):
        cm.run({"a": rand((4, 3)), "b": rand((2, 3))})
    model = node_model("Add", {"a": rand((4, 3)), "b": rand((1, 3))}, input_shapes={"a": [4, 3], "b": ["M", 3]})
    cm = onnxc.compile(model)
    np.testing.assert_allclose(cm.run({"a": rand((4, 3)) * 0, "b": np.ones((1, 3), np.float32)})["y0"], 1)
    with pytest.raises(InputError, match="cannot broadcast"):
        cm.run({"a": rand((4, 3)), "b": rand((2, 3))})


def random_broadcast_case(seed: int):
    """Three shapes that broadcast together, and for each a declaration with some dims symbolic."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(0, 5))
    out = [int(rng.integers(1, 5)) for _ in range(rank)]
    shapes, decls = [], []
    for k in range(3):
        r = int(rng.integers(0, rank + 1))
        shape = [d if rng.random() < 0.6 else 1 for d in out[rank - r:]]
        decl = [f"d{rank - r + i}" if rng.random() < 0.4 and d > 1 else d for i, d in enumerate(shape)]
        if k == 1 and rng.random() < 0.3:  # a symbolic dim that is 1 at run time against a larger output
            decl = [f"b{i}" if d == 1 else x for i, (d, x) in enumerate(zip(shape, decl))]
        shapes.append(tuple(shape))
        decls.append(decl)
    return shapes, decls


@pytest.mark.parametrize("seed", range(24))
def test_random_broadcasts(seed):
    (sc, sx, sy), (dc, dx, dy) = random_broadcast_case(seed)
    decls = {"c": dc, "x": dx, "y": dy}
    inputs = {"c": rand(sc, np.bool_), "x": rand(sx), "y": rand(sy)}
    check_node("Where", inputs, opset=16, input_shapes=decls)
    inputs["c"] = rand(sc)
    want = np.maximum(np.maximum(inputs["c"], inputs["x"]), inputs["y"])
    check_node("Max", inputs, opset=13, input_shapes=decls, expected=[want])


# ---- loop nests: the intended code path ----------------------------------------------------------------------

def kernel_source(model, threads: int = 1) -> str:
    src = onnxc.compile(model, threads=threads).c_source
    return src[src.index("ONNXC_KERNEL int k0"):].split("\n}\n")[0]


@pytest.mark.parametrize("sa, sb, loops", [((64, 64), (64, 64), 1), ((64, 64), (), 1), ((2, 3, 4, 5), (3, 1, 1), 3),
                                           ((512, 1024), (1024,), 2), ((8, 1, 16), (8, 1, 16), 1),
                                           ((2, 3, 4, 5), (1, 3, 4, 5), 2), ((4, 1, 5), (1, 6, 1), 3)])
def test_loops_coalesce(sa, sb, loops):
    src = kernel_source(node_model("Add", {"a": rand(sa), "b": rand(sb)}))
    assert src.count("for (") == loops, src


def test_loops_parallel_only_when_large():
    """Large loops of a model built for threads go to the runtime's pool; small ones and one-thread builds
    keep the plain loop; a symbolic size is decided at run time (onnxc_chunks)."""
    big = node_model("Add", {"a": rand((256, 1024)), "b": rand((1024,))})
    assert "onnxc_parallel(" in kernel_source(big, threads=2)
    assert "onnxc_parallel(" not in kernel_source(big, threads=1)
    assert "onnxc_parallel(" not in kernel_source(node_model("Add", {"a": rand((8, 8)), "b": rand((8,))}), 2)
    sym = node_model("Relu", {"x": rand((8, 8))}, input_shapes={"x": ["N", 8]})
    assert "onnxc_chunks(rt->threads" in kernel_source(sym, threads=2)
    assert "omp parallel" not in kernel_source(big, threads=2)


@pytest.mark.parametrize("sa, sb, shapes", [
    ((300, 1000), (1000,), None),
    ((300001,), (300001,), {"a": ["N"], "b": ["N"]}),                          # one flat loop in blocks
    ((3, 7, 97, 211), (7, 1, 211), {"a": ["A", "B", "C", "D"], "b": ["B", "E", "D"]}),  # strides at run time
    ((2, 3, 300, 500), (1, 3, 1, 1), None)])
def test_threads_give_same_result(sa, sb, shapes):
    """Pool chunks of flat and nested loops, static and symbolic, cover every element exactly once."""
    a, b = rand(sa), rand(sb)
    m = node_model("Mul", {"a": a, "b": b}, input_shapes=shapes) if shapes else node_model("Mul", {"a": a, "b": b})
    got = onnxc.compile(m, threads=2).run({"a": a, "b": b})["y0"]
    np.testing.assert_array_equal(got, a * b)


# ---- constant folding agrees with the kernels --------------------------------------------------------------

FOLD_CASES = [
    ("Div", {"a": np.array([7, -7, -128, 5, 0], np.int8), "b": np.array([2, 2, -1, 0, 0], np.int8)}, {}),
    ("Mod", {"a": np.array([7, -7, 7, -7, 3], np.int32), "b": np.array([3, 3, -3, 0, -1], np.int32)}, {}),
    ("Mod", {"a": np.array([7, -7, 7, -7], np.int64), "b": np.array([3, 3, -3, 0], np.int64)}, {"fmod": 1}),
    ("Add", {"a": np.array([127, -128], np.int8), "b": np.array([1, -1], np.int8)}, {}),
    ("Mul", {"a": np.array([2**62, 3], np.int64), "b": np.array([4, -5], np.int64)}, {}),
    ("Abs", {"x": np.array([-128, -3, 4], np.int8)}, {}),
    ("Neg", {"x": np.array([-2**31, 5], np.int32)}, {}),
    ("Pow", {"x": np.array([3, -2, 2, 5], np.int64), "y": np.array([41, 3, -1, 0], np.int64)}, {}),
    ("BitShift", {"x": np.array([1, 255, 7], np.uint8), "y": np.array([7, 8, 1], np.uint8)}, {"direction": "LEFT"}),
    ("Round", {"x": np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)}, {}),
    ("Max", {"a": np.array([np.nan, 1.0], np.float32), "b": np.array([1.0, np.nan], np.float32)}, {}),
    ("Where", {"c": np.array([True, False]), "x": np.array([1, 2], np.int64), "y": np.array([3, 4], np.int64)}, {}),
    ("Clip", {"x": np.array([-5, 0, 5], np.int64), "lo": np.array(-1, np.int64), "hi": np.array(2, np.int64)}, {}),
    ("Shrink", {"x": np.array([-5, 0, 5], np.int16)}, {"lambd": 1.5, "bias": 0.5}),
    ("Equal", {"a": np.array([1, 2], np.int64), "b": np.array([1, 3], np.int64)}, {}),
    ("Not", {"x": np.array([True, False])}, {}),
    ("Sign", {"x": np.array([-3.0, 0.0, 2.0], np.float32)}, {}),
    ("Mean", {"a": np.array([1.0, 2.0], np.float32), "b": np.array([4.0], np.float32)}, {}),
]


@pytest.mark.parametrize("op, inputs, attrs", FOLD_CASES, ids=[c[0] for c in FOLD_CASES])
def test_fold_matches_kernel(op, inputs, attrs):
    opset = 28 if op in ("Mod", "BitShift") else 20
    kernel = run(op, inputs, opset=opset, **attrs)
    model = node_model(op, inputs, opset=opset, const_inputs=tuple(inputs), **attrs)
    cm = onnxc.compile(model)
    assert not list(cm.ir.graph.nodes), "the node should have been folded"
    folded = cm.run({})["y0"]
    assert folded.dtype == kernel.dtype
    np.testing.assert_array_equal(folded, kernel)


# ---- invalid models and unsupported types ---------------------------------------------------------------------

def test_errors_name_the_node():
    with pytest.raises(ShapeError, match="Add.*element type"):
        run("Add", {"a": rand((2,)), "b": rand((2,), np.int64)})
    with pytest.raises(ShapeError, match="broadcast"):
        run("Mul", {"a": rand((2, 3)), "b": rand((4,))})
    with pytest.raises((ShapeError, UnsupportedOpError), match="approximate"):
        run("Gelu", {"x": rand((2,))}, opset=20, approximate="fast")
    with pytest.raises((ShapeError, UnsupportedOpError), match="direction"):
        run("BitShift", {"x": rand((2,), np.uint8), "y": rand((2,), np.uint8)}, opset=11, direction="UP")
    with pytest.raises(ShapeError, match="condition must be bool"):
        run("Where", {"c": rand((2,)), "x": rand((2,)), "y": rand((2,))}, opset=16)


@pytest.mark.parametrize("op, inputs", [("Relu", {"x": rand((3,), np.uint8)}),
                                        ("Add", {"a": rand((3,)) > 0, "b": rand((3,)) > 0}),
                                        ("Exp", {"x": rand((3,), np.int32)})])
def test_unsupported_types_are_reported(op, inputs):
    with pytest.raises(UnsupportedOpError, match=r"element type (u8|bool|i32) is not supported \(supported: "):
        run(op, inputs, opset=13)


# ---- symbolic values of shape tensors -------------------------------------------------------------------------

def sym_graph(op: str, ins: list, version: int = 17, **attrs):
    """Run shape inference on one node whose inputs are (name, array) constants or (name, dims) shape values."""
    from onnxc.ir import Attr, DType, Graph, Node, TensorType, Value
    from onnxc.passes.infer_shapes import infer_graph

    g = Graph()
    vals = []
    for x in ins:
        if isinstance(x, np.ndarray):
            vals.append(g.constant(x))
        else:
            v = g.add_input(Value(g.fresh_name("s"), TensorType(DType.INT64, (len(x),))))
            v.sym_value = tuple(x)
            vals.append(v)
    out = Value("out")
    kinds = {int: "INT", str: "STRING", float: "FLOAT"}
    g.append(Node(op, vals, [out], {k: Attr(k, kinds[type(a)], a) for k, a in attrs.items()}, version=version))
    infer_graph(g)
    return out.sym_value


def test_sym_value_arithmetic():
    from onnxc.ir import dmax, floordiv, sym

    n, c = sym("N"), sym("C")
    assert sym_graph("Mul", [(n, c), np.array([2, 3], np.int64)]) == (2 * n, 3 * c)
    assert sym_graph("Add", [(n, 4), np.array(1, np.int64)]) == (n + 1, 5)
    assert sym_graph("Sub", [(n, c), (n, 1)]) == (0, c - 1)
    assert sym_graph("Div", [(2 * n, c), np.array([2, 4], np.int64)]) == (n, floordiv(c, 4))
    assert sym_graph("Div", [(n, 7), np.array([-2, -2], np.int64)]) is None  # trunc != floor: not tracked
    assert sym_graph("Div", [(n,), (c,)]) == (floordiv(n, c),)
    assert sym_graph("Max", [(n, c), np.array([1, 1], np.int64)]) == (dmax(n, 1), dmax(c, 1))
    assert sym_graph("Neg", [(n, 3)]) == (-n, -3)
    assert sym_graph("Mod", [(n, -7), np.array([4, 3], np.int64)]) == (n % 4, 2)
    assert sym_graph("Mod", [(n, -7), np.array([4, 3], np.int64)], fmod=1) == (n % 4, -1)
    assert sym_graph("Mod", [(n - 5,), np.array([3], np.int64)], fmod=1) is None  # may be negative: C's sign
    assert sym_graph("Cast", [(n, c)], to=6) == (n, c)
    assert sym_graph("Cast", [(n, c)], to=1) == (n, c)  # kept for float Range (passes/shapes/shape_ops.py)
    assert sym_graph("Cast", [(n, c)], to=10) is None  # float16: not exact beyond 2048


def test_shape_arithmetic_gives_symbolic_reshape():
    """Shape -> Mul/Div -> Reshape: the output shape is static in the dimension variables."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Mul", ["s", "k"], ["s2"]),
             helper.make_node("Div", ["s2", "d"], ["s3"]),
             helper.make_node("Reshape", ["x", "s3"], ["y"])]
    inits = [helper.make_tensor("k", TensorProto.INT64, [3], [2, 1, 1]),
             helper.make_tensor("d", TensorProto.INT64, [3], [1, 2, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    cm = onnxc.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [str(d) for d in cm.outputs[0].shape] == ["2*N", "2", "6"]
    x = rand((3, 4, 6))
    np.testing.assert_array_equal(cm.run({"x": x})["y"], x.reshape(6, 2, 6))
