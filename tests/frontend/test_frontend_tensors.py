"""Tensor decoding equals onnx.numpy_helper, for every element type, storage field and test file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _frontend_cases import all_models, assert_same_array, assert_same_value, data_blobs, onnx_value
from onnx import TensorProto, helper, numpy_helper

from onnxc.frontend import load_model, load_tensor, load_value, schema
from onnxc.frontend.tensors import sparse_to_array, tensor_to_array
from onnxc.ir import DType, ModelError

ELEMENT_TYPES = [dt for dt in range(1, 27) if dt != TensorProto.STRING]
FLOATS = {1, 10, 11, 16, 17, 18, 19, 20, 23}


def _sample(dt: int, shape: tuple = (2, 5)) -> np.ndarray:
    np_dtype = helper.tensor_dtype_to_np_dtype(dt)
    n = int(np.prod(shape))
    if dt == TensorProto.BOOL:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dt in (TensorProto.INT2, TensorProto.UINT2):
        base = np.arange(n) % 4 - (2 if dt == TensorProto.INT2 else 0)
    elif dt in (TensorProto.INT4, TensorProto.UINT4):
        base = np.arange(n) % 16 - (8 if dt == TensorProto.INT4 else 0)
    elif dt in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        return (np.arange(n) - 1j * np.arange(n)).astype(np_dtype).reshape(shape)
    elif dt == TensorProto.FLOAT8E8M0:
        base = 2.0 ** (np.arange(n) % 7 - 3)
    else:
        base = (np.arange(n) - n // 2) * (0.5 if dt in FLOATS else 1)
    # ml_dtypes types convert from float32; numpy ones directly
    return np.asarray(base).astype(np.float32 if dt >= 16 else np_dtype).astype(np_dtype).reshape(shape)


def _ours(t: onnx.TensorProto) -> np.ndarray:
    return tensor_to_array(schema.TensorProto.FromString(t.SerializeToString()))


@pytest.mark.parametrize("dt", ELEMENT_TYPES, ids=lambda dt: TensorProto.DataType.Name(dt))
@pytest.mark.parametrize("shape", [(2, 5), (3,), (), (0, 4)])
@pytest.mark.parametrize("raw", [True, False])
def test_element_types(dt, shape, raw):
    arr = _sample(dt, shape)
    t = helper.make_tensor("t", dt, arr.shape, arr if raw else arr.reshape(-1), raw=raw)
    assert t.HasField("raw_data") == raw
    ours = _ours(t)
    assert ours.dtype == DType(dt).np
    assert_same_array(ours, numpy_helper.to_array(t), TensorProto.DataType.Name(dt))


def test_strings_and_invalid_utf8():
    t = helper.make_tensor("s", TensorProto.STRING, (3,), [b"a", "\u00e9".encode(), b"\xff\xfe"])
    ours = _ours(t)
    assert ours.dtype == object and list(ours) == ["a", "\u00e9", b"\xff\xfe"]


def test_int4_sign_extension_and_odd_count():
    t = helper.make_tensor("q", TensorProto.INT4, (3,), bytes([0x8F, 0x07]), raw=True)
    np.testing.assert_array_equal(_ours(t), np.array([-1, -8, 7], np.int8))
    t = helper.make_tensor("q", TensorProto.INT2, (5,), bytes([0b11100100, 0b01]), raw=True)
    np.testing.assert_array_equal(_ours(t), np.array([0, 1, -2, -1, 1], np.int8))


@pytest.mark.hostile
@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.dims.append(2), "6 elements of type FLOAT need 24 raw_data bytes, found 12"),
    (lambda t: (t.ClearField("dims"), t.dims.extend([-1, 3])), "negative dims"),
    (lambda t: setattr(t, "data_type", 27), "element type 27 is not supported"),
    (lambda t: setattr(t, "data_type", 0), "has no data_type"),
    (lambda t: t.segment.SetInParent(), "segment"),
])
def test_malformed_tensors_name_the_tensor(mutate, message):
    t = numpy_helper.from_array(np.zeros(3, np.float32), "weights")
    mutate(t)
    with pytest.raises(ModelError, match=message) as e:
        _ours(t)
    assert "'weights'" in str(e.value)


def test_typed_field_count_mismatch():
    t = helper.make_tensor("w", TensorProto.INT64, (4,), [1, 2, 3, 4])
    del t.int64_data[-1]
    with pytest.raises(ModelError, match="tensor 'w': 4 elements of type INT64 need 4 entries in int64_data, found 3"):
        _ours(t)


@pytest.mark.parametrize("coo", [True, False])
def test_sparse_tensor_densified(coo):
    values = numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "sp")
    idx = np.array([[0, 1], [2, 3]] if coo else [1, 11], np.int64)
    sp = helper.make_sparse_tensor(values, numpy_helper.from_array(idx), [3, 4])
    ours = sparse_to_array(schema.SparseTensorProto.FromString(sp.SerializeToString()))
    expected = np.zeros((3, 4), np.float32)
    expected[0, 1], expected[2, 3] = 5, 7
    np.testing.assert_array_equal(ours, expected)
    bad = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([1, 12], np.int64)), [3, 4])
    with pytest.raises(ModelError, match="out of range"):
        sparse_to_array(schema.SparseTensorProto.FromString(bad.SerializeToString()))


def _tensors(g: onnx.GraphProto, where: str):
    for t in g.initializer:
        yield f"{where}/{t.name}", t
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                yield f"{where}/{n.op_type}.{a.name}", a.t
            yield from ((f"{where}/{n.op_type}.{a.name}[{i}]", t) for i, t in enumerate(a.tensors))
            for sg in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _tensors(sg, f"{where}/{n.op_type}.{a.name}")


def test_every_model_tensor_matches_numpy_helper():
    count = 0
    for label, blob in all_models():
        ref = onnx.ModelProto.FromString(blob)
        model = load_model(blob)
        for name, t in _tensors(ref.graph, label):
            assert_same_array(_ours(t), numpy_helper.to_array(t), name)
            count += 1
        for t in ref.graph.initializer:  # the loader wires them into the graph as constants
            assert_same_array(model.graph.initializers[t.name].const, numpy_helper.to_array(t), t.name)
        for node in model.graph.nodes:
            if node.op_type == "Constant" and node.has_attr("value"):
                refnode = next(n for n in ref.graph.node if n.output[0] == node.outputs[0].name)
                assert_same_array(node.attr("value"), numpy_helper.to_array(refnode.attribute[0].t), label)
    assert count > 1500


def test_every_data_set_value_matches_numpy_helper():
    blobs = data_blobs()
    kinds = {k for _, k, _ in blobs}
    assert {"tensor", "sequence", "optional"} <= kinds and len(blobs) > 5000
    for label, kind, blob in blobs:
        assert_same_value(load_value(blob, kind), onnx_value(blob, kind), label)


def test_load_tensor_from_file_and_message(tmp_path):
    t = numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3), "x")
    (tmp_path / "x.pb").write_bytes(t.SerializeToString())
    np.testing.assert_array_equal(load_tensor(tmp_path / "x.pb"), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(load_tensor(t), np.arange(6).reshape(2, 3))
    assert load_value(numpy_helper.from_optional(None, "o").SerializeToString(), "optional") is None
    m = load_value(numpy_helper.from_dict({3: np.float32(1.5)}, "m").SerializeToString(), "map")
    assert list(m) == [3] and float(m[3]) == 1.5
    with pytest.raises(ModelError, match="could not parse"):
        load_tensor(b"\xff\xff\xff")
    with pytest.raises(ModelError, match="does not exist"):
        load_tensor(tmp_path / "missing.pb")
