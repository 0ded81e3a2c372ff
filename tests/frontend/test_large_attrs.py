"""frontend/large_attrs.py: large INTS/FLOATS/STRINGS attributes of the main graph cut out of the serialized
model and decoded before protobuf parses it read exactly what protobuf reads, in every encoding the walker
accepts; every other encoding is left to protobuf (and still reads right); a forest loaded that way compiles
to the same results as onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnxc.frontend import large_attrs, load_model, repeated, schema

RNG = np.random.default_rng(0)


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _ints(vals) -> bytes:
    return b"".join(b"\x40" + _varint(int(v)) for v in vals)


def _strs(vals) -> bytes:
    return b"".join(_field(9, s) for s in vals)


def _attr(name: str, kind: int | None, *runs: bytes) -> bytes:
    """A raw AttributeProto: name, the runs as given, then the type (as protobuf writes it, last)."""
    return _field(1, name.encode()) + b"".join(runs) + (b"" if kind is None else b"\xa0\x01" + _varint(kind))


def _model(*attrs: bytes) -> bytes:
    """A raw ModelProto whose graph has one node (op type X) with the given raw attributes."""
    node = _field(4, b"X") + b"".join(_field(5, a) for a in attrs)
    return _varint(1 << 3) + _varint(8) + _field(7, _field(1, node) + _field(2, b"g"))


def _read(a) -> object:
    """What onnxc's frontend makes of a parsed attribute (cut value, or protobuf's field)."""
    got = large_attrs.take(a, bytes)
    if got is not None:
        return list(got) if isinstance(got, list) else got.tolist()
    return list(a.ints) or list(a.floats) or list(a.strings)


def _check(data: bytes, cut_expected: int) -> list:
    """The attributes of ``data`` read through cut + take equal protobuf's reading of the original bytes."""
    plain = schema.ModelProto()
    plain.ParseFromString(data)
    small, cut = large_attrs.cut(data)
    assert len(cut.values) == cut_expected
    mp = schema.ModelProto()
    mp.ParseFromString(small)
    with large_attrs.active(cut):
        got = [_read(a) for a in mp.graph.node[0].attribute]
    want = [list(a.ints) or list(a.floats) or list(a.strings) for a in plain.graph.node[0].attribute]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w and isinstance(w[0], float):
            np.testing.assert_array_equal(np.float32(g).view(np.uint32), np.float32(w).view(np.uint32))
        else:
            assert g == w
    return got


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(large_attrs, "MIN_BYTES", 64)
    monkeypatch.setattr(repeated, "_CHUNK", 37)  # several decoding chunks


def test_ints_floats_strings_are_cut():
    ints = RNG.integers(-(2**63), 2**63 - 1, 300).tolist() + [0, 1, 127, 128, 2**63 - 1, -1] * 20
    floats = np.concatenate([[np.nan, -0.0, np.inf], RNG.standard_normal(200)]).astype(np.float32)
    strs = [b"BRANCH_LEQ", b"LEAF", b"", b"BRANCH_GT", "\u00e9t\u00e9".encode()] * 40
    data = _model(_attr("i", 7, _ints(ints)),
                  _attr("f", 6, b"".join(b"\x3d" + v.tobytes() for v in floats)),
                  _attr("s", 8, _strs(strs)), _attr("small", 7, _ints([1, 2])))
    _check(data, 3)


def test_one_byte_values_and_a_run_ending_at_the_chunk():
    vals = [v % 100 for v in range(37 * 3)]  # exactly three chunks of one-byte values
    _check(_model(_attr("i", 7, _ints(vals)), _attr("j", 7, _ints(vals + [300]))), 2)


@pytest.mark.parametrize("case", ["split run", "no type", "wrong type", "packed", "J in a string", "long string",
                                  "many distinct", "mark in file"])
def test_other_encodings_are_left_to_protobuf(case):
    vals = list(range(200))
    attr = {
        "split run": _attr("i", None, _ints(vals), _field(13, b"doc"), _ints(vals)) + b"\xa0\x01\x07",
        "no type": _attr("i", None, _ints(vals)),
        "wrong type": _attr("i", 6, _ints(vals)),
        "packed": _attr("i", 7, _field(8, b"".join(_varint(v) for v in vals))),
        "J in a string": _attr("s", 8, _strs([b"ab", b"J\x03xyz", b"c"] * 50)),
        "long string": _attr("s", 8, _strs([b"x" * 200, b"y"] * 50)),
        "many distinct": _attr("s", 8, _strs([b"%d" % v for v in vals])),
        "mark in file": _attr("i", 7, _ints(vals), _varint(large_attrs.MARK << 3) + _varint(0)),
    }[case]
    _check(_model(attr), 0)


def test_a_forged_mark_names_no_value():
    data = _model(_attr("i", 7, _ints(range(200))))
    small, cut = large_attrs.cut(data)
    forged = _model(_attr("j", 7, _varint(large_attrs.MARK << 3) + _varint(0)))  # another load's mark
    mp = schema.ModelProto()
    mp.ParseFromString(forged)
    with large_attrs.active(cut):
        assert large_attrs.take(mp.graph.node[0].attribute[0], bytes) is None


def test_truncated_model_is_still_a_model_error():
    from onnxc.ir import ModelError

    data = _model(_attr("i", 7, _ints(range(300))))
    with pytest.raises(ModelError, match="could not parse"):
        load_model(data[:-40])


def test_loader_reads_cut_strings_with_codes():
    n = 2000
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            nodes_modes=["BRANCH_LEQ", "LEAF"] * (n // 2), nodes_treeids=list(range(n)), n_targets=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 2])],
                          [helper.make_tensor_value_info("y", 1, [1, 1])])
    m = load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)]))
    modes = m.graph.nodes[0].attr("nodes_modes")
    assert isinstance(modes, repeated.AttrStrings) and modes == ["BRANCH_LEQ", "LEAF"] * (n // 2)
    assert modes.vocab == ["BRANCH_LEQ", "LEAF"] and modes.codes.tolist() == [0, 1] * (n // 2)
    assert isinstance(m.graph.nodes[0].attr("nodes_treeids"), repeated.AttrArray)


def test_cut_forest_matches_onnxruntime(tmp_path, monkeypatch):
    monkeypatch.setattr(large_attrs, "MIN_BYTES", 1 << 12)
    ort = pytest.importorskip("onnxruntime")
    import onnxc
    from benchmarks.forest_scale import compare, lightgbm_like

    model = lightgbm_like(40, 60, 8, 3, seed=3)
    data = model.SerializeToString()
    assert len(large_attrs.cut(data)[1].values) >= 10  # the node's large attributes were all cut
    cm = onnxc.compile(data, cache_dir=tmp_path)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32)
    x[::7, 2] = np.nan
    got = compare(cm, sess, x)
    assert got["label_mismatches"] == 0 and got["max_abs_prob_diff"] < 1e-6


def test_repeated_strings_of_a_parsed_attribute():
    vals = [b"LEAF", b"BRANCH_LEQ", b"BRANCH_LEQ"] * 100
    a = schema.AttributeProto()
    a.ParseFromString(_attr("s", 8, _strs(vals)))
    got = repeated.repeated_strings(a, bytes)
    assert got == vals and got.vocab == [b"LEAF", b"BRANCH_LEQ"] and got.codes.tolist() == [0, 1, 1] * 100
    a.ParseFromString(_attr("s", 8, _strs([b"J\x01", b"x"] * 100)))
    assert repeated.repeated_strings(a, bytes) is None  # a candidate inside a string: the caller reads the field
