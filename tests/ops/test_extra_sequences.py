"""Sequence and optional ops beyond the conformance suite: element types it does not use (bool, int8,
float16, bfloat16, strings), symbolic input dims, negative positions, empty tensors.

Each graph runs on onnxc and on onnx.reference; outputs must be equal (bit-exact: these ops only move
values).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

BF16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(7)


def data(shape, dt) -> np.ndarray:
    """Test values of numpy dtype ``dt`` (object: strings)."""
    if dt is object:
        return np.array(rng.choice(["a", "bc", "", "déf"], size=shape), dtype=object)
    if dt is bool:
        return rng.random(shape) > 0.5
    if np.dtype(dt).kind in "iu":
        return rng.integers(-5 if np.dtype(dt).kind == "i" else 0, 9, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def elem_type(a: np.ndarray) -> int:
    return TP.STRING if a.dtype == object else helper.np_dtype_to_tensor_dtype(a.dtype)


def run_graph(nodes, inputs: dict, outputs: dict, shapes: dict | None = None, inits=()) -> dict:
    """Compile the graph, run it on onnxc and onnx.reference, assert equal outputs; returns onnxc's."""
    g_in = [helper.make_tensor_value_info(k, elem_type(v), (shapes or {}).get(k, list(v.shape)))
            for k, v in inputs.items()]
    g_out = [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()]
    model = helper.make_model(helper.make_graph(nodes, "t", g_in, g_out, initializer=list(inits)),
                              opset_imports=[helper.make_opsetid("", 21)])
    want = ReferenceEvaluator(model).run(None, inputs)
    got = onnxc.compile(model).run(inputs)
    for name, w in zip(outputs, want):
        if isinstance(w, list) and len(w) == 1:  # the reference's OptionalGetElement wraps a tensor in a list
            w = w[0]
        g, w = got[name], np.asarray(w)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if w.dtype == object:
            assert [str(x) for x in g.reshape(-1)] == [str(x) for x in w.reshape(-1)], name
        else:
            assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
            np.testing.assert_array_equal(g.view(np.uint8) if g.dtype == BF16 else g,
                                          w.view(np.uint8) if w.dtype == BF16 else w)
    return got


def i64(name: str, *v: int):
    return numpy_helper.from_array(np.array(v[0] if len(v) == 1 else v, np.int64), name)


TYPES = [np.float32, np.int64, bool, np.float16, BF16, object]


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: np.dtype(t).name)
def test_construct_at_length_symbolic(dt) -> None:
    """SequenceConstruct of inputs with a symbolic dim; SequenceAt with a negative position."""
    a, b = data((3, 2), dt), data((3, 2), dt)
    out_t = elem_type(a)
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "a"], ["s"]),
             helper.make_node("SequenceAt", ["s", "neg"], ["y"]),
             helper.make_node("SequenceAt", ["s", "one"], ["z"]),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    got = run_graph(nodes, {"a": a, "b": b}, {"y": out_t, "z": out_t, "n": TP.INT64},
                    shapes={"a": ["N", 2], "b": ["N", 2]}, inits=[i64("neg", -1), i64("one", 1)])
    assert int(got["n"]) == 3


@pytest.mark.parametrize("dt", [np.int8, np.float64, bool, np.float16, object], ids=lambda t: np.dtype(t).name)
def test_empty_insert_erase_concat(dt) -> None:
    """SequenceEmpty of the element type, inserts at the end and at 0, an erase, ConcatFromSequence
    with new_axis=1."""
    a, b = data((2, 3), dt), data((2, 3), dt)
    et = elem_type(a)
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=et),
             helper.make_node("SequenceInsert", ["e", "a"], ["s1"]),
             helper.make_node("SequenceInsert", ["s1", "b", "zero"], ["s2"]),
             helper.make_node("SequenceInsert", ["s2", "a", "neg"], ["s3"]),
             helper.make_node("SequenceErase", ["s3", "zero"], ["s4"]),
             helper.make_node("ConcatFromSequence", ["s4"], ["y"], axis=-1, new_axis=1)]
    got = run_graph(nodes, {"a": a, "b": b}, {"y": et}, inits=[i64("zero", 0), i64("neg", -1)])
    assert got["y"].shape == (2, 3, 2)


@pytest.mark.parametrize("dt", [np.float32, np.uint8, object], ids=lambda t: np.dtype(t).name)
def test_sequences_of_empty_tensors(dt) -> None:
    """Tensors with a zero-sized dim go through construct / concat / split."""
    a = data((0, 3), dt)
    nodes = [helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
             helper.make_node("SplitToSequence", ["a"], ["p"], axis=1),
             helper.make_node("SequenceLength", ["p"], ["n"])]
    got = run_graph(nodes, {"a": a}, {"y": elem_type(a), "n": TP.INT64})
    assert got["y"].shape == (0, 3) and int(got["n"]) == 3


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.float16, BF16, object], ids=lambda t: np.dtype(t).name)
def test_optional_of_a_tensor(dt) -> None:
    a = data((2, 2), dt)
    nodes = [helper.make_node("Optional", ["a"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"])]
    got = run_graph(nodes, {"a": a}, {"has": TP.BOOL, "y": elem_type(a)}, shapes={"a": ["N", 2]})
    assert bool(got["has"])


def compile_graph(nodes, inputs: dict, outputs: dict, inits=()):
    g_in = [helper.make_tensor_value_info(k, elem_type(v), list(v.shape)) for k, v in inputs.items()]
    g_out = [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()]
    return onnxc.compile(helper.make_model(helper.make_graph(nodes, "t", g_in, g_out, initializer=list(inits)),
                                           opset_imports=[helper.make_opsetid("", 21)]))


def test_empty_optional_has_no_element() -> None:
    """Optional without an input (type attribute) is empty (the spec; onnx.reference 1.23 answers true)."""
    tp = helper.make_tensor_type_proto(TP.INT64, [2])
    nodes = [helper.make_node("Optional", [], ["o"], type=tp), helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("Identity", ["x"], ["xo"])]
    x = np.zeros(1, np.float32)
    got = compile_graph(nodes, {"x": x}, {"has": TP.BOOL, "xo": TP.FLOAT}).run({"x": x})
    assert got["has"].dtype == np.bool_ and got["has"].shape == () and not bool(got["has"])


def test_optional_of_a_sequence() -> None:
    """An optional holding a sequence of int8 tensors: get the sequence back, read an element (checked
    with numpy: onnx.reference 1.23 cannot take an element out of an optional sequence)."""
    a, b = data((3,), np.int8), data((3,), np.int8)
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("Optional", ["s"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "one"], ["y"])]
    got = compile_graph(nodes, {"a": a, "b": b}, {"y": TP.INT8, "has": TP.BOOL}, inits=[i64("one", 1)]).run(
        {"a": a, "b": b})
    assert bool(got["has"])
    assert got["y"].dtype == np.int8
    np.testing.assert_array_equal(got["y"], b)
