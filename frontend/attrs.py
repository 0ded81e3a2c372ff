"""AttributeProto -> ir.Attr.

``Attr.kind`` is the ONNX AttributeType name; the value is Python/numpy data: float, int, str (bytes
when not UTF-8), numpy arrays for tensors (sparse ones densified), IR types for TYPE_PROTO, lists for
the plural kinds (INTS/FLOATS of repeated.LARGE entries or more, or cut out before parsing by large_attrs.py:
int64/float32 arrays, falsy when empty; such STRINGS: repeated.AttrStrings lists, with their distinct values
and codes), and nested ir.Graphs for GRAPH/GRAPHS, which the caller builds (it owns scoping).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onnxc.ir import Attr, Graph, ModelError

from . import large_attrs, repeated
from .external import DataDir
from .tensors import decode_str, sparse_to_array, tensor_to_array
from .types import convert_type

KINDS = {1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS", 8: "STRINGS",
         9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO",
         14: "TYPE_PROTOS"}

# Field holding the value of each kind; also used to guess the kind of attributes without a type.
_FIELDS = {"FLOAT": "f", "INT": "i", "STRING": "s", "TENSOR": "t", "GRAPH": "g", "SPARSE_TENSOR": "sparse_tensor",
           "TYPE_PROTO": "tp", "FLOATS": "floats", "INTS": "ints", "STRINGS": "strings", "TENSORS": "tensors",
           "GRAPHS": "graphs", "SPARSE_TENSORS": "sparse_tensors", "TYPE_PROTOS": "type_protos"}

BuildGraph = Callable[[Any, str], Graph]  # (GraphProto, name for errors) -> Graph


def attr_kind(a: Any, where: str) -> str:
    """The AttributeType name of ``a``; old models without ``type`` get it from the field that is set."""
    if a.type:
        if a.type not in KINDS:
            raise ModelError(f"{where}: attribute {a.name!r} has unknown type {a.type}")
        return KINDS[a.type]
    for kind, field in _FIELDS.items():
        if kind in ("FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSORS", "TYPE_PROTOS"):
            if len(getattr(a, field)):
                return kind
        elif a.HasField(field):
            return kind
    raise ModelError(f"{where}: attribute {a.name!r} has no type and no value")


def convert_attr(a: Any, where: str, base_dir: DataDir | str | None, build_graph: BuildGraph) -> Attr:
    """IR attribute of AttributeProto ``a``; ``where`` names the owning node in error messages."""
    if not a.name:
        raise ModelError(f"{where}: an attribute has no name")
    if a.ref_attr_name:
        kind = KINDS.get(a.type, "UNDEFINED")
        return Attr(a.name, kind, None, ref=a.ref_attr_name)
    kind = attr_kind(a, where)
    label = f"{where} attribute {a.name!r}"
    return Attr(a.name, kind, _value(a, kind, label, base_dir, build_graph))


def _value(a: Any, kind: str, label: str, base_dir: DataDir | str | None, build_graph: BuildGraph) -> Any:
    if kind == "FLOAT":
        return float(a.f)
    if kind == "INT":
        return int(a.i)
    if kind == "STRING":
        return decode_str(a.s)
    if kind == "TENSOR":
        return tensor_to_array(a.t, base_dir, f"{label} tensor {a.t.name!r}")
    if kind == "SPARSE_TENSOR":
        return sparse_to_array(a.sparse_tensor, base_dir, f"{label} sparse tensor")
    if kind == "GRAPH":
        return build_graph(a.g, label)
    if kind == "TYPE_PROTO":
        return convert_type(a.tp, a.name)
    if kind in ("FLOATS", "INTS", "STRINGS") and not len(getattr(a, _FIELDS[kind])):
        cut = large_attrs.take(a, decode_str)  # decoded before parsing (large_attrs.py)
        if cut is not None:
            return cut
    if kind in ("FLOATS", "INTS"):  # tree ensembles hold millions of entries: arrays from the bytes (repeated.py)
        field = a.floats if kind == "FLOATS" else a.ints
        if len(field) >= repeated.LARGE:
            arr = repeated.repeated_numbers(a, kind)
            if arr is not None:
                return arr
        return list(field)  # Python numbers already: list() is twice as fast as a comprehension
    if kind == "STRINGS":
        if len(a.strings) >= repeated.LARGE:  # a tree ensemble's nodes_modes: a few values, millions of times
            got = repeated.repeated_strings(a, decode_str)
            if got is not None:
                return got
        return _strings(a.strings)
    if kind == "TENSORS":
        return [tensor_to_array(t, base_dir, f"{label} tensor #{i}") for i, t in enumerate(a.tensors)]
    if kind == "SPARSE_TENSORS":
        return [sparse_to_array(s, base_dir, f"{label} sparse tensor #{i}")
                for i, s in enumerate(a.sparse_tensors)]
    if kind == "GRAPHS":
        return [build_graph(g, f"{label} graph #{i}") for i, g in enumerate(a.graphs)]
    return [convert_type(tp, a.name) for tp in a.type_protos]  # TYPE_PROTOS


def _strings(items: Any) -> list:
    """Decoded STRINGS, each distinct value decoded once (a tree ensemble's millions of ``nodes_modes``
    hold a handful of values)."""
    raw = list(items)
    if len(raw) < 64:
        return [decode_str(s) for s in raw]
    text = {s: decode_str(s) for s in set(raw)}
    return [text[s] for s in raw]
