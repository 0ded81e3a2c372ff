"""Shape rules of the ai.onnx.ml ops between maps and tensors: ZipMap, CastMap, DictVectorizer.

A map value is a pair of 1-D tensors (keys, values) at run time (runtime_c/onnxc_value.h). ZipMap
turns the [N, C] scores of a classifier into N maps {class label: score} (what scikit-learn
converters put after every classifier); CastMap and DictVectorizer read one map into a [1, K] tensor.
The attribute decoding lives here so the kernels (codegen/kernels/ml_maps.py) read the same lists.
"""

from __future__ import annotations

from onnxc.ir import DType, MapType, Node, SequenceType, TensorType

from .common import fail, runtime_dim, shape_of, tensor_type
from .ml import ML, _as_str
from .registry import shape_rule


def class_labels(node: Node, stem: str = "classlabels") -> tuple[DType, list]:
    """ZipMap's keys: (INT64, ints) or (STRING, strs); exactly one of the two attributes is set."""
    ints, strs = node.attr(f"{stem}_int64s"), node.attr(f"{stem}_strings")
    if (ints is None) == (strs is None):
        raise fail(node, f"exactly one of {stem}_int64s and {stem}_strings must be set")
    if ints is not None:
        return DType.INT64, [int(x) for x in ints]
    return DType.STRING, [_as_str(s) for s in strs]


def _map_input(node: Node) -> MapType:
    t = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
    if not isinstance(t, MapType):
        raise fail(node, f"input must be a map, got {t}")
    if not isinstance(t.value, TensorType):
        raise fail(node, f"map values must be tensors of scalars, got {t.value}")
    return t


@shape_rule("ZipMap", domain=ML)
def _zip_map(node: Node) -> list:
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if t.dtype != DType.FLOAT:
        raise fail(node, f"input must be float, got {t.dtype.short}")
    if len(shape) not in (1, 2):
        raise fail(node, f"input must have shape [N, C] or [C], got {list(shape)}")
    key, labels = class_labels(node)
    c = shape[-1]
    if isinstance(c, int) and c != len(labels):
        raise fail(node, f"input has {c} columns for {len(labels)} class labels")
    return [SequenceType(MapType(key, TensorType(DType.FLOAT, ())))]


CAST_TO = {"TO_FLOAT": DType.FLOAT, "TO_STRING": DType.STRING, "TO_INT64": DType.INT64}


def cast_map_form(node: Node) -> tuple[DType, bool, int]:
    """CastMap's (output type, sparse?, max_map)."""
    to = _as_str(node.attr("cast_to", "TO_FLOAT"))
    form = _as_str(node.attr("map_form", "DENSE"))
    if to not in CAST_TO:
        raise fail(node, f"cast_to {to!r} is not one of {', '.join(CAST_TO)}")
    if form not in ("DENSE", "SPARSE"):
        raise fail(node, f"map_form {form!r} is not DENSE or SPARSE")
    max_map = int(node.attr("max_map", 1))
    if form == "SPARSE" and max_map < 1:
        raise fail(node, f"max_map must be positive for SPARSE, got {max_map}")
    return CAST_TO[to], form == "SPARSE", max_map


@shape_rule("CastMap", domain=ML)
def _cast_map(node: Node) -> list:
    t = _map_input(node)
    if t.key != DType.INT64 or t.value.dtype not in (DType.FLOAT, DType.STRING):
        raise fail(node, f"input must be map(int64, float) or map(int64, string), got {t}")
    to, sparse, max_map = cast_map_form(node)
    n = max_map if sparse else runtime_dim(node, 0, 1)  # dense: one column per key
    return [TensorType(to, (1, n))]


def vocabulary(node: Node) -> tuple[DType, list]:
    """DictVectorizer's vocabulary: (INT64, ints) or (STRING, strs)."""
    ints, strs = node.attr("int64_vocabulary"), node.attr("string_vocabulary")
    if (ints is None) == (strs is None):
        raise fail(node, "exactly one of int64_vocabulary and string_vocabulary must be set")
    if ints is not None:
        return DType.INT64, [int(x) for x in ints]
    return DType.STRING, [_as_str(s) for s in strs]


@shape_rule("DictVectorizer", domain=ML)
def _dict_vectorizer(node: Node) -> list:
    t = _map_input(node)
    key, vocab = vocabulary(node)
    if t.key != key:
        raise fail(node, f"the map has {t.key.short} keys but the vocabulary is {key.short}")
    if t.value.dtype not in (DType.INT64, DType.FLOAT, DType.DOUBLE, DType.STRING):
        raise fail(node, f"map values must be int64, float, double or string, got {t.value.dtype.short}")
    return [TensorType(t.value.dtype, (1, len(vocab)))]
