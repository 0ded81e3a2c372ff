"""onnxc's own ONNX protobuf schema (IR version 12 / ONNX 1.23), wire-compatible with real ONNX files.

onnxc does not depend on the ``onnx`` package at run time, so the message classes are built here,
at import time, from a compact field table transcribed from the ONNX specification (onnx-ml.proto,
onnx-data.proto, onnx-operators-ml.proto): same field numbers, wire types, labels and packing.
They live in a private descriptor pool under the package ``onnxc.onnx``, so they never clash with
the messages the ``onnx`` package registers in the default pool.

Table format, one field a line: ``<label> <type> <name> <number> [packed]``, where label is
``optional``, ``repeated`` or ``oneof:<group>``, and a message or enum type is written with its
full dotted name inside the package (``TensorShapeProto.Dimension``). ``reserved`` lines list
reserved numbers (``16-19`` is inclusive) and names.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

PACKAGE = "onnxc.onnx"

_ENUMS: dict[str, str] = {
    "Version": "_START_VERSION=0 IR_VERSION_2017_10_10=1 IR_VERSION_2017_10_30=2 IR_VERSION_2017_11_3=3 "
               "IR_VERSION_2019_1_22=4 IR_VERSION_2019_3_18=5 IR_VERSION_2019_9_19=6 IR_VERSION_2020_5_8=7 "
               "IR_VERSION_2021_7_30=8 IR_VERSION_2023_5_5=9 IR_VERSION_2024_3_25=10 "
               "IR_VERSION_2025_05_12=11 IR_VERSION_2025_08_26=12 IR_VERSION_2025_11_06=13 IR_VERSION=14",
    "OperatorStatus": "EXPERIMENTAL=0 STABLE=1",
    "AttributeProto.AttributeType": "UNDEFINED=0 FLOAT=1 INT=2 STRING=3 TENSOR=4 GRAPH=5 SPARSE_TENSOR=11 "
                                    "TYPE_PROTO=13 FLOATS=6 INTS=7 STRINGS=8 TENSORS=9 GRAPHS=10 "
                                    "SPARSE_TENSORS=12 TYPE_PROTOS=14",
    "TensorProto.DataType": "UNDEFINED=0 FLOAT=1 UINT8=2 INT8=3 UINT16=4 INT16=5 INT32=6 INT64=7 STRING=8 "
                            "BOOL=9 FLOAT16=10 DOUBLE=11 UINT32=12 UINT64=13 COMPLEX64=14 COMPLEX128=15 "
                            "BFLOAT16=16 FLOAT8E4M3FN=17 FLOAT8E4M3FNUZ=18 FLOAT8E5M2=19 FLOAT8E5M2FNUZ=20 "
                            "UINT4=21 INT4=22 FLOAT4E2M1=23 FLOAT8E8M0=24 UINT2=25 INT2=26 FLOAT6E2M3=27 "
                            "FLOAT6E3M2=28",
    "TensorProto.DataLocation": "DEFAULT=0 EXTERNAL=1",
    "SequenceProto.DataType": "UNDEFINED=0 TENSOR=1 SPARSE_TENSOR=2 SEQUENCE=3 MAP=4 OPTIONAL=5",
    "OptionalProto.DataType": "UNDEFINED=0 TENSOR=1 SPARSE_TENSOR=2 SEQUENCE=3 MAP=4 OPTIONAL=5",
}

# Parents come before their nested messages.
_MESSAGES: dict[str, str] = {
    "AttributeProto": """
        reserved 12 16-19 v
        optional string name 1
        optional string ref_attr_name 21
        optional string doc_string 13
        optional AttributeProto.AttributeType type 20
        optional float f 2
        optional int64 i 3
        optional bytes s 4
        optional TensorProto t 5
        optional GraphProto g 6
        optional SparseTensorProto sparse_tensor 22
        optional TypeProto tp 14
        repeated float floats 7
        repeated int64 ints 8
        repeated bytes strings 9
        repeated TensorProto tensors 10
        repeated GraphProto graphs 11
        repeated SparseTensorProto sparse_tensors 23
        repeated TypeProto type_protos 15""",
    "ValueInfoProto": """
        optional string name 1
        optional TypeProto type 2
        optional string doc_string 3
        repeated StringStringEntryProto metadata_props 4""",
    "NodeProto": """
        repeated string input 1
        repeated string output 2
        optional string name 3
        optional string op_type 4
        optional string domain 7
        optional string overload 8
        repeated AttributeProto attribute 5
        optional string doc_string 6
        repeated StringStringEntryProto metadata_props 9
        repeated NodeDeviceConfigurationProto device_configurations 10""",
    "IntIntListEntryProto": """
        optional int64 key 1
        repeated int64 value 2""",
    "NodeDeviceConfigurationProto": """
        optional string configuration_id 1
        repeated ShardingSpecProto sharding_spec 2
        optional int32 pipeline_stage 3""",
    "ShardingSpecProto": """
        optional string tensor_name 1
        repeated int64 device 2
        repeated IntIntListEntryProto index_to_device_group_map 3
        repeated ShardedDimProto sharded_dim 4""",
    "ShardedDimProto": """
        optional int64 axis 1
        repeated SimpleShardedDimProto simple_sharding 2""",
    "SimpleShardedDimProto": """
        oneof:dim int64 dim_value 1
        oneof:dim string dim_param 2
        optional int64 num_shards 3""",
    "TrainingInfoProto": """
        optional GraphProto initialization 1
        optional GraphProto algorithm 2
        repeated StringStringEntryProto initialization_binding 3
        repeated StringStringEntryProto update_binding 4""",
    "ModelProto": """
        optional int64 ir_version 1
        repeated OperatorSetIdProto opset_import 8
        optional string producer_name 2
        optional string producer_version 3
        optional string domain 4
        optional int64 model_version 5
        optional string doc_string 6
        optional GraphProto graph 7
        repeated StringStringEntryProto metadata_props 14
        repeated TrainingInfoProto training_info 20
        repeated FunctionProto functions 25
        repeated DeviceConfigurationProto configuration 26""",
    "DeviceConfigurationProto": """
        optional string name 1
        optional int32 num_devices 2
        repeated string device 3""",
    "StringStringEntryProto": """
        optional string key 1
        optional string value 2""",
    "TensorAnnotation": """
        optional string tensor_name 1
        repeated StringStringEntryProto quant_parameter_tensor_names 2""",
    "GraphProto": """
        reserved 3 4 6-9 ir_version producer_version producer_tag domain
        repeated NodeProto node 1
        optional string name 2
        repeated TensorProto initializer 5
        repeated SparseTensorProto sparse_initializer 15
        optional string doc_string 10
        repeated ValueInfoProto input 11
        repeated ValueInfoProto output 12
        repeated ValueInfoProto value_info 13
        repeated TensorAnnotation quantization_annotation 14
        repeated StringStringEntryProto metadata_props 16""",
    "TensorProto": """
        repeated int64 dims 1
        optional int32 data_type 2
        optional TensorProto.Segment segment 3
        repeated float float_data 4 packed
        repeated int32 int32_data 5 packed
        repeated bytes string_data 6
        repeated int64 int64_data 7 packed
        optional string name 8
        optional string doc_string 12
        optional bytes raw_data 9
        repeated StringStringEntryProto external_data 13
        optional TensorProto.DataLocation data_location 14
        repeated double double_data 10 packed
        repeated uint64 uint64_data 11 packed
        repeated StringStringEntryProto metadata_props 16""",
    "TensorProto.Segment": """
        optional int64 begin 1
        optional int64 end 2""",
    "SparseTensorProto": """
        optional TensorProto values 1
        optional TensorProto indices 2
        repeated int64 dims 3""",
    "TensorShapeProto": """
        repeated TensorShapeProto.Dimension dim 1""",
    "TensorShapeProto.Dimension": """
        oneof:value int64 dim_value 1
        oneof:value string dim_param 2
        optional string denotation 3""",
    "TypeProto": """
        oneof:value TypeProto.Tensor tensor_type 1
        oneof:value TypeProto.Sequence sequence_type 4
        oneof:value TypeProto.Map map_type 5
        oneof:value TypeProto.Optional optional_type 9
        oneof:value TypeProto.SparseTensor sparse_tensor_type 8
        oneof:value TypeProto.Opaque opaque_type 7
        optional string denotation 6""",
    "TypeProto.Tensor": """
        optional int32 elem_type 1
        optional TensorShapeProto shape 2""",
    "TypeProto.Sequence": """
        optional TypeProto elem_type 1""",
    "TypeProto.Map": """
        optional int32 key_type 1
        optional TypeProto value_type 2""",
    "TypeProto.Optional": """
        optional TypeProto elem_type 1""",
    "TypeProto.SparseTensor": """
        optional int32 elem_type 1
        optional TensorShapeProto shape 2""",
    "TypeProto.Opaque": """
        reserved 3 parameters
        optional string domain 1
        optional string name 2""",
    "OperatorSetIdProto": """
        optional string domain 1
        optional int64 version 2""",
    "FunctionProto": """
        reserved 2 3 since_version status
        optional string name 1
        repeated string input 4
        repeated string output 5
        repeated string attribute 6
        repeated AttributeProto attribute_proto 11
        repeated NodeProto node 7
        optional string doc_string 8
        repeated OperatorSetIdProto opset_import 9
        optional string domain 10
        optional string overload 13
        repeated ValueInfoProto value_info 12
        repeated StringStringEntryProto metadata_props 14""",
    # onnx-data.proto: values of non-tensor types, used by the backend test data sets.
    "SequenceProto": """
        optional string name 1
        optional int32 elem_type 2
        repeated TensorProto tensor_values 3
        repeated SparseTensorProto sparse_tensor_values 4
        repeated SequenceProto sequence_values 5
        repeated MapProto map_values 6
        repeated OptionalProto optional_values 7""",
    "MapProto": """
        optional string name 1
        optional int32 key_type 2
        repeated int64 keys 3
        repeated bytes string_keys 4
        optional SequenceProto values 5""",
    "OptionalProto": """
        optional string name 1
        optional int32 elem_type 2
        optional TensorProto tensor_value 3
        optional SparseTensorProto sparse_tensor_value 4
        optional SequenceProto sequence_value 5
        optional MapProto map_value 6
        optional OptionalProto optional_value 7""",
    # onnx-operators-ml.proto: operator set descriptions.
    "OperatorProto": """
        optional string op_type 1
        optional int64 since_version 2
        optional OperatorStatus status 3
        optional string doc_string 10""",
    "OperatorSetProto": """
        optional string magic 1
        optional int64 ir_version 2
        optional string ir_version_prerelease 3
        optional string ir_build_metadata 7
        optional string domain 4
        optional int64 opset_version 5
        optional string doc_string 6
        repeated OperatorProto operator 8
        repeated FunctionProto functions 9""",
}

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES,
}


def _add_field(msg: descriptor_pb2.DescriptorProto, line: str) -> None:
    label, ftype, name, number, *opts = line.split()
    field = msg.field.add(name=name, number=int(number), json_name=_camel(name))
    if label.startswith("oneof:"):
        group = label.split(":", 1)[1]
        names = [o.name for o in msg.oneof_decl]
        if group not in names:
            msg.oneof_decl.add(name=group)
            names.append(group)
        field.oneof_index = names.index(group)
        label = "optional"
    field.label = _F.LABEL_REPEATED if label == "repeated" else _F.LABEL_OPTIONAL
    if ftype in _SCALARS:
        field.type = _SCALARS[ftype]
    else:
        field.type = _F.TYPE_ENUM if ftype in _ENUMS else _F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{ftype}"
    if "packed" in opts:
        field.options.packed = True


def _add_reserved(msg: descriptor_pb2.DescriptorProto, items: list[str]) -> None:
    for item in items:
        if item[0].isdigit():
            lo, _, hi = item.partition("-")
            msg.reserved_range.add(start=int(lo), end=int(hi or lo) + 1)  # end is exclusive
        else:
            msg.reserved_name.append(item)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of the whole schema."""
    fdp = descriptor_pb2.FileDescriptorProto(name="onnxc/onnx.proto", package=PACKAGE, syntax="proto2")
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    for full, body in _MESSAGES.items():
        parent, _, short = full.rpartition(".")
        msg = messages[parent].nested_type.add(name=short) if parent else fdp.message_type.add(name=short)
        messages[full] = msg
        for line in body.strip().splitlines():
            words = line.split()
            if words[0] == "reserved":
                _add_reserved(msg, words[1:])
            else:
                _add_field(msg, line)
    for full, values in _ENUMS.items():
        parent, _, short = full.rpartition(".")
        enum = messages[parent].enum_type.add(name=short) if parent else fdp.enum_type.add(name=short)
        for item in values.split():
            vname, _, number = item.partition("=")
            enum.value.add(name=vname, number=int(number))
    fdp.options.optimize_for = descriptor_pb2.FileOptions.LITE_RUNTIME
    return fdp


