"""float16 / bfloat16 element types: Cast/CastLike conversions and data-movement kernels.

onnxc stores bfloat16 as its uint16 bit pattern; the reference (onnx.reference) uses ml_dtypes
bfloat16, so feeds and results are converted at the boundary here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ir import DType
from onnxc.passes.shapes.cast import float_to_bfloat16

BF16 = np.dtype(ml_dtypes.bfloat16)
SPECIAL = [0.0, -0.0, 1.5, -2.25, 65504, 65520, 7e4, 1e-8, 3e-5, 6e-8, np.nan, np.inf, -np.inf, 0.1, 1 / 3,
           2049, 2051, -1e-40, 1e30, 3.0e38]


def _to_onnxc(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16) if a.dtype == BF16 else a


def _run(nodes, inputs: dict, out_types: dict, opset: int = 21, inits=()) -> None:
    """Compile and run a graph on onnxc and the reference; compare outputs bit-exactly."""
    g_in = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for k, v in inputs.items()]
    g_out = [helper.make_tensor_value_info(k, t, None) for k, t in out_types.items()]
    model = helper.make_model(helper.make_graph(nodes, "t", g_in, g_out, initializer=list(inits)),
                              opset_imports=[helper.make_opsetid("", opset)])
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, inputs)
    got = onnxc.compile(model).run({k: _to_onnxc(v) for k, v in inputs.items()})
    for name, w in zip(out_types, want):
        w = np.asarray(w)
        g = got[name]
        assert g.shape == w.shape
        if w.dtype == BF16:
            assert g.dtype == BF16  # returned as an ml_dtypes view (onnxc.api)
            w, g = w.view(np.uint16), g.view(np.uint16)
            g_nan, w_nan = (g & 0x7FFF) > 0x7F80, (w & 0x7FFF) > 0x7F80
        else:
            assert g.dtype == w.dtype
            g_nan = w_nan = np.zeros(w.shape, bool)
            if w.dtype.kind == "f":
                g_nan, w_nan = np.isnan(g), np.isnan(w)
        assert np.array_equal(g_nan, w_nan), (g, w)
        assert np.array_equal(g[~g_nan], w[~w_nan]), (g, w)


def _cast(src: np.ndarray, to: int, opset: int = 21) -> None:
    _run([helper.make_node("Cast", ["x"], ["y"], to=to)], {"x": src}, {"y": to}, opset)


def _values(dt) -> np.ndarray:
    x = np.array(SPECIAL, np.float64)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        x = [0, 1, -1, 7, 2049, 2051, 4097, 65519, 70000, int(info.min), int(info.max), 123456789]
        return np.array([min(max(v, int(info.min)), int(info.max)) for v in x], dt)
    with np.errstate(all="ignore"):
        return x.astype(dt)


@pytest.mark.parametrize("src", [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                 np.uint16, np.uint32, np.uint64, np.bool_])
@pytest.mark.parametrize("to", [TP.FLOAT16, TP.BFLOAT16])
def test_cast_to_half(src, to):
    _cast(_values(src), to)


@pytest.mark.parametrize("to", [TP.FLOAT, TP.DOUBLE, TP.INT8, TP.INT32, TP.INT64, TP.UINT8, TP.UINT64, TP.BOOL,
                                TP.FLOAT16, TP.BFLOAT16])
@pytest.mark.parametrize("src", [np.float16, BF16])
def test_cast_from_half(src, to):
    x = _values(np.float32)
    if to not in (TP.FLOAT, TP.DOUBLE, TP.BOOL, TP.FLOAT16, TP.BFLOAT16):
        x = np.array([0, 1.5, -2.7, 100.25, -100.9, 0.1], np.float32)  # in range: ONNX leaves the rest undefined
        if to in (TP.UINT8, TP.UINT64):
            x = np.abs(x)
    with np.errstate(all="ignore"):
        x = x.astype(src)
    _cast(x, to)


def test_cast_all_float16_patterns():
    x = np.arange(2**16, dtype=np.uint16).view(np.float16)
    _cast(x, TP.FLOAT)
    _cast(x, TP.BFLOAT16)


def test_cast_float_to_half_random_bits():
    bits = np.random.default_rng(0).integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    _cast(x, TP.FLOAT16)
    _cast(x, TP.BFLOAT16)


def test_castlike_and_symbolic_dims():
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    like = np.zeros((1,), np.float16)
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    _run([node], {"x": x, "like": like}, {"y": TP.FLOAT16})


def test_cast_folds_constants():
    """Cast of an initializer folds with numpy; the result must equal the kernel's."""
    x = np.array(SPECIAL, np.float32)
    init = onnx.numpy_helper.from_array(x, "c")
    nodes = [helper.make_node("Cast", ["c"], ["h"], to=TP.BFLOAT16), helper.make_node("Cast", ["h"], ["f"], to=TP.FLOAT),
             helper.make_node("Cast", ["c"], ["g"], to=TP.FLOAT16), helper.make_node("Add", ["f", "z"], ["y"])]
    _run(nodes, {"z": np.zeros(1, np.float32)}, {"y": TP.FLOAT, "g": TP.FLOAT16}, inits=[init])


