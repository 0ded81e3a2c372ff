"""Reduction family: Reduce*, ArgMax/ArgMin, CumSum/CumProd, TopK, LpNormalization, MVN.

Each case compiles a one-node model and compares with onnx.reference (or with numpy where the
reference is known to differ from the spec). Covers attribute vs input axes across opsets, keepdims,
noop_with_empty_axes, negative axes, empty reductions, integer/bool types, symbolic dims (one compiled
model run at several sizes), multi-threaded nests, constant folding and error messages.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ir import RuntimeFailure, ShapeError, UnsupportedOpError
from onnxc.passes.shapes.reduce import np_reduce

from .util import check_node, node_model

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
RNG = np.random.default_rng(0)


def rand(shape, dtype=np.float32, lo=-3, hi=4) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "u":
        lo = 0
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def positive(shape, dtype=np.float32) -> np.ndarray:
    return (RNG.random(shape) + 0.5).astype(dtype)


def axes_first(op: str) -> int:
    """First opset where ``op`` takes axes as an input."""
    return 13 if op == "ReduceSum" else 18


def reduce_case(op: str, x: np.ndarray, axes, opset: int, cast_ref: bool = False, **attrs):
    """check_node for a Reduce* op with ``axes`` as attribute or constant input depending on the opset.

    ``cast_ref`` casts the reference result to the input type (the reference returns int64 for some
    integer reductions where the spec keeps the input type)."""
    if opset >= axes_first(op):
        inputs = {"x": x, "axes": None if axes is None else np.array(axes, np.int64)}
        const = ("axes",)
    else:
        inputs, const = {"x": x}, ()
        if axes is not None:
            attrs["axes"] = list(axes)
    if cast_ref:
        model = node_model(op, inputs, opset=opset, const_inputs=const, **attrs)
        attrs["expected"] = [np.asarray(w).astype(x.dtype) for w in ReferenceEvaluator(model).run(None, {"x": x})]
    return check_node(op, inputs, opset=opset, const_inputs=const, rtol=1e-4, atol=1e-5, **attrs)


def data_for(op: str, shape, dtype=np.float32) -> np.ndarray:
    return positive(shape, dtype) if op == "ReduceLogSum" else rand(shape, dtype)


def run_many(model: onnx.ModelProto, feeds_list: list[dict], rtol=1e-5, atol=1e-6):
    """Compile once, run at several input sizes, compare every run with the reference."""
    cm = onnxc.compile(model)
    ref = ReferenceEvaluator(model)
    for feeds in feeds_list:
        got = cm.run(feeds)
        for i, w in enumerate(ref.run(None, feeds)):
            g = got[f"y{i}"]
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return cm


# -- Reduce*: axes forms, keepdims, opsets ----------------------------------------------------------

@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("form", ["attr", "input", "all"])
def test_reduce_axes_forms(op, form):
    x = data_for(op, (3, 4, 5, 2))
    if form == "attr":
        reduce_case(op, x, [0, 2], opset=13 if op != "ReduceSum" else 11, keepdims=1)
    elif form == "input":
        reduce_case(op, x, [-1, 1], opset=18, keepdims=0)
    else:
        reduce_case(op, x, None, opset=18, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_with_empty_axes(op):
    x = data_for(op, (3, 4))
    reduce_case(op, x, None, opset=18, noop_with_empty_axes=1)
    reduce_case(op, x, [], opset=18, noop_with_empty_axes=1, keepdims=0)


@pytest.mark.parametrize("axes", [(0,), (1,), (3,), (0, 2), (1, 3), (0, 1, 3), (0, 3), (1, 2), (0, 1, 2, 3)])
def test_reduce_block_patterns(axes):
    """Every kept/reduced block layout the loop nest meets, incl. 1-sized axes dropped from the view."""
    x = rand((3, 1, 4, 5))
    reduce_case("ReduceSum", x, list(axes), opset=13)
    reduce_case("ReduceMax", rand((2, 3, 4, 5)), list(axes), opset=18, keepdims=0)


INT_TYPES = [np.int32, np.int64, np.uint32, np.uint64]


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in REDUCE for dt in [np.float64, *INT_TYPES]
                                      if dt == np.float64 or op not in ("ReduceLogSum", "ReduceLogSumExp")])
def test_reduce_dtypes(op, dtype):
    x = data_for(op, (4, 3, 5), dtype)
    reduce_case(op, x, [1], opset=18, cast_ref=True)


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
def test_reduce_log_ints_before_opset28(op):
    """Integer inputs (allowed before opset 28; the reference rejects them): computed in double."""
    x = rand((4, 3), np.int32, 1, 9)
    reduce_case(op, x, [1], opset=18, expected=[np_reduce(op, x, (1,), True)])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_reduce_minmax_small_ints(op, dtype):
    reduce_case(op, rand((4, 6), dtype, -100, 100), [1], opset=12)
    reduce_case(op, rand((4, 6), dtype, -100, 100), [0], opset=18, keepdims=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_minmax_bool(op):
    x = RNG.random((3, 5)) > 0.5
    x[0] = False
    x[1] = True
    reduce_case(op, x, [1], opset=20)
    reduce_case(op, x, None, opset=20, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_empty_set(op):
    """Reducing a zero-sized axis gives the identity (NaN for Mean)."""
    x = np.zeros((2, 0, 3), np.float32)
    want = np_reduce(op, x, (1,), True)
    reduce_case(op, x, [1], opset=18, expected=[want])


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in ("ReduceMax", "ReduceMin") for dt in (np.int32, np.uint8, np.bool_)]
                         + [("ReduceSum", np.int32), ("ReduceProd", np.int64)])
def test_reduce_empty_set_ints(op, dtype):
    x = np.zeros((0, 3), dtype)
    want = np_reduce(op, x, (0,), False)
    reduce_case(op, x, [0], opset=20, keepdims=0, expected=[want])


def test_reduce_empty_non_reduced_axis():
    reduce_case("ReduceSum", np.zeros((0, 3), np.float32), [1], opset=13)


def test_reduce_scalar_input():
    for op in ("ReduceSum", "ReduceMax", "ReduceL2"):
        reduce_case(op, np.array(2.5, np.float32), None, opset=18)


def test_reduce_int_wraps_in_element_width():
    x = np.full((4, 3), 2**30, np.int32)
    got = reduce_case("ReduceSum", x, [0], opset=13)
    assert got["y0"][0, 0] == np.int32(0)


def test_reduce_mean_int_truncates():
    x = np.array([[-3, -4], [5, 8], [1, 0]], np.int32)
    reduce_case("ReduceMean", x, [1], opset=18)


def test_reduce_logsumexp_extremes():
    x = np.array([[1000.0, 1000.0], [-np.inf, 0.0], [-1000.0, -1001.0]], np.float32)
    reduce_case("ReduceLogSumExp", x, [1], opset=18)


def test_reduce_long_sum_precision():
    x = (RNG.random((3, 200_000)) + 0.5).astype(np.float32)
    reduce_case("ReduceMean", x, [1], opset=18)
    reduce_case("ReduceSum", x.T.copy(), [0], opset=13)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceLogSumExp", "ReduceMean"])
def test_reduce_threaded(op):
    """Large enough to take the OpenMP path of the outer loop."""
    x = rand((256, 64, 8))
    reduce_case(op, x, [1], opset=18)
    reduce_case(op, x, [2], opset=18)


@pytest.mark.parametrize("axes", [[1], [0, 2], [2], [0]])
def test_reduce_symbolic_dims(axes):
    x = rand((2, 3, 4))
    model = node_model("ReduceSum", {"x": x, "axes": np.array(axes, np.int64)}, opset=13,
                       const_inputs=("axes",), input_shapes={"x": ["N", 3, "W"]}, keepdims=0)
    run_many(model, [{"x": rand((n, 3, w))} for n, w in ((2, 4), (1, 1), (5, 7), (0, 3), (3, 0))], 1e-5, 1e-5)
    m2 = node_model("ReduceLogSumExp", {"x": x, "axes": np.array(axes, np.int64)}, opset=18,
                    const_inputs=("axes",), input_shapes={"x": ["N", 3, "W"]})
    run_many(m2, [{"x": rand((n, 3, w))} for n, w in ((2, 4), (1, 1), (5, 7))], 1e-5, 1e-5)


# -- ArgMax / ArgMin --------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (2, 0, 1), (-3, 1, 1)])
def test_arg(op, axis, keepdims, last):
    x = rand((4, 5, 6), np.float32).round(0)  # rounding makes ties
    attrs = {"axis": axis, "keepdims": keepdims}
    if last:
        attrs["select_last_index"] = 1
    check_node(op, {"x": x}, opset=13, **attrs)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset,dtype", [(1, np.float64), (11, np.int8)] + [
    (12, dt) for dt in (np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int64, np.uint64)])
def test_arg_dtypes(op, opset, dtype):
    check_node(op, {"x": rand((3, 70), dtype, -50, 50)}, opset=opset, axis=1)
    check_node(op, {"x": rand((70, 3), dtype, -50, 50)}, opset=opset, axis=0, keepdims=0)


def test_arg_symbolic():
    model = node_model("ArgMax", {"x": rand((2, 3))}, opset=13, input_shapes={"x": ["N", "M"]}, axis=0,
                       select_last_index=1)
    run_many(model, [{"x": rand((n, m)).round()} for n, m in ((2, 3), (1, 1), (7, 100), (5, 1))])


# -- CumSum / CumProd -------------------------------------------------------------------------------

@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum(exclusive, reverse, axis):
    x = rand((3, 4, 5))
    check_node("CumSum", {"x": x, "axis": np.array(axis, np.int64)}, opset=14, const_inputs=("axis",),
               exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_cumsum_dtypes(dtype):
    check_node("CumSum", {"x": rand((3, 6), dtype), "axis": np.array(1, np.int32)}, opset=11,
               const_inputs=("axis",), reverse=1)


@pytest.mark.parametrize("axis", [0, 1, -2, 2])
def test_cumsum_runtime_axis(axis):
    x = rand((3, 4, 2))
    check_node("CumSum", {"x": x, "axis": np.array(axis, np.int32)}, opset=14, exclusive=1)


def test_cumsum_runtime_axis_out_of_range():
    x = rand((3, 4))
    model = node_model("CumSum", {"x": x, "axis": np.array(0, np.int64)}, opset=14)
    cm = onnxc.compile(model)
    with pytest.raises(RuntimeFailure, match="axis 5 is out of range"):
        cm.run({"x": x, "axis": np.array(5, np.int64)})


def test_cumsum_symbolic():
    model = node_model("CumSum", {"x": rand((2, 3)), "axis": np.array(0, np.int64)}, opset=14,
                       const_inputs=("axis",), input_shapes={"x": ["N", "M"]}, reverse=1)
    run_many(model, [{"x": rand((n, m))} for n, m in ((2, 3), (1, 1), (0, 4), (9, 1), (4, 33))])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 1), (1, 0)])
def test_cumprod(exclusive, reverse):
    if "CumProd" not in {s.name for s in onnx.defs.get_all_schemas()}:
        pytest.skip("onnx has no CumProd")
    x = positive((3, 5))
    check_node("CumProd", {"x": x, "axis": np.array(1, np.int64)}, opset=26, const_inputs=("axis",),
               exclusive=exclusive, reverse=reverse)
    check_node("CumProd", {"x": rand((4, 3), np.int64), "axis": np.array(0, np.int64)}, opset=26,
               const_inputs=("axis",), exclusive=exclusive, reverse=reverse)


# -- TopK -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_topk(largest, axis, k):
    x = rand((40, 50, 41), np.float32).round(1)  # ties
    check_node("TopK", {"x": x, "k": np.array([k], np.int64)}, n_outputs=2, opset=11, const_inputs=("k",),
               axis=axis, largest=largest)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8, np.int8, np.uint64])
def test_topk_dtypes_and_ties(dtype):
    x = rand((5, 300), dtype, 0, 6)
    for k in (2, 150, 300):
        for largest in (0, 1):
            check_node("TopK", {"x": x, "k": np.array([k], np.int64)}, n_outputs=2, opset=11,
                       const_inputs=("k",), largest=largest, sorted=1)


def test_topk_opset1_and_10():
    x = rand((4, 9))
    check_node("TopK", {"x": x}, n_outputs=2, opset=1, k=3)
    check_node("TopK", {"x": x, "k": np.array([4], np.int64)}, n_outputs=2, opset=10, const_inputs=("k",),
               axis=0)


def test_topk_k_zero():
    x = rand((4, 9))
    check_node("TopK", {"x": x, "k": np.array([0], np.int64)}, n_outputs=2, opset=11, const_inputs=("k",))


def test_topk_symbolic_input_and_runtime_k_check():
    model = node_model("TopK", {"x": rand((2, 8)), "k": np.array([3], np.int64)}, n_outputs=2, opset=11,
                       const_inputs=("k",), input_shapes={"x": ["N", "M"]})
    cm = run_many(model, [{"x": rand((n, m)).round(1)} for n, m in ((2, 8), (1, 3), (6, 100))])
    with pytest.raises(RuntimeFailure, match="k = 3 exceeds the axis size 2"):
        cm.run({"x": rand((3, 2))})


def test_topk_symbolic_k():
    """k computed from the input's shape (Shape -> Gather) is a symbolic dim of the outputs."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "M"])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["k"], axis=0),
             helper.make_node("TopK", ["x", "k"], ["y0", "y1"], axis=0)]
    one = onnx.numpy_helper.from_array(np.array([0], np.int64), "one")
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in ("y0", "y1")]
    model = helper.make_model(helper.make_graph(nodes, "t", [x], outs, initializer=[one]),
                              opset_imports=[helper.make_opsetid("", 13)])
    try:
        cm = onnxc.compile(model)
    except UnsupportedOpError as e:
        if "TopK" in str(e):
            raise
        pytest.skip(f"shape ops not available yet: {e}")
    assert cm.outputs[0].shape == ("N", "M")
    run_many(model, [{"x": rand((n, 3))} for n in (1, 4, 9)])