POOL = descriptor_pool.DescriptorPool()
POOL.AddSerializedFile(_file_descriptor().SerializeToString())


def message_class(name: str) -> type[Message]:
    """The message class of a top-level message, e.g. ``message_class("ModelProto")``."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


AttributeProto = message_class("AttributeProto")
ValueInfoProto = message_class("ValueInfoProto")
NodeProto = message_class("NodeProto")
IntIntListEntryProto = message_class("IntIntListEntryProto")
NodeDeviceConfigurationProto = message_class("NodeDeviceConfigurationProto")
ShardingSpecProto = message_class("ShardingSpecProto")
ShardedDimProto = message_class("ShardedDimProto")
SimpleShardedDimProto = message_class("SimpleShardedDimProto")
TrainingInfoProto = message_class("TrainingInfoProto")
ModelProto = message_class("ModelProto")
DeviceConfigurationProto = message_class("DeviceConfigurationProto")
StringStringEntryProto = message_class("StringStringEntryProto")
TensorAnnotation = message_class("TensorAnnotation")
GraphProto = message_class("GraphProto")
TensorProto = message_class("TensorProto")
SparseTensorProto = message_class("SparseTensorProto")
TensorShapeProto = message_class("TensorShapeProto")
TypeProto = message_class("TypeProto")
OperatorSetIdProto = message_class("OperatorSetIdProto")
FunctionProto = message_class("FunctionProto")
SequenceProto = message_class("SequenceProto")
MapProto = message_class("MapProto")
OptionalProto = message_class("OptionalProto")
OperatorProto = message_class("OperatorProto")
OperatorSetProto = message_class("OperatorSetProto")