def test_bfloat16_rounding_numpy_twin():
    x = np.array(SPECIAL, np.float32)
    with np.errstate(all="ignore"):
        want = x.astype(BF16).view(np.uint16)
    got = float_to_bfloat16(x)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & 0x7FFF) > 0x7F80)


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_data_movement(dt):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32).astype(dt)
    idx = np.array([2, 0, -1], np.int64)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
             helper.make_node("Gather", ["x", "i"], ["g"], axis=2),
             helper.make_node("Flatten", ["x"], ["f"], axis=1)]
    t = DType.FLOAT16 if dt == np.float16 else DType.BFLOAT16
    _run(nodes, {"x": x, "i": idx}, {"t": t, "c": t, "g": t, "f": t})


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_scatter_reduction(dt):
    x = np.arange(6, dtype=np.float32).reshape(2, 3).astype(dt)
    upd = np.full((2, 1), 0.5, np.float32).astype(dt)
    idx = np.array([[1], [2]], np.int64)
    t = DType.FLOAT16 if dt == np.float16 else DType.BFLOAT16
    _run([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")],
         {"x": x, "i": idx, "u": upd}, {"y": t}, opset=18)


def test_float16_literals():
    shape = np.array([2, 3], np.int64)
    value = onnx.numpy_helper.from_array(np.array([1.5], np.float16))
    x = np.arange(9, dtype=np.float16).reshape(3, 3)
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
             helper.make_node("EyeLike", ["x"], ["e"]), helper.make_node("Trilu", ["x"], ["u"])]
    _run(nodes, {"s": shape, "x": x}, {"c": TP.FLOAT16, "e": TP.FLOAT16, "u": TP.FLOAT16})


def _close(nodes, inputs: dict, out_types: dict, opset: int = 21, rtol: float = 1e-2) -> None:
    """Compare half-precision results with the reference within one or two units in the last place."""
    g_in = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for k, v in inputs.items()]
    g_out = [helper.make_tensor_value_info(k, t, None) for k, t in out_types.items()]
    model = helper.make_model(helper.make_graph(nodes, "t", g_in, g_out),
                              opset_imports=[helper.make_opsetid("", opset)])
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, inputs)
    got = onnxc.compile(model).run({k: _to_onnxc(v) for k, v in inputs.items()})
    for name, w in zip(out_types, want):
        w = np.asarray(w)
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=1e-3)


