"""ONNX TypeProto -> IR value types.

Dimensions become ints (``dim_value >= 0``), dimension variables named by ``dim_param`` (kept
verbatim: codegen makes them safe C names), or, when the model leaves a dimension unknown, a fresh
variable named ``"<value>:<axis>"`` so that error messages point at the value it came from.

A ``dim_param`` binds every dimension of that name to one variable only when it is a C identifier, as
the ONNX IR spec asks of dimension variables. Converters also write names that are not ('?', '-1', '',
'batch size') or placeholders numbered per occurrence ('unk__3', tf2onnx): those dims are unknown and
unrelated, as onnxruntime treats them, so each gets a fresh variable (a PaddleOCR input
[-1, 3, '?', '?'] takes 48 x 192). ``loose_dim_names`` lists the ones that look like an intended
shared variable, for the loader's warning (not arithmetic of names such as 'past_seq + seq', which
torch.export writes for output sizes).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from onnxc.ir import DType, MapType, ModelError, OptionalType, SequenceType, TensorType, sym


def convert_dtype(code: int, what: str) -> DType:
    """The IR element type of an ONNX ``TensorProto.DataType`` number; ``what`` names the owner."""
    try:
        return DType(code)
    except ValueError:
        raise ModelError(f"{what}: element type {code} is not supported by onnxc") from None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER = re.compile(r"unk__[0-9]+")  # tf2onnx: one per unknown dim, not a shared variable
# a size written as arithmetic of dimension names ('past_seq + seq', 's0*2': torch.export's output dims), not a
# variable of its own: no warning
_EXPRESSION = re.compile(r"(?=.*[A-Za-z_])(?=.*[-+*/%])[-+*/%A-Za-z0-9_ ()]+")


def shared_dim_name(name: str) -> bool:
    """Whether ``dim_param`` ``name`` names a dimension variable shared by every dim of that name."""
    return _IDENTIFIER.fullmatch(name) is not None and _PLACEHOLDER.fullmatch(name) is None


def loose_dim_names(shapes: list[Any]) -> list[str]:
    """The ``dim_param`` names among the TensorShapeProtos ``shapes`` that are not shared (see the top)
    yet contain a letter and occur more than once: probably meant as one variable."""
    seen = Counter(d.dim_param for s in shapes for d in s.dim if d.WhichOneof("value") == "dim_param")
    return sorted(n for n, k in seen.items() if k > 1 and not shared_dim_name(n) and _PLACEHOLDER.fullmatch(n) is None
                  and _EXPRESSION.fullmatch(n) is None and re.search(r"[A-Za-z]", n))


def convert_shape(shape: Any, value_name: str) -> tuple:
    """IR shape of a TensorShapeProto belonging to the value ``value_name``."""
    dims = []
    for axis, d in enumerate(shape.dim):
        which = d.WhichOneof("value")
        if which == "dim_value" and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif which == "dim_param" and shared_dim_name(d.dim_param):
            dims.append(sym(d.dim_param))
        else:
            dims.append(sym(f"{value_name}:{axis}"))
    return tuple(dims)


def convert_type(tp: Any, value_name: str) -> Any:
    """IR type (TensorType, SequenceType, OptionalType, MapType) of a TypeProto, or None if unknown.

    Sparse tensors become dense TensorTypes: onnxc densifies sparse values at the boundary.
    Opaque types, TypeProtos with no value set and tensors of element type 0 (UNDEFINED) have no IR
    equivalent and give None.
    """
    which = tp.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        t = getattr(tp, which)
        if t.elem_type == 0:  # UNDEFINED: the type is not given (graph inputs must give it: graphs.py)
            return None
        dtype = convert_dtype(t.elem_type, f"type of {value_name!r}")
        shape = convert_shape(t.shape, value_name) if t.HasField("shape") else None
        return TensorType(dtype, shape)
    if which == "sequence_type":
        return SequenceType(_inner(tp.sequence_type, value_name))
    if which == "optional_type":
        return OptionalType(_inner(tp.optional_type, value_name))
    if which == "map_type":
        key = convert_dtype(tp.map_type.key_type, f"map key type of {value_name!r}")
        value = convert_type(tp.map_type.value_type, value_name) if tp.map_type.HasField("value_type") else None
        return MapType(key, value)
    return None


def _inner(t: Any, value_name: str) -> Any:
    return convert_type(t.elem_type, value_name) if t.HasField("elem_type") else None
