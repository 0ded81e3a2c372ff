"""frontend/repeated.py: large INTS/FLOATS attributes decoded straight from their serialized bytes equal
what ``list()`` reads, for every value range, around other fields and across decoding chunks; other
encodings fall back (None)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import AttributeProto, helper

from onnxc.frontend import repeated
from onnxc.frontend.schema import AttributeProto as OurAttribute

RNG = np.random.default_rng(0)
EDGE = [0, 1, -1, 127, 128, -128, 2**31 - 1, -(2**31), 2**32, 2**62, 2**63 - 1, -(2**63), 300, -300]


def _ours(proto_bytes: bytes):
    """The attribute as onnxc's frontend reads it (its own proto2 schema)."""
    a = OurAttribute()
    a.ParseFromString(proto_bytes)
    return a


@pytest.mark.parametrize("n", [1, 5, 1000])
def test_ints_equal_list(n, monkeypatch):
    vals = (EDGE * (n // len(EDGE) + 1))[:n] if n < 100 else \
        np.concatenate([EDGE, RNG.integers(-(2**63), 2**63 - 1, n - len(EDGE), dtype=np.int64)]).tolist()
    a = _ours(helper.make_attribute("nodes_treeids", vals, doc_string="d" * 300).SerializeToString())
    got = repeated.repeated_numbers(a, "INTS")
    assert got is not None and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array(list(a.ints), np.int64))
    monkeypatch.setattr(repeated, "_CHUNK", 7)  # several chunks
    np.testing.assert_array_equal(repeated.repeated_numbers(a, "INTS"), np.array(vals, np.int64))


def test_floats_equal_list():
    vals = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38],
                           RNG.standard_normal(5000)]).astype(np.float32)
    a = _ours(helper.make_attribute("nodes_values", vals.tolist()).SerializeToString())
    got = repeated.repeated_numbers(a, "FLOATS")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), vals.view(np.uint32))


def test_packed_input_and_missing_fields():
    a = _ours(AttributeProto(name="x", type=AttributeProto.INTS).SerializeToString() +
              bytes([0x42, 3, 1, 2, 3]))  # packed by another writer: re-serialized in the schema's form
    np.testing.assert_array_equal(repeated.repeated_numbers(a, "INTS"), [1, 2, 3])
    a.ClearField("ints")
    assert repeated.repeated_numbers(a, "INTS") is None  # no run of the field: the caller uses list()


def test_loader_gives_arrays_for_large_attributes():
    from onnxc.frontend import load_model

    n = repeated.LARGE
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            nodes_treeids=list(range(n)), nodes_values=[0.5] * n, n_targets=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 2])],
                          [helper.make_tensor_value_info("y", 1, [1, 1])])
    m = load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)]))
    ids, vals = m.graph.nodes[0].attr("nodes_treeids"), m.graph.nodes[0].attr("nodes_values")
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids[-1] == n - 1 and bool(ids)
    assert isinstance(vals, np.ndarray) and vals.dtype == np.float32 and (vals == 0.5).all()
