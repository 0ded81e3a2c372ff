"""ONNX protobuf -> onnxc IR: onnxc's own wire-compatible schema, tensor decoding, validation.

``load_model`` turns a model file, bytes or protobuf message into an ``onnxc.ir.Model``;
``load_tensor``/``load_value`` decode serialized tensors and sequence/map/optional values
(the ONNX backend test data). Only this package knows the ONNX protobuf.
"""

from .loader import load_model
from .values import load_tensor, load_value, value_kind

__all__ = ["load_model", "load_tensor", "load_value", "value_kind"]
