"""Shape, Size, Constant, ConstantOfShape, Range and symbolic shape values (Shape -> Gather -> Concat ->
Reshape chains resolved at compile time), against onnx.reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import UnsupportedOpError
from onnxc.passes.pipeline import optimize

from .util import check_node

rng = np.random.default_rng(0)


def _i64(*v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def _model(nodes, inputs, outputs, inits=(), opset=18) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [onnx.numpy_helper.from_array(a, n) for n, a in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _compare(m: onnx.ModelProto, feeds: dict, cm=None):
    cm = cm or onnxc.compile(m)
    got = cm.run(feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for o, w in zip(m.graph.output, want):
        assert got[o.name].dtype == w.dtype and got[o.name].shape == w.shape, o.name
        np.testing.assert_array_equal(got[o.name], w)
    return cm


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in optimize(load_model(m)).graph.nodes]


# -- Shape / Size ---------------------------------------------------------------------------------

@pytest.mark.parametrize("opset,attrs", [(13, {}), (15, {}), (15, {"start": 1}), (15, {"end": -1}),
                                         (15, {"start": -3, "end": 3}), (15, {"start": 5}),
                                         (15, {"start": -10, "end": 10})])
def test_shape(opset, attrs):
    check_node("Shape", {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)}, opset=opset, **attrs)


def test_shape_symbolic_runs_kernel():
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    check_node("Shape", {"x": x}, input_shapes={"x": ["N", 3, "W"]})
    check_node("Shape", {"x": x}, input_shapes={"x": ["N", 3, "W"]}, opset=15, start=1)


def test_shape_static_folds():
    m = _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Identity", ["s"], ["y"])],
               [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", TP.INT64, None)])
    assert "Shape" not in _ops(m)
    _compare(m, {"x": np.zeros((2, 3), np.float32)})


@pytest.mark.parametrize("opset", [1, 13, 21])
def test_size(opset):
    check_node("Size", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, opset=opset)
    check_node("Size", {"x": np.zeros((2, 3), bool)}, opset=opset, input_shapes={"x": ["N", "M"]})


# -- Constant -------------------------------------------------------------------------------------

@pytest.mark.parametrize("attr,value", [
    ("value", onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
    ("value", onnx.numpy_helper.from_array(np.array([True, False]))),
    ("value", onnx.numpy_helper.from_array(np.array(7, np.int32))),
    ("value_float", 2.5), ("value_floats", [1.0, -2.0]), ("value_int", -3), ("value_ints", [4, 5, 6]),
])
def test_constant(attr, value):
    m = _model([helper.make_node("Constant", [], ["y"], **{attr: value})], [],
               [helper.make_tensor_value_info("y", TP.UNDEFINED, None)], opset=13)
    _compare(m, {})


def test_constant_sparse():
    sp = helper.make_sparse_tensor(onnx.numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "v"),
                                   onnx.numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
    m = _model([helper.make_node("Constant", [], ["y"], sparse_value=sp)], [],
               [helper.make_tensor_value_info("y", TP.UNDEFINED, None)], opset=13)
    got = onnxc.compile(m).run({})["y"]
    np.testing.assert_array_equal(got, np.array([[0, 1.5, 0], [0, 2.5, 0]], np.float32))


# -- ConstantOfShape ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([7], np.int64),
                                   np.array([True]), np.array([3], np.uint8)])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check_node("ConstantOfShape", {"s": _i64(2, 3)}, const_inputs=("s",), **attrs)
    check_node("ConstantOfShape", {"s": _i64(0)}, const_inputs=("s",), **attrs)


def test_constant_of_shape_symbolic():
    """ConstantOfShape(Shape(x)) with symbolic dims runs as a fill kernel of the input's shape."""
    attrs = {"value": onnx.numpy_helper.from_array(np.array([2], np.int32))}
    m = _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)],
               [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 4])],
               [helper.make_tensor_value_info("y", TP.INT32, None)])
    assert "Shape" not in _ops(m)
    cm = None
    for n in (1, 3, 6):
        cm = _compare(m, {"x": np.zeros((n, 4), np.float32)}, cm)


# -- Range ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("start,limit,delta", [(0, 10, 3), (10, 4, -2), (5, 5, 1), (3, 1, 1), (-4, 4, 3)])
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.int16, np.float32, np.float64])
def test_range_const(start, limit, delta, dt):
    ins = {"a": np.array(start, dt), "b": np.array(limit, dt), "c": np.array(delta, dt)}
    check_node("Range", ins, const_inputs=("a", "b", "c"))


def test_range_float_fraction():
    ins = {"a": np.array(1.0, np.float32), "b": np.array(2.0, np.float32), "c": np.array(0.3, np.float32)}
    check_node("Range", ins, const_inputs=("a", "b", "c"))


def test_range_symbolic_limit():
    """Range(0, N, 1) with N from Shape: output length N, computed by the Range kernel."""
    m = _model([helper.make_node("Shape", ["x"], ["s"]),
                helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
                helper.make_node("Range", ["z", "n", "one"], ["y"])],
               [helper.make_tensor_value_info("x", TP.FLOAT, [2, "L"])],
               [helper.make_tensor_value_info("y", TP.INT64, None)],
               {"i1": _i64(1).reshape(()), "z": _i64(0).reshape(()), "one": _i64(1).reshape(())})
    g = optimize(load_model(m)).graph
    assert [n.op_type for n in g.nodes] == ["SymValue", "Range"]
    assert str(g.outputs[0].type) == "int64[L]"
    cm = None
    for n in (1, 4, 9):
        cm = _compare(m, {"x": np.zeros((2, n), np.float32)}, cm)