@pytest.mark.parametrize("dt", [np.float16, BF16])
@pytest.mark.parametrize("op", ["Relu", "Exp", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Erf", "Floor"])
def test_unary(dt, op):
    x = np.random.default_rng(3).uniform(0.1, 3, (3, 4)).astype(np.float32).astype(dt)
    t = TP.FLOAT16 if dt == np.float16 else TP.BFLOAT16
    _close([helper.make_node(op, ["x"], ["y"])], {"x": x}, {"y": t})


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_binary_broadcast_compare_where(dt):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32).astype(dt)
    b = rng.standard_normal((3, 1)).astype(np.float32).astype(dt)
    c = np.array([True, False, True, True])
    t = TP.FLOAT16 if dt == np.float16 else TP.BFLOAT16
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["a", "b"], ["m"]),
             helper.make_node("Div", ["a", "b"], ["d"]), helper.make_node("Less", ["a", "b"], ["l"]),
             helper.make_node("Where", ["c", "a", "b"], ["w"]), helper.make_node("Max", ["a", "b", "a"], ["x"]),
             helper.make_node("Mean", ["a", "b"], ["e"]), helper.make_node("LeakyRelu", ["a"], ["r"], alpha=0.3),
             helper.make_node("Clip", ["a", "lo", "hi"], ["k"]), helper.make_node("Pow", ["a", "two"], ["p"])]
    inputs = {"a": a, "b": b, "c": c, "lo": np.array(-0.5, np.float32).astype(dt),
              "hi": np.array(0.5, np.float32).astype(dt), "two": np.array(2, np.float32).astype(dt)}
    _close(nodes, inputs, {"s": t, "m": t, "d": t, "l": TP.BOOL, "w": t, "x": t, "e": t, "r": t, "k": t, "p": t})


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_matmul_gemm(dt):
    rng = np.random.default_rng(5)
    b2 = rng.standard_normal((4, 5)).astype(np.float32).astype(dt)
    c = rng.standard_normal((5,)).astype(np.float32).astype(dt)
    a2 = rng.standard_normal((3, 4)).astype(np.float32).astype(dt)
    t = TP.FLOAT16 if dt == np.float16 else TP.BFLOAT16
    nodes = [helper.make_node("Gemm", ["a2", "b2", "c"], ["g"], alpha=0.5, beta=2.0)]
    _close(nodes, {"b2": b2, "c": c, "a2": a2}, {"g": t}, rtol=2e-2)
    # half MatMul rounds like the reference (bit-exact checks: tests/ops/test_half_matmul.py)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32).astype(dt)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32).astype(dt)
    _close([helper.make_node("MatMul", ["a", "b"], ["m"])], {"a": a, "b": b}, {"m": t})


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_nn_ops(dt):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32).astype(dt)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32).astype(dt)
    s = rng.standard_normal((5,)).astype(np.float32).astype(dt)
    t = TP.FLOAT16 if dt == np.float16 else TP.BFLOAT16
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], axis=-1),
             helper.make_node("LayerNormalization", ["x", "s"], ["ln"], axis=-1),
             helper.make_node("Conv", ["x", "w"], ["cv"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[2, 2]),
             helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[2, 2]),
             helper.make_node("GlobalAveragePool", ["x"], ["gp"])]
    _close(nodes, {"x": x, "w": w, "s": s}, {k: t for k in ("sm", "ln", "cv", "mp", "ap", "gp")}, rtol=3e-2)


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_reductions(dt):
    x = np.random.default_rng(7).standard_normal((3, 4, 5)).astype(np.float32).astype(dt)
    t = TP.FLOAT16 if dt == np.float16 else TP.BFLOAT16
    axes = np.array([1], np.int64)
    nodes = [helper.make_node("ReduceSum", ["x", "a"], ["rs"], keepdims=0),
             helper.make_node("ReduceMax", ["x", "a"], ["rm"]),
             helper.make_node("ReduceMean", ["x"], ["ra"], keepdims=0),
             helper.make_node("ArgMax", ["x"], ["am"], axis=-1)]
    _close(nodes, {"x": x, "a": axes}, {"rs": t, "rm": t, "ra": t, "am": TP.INT64}, rtol=3e-2)
