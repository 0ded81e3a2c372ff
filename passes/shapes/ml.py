"""Shape and fold rules of the classic ML ops: ai.onnx.ml LabelEncoder, ArrayFeatureExtractor,
Binarizer, TreeEnsemble (opset 5) and TreeEnsembleClassifier/Regressor (opsets 1 and 3), and ai.onnx
TfIdfVectorizer. (SVMs: ml_svm.py; map ops: ml_maps.py; the linear models and preprocessors are
expansions, passes/expansions/ml_linear.py and ml_preprocess.py.)

``label_map`` decodes LabelEncoder's attribute forms (opset 1 ``classes_strings``; opset 2
``keys_*``/``values_*``/``default_*``; opset 4 also ``*_tensor``) into one mapping that both the
shape rule and the kernel use. Lookups follow onnxruntime where it differs from the spec: a repeated
key keeps its first value (onnxruntime's ``emplace``; the opset 4 spec says the last) except in opset
1, where a repeated class keeps its last index; a NaN key matches any NaN input from opset 4 on only
(opsets 2-3 hash floats plainly, so NaN finds nothing, though their spec promises a bitwise match);
0.0 and -0.0 are the same key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import fail, shape_of, tensor_type
from .registry import fold_rule, shape_rule

ML = "ai.onnx.ml"
_INTS = (DType.INT64, DType.INT32, DType.INT16)
_FLOATS = (DType.FLOAT, DType.DOUBLE)


def _as_str(s) -> str:
    return s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)


def _kind(dt: DType) -> str:
    return "string" if dt == DType.STRING else "float" if dt in _FLOATS else "int" if dt in _INTS else "?"


# -- LabelEncoder ---------------------------------------------------------------------------------

@dataclass
class LabelMap:
    """A LabelEncoder's lookup: ``keys`` (sorted, unique, no NaN) map to ``values``; ``nan_value``
    is the value of a NaN key (None: NaN is not a key). ``index`` (opset 1, int64 -> string): the
    input is an index into ``values``, not a key."""

    key_type: DType
    keys: list
    values: list
    value_type: DType
    default: object
    nan_value: object = None
    index: bool = False


def _attr_list(node: Node, stem: str) -> tuple[str, list, DType] | None:
    """The one ``<stem>_*`` attribute that is set: (name, values, element type)."""
    found = []
    for suffix, dt in (("floats", DType.FLOAT), ("int64s", DType.INT64), ("strings", DType.STRING)):
        v = node.attr(f"{stem}_{suffix}")
        if v is not None:
            found.append((f"{stem}_{suffix}", list(v), dt))
    t = node.attr(f"{stem}_tensor") if node.version >= 4 else None
    if t is not None:
        arr = np.asarray(t)
        found.append((f"{stem}_tensor", arr.reshape(-1).tolist(), _dtype_of(node, arr)))
    if len(found) > 1:
        raise fail(node, f"only one of {[f[0] for f in found]} may be set")
    return found[0] if found else None


def _dtype_of(node: Node, arr: np.ndarray) -> DType:
    if arr.dtype.kind in "OUS":
        return DType.STRING
    for dt in (DType.INT64, DType.INT32, DType.INT16, DType.FLOAT, DType.DOUBLE):
        if arr.dtype == dt.np:
            return dt
    raise fail(node, f"tensor attributes of element type {arr.dtype} are not allowed")


def _default(node: Node, vtype: DType, from_tensor: bool):
    """The value of keys not found: ``default_tensor`` goes with ``values_tensor``, ``default_*`` with
    ``values_*``; absent, the spec's defaults ("_Unused", -1, -0.0)."""
    kind = _kind(vtype)
    if from_tensor:
        t = node.attr("default_tensor")
        if t is None:
            return {"string": "_Unused", "float": -0.0}.get(kind, -1)
        arr = np.asarray(t).reshape(-1)
        if arr.size != 1 or _kind(_dtype_of(node, arr)) != kind:
            raise fail(node, "default_tensor must hold one value of the values' type")
        return _as_str(arr[0]) if kind == "string" else arr[0].item()
    if kind == "string":
        return _as_str(node.attr("default_string", "_Unused"))
    if kind == "float":
        return float(node.attr("default_float", -0.0))
    return int(node.attr("default_int64", -1))