# -- LpNormalization / MeanVarianceNormalization ----------------------------------------------------

def lp_expected(x: np.ndarray, axis: int, p: int) -> np.ndarray:
    n = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    with np.errstate(all="ignore"):
        return np.where(n == 0, 0, x / n).astype(x.dtype)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lpnormalization(p, axis, dtype):
    x = rand((3, 4, 70), dtype)
    x[1] = 0  # zero norms along axis 1 and 2 give 0
    check_node("LpNormalization", {"x": x}, opset=22, axis=axis, p=p, expected=[lp_expected(x, axis, p)])


def test_lpnormalization_symbolic():
    x = rand((3, 5))
    model = node_model("LpNormalization", {"x": x}, opset=1, input_shapes={"x": ["N", "M"]}, axis=0)
    cm = onnxc.compile(model)
    for n, m in ((3, 5), (1, 1), (100, 2)):
        a = rand((n, m))
        np.testing.assert_allclose(cm.run({"x": a})["y0"], lp_expected(a, 0, 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes", [None, [1], [0, 1], [-1], [0, 2, 3]])
def test_mvn(axes):
    x = rand((2, 3, 4, 5))
    attrs = {} if axes is None else {"axes": axes}
    check_node("MeanVarianceNormalization", {"x": x}, opset=13, rtol=1e-4, atol=1e-5, **attrs)


def test_mvn_symbolic_double():
    """float64 (the reference's function body only runs float32: compare with numpy)."""
    model = node_model("MeanVarianceNormalization", {"x": rand((2, 3, 4, 5), np.float64)}, opset=9,
                       input_shapes={"x": ["N", 3, "H", "W"]})
    cm = onnxc.compile(model)
    for n, h, w in ((2, 4, 5), (1, 7, 1)):
        x = rand((n, 3, h, w), np.float64)
        m = x.mean(axis=(0, 2, 3), keepdims=True)
        want = (x - m) / (np.sqrt(((x - m) ** 2).mean(axis=(0, 2, 3), keepdims=True)) + 1e-9)
        np.testing.assert_allclose(cm.run({"x": x})["y0"], want, rtol=1e-9, atol=1e-9)


# -- constant folding, errors -----------------------------------------------------------------------

@pytest.mark.parametrize("op,inputs,attrs", [
    ("ReduceSum", {"x": rand((3, 4)), "axes": np.array([1], np.int64)}, {}),
    ("ReduceLogSumExp", {"x": rand((3, 4)), "axes": np.array([0], np.int64)}, {"keepdims": 0}),
    ("ReduceMin", {"x": rand((3, 4), np.int32)}, {}),
    ("ArgMin", {"x": rand((3, 4)).round()}, {"axis": 1, "select_last_index": 1}),
    ("CumSum", {"x": rand((3, 4)), "axes": np.array(1, np.int64)}, {"exclusive": 1, "reverse": 1}),
    ("LpNormalization", {"x": rand((3, 4))}, {"axis": 0}),
    ("MeanVarianceNormalization", {"x": rand((2, 3, 4, 5))}, {}),
])
def test_constant_inputs_fold(op, inputs, attrs):
    """All-constant nodes are folded by the numpy rules (no kernel step) with the kernels' results."""
    model = node_model(op, inputs, opset=18, const_inputs=tuple(inputs), **attrs)
    want = ReferenceEvaluator(model).run(None, {})
    cm = onnxc.compile(model)
    assert not any(op in st.node for st in cm.program.steps), [st.node for st in cm.program.steps]
    np.testing.assert_allclose(cm.run({})["y0"], want[0], rtol=1e-5, atol=1e-6)


def test_topk_fold():
    inputs = {"x": rand((4, 30)).round(), "k": np.array([7], np.int64)}
    model = node_model("TopK", inputs, n_outputs=2, opset=11, const_inputs=("x", "k"), largest=0)
    want = ReferenceEvaluator(model).run(None, {})
    got = onnxc.compile(model).run({})
    np.testing.assert_array_equal(got["y0"], want[0])
    np.testing.assert_array_equal(got["y1"], want[1])


def test_errors_name_the_node():
    x = rand((3, 4))
    skip_ref = {"expected": [np.zeros(1)]}  # the reference itself rejects these models
    with pytest.raises(ShapeError, match="ReduceSum.*same axis twice"):
        reduce_case("ReduceSum", x, [1, -1], opset=13, **skip_ref)
    with pytest.raises(ShapeError, match="ReduceMax.*out of range"):
        reduce_case("ReduceMax", x, [2], opset=11, **skip_ref)
    with pytest.raises(ShapeError, match="TopK.*exceeds"):
        check_node("TopK", {"x": x, "k": np.array([5], np.int64)}, n_outputs=2, const_inputs=("k",), **skip_ref)
    with pytest.raises(ShapeError, match="CumSum.*axis 2 is out of range"):
        check_node("CumSum", {"x": x, "a": np.array(2, np.int64)}, const_inputs=("a",), **skip_ref)
    with pytest.raises(UnsupportedOpError, match="axes .* output rank is data-dependent"):
        check_node("ReduceMean", {"x": x, "axes": np.array([1], np.int64)}, opset=18, keepdims=0,
                   input_shapes={"axes": ["k"]}, **skip_ref)


def test_float8_is_reported_unsupported():
    import ml_dtypes

    with pytest.raises(UnsupportedOpError, match="element type f8e4m3fn is not supported"):
        reduce_case("ReduceSum", rand((3, 4)).astype(ml_dtypes.float8_e4m3fn), [1], opset=13)
