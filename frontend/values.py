"""Serialized ONNX values (TensorProto, SequenceProto, MapProto, OptionalProto) -> Python data.

The ONNX backend test data sets store inputs and outputs this way (``test_data_set_*/*.pb``). The
Python forms are those of the onnxc API: tensors are numpy arrays (IR storage layout, see
tensors.py), sequences are lists, maps are dicts (string keys as ``str``), an empty optional is None.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from onnxc.ir import MapType, ModelError, OptionalType, SequenceType

from . import schema
from .loader import read_source
from .tensors import decode_str, sparse_to_array, tensor_to_array

# SequenceProto.DataType / OptionalProto.DataType
UNDEFINED, TENSOR, SPARSE_TENSOR, SEQUENCE, MAP, OPTIONAL = range(6)
STRING = 8  # TensorProto.DataType.STRING, the key type of string-keyed maps

_KINDS = {"tensor": schema.TensorProto, "sparse_tensor": schema.SparseTensorProto,
          "sequence": schema.SequenceProto, "map": schema.MapProto, "optional": schema.OptionalProto}


def load_tensor(source: Any, base_dir: str | None = None) -> np.ndarray:
    """Decode a serialized TensorProto (bytes, a file path or a protobuf message) to a numpy array."""
    return load_value(source, "tensor", base_dir)


def value_kind(t: Any) -> str:
    """The ``load_value`` kind for values of IR type ``t`` (TensorType, SequenceType, ...)."""
    if isinstance(t, SequenceType):
        return "sequence"
    if isinstance(t, OptionalType):
        return "optional"
    if isinstance(t, MapType):
        return "map"
    return "tensor"


def load_value(source: Any, kind: str = "tensor", base_dir: str | None = None) -> Any:
    """Decode a serialized value: ``kind`` is tensor, sparse_tensor, sequence, map or optional.

    ``source`` is bytes, a file path or a protobuf message; external tensor data is read relative to
    ``base_dir`` (default: the file's directory).
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown value kind {kind!r}; expected one of {sorted(_KINDS)}")
    msg, path, _ = read_source(source, _KINDS[kind], _KINDS[kind].__name__)
    if base_dir is None and path is not None:
        base_dir = os.path.dirname(path)
    return _decode(msg, kind, base_dir)


def _decode(msg: Any, kind: str, base_dir: str | None) -> Any:
    if kind == "tensor":
        return tensor_to_array(msg, base_dir)
    if kind == "sparse_tensor":
        return sparse_to_array(msg, base_dir)
    if kind == "sequence":
        return _sequence(msg, base_dir)
    if kind == "map":
        return _map(msg, base_dir)
    return _optional(msg, base_dir)


def _sequence(s: Any, base_dir: str | None) -> list:
    fields = {TENSOR: ("tensor_values", "tensor"), SPARSE_TENSOR: ("sparse_tensor_values", "sparse_tensor"),
              SEQUENCE: ("sequence_values", "sequence"), MAP: ("map_values", "map"),
              OPTIONAL: ("optional_values", "optional")}
    if s.elem_type == UNDEFINED:
        return []
    if s.elem_type not in fields:
        raise ModelError(f"sequence {s.name!r} has unknown element type {s.elem_type}")
    field, kind = fields[s.elem_type]
    return [_decode(v, kind, base_dir) for v in getattr(s, field)]


def _map(m: Any, base_dir: str | None) -> dict:
    keys: list[Any] = ([decode_str(k) for k in m.string_keys] if m.key_type == STRING
                       else [int(k) for k in m.keys])
    values = _sequence(m.values, base_dir)
    if len(keys) != len(values):
        raise ModelError(f"map {m.name!r} has {len(keys)} keys but {len(values)} values")
    return dict(zip(keys, values))


def _optional(o: Any, base_dir: str | None) -> Any:
    fields = {TENSOR: ("tensor_value", "tensor"), SPARSE_TENSOR: ("sparse_tensor_value", "sparse_tensor"),
              SEQUENCE: ("sequence_value", "sequence"), MAP: ("map_value", "map"),
              OPTIONAL: ("optional_value", "optional")}
    if o.elem_type == UNDEFINED:
        return None
    if o.elem_type not in fields:
        raise ModelError(f"optional {o.name!r} has unknown element type {o.elem_type}")
    field, kind = fields[o.elem_type]
    return _decode(getattr(o, field), kind, base_dir)