def label_map(node: Node) -> LabelMap:
    """The lookup a LabelEncoder node performs (see LabelMap); errors name the node."""
    in_type = tensor_type(node, 0).dtype
    if node.version < 2:
        classes = [_as_str(s) for s in node.attr("classes_strings", []) or []]
        if in_type == DType.STRING:
            last = {s: i for i, s in enumerate(classes)}  # onnxruntime: the last index of a repeated class
            keys = sorted(last, key=lambda s: s.encode("utf-8", "surrogateescape"))
            return LabelMap(DType.STRING, keys, [last[k] for k in keys], DType.INT64,
                            int(node.attr("default_int64", -1)))
        if in_type != DType.INT64:
            raise fail(node, f"input must be string or int64, got {in_type.short}")
        return LabelMap(DType.INT64, [], classes, DType.STRING, _as_str(node.attr("default_string", "_Unused")),
                        index=True)
    k, v = _attr_list(node, "keys"), _attr_list(node, "values")
    if k is None or v is None:
        raise fail(node, "one keys_* and one values_* attribute are required")
    (kname, keys, ktype), (vname, values, vtype) = k, v
    if len(keys) != len(values):
        raise fail(node, f"{kname} has {len(keys)} entries but {vname} has {len(values)}")
    if _kind(ktype) != _kind(in_type):
        raise fail(node, f"input of type {in_type.short} cannot be looked up in {kname} ({ktype.short})")
    if vtype == DType.STRING:
        values = [_as_str(s) for s in values]
    table: dict = {}
    nan_value = None
    for key, val in zip(keys, values):  # the first value of a repeated key wins, as in onnxruntime
        if ktype == DType.STRING:
            table.setdefault(_as_str(key), val)
        elif ktype in _FLOATS and math.isnan(key):
            if node.version >= 4 and nan_value is None:  # opsets 2-3: onnxruntime never matches NaN
                nan_value = val
        else:
            table.setdefault(float(key) if ktype in _FLOATS else int(key), val)
    order = sorted(table, key=(lambda s: s.encode("utf-8", "surrogateescape")) if ktype == DType.STRING else None)
    return LabelMap(ktype, order, [table[x] for x in order], vtype, _default(node, vtype, vname.endswith("_tensor")),
                    nan_value)


def lookup(m: LabelMap, x, table: dict):
    """The value of one input element (the kernel's semantics, for folding); ``table`` maps keys to values."""
    if m.index:
        return m.values[x] if 0 <= x < len(m.values) else m.default
    if m.key_type in _FLOATS and math.isnan(x):
        return m.default if m.nan_value is None else m.nan_value
    return table.get(_as_str(x) if m.key_type == DType.STRING else x, m.default)


@shape_rule("LabelEncoder", domain=ML, versions=(1, 4))
def _label_encoder(node: Node) -> list:
    return [TensorType(label_map(node).value_type, shape_of(node, 0))]


@fold_rule("LabelEncoder", domain=ML)
def _fold_label_encoder(node: Node, xs: list) -> list:
    m = label_map(node)
    x = np.asarray(xs[0])
    table = dict(zip(m.keys, m.values))
    out = [lookup(m, e, table) for e in x.reshape(-1).tolist()]
    arr = np.empty(len(out), dtype=object) if m.value_type == DType.STRING else None
    if arr is not None:
        arr[:] = out
        return [arr.reshape(x.shape)]
    return [np.array(out, dtype=m.value_type.np).reshape(x.shape)]


# -- ArrayFeatureExtractor, Binarizer -------------------------------------------------------------

@shape_rule("ArrayFeatureExtractor", domain=ML)
def _array_feature_extractor(node: Node) -> list:
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if not shape:
        raise fail(node, "the input must have at least one dimension")
    if tensor_type(node, 1).dtype != DType.INT64:
        raise fail(node, f"indices must be int64, got {tensor_type(node, 1).dtype.short}")
    k = tensor_type(node, 1).numel()
    return [TensorType(t.dtype, (1, k) if len(shape) == 1 else shape[:-1] + (k,))]


