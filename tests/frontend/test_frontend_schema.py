"""onnxc's own ONNX schema matches the real one: same descriptors, and every test model round-trips."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _frontend_cases import all_models
from google.protobuf import descriptor_pb2
from onnx import onnx_data_pb2, onnx_ml_pb2, onnx_operators_ml_pb2

from onnxc.frontend import schema


def _file_proto(desc) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    desc.CopyToProto(fdp)
    return fdp


def _messages(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    out = {}

    def visit(prefix: str, msgs) -> None:
        for m in msgs:
            out[prefix + m.name] = m
            visit(prefix + m.name + ".", m.nested_type)

    visit("", fdp.message_type)
    return out


def _enums(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, dict[str, int]]:
    out = {e.name: {v.name: v.number for v in e.value} for e in fdp.enum_type}
    for full, m in _messages(fdp).items():
        out.update({f"{full}.{e.name}": {v.name: v.number for v in e.value} for e in m.enum_type})
    return out


def _field_facts(m: descriptor_pb2.DescriptorProto) -> dict:
    oneofs = [o.name for o in m.oneof_decl]
    return {
        f.name: (f.number, f.label, f.type, f.type_name.split(".")[-1] if f.type_name else "",
                 oneofs[f.oneof_index] if f.HasField("oneof_index") else None, f.options.packed)
        for f in m.field
    }


def _reference() -> descriptor_pb2.FileDescriptorProto:
    merged = descriptor_pb2.FileDescriptorProto()
    for mod in (onnx_ml_pb2, onnx_data_pb2, onnx_operators_ml_pb2):
        fdp = _file_proto(mod.DESCRIPTOR)
        merged.message_type.extend(fdp.message_type)
        merged.enum_type.extend(fdp.enum_type)
    return merged


def test_descriptors_match_onnx():
    ours = _file_proto(schema.POOL.FindFileByName("onnxc/onnx.proto"))
    ref = _reference()
    assert ours.package == "onnxc.onnx" and ours.syntax in ("", "proto2")
    ours_msgs, ref_msgs = _messages(ours), _messages(ref)
    assert sorted(ours_msgs) == sorted(ref_msgs)
    for name, m in ref_msgs.items():
        assert _field_facts(ours_msgs[name]) == _field_facts(m), name
        assert [(r.start, r.end) for r in ours_msgs[name].reserved_range] == \
               [(r.start, r.end) for r in m.reserved_range], name
        assert list(ours_msgs[name].reserved_name) == list(m.reserved_name), name
    assert _enums(ours) == _enums(ref)


def test_private_pool_does_not_clash_with_onnx():
    assert schema.ModelProto.DESCRIPTOR.full_name == "onnxc.onnx.ModelProto"
    assert onnx.ModelProto.DESCRIPTOR.full_name == "onnx.ModelProto"
    assert schema.TensorProto.FLOAT == 1 and schema.TensorProto.DataLocation.Value("EXTERNAL") == 1
    assert schema.AttributeProto.GRAPHS == 10


def test_every_test_model_round_trips():
    """Parse with our schema, drop unknown fields, re-serialize: onnx must read back the same model."""
    models = all_models()
    assert len(models) > 1900
    bad = []
    for label, blob in models:
        ours = schema.ModelProto.FromString(blob)
        ours.DiscardUnknownFields()  # a field our schema lacked would vanish here and fail the check
        back = onnx.ModelProto.FromString(ours.SerializeToString())
        if back != onnx.ModelProto.FromString(blob):
            bad.append(label)
    assert not bad, f"{len(bad)} models differ after a round trip, e.g. {bad[:5]}"


@pytest.mark.parametrize("name", ["SequenceProto", "MapProto", "OptionalProto", "OperatorSetProto"])
def test_data_messages_round_trip(name):
    ref_cls = getattr(onnx, name)
    ref = ref_cls()
    if name == "SequenceProto":
        ref = onnx.numpy_helper.from_list([np.arange(3)], "s")
    elif name == "MapProto":
        ref = onnx.numpy_helper.from_dict({7: np.float32(1)}, "m")
    elif name == "OptionalProto":
        ref = onnx.numpy_helper.from_optional([np.zeros(2)], "o")
    else:
        ref.domain, ref.opset_version = "x", 3
        ref.operator.add(op_type="Foo", since_version=2)
    ours = getattr(schema, name).FromString(ref.SerializeToString())
    ours.DiscardUnknownFields()
    assert ref_cls.FromString(ours.SerializeToString()) == ref
