"""ai.onnx.ml ZipMap, CastMap and DictVectorizer: map values in and out of compiled models, compared
with onnxruntime (maps come back as dicts, sequences of maps as lists of dicts). Nodes sit side by
side in one model per op (tests/ops/test_ml_linear.py ``SideBySide``); maps onnxruntime's Python
binding cannot feed (string values, int64 values, double values from Python floats) are checked
against the spec's stated values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from tests.ops.test_ml_linear import SideBySide

ML = "ai.onnx.ml"
ZIP_LABELS = [{"classlabels_strings": ["b", "a", "é", "c"]}, {"classlabels_int64s": [3, -1, 7, 0]}]


def map_type(key: int, value: int) -> onnx.TypeProto:
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))


def one_node(op: str, in_type: onnx.TypeProto, out_type: onnx.TypeProto, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["X"], ["Y"], domain=ML, **attrs)
    g = helper.make_graph([node], "t", [helper.make_value_info("X", in_type)], [helper.make_value_info("Y", out_type)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def zip_map(labels: dict, cols="C") -> onnx.ModelProto:
    key = TP.STRING if "classlabels_strings" in labels else TP.INT64
    return one_node("ZipMap", helper.make_tensor_type_proto(TP.FLOAT, ["N", cols]),
                    helper.make_sequence_type_proto(map_type(key, TP.FLOAT)), **labels)


def test_zip_map_matches_onnxruntime():
    """String and int labels (maps in ascending key order, as onnxruntime's), 0, 1 and 5 rows, a 1-D
    input, and the scikit-learn converter pattern: probabilities -> ZipMap beside the label output."""
    s = SideBySide()
    x, x1, xc = s.input("x", TP.FLOAT, ["N", "C"]), s.input("x1", TP.FLOAT, [4]), s.input("xc", TP.FLOAT, ["M", 4])
    outs = [s.add("ZipMap", [x], **labels)[0] for labels in ZIP_LABELS]
    s.add("ZipMap", [x1], classlabels_int64s=[5, 1, 3, 2])
    w = s.initializer("W", np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    (p,) = s.add("Softmax", s.add("MatMul", [xc, w], domain=""), axis=1, domain="")
    s.add("ArgMax", [p], axis=1, keepdims=0, domain="")
    s.add("ZipMap", [p], classlabels_int64s=[10, 20, 30])
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.random((n, 4), dtype=np.float32), "x1": rng.random(4, dtype=np.float32),
              "xc": rng.random((n + 2, 4), dtype=np.float32)} for n in (0, 1, 5)]
    compiled = s.check(feeds)
    assert {str(t.type) for t in compiled.outputs if t.name in outs} == {"seq(map(int64, float[]))",
                                                                          "seq(map(string, float[]))"}
    with pytest.raises(onnxc.OnnxcError, match="3 columns for 4 class labels"):
        compiled.run({**feeds[1], "x": np.zeros((2, 3), np.float32)})


def test_zip_map_attribute_errors():
    with pytest.raises(onnxc.OnnxcError, match="3 columns for 2 class labels"):
        onnxc.compile(zip_map({"classlabels_int64s": [0, 1]}, cols=3))
    with pytest.raises(onnxc.OnnxcError, match="exactly one of classlabels_int64s and classlabels_strings"):
        onnxc.compile(zip_map({"classlabels_int64s": [0, 1], "classlabels_strings": ["a", "b"]}))


def test_cast_map():
    """Every cast_to x map_form against onnxruntime, string values (stated: onnxruntime's binding cannot
    feed them), and the run-time errors."""
    s = SideBySide()
    mf, ms = s.map_input("mf", TP.INT64, TP.FLOAT), s.map_input("ms", TP.INT64, TP.STRING)
    for form in ("DENSE", "SPARSE"):
        for to in ("TO_FLOAT", "TO_INT64", "TO_STRING"):
            s.add("CastMap", [mf], cast_to=to, map_form=form, max_map=6)
    (y,) = s.add("CastMap", [ms], cast_to="TO_FLOAT", map_form="SPARSE", max_map=3, ort=False)
    f = {"mf": {4: 1.5, 1: 2.75, 0: -7.0}, "ms": {2: "1.5", 0: "-2"}}  # insertion order is not key order
    compiled = s.check([f])
    assert s.run(compiled, f)[y].tolist() == [[-2.0, 0.0, 1.5]]
    with pytest.raises(onnxc.OnnxcError, match=r"key 3 is outside \[0, max_map = 3\)"):
        compiled.run({**f, "ms": {3: "1"}})
    with pytest.raises(onnxc.InputError, match="expected a map"):
        compiled.run({**f, "ms": [1.0]})
    with pytest.raises(onnxc.InputError, match="expected int64 keys"):
        compiled.run({**f, "ms": {"a": "1"}})
    bad = one_node("CastMap", map_type(TP.INT64, TP.FLOAT), helper.make_tensor_type_proto(TP.FLOAT, None),
                   cast_to="TO_DOUBLE")
    with pytest.raises(onnxc.OnnxcError, match="cast_to 'TO_DOUBLE' is not one of"):
        onnxc.compile(bad)


def test_dict_vectorizer():
    """String and int64 vocabularies against onnxruntime (keys outside the vocabulary are skipped), and
    the value types its Python binding cannot feed, with the spec's rule: absent keys give 0 / ''."""
    s = SideBySide()
    s.add("DictVectorizer", [s.map_input("sf", TP.STRING, TP.FLOAT)], string_vocabulary=["a", "c", "b", "z"])
    s.add("DictVectorizer", [s.map_input("if", TP.INT64, TP.FLOAT)], int64_vocabulary=[5, 3, 9, -2])
    stated = {}
    for key, value, vocab, x, expected in [
            (TP.INT64, TP.STRING, {"int64_vocabulary": [5, 3, 9]}, {9: "nine", 5: "five"}, [["five", "", "nine"]]),
            (TP.INT64, TP.DOUBLE, {"int64_vocabulary": [5, 3, 9]}, {9: 1.5, 5: 2.0}, [[2.0, 0.0, 1.5]]),
            (TP.STRING, TP.INT64, {"string_vocabulary": ["x", "y"]}, {"y": 4}, [[0, 4]]),
            (TP.STRING, TP.FLOAT, {"string_vocabulary": ["x", "y"]}, {}, [[0.0, 0.0]])]:  # onnxruntime: no empty maps
        name = s.map_input(f"m{len(stated)}", key, value)
        (y,) = s.add("DictVectorizer", [name], ort=False, **vocab)
        stated[y] = (name, x, expected)
    f = {"sf": {"a": 4.0, "c": 8.0, "unseen": 3.0}, "if": {9: 1.5, -2: 2.0, 4: 1.0},
         **{name: x for name, x, _ in stated.values()}}
    got = s.run(s.check([f]), f)
    for y, (_, _, expected) in stated.items():
        assert got[y].tolist() == expected, y
    model = one_node("DictVectorizer", map_type(TP.INT64, TP.FLOAT), helper.make_tensor_type_proto(TP.FLOAT, None),
                     string_vocabulary=["a"])
    with pytest.raises(onnxc.OnnxcError, match="the map has int64 keys but the vocabulary is string"):
        onnxc.compile(model)


def test_zip_map_rows_read_as_one_array_equal_the_map_by_map_reading():
    """ZipMap's maps share one key table, so the library copies their values out as one array
    (<prefix>_maps_dense, runtime_c/onnxc_value.c) and Python builds the dicts from its rows; the
    result is the same as reading every map on its own (libraries without that function)."""
    s = SideBySide()
    x = s.input("x", TP.FLOAT, ["N", 4])
    for labels in ZIP_LABELS:
        s.add("ZipMap", [x], **labels)
    xv = np.random.default_rng(7).random((300, 4), dtype=np.float32)
    m = onnxc.compile(s.model(s.nodes))
    native = m._native
    assert native._maps_dense is not None
    dense = m.run({"x": xv})
    native._maps_dense, readers = None, native._readers
    native._readers = [None] * len(readers)  # (else the keys kept from the first call serve: the next test)
    try:
        one_by_one = m.run({"x": xv})
    finally:
        native._maps_dense, native._readers = m._native.lib.onnxc_model_maps_dense, readers
    for name in dense:
        a_rows, b_rows = dense[name], one_by_one[name]
        assert a_rows == b_rows and len(a_rows) == 300
        assert all(list(a) == list(b) and all(type(v) is float for v in a.values()) for a, b in zip(a_rows, b_rows))
        assert a_rows[0] is not a_rows[1]  # every row its own dict


def test_zip_map_keys_kept_between_calls_give_the_general_reading():
    """The first call reads ZipMap's maps on the general path and keeps their keys (codegen/native.py
    MapsReader); later calls have the library check every row's keys against the kept ones and copy the values
    as one array: the same dicts as the general path, at 1 row, 0 rows and 300 rows, string and int labels."""
    s = SideBySide()
    x = s.input("x", TP.FLOAT, ["N", 4])
    for labels in ZIP_LABELS:
        s.add("ZipMap", [x], **labels)
    m = onnxc.compile(s.model(s.nodes))
    native = m._native
    xv = np.random.default_rng(8).random((300, 4), dtype=np.float32)
    m.run({"x": xv[:2]})
    assert all(r is not None and r.state is not None for r in native._readers)
    readers = native._readers
    for n in (1, 0, 300, 1):
        kept = m.run({"x": xv[:n]})
        native._readers = [None] * len(readers)
        try:
            general = m.run({"x": xv[:n]})
        finally:
            native._readers = readers
        for name in kept:
            assert kept[name] == general[name] and len(kept[name]) == n
            assert all(list(a) == list(b) and all(type(v) is float for v in a.values())
                       for a, b in zip(kept[name], general[name]))


@pytest.mark.parametrize("key", [TP.INT64, TP.STRING])
def test_map_outputs_whose_keys_change_are_read_again(key):
    """A sequence-of-maps output whose keys change from call to call (here the model's input passed through):
    the library finds the rows' keys differ from the kept ones, the call takes the general path and keeps the
    new keys; maps with keys of another row's, empty sequences and equal keys again all read back as given."""
    k = (lambda a: a) if key == TP.INT64 else (lambda a: f"k{a}")
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(key, helper.make_tensor_type_proto(TP.FLOAT, [])))
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "t", [helper.make_value_info("s", seq)],
                          [helper.make_value_info("y", seq)])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    for feed in ([{k(1): 1.0, k(2): 2.0}], [{k(1): 3.0, k(2): 4.0}, {k(1): 5.0, k(2): 6.0}], [{k(3): 1.0, k(2): 2.0}],
                 [{k(2): 1.0, k(3): 2.0}], [{k(1): 1.0, k(2): 2.0}, {k(1): 1.0, k(5): 2.0}], [], [{k(1): 7.0}],
                 [{k(1): 8.0}]):
        got = m.run({"s": feed})["y"]
        assert got == feed and [list(d) for d in got] == [list(d) for d in feed]


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