@shape_rule("Binarizer", domain=ML)
def _binarizer(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in (*_FLOATS, DType.INT64, DType.INT32):
        raise fail(node, f"input must be float, double, int64 or int32, got {t.dtype.short}")
    return [TensorType(t.dtype, shape_of(node, 0))]


@fold_rule("Binarizer", domain=ML)
def _fold_binarizer(node: Node, xs: list) -> list:
    x = np.asarray(xs[0])
    if x.dtype.kind == "f" and np.isnan(x).any():
        return None  # left to the kernel's run-time error (onnxruntime refuses NaN)
    return [(x.astype(np.float64) > float(node.attr("threshold", 0.0))).astype(x.dtype)]


# -- TreeEnsemble ---------------------------------------------------------------------------------

def _max_id(node: Node, name: str, default: int) -> int:
    """The largest entry of int list attribute ``name`` (millions in big forests: one numpy step)."""
    v = node.attr(name)
    return int(np.max(np.asarray(v, dtype=np.int64))) if v is not None and len(v) else default


def tree_targets(node: Node) -> int:
    n = node.attr("n_targets")
    if n is None:
        return _max_id(node, "leaf_targetids", -1) + 1
    return int(n)


@shape_rule("TreeEnsemble", domain=ML, versions=(5, 10**9))
def _tree_ensemble(node: Node) -> list:
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if t.dtype not in (DType.FLOAT, DType.DOUBLE, DType.FLOAT16):
        raise fail(node, f"input must be float, double or float16, got {t.dtype.short}")
    if len(shape) != 2:
        raise fail(node, f"input must have shape [N, F], got {list(shape)}")
    return [TensorType(t.dtype, (shape[0], tree_targets(node)))]


def classic_tree_targets(node: Node) -> int:
    """TreeEnsembleRegressor's target count: ``n_targets``, else one past the largest target id."""
    n = node.attr("n_targets")
    if n is None:
        return _max_id(node, "target_ids", 0) + 1
    return int(n)


def classic_class_labels(node: Node) -> tuple[list, DType]:
    """TreeEnsembleClassifier's class labels and their type (exactly one of the two lists is set)."""
    ints, strs = node.attr("classlabels_int64s"), node.attr("classlabels_strings")
    if (ints is None) == (strs is None):
        raise fail(node, "exactly one of classlabels_int64s and classlabels_strings must be set")
    if ints is not None:
        return [int(v) for v in ints], DType.INT64
    return [_as_str(s) for s in strs], DType.STRING


def _classic_rows(node: Node):
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if t.dtype not in (DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32):
        raise fail(node, f"input must be float, double, int64 or int32, got {t.dtype.short}")
    if len(shape) not in (1, 2):
        raise fail(node, f"input must have shape [N, F] or [F], got {list(shape)}")
    return shape[0] if len(shape) == 2 else 1


@shape_rule("TreeEnsembleRegressor", domain=ML, versions=(1, 4))
def _tree_ensemble_regressor(node: Node) -> list:
    n = classic_tree_targets(node)
    if n < 1:
        raise fail(node, f"n_targets must be positive, got {n}")
    return [TensorType(DType.FLOAT, (_classic_rows(node), n))]


@shape_rule("TreeEnsembleClassifier", domain=ML, versions=(1, 4))
def _tree_ensemble_classifier(node: Node) -> list:
    labels, dt = classic_class_labels(node)
    rows = _classic_rows(node)
    return [TensorType(dt, (rows,)), TensorType(DType.FLOAT, (rows, len(labels)))]


# -- TfIdfVectorizer ------------------------------------------------------------------------------

def tfidf_output_size(node: Node) -> int:
    return max((int(i) for i in node.attr("ngram_indexes", []) or []), default=-1) + 1


@shape_rule("TfIdfVectorizer", versions=(9, 10**9))
def _tfidf(node: Node) -> list:
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if t.dtype not in (DType.STRING, DType.INT32, DType.INT64):
        raise fail(node, f"input must be string, int32 or int64, got {t.dtype.short}")
    if len(shape) > 2:
        raise fail(node, f"input must have shape [C] or [B, C], got {list(shape)}")
    n = tfidf_output_size(node)
    return [TensorType(DType.FLOAT, (shape[0], n) if len(shape) == 2 else (n,))]