# -- symbolic shape chains ------------------------------------------------------------------------

def _pytorch_style_model() -> onnx.ModelProto:
    """x[N,3,H,W] -> Reshape(x, [N, -1]) with N taken from Shape(x), then Transpose and a Slice."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["nu"]),
        helper.make_node("Slice", ["s", "st2", "en4"], ["hw"]),
        helper.make_node("Concat", ["nu", "m1"], ["shp"], axis=0),
        helper.make_node("Reshape", ["x", "shp"], ["flat"]),
        helper.make_node("Concat", ["nu", "three", "hw"], ["shp2"], axis=0),
        helper.make_node("Reshape", ["flat", "shp2"], ["back"]),
        helper.make_node("Add", ["back", "x"], ["y"]),
    ]
    inits = {"i0": _i64(0).reshape(()), "ax0": _i64(0), "m1": _i64(-1), "st2": _i64(2), "en4": _i64(4),
             "three": _i64(3)}
    return _model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3, "H", "W"])],
                  [helper.make_tensor_value_info("flat", TP.FLOAT, None),
                   helper.make_tensor_value_info("y", TP.FLOAT, None)], inits)


def test_pytorch_style_shape_chain():
    m = _pytorch_style_model()
    g = optimize(load_model(m)).graph
    ops = [n.op_type for n in g.nodes]
    for dead in ("Shape", "Gather", "Concat", "Unsqueeze", "Slice"):
        assert dead not in ops, ops
    reshapes = [n for n in g.nodes if n.op_type == "Reshape"]
    assert str(reshapes[0].outputs[0].type) == "float[N, 3*H*W]"
    assert str(reshapes[1].outputs[0].type) == "float[N, 3, H, W]"
    cm = None
    for shape in [(1, 3, 4, 5), (2, 3, 7, 3), (5, 3, 1, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        cm = onnxc.compile(m) if cm is None else cm
        got = cm.run({"x": x})
        want = ReferenceEvaluator(m).run(None, {"x": x})
        np.testing.assert_array_equal(got["flat"], want[0])
        np.testing.assert_allclose(got["y"], want[1])


def test_static_dim_of_symbolic_shape_folds():
    """Gather of a static dim out of a symbolic shape is a constant."""
    m = _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["y"], axis=0)],
               [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3])],
               [helper.make_tensor_value_info("y", TP.INT64, None)], {"i": _i64(-1)})
    assert _ops(m) == []
    _compare(m, {"x": np.zeros((2, 3), np.float32)})


def test_symbolic_shape_output_at_run_time():
    """A shape tensor that is a graph output is written from the bound dims."""
    m = _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["g"], axis=0),
                helper.make_node("Concat", ["g", "g"], ["y"], axis=0)],
               [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3, "W"])],
               [helper.make_tensor_value_info("y", TP.INT64, None)], {"i": _i64(2, 0)})
    cm = None
    for n in (1, 5):
        cm = _compare(m, {"x": np.zeros((n, 3, n + 1), np.float32)}, cm)


def test_data_dependent_rank_is_unsupported():
    """A run-time shape tensor is fine (tests/ops/test_runtime_shapes.py), one of unknown length is not."""
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r1")],
               [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3]), helper.make_tensor_value_info("s", TP.INT64, ["k"])],
               [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    with pytest.raises(UnsupportedOpError, match="r1.*output rank is data-dependent"):
        onnxc.compile(m)


def test_symbolic_expand_slice_tile():
    """Expand to Shape(y), Slice x[:, :S] with S from Shape(y), Tile by [N, 1]: all static-in-symbols."""
    nodes = [
        helper.make_node("Shape", ["y"], ["sy"]),
        helper.make_node("Expand", ["x", "sy"], ["e"]),
        helper.make_node("Gather", ["sy", "i1"], ["s1"], axis=0),
        helper.make_node("Unsqueeze", ["s1", "ax0"], ["s1u"]),
        helper.make_node("Slice", ["z", "zero", "s1u", "one"], ["sl"]),
        helper.make_node("Gather", ["sy", "i0"], ["s0"], axis=0),
        helper.make_node("Unsqueeze", ["s0", "ax0"], ["s0u"]),
        helper.make_node("Concat", ["s0u", "one"], ["reps"], axis=0),
        helper.make_node("Tile", ["x", "reps"], ["t"]),
    ]
    inits = {"i0": _i64(0).reshape(()), "i1": _i64(1).reshape(()), "ax0": _i64(0), "zero": _i64(0),
             "one": _i64(1)}
    m = _model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [1, "S"]),
                       helper.make_tensor_value_info("y", TP.FLOAT, ["N", "S"]),
                       helper.make_tensor_value_info("z", TP.FLOAT, [3, "L"])],
               [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in ("e", "sl", "t")], inits)
    g = optimize(load_model(m)).graph
    assert {n.op_type for n in g.nodes} == {"SymValue", "Expand", "Slice", "Tile"}
    assert [str(v.type) for v in g.outputs][0] == "float[N, S]"
    assert str(g.outputs[2].type) == "float[N, S]"
    cm = None
    for n, s, l in [(1, 2, 5), (3, 4, 2), (2, 1, 1)]:
        feeds = {"x": rng.standard_normal((1, s)).astype(np.float32),
                 "y": np.zeros((n, s), np.float32), "z": rng.standard_normal((3, l)).astype(np.float32)}
        cm = _compare(m, feeds, cm)
