"""ai.onnx.ml ZipMap, CastMap and DictVectorizer: map values in and out of compiled models, compared
with onnxruntime (maps come back as dicts, sequences of maps as lists of dicts)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc

ML = "ai.onnx.ml"


def map_type(key: int, value: int) -> onnx.TypeProto:
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))


def one_node(op: str, in_type: onnx.TypeProto, out_type: onnx.TypeProto, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["X"], ["Y"], domain=ML, **attrs)
    g = helper.make_graph([node], "t", [helper.make_value_info("X", in_type)], [helper.make_value_info("Y", out_type)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def run_both(model: onnx.ModelProto, x):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    return onnxc.compile(model).run({"X": x})["Y"], want


def zip_map(labels: dict, cols="C") -> onnx.ModelProto:
    key = TP.STRING if "classlabels_strings" in labels else TP.INT64
    return one_node("ZipMap", helper.make_tensor_type_proto(TP.FLOAT, ["N", cols]),
                    helper.make_sequence_type_proto(map_type(key, TP.FLOAT)), **labels)


@pytest.mark.parametrize("labels", [{"classlabels_strings": ["b", "a", "é", "c"]},
                                    {"classlabels_int64s": [3, -1, 7, 0]}])
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_zip_map_matches_onnxruntime(labels, rows):
    x = np.random.default_rng(rows).random((rows, 4), dtype=np.float32)
    got, want = run_both(zip_map(labels), x)
    assert isinstance(got, list) and len(got) == rows
    assert got == want
    for g, w in zip(got, want, strict=True):  # the same key order as onnxruntime's maps (ascending)
        assert list(g) == list(w)
        assert all(type(k) is type(kw) for k, kw in zip(g, w, strict=True))


def test_zip_map_declares_its_type():
    m = onnxc.compile(zip_map({"classlabels_int64s": [0, 1]}))
    assert str(m.outputs[0].type) == "seq(map(int64, float[]))"


def test_zip_map_column_count_is_checked():
    with pytest.raises(onnxc.OnnxcError, match="3 columns for 2 class labels"):
        onnxc.compile(zip_map({"classlabels_int64s": [0, 1]}, cols=3))
    m = onnxc.compile(zip_map({"classlabels_int64s": [0, 1]}))
    with pytest.raises(onnxc.OnnxcError, match="3 columns for 2 class labels"):
        m.run({"X": np.zeros((2, 3), np.float32)})
    with pytest.raises(onnxc.OnnxcError, match="exactly one of classlabels_int64s and classlabels_strings"):
        onnxc.compile(zip_map({"classlabels_int64s": [0, 1], "classlabels_strings": ["a", "b"]}))


def test_zip_map_after_a_classifier():
    """The scikit-learn converter pattern: probabilities -> ZipMap beside the label output."""
    w = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=1),
             helper.make_node("ArgMax", ["p"], ["label"], axis=1, keepdims=0),
             helper.make_node("ZipMap", ["p"], ["probs"], domain=ML, classlabels_int64s=[10, 20, 30])]
    g = helper.make_graph(nodes, "clf", [helper.make_tensor_value_info("X", TP.FLOAT, ["N", 5])],
                          [helper.make_tensor_value_info("label", TP.INT64, ["N"]),
                           helper.make_value_info("probs", helper.make_sequence_type_proto(map_type(TP.INT64, TP.FLOAT)))],
                          [onnx.numpy_helper.from_array(w, "W")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    x = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})
    label, probs = onnxc.compile(model)(x)
    np.testing.assert_array_equal(label, want[0])
    assert len(probs) == 7
    for g_, w_ in zip(probs, want[1], strict=True):
        assert list(g_) == list(w_)
        np.testing.assert_allclose(list(g_.values()), list(w_.values()), rtol=1e-6)


@pytest.mark.parametrize("form", ["DENSE", "SPARSE"])
@pytest.mark.parametrize("to,out", [("TO_FLOAT", TP.FLOAT), ("TO_INT64", TP.INT64), ("TO_STRING", TP.STRING)])
def test_cast_map_matches_onnxruntime(form, to, out):
    model = one_node("CastMap", map_type(TP.INT64, TP.FLOAT), helper.make_tensor_type_proto(out, None),
                     cast_to=to, map_form=form, max_map=6)
    x = {4: 1.5, 1: 2.75, 0: -7.0}  # insertion order is not key order
    got, want = run_both(model, x)
    assert got.shape == want.shape == ((1, 6) if form == "SPARSE" else (1, 3))
    assert got.tolist() == want.tolist()


def test_cast_map_string_values_and_errors():
    model = one_node("CastMap", map_type(TP.INT64, TP.STRING), helper.make_tensor_type_proto(TP.FLOAT, None),
                     cast_to="TO_FLOAT", map_form="SPARSE", max_map=3)
    m = onnxc.compile(model)
    np.testing.assert_array_equal(m.run({"X": {2: "1.5", 0: "-2"}})["Y"], [[-2.0, 0.0, 1.5]])
    with pytest.raises(onnxc.OnnxcError, match=r"key 3 is outside \[0, max_map = 3\)"):
        m.run({"X": {3: "1"}})
    with pytest.raises(onnxc.InputError, match="expected a map"):
        m.run({"X": [1.0]})
    with pytest.raises(onnxc.InputError, match="expected int64 keys"):
        m.run({"X": {"a": "1"}})
    bad = one_node("CastMap", map_type(TP.INT64, TP.FLOAT), helper.make_tensor_type_proto(TP.FLOAT, None),
                   cast_to="TO_DOUBLE")
    with pytest.raises(onnxc.OnnxcError, match="cast_to 'TO_DOUBLE' is not one of"):
        onnxc.compile(bad)


@pytest.mark.parametrize("vocab,x", [
    ({"string_vocabulary": ["a", "c", "b", "z"]}, {"a": 4.0, "c": 8.0, "unseen": 3.0}),
    ({"int64_vocabulary": [5, 3, 9, -2]}, {9: 1.5, -2: 2.0, 4: 1.0}),
])
def test_dict_vectorizer_matches_onnxruntime(vocab, x):
    key = TP.STRING if "string_vocabulary" in vocab else TP.INT64
    model = one_node("DictVectorizer", map_type(key, TP.FLOAT), helper.make_tensor_type_proto(TP.FLOAT, None), **vocab)
    got, want = run_both(model, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key,value,vocab,x,expected", [
    (TP.INT64, TP.STRING, {"int64_vocabulary": [5, 3, 9]}, {9: "nine", 5: "five"}, [["five", "", "nine"]]),
    (TP.INT64, TP.DOUBLE, {"int64_vocabulary": [5, 3, 9]}, {9: 1.5, 5: 2.0}, [[2.0, 0.0, 1.5]]),
    (TP.STRING, TP.INT64, {"string_vocabulary": ["x", "y"]}, {"y": 4}, [[0, 4]]),
    (TP.STRING, TP.FLOAT, {"string_vocabulary": ["x", "y"]}, {}, [[0.0, 0.0]]),  # onnxruntime refuses empty maps
])
def test_dict_vectorizer_other_value_types(key, value, vocab, x, expected):
    """Maps onnxruntime's Python binding cannot feed; the spec's rule: absent keys give 0 / ''."""
    model = one_node("DictVectorizer", map_type(key, value), helper.make_tensor_type_proto(value, None), **vocab)
    got = onnxc.compile(model).run({"X": x})["Y"]
    assert got.tolist() == expected


def test_dict_vectorizer_key_type_must_match_vocabulary():
    model = one_node("DictVectorizer", map_type(TP.INT64, TP.FLOAT), helper.make_tensor_type_proto(TP.FLOAT, None),
                     string_vocabulary=["a"])
    with pytest.raises(onnxc.OnnxcError, match="the map has int64 keys but the vocabulary is string"):
        onnxc.compile(model)


@pytest.mark.parametrize("labels", [{"classlabels_strings": ["b", "a", "é", "c"]},
                                    {"classlabels_int64s": [3, -1, 7, 0]}])
def test_zip_map_rows_read_as_one_array_equal_the_map_by_map_reading(labels):
    """ZipMap's maps share one key table, so the library copies their values out as one array
    (<prefix>_maps_dense, runtime_c/onnxc_value.c) and Python builds the dicts from its rows; the
    result is the same as reading every map on its own (libraries without that function)."""
    x = np.random.default_rng(7).random((300, 4), dtype=np.float32)
    m = onnxc.compile(zip_map(labels))
    native = m._native
    assert native._maps_dense is not None
    dense = m.run({"X": x})["Y"]
    native._maps_dense = None
    try:
        one_by_one = m.run({"X": x})["Y"]
    finally:
        native._maps_dense = m._native.lib.onnxc_model_maps_dense
    assert dense == one_by_one and len(dense) == 300
    assert all(list(a) == list(b) and all(type(v) is float for v in a.values()) for a, b in zip(dense, one_by_one))
    assert dense[0] is not dense[1]  # every row its own dict


@pytest.mark.parametrize("keys", [[7], ["b", "a", "c"], [10, 20, 30, 40], list(range(300)), ["k'\"{}", "\\n"]])
def test_dense_rows_become_the_same_dicts_as_dict_zip(keys):
    """ZipMap rows read back as dicts: the dict-display builder (up to 256 keys) and the dict(zip) fallback
    give the same dicts, in key order, for int and string keys (quotes and braces included)."""
    from onnxc.codegen.native import _DICT_LITERAL_MAX, _dict_rows

    rows = np.random.default_rng(0).random((5, len(keys))).tolist()
    want = [dict(zip(keys, r)) for r in rows]
    if len(keys) <= _DICT_LITERAL_MAX:
        got = _dict_rows(len(keys))(*keys, rows)
        assert got == want and [list(d) for d in got] == [list(d) for d in want]
    assert _dict_rows(2)("x", "y", []) == []
