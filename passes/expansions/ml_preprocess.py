"""ai.onnx.ml preprocessing ops (opset 1) as primitive ops: Scaler, Normalizer, Imputer, OneHotEncoder,
FeatureVectorizer and CategoryMapper.

Semantics follow onnxruntime 1.32, which users compare against; "features" are the last axis of an
``[N, C]`` input or of a ``[C]`` one. Where the ONNX reference evaluator (or the spec) differs:

- Scaler computes ``(x - offset) * scale`` in float (in double for double inputs) and returns float
  for every input type (the reference keeps integer types). An omitted ``offset`` is 0 and an
  omitted ``scale`` 1 (onnxruntime requires both, of equal lengths).
- Normalizer MAX divides each row by its maximum, which may be negative (the reference divides by
  the largest absolute value); a row whose divisor is 0 is copied. Inputs are cast to float first.
- Imputer keeps the input type; a NaN ``replaced_value_float`` replaces NaNs. onnxruntime has float
  and int64 kernels only; onnxc also takes double (with the float attributes) and int32 (with the
  int64 ones).
- OneHotEncoder casts float/double/int32 inputs to int64 by truncation (the reference compares
  floats exactly), NaN and out-of-range floats becoming INT64_MIN as onnxruntime's cast does on
  x86 (an unknown category, unless listed); a repeated category keeps its last position; any
  input rank works (output: the input shape + [number of categories]). With ``zeros=0`` an
  unknown category is a run-time error (from an ArrayFeatureExtractor node named
  ``<node>/unknown_category``: "index -1 is out of range").
- FeatureVectorizer accepts inputs of different element types (onnxruntime binds them to one type).
- CategoryMapper: a repeated category keeps its last value, as in onnxruntime (it becomes a
  LabelEncoder, whose repeated keys keep their first value).
- Per-feature attribute lists (Scaler, Imputer) need the input's feature count to be static; on
  inputs of rank > 2 they are not supported (onnxruntime indexes them by ``dims[1]``).
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Value
from onnxc.passes.shapes.ml import ML

from .builder import Builder
from .ml_linear import NUMERIC_IN, text
from .registry import expansion

_INTS = (DType.INT64, DType.INT32)


def _features(b: Builder, name: str, values: list, allow_empty: bool = False) -> int:
    """Check that attribute ``name`` has 1 or C values (C: the features of input 0); returns its length."""
    shape = b.shape(0)
    if not shape:
        raise b.fail("X must have at least one dimension")
    n = len(values)
    if n == 0 and not allow_empty:
        raise b.fail(f"attribute {name} is required")
    if n <= 1:
        return n
    if len(shape) > 2:
        raise b.unsupported(f"attribute {name} has {n} per-feature values; inputs of rank {len(shape)} "
                            "are not supported with them (only [N, C] or [C])")
    c = shape[-1]
    if not isinstance(c, int):
        raise b.unsupported(f"attribute {name} has {n} per-feature values; the feature count of X ({c}) "
                            "must be static")
    if n != c:
        raise b.fail(f"attribute {name} has {n} values; expected 1 or the {c} features of X")
    return n


@expansion("Scaler", domain=ML)
def scaler(b: Builder) -> None:
    b.require_types([0], NUMERIC_IN)
    scale = [float(v) for v in b.attr("scale") or []]
    offset = [float(v) for v in b.attr("offset") or []]
    _features(b, "scale", scale, allow_empty=True)
    _features(b, "offset", offset, allow_empty=True)
    work = DType.DOUBLE if b.dtype(0) == DType.DOUBLE else DType.FLOAT
    x = b.input(0)
    if b.dtype(0) != work:
        x = b.cast(x, work)
    # the attributes are float32 (as onnxruntime reads them), widened for double inputs
    if offset and any(v != 0.0 for v in offset):
        x = b.op("Sub", x, b.const(np.asarray(offset, np.float32).astype(work.np), tag="offset"))
    if scale and any(v != 1.0 for v in scale):
        x = b.op("Mul", x, b.const(np.asarray(scale, np.float32).astype(work.np), tag="scale"))
    if work == DType.FLOAT:
        b.identity(x, b.output(0))
    else:
        b.cast(x, DType.FLOAT, out=b.output(0))


@expansion("Normalizer", domain=ML)
def normalizer(b: Builder) -> None:
    b.require_types([0], NUMERIC_IN)
    norm = text(b.attr("norm", "MAX"))
    if norm not in ("MAX", "L1", "L2"):
        raise b.fail(f"attribute norm: unknown value {norm!r} (expected MAX, L1 or L2)")
    r = b.rank(0)
    if r not in (1, 2):
        raise b.fail(f"X must have shape [N, C] or [C], got rank {r}")
    f = DType.FLOAT
    x = b.input(0)
    if b.dtype(0) != f:
        x = b.cast(x, f)
    if norm == "MAX":
        div = b.reduce("ReduceMax", x, [-1], keepdims=1)
        y = b.op("Div", x, div)
    elif norm == "L1":
        div = b.reduce("ReduceSum", b.op("Abs", x), [-1], keepdims=1)
        y = b.op("Div", x, div)
    else:  # onnxruntime's sign(x) * sqrt(x^2 / sum(x^2))
        sq = b.op("Mul", x, x)
        div = b.reduce("ReduceSum", sq, [-1], keepdims=1)
        mag = b.op("Sqrt", b.op("Div", sq, div))
        y = b.op("Where", b.op("Less", x, b.scalar(0.0, f)), b.op("Neg", mag), mag)
    b.op("Where", b.op("Equal", div, b.scalar(0.0, f)), x, y, out=b.output(0))


@expansion("Imputer", domain=ML)
def imputer(b: Builder) -> None:
    b.require_types([0], NUMERIC_IN)
    dt = b.dtype(0)
    floats, ints = b.attr("imputed_value_floats") or [], b.attr("imputed_value_int64s") or []
    if floats and ints:
        raise b.fail("only one of the attributes imputed_value_floats and imputed_value_int64s may be set")
    want, other = ("imputed_value_int64s", "floats") if dt in _INTS else ("imputed_value_floats", "int64s")
    values = list(ints if dt in _INTS else floats)
    if not values:
        raise b.fail(f"attribute {want} is required for {dt.short} input"
                     + (f" (imputed_value_{other} is set)" if floats or ints else ""))
    _features(b, want, values)
    x = b.input(0)
    if dt in _INTS:
        replaced = int(b.attr("replaced_value_int64", 0))
        match = b.op("Equal", x, b.scalar(replaced, dt))
        table = np.asarray(values, np.int64).astype(dt.np)
    else:
        replaced = float(b.attr("replaced_value_float", 0.0))
        match = b.op("IsNaN", x) if math.isnan(replaced) else b.op("Equal", x, b.scalar(replaced, dt))
        table = np.asarray(values, np.float32).astype(dt.np)
    b.op("Where", match, b.const(table, tag="imputed"), x, out=b.output(0))


def _index_of(b: Builder, x: Value, keys: np.ndarray) -> Value:
    """The position of each element of ``x`` in ``keys`` (the last one when repeated), -1 if absent."""
    last = {k: i for i, k in enumerate(keys.tolist())}  # LabelEncoder keeps the first of repeated keys
    return b.op("LabelEncoder", x, domain=ML, version=4, tag="index",
                keys_tensor=np.array(list(last), dtype=keys.dtype),
                values_tensor=np.asarray(list(last.values()), dtype=np.int64),
                default_tensor=np.array([-1], np.int64))


def _float_categories(b: Builder, x: Value, dt: DType) -> Value:
    """Float categories as int64 the way onnxruntime's ``static_cast`` gives them on x86: truncated,
    and NaN or values outside the int64 range as INT64_MIN (onnxc's Cast saturates them instead)."""
    fits = b.op("Less", b.op("Abs", x), b.scalar(2.0 ** 63, dt))  # false for NaN
    lowest = b.scalar(int(np.iinfo(np.int64).min), DType.INT64)
    return b.op("Where", fits, b.cast(x, DType.INT64), lowest)


@expansion("OneHotEncoder", domain=ML)
def one_hot_encoder(b: Builder) -> None:
    b.require_types([0], (DType.STRING,) + NUMERIC_IN)
    dt = b.dtype(0)
    ints, strs = b.attr("cats_int64s") or [], b.attr("cats_strings") or []
    if ints and strs:
        raise b.fail("only one of the attributes cats_int64s and cats_strings may be set")
    zeros = b.attr("zeros", 1)
    x = b.input(0)
    if dt == DType.STRING:
        if not strs:
            raise b.fail("attribute cats_strings is required for string input")
        keys = np.array([text(s) for s in strs], dtype=object)
    else:
        if not ints:
            raise b.fail(f"attribute cats_int64s is required for {dt.short} input")
        keys = np.asarray(list(ints), np.int64)
        if dt in (DType.FLOAT, DType.DOUBLE):
            x = _float_categories(b, x, dt)
        elif dt != DType.INT64:
            x = b.cast(x, DType.INT64)
    k = len(keys)
    index = _index_of(b, x, keys)
    if not zeros:  # an unknown category (-1) must fail: ArrayFeatureExtractor checks every index
        flat = b.reshape(index, [-1])
        checked = b.op("ArrayFeatureExtractor", b.const(np.arange(k, dtype=np.int64), tag="categories"), flat,
                       domain=ML, version=1, tag="unknown_category")
        index = b.reshape(checked, b.op("Shape", b.input(0)))
    hot = b.op("Equal", b.unsqueeze(index, [-1]), b.const(np.arange(k, dtype=np.int64), tag="positions"))
    b.cast(hot, DType.FLOAT, out=b.output(0))


@expansion("FeatureVectorizer", domain=ML)
def feature_vectorizer(b: Builder) -> None:
    ins = b.node.inputs
    dims = [int(d) for d in b.attr("inputdimensions") or []]
    if len(dims) != len(ins):
        raise b.fail(f"attribute inputdimensions has {len(dims)} values for {len(ins)} inputs")
    b.require_types(range(len(ins)), NUMERIC_IN)
    parts = []
    for i, d in enumerate(dims):
        if d < 0:
            raise b.fail(f"attribute inputdimensions: value {i} is negative ({d})")
        shape = b.shape(i)
        if not shape:
            raise b.fail(f"input {i} must have at least one dimension")
        x = b.input(i)
        if b.dtype(i) != DType.FLOAT:
            x = b.cast(x, DType.FLOAT)
        if len(shape) == 1:
            x = b.unsqueeze(x, [0])
        elif len(shape) > 2:
            x = b.op("Flatten", x, axis=1)
        if d == 0:
            continue
        rest = shape[-1:] if len(shape) == 1 else shape[1:]
        c = math.prod(rest) if all(isinstance(s, int) for s in rest) else None
        if c is None:  # not known: pad with d zeros, then keep the first d
            x = b.slice(b.op("Pad", x, b.ints([0, 0, 0, d])), [0], [d], [1])
        elif c < d:
            x = b.op("Pad", x, b.ints([0, 0, 0, d - c]))
        elif c > d:
            x = b.slice(x, [0], [d], [1])
        parts.append(x)
    if not parts:
        raise b.fail("attribute inputdimensions: every value is 0, the output would have no features")
    if len(parts) == 1:
        b.identity(parts[0], b.output(0))
    else:
        b.op("Concat", *parts, axis=1, out=b.output(0))


@expansion("CategoryMapper", domain=ML)
def category_mapper(b: Builder) -> None:
    b.require_types([0], (DType.STRING, DType.INT64))
    strs = [text(s) for s in b.attr("cats_strings") or []]
    ints = [int(v) for v in b.attr("cats_int64s") or []]
    if len(strs) != len(ints):
        raise b.fail(f"attributes cats_strings ({len(strs)} values) and cats_int64s ({len(ints)}) must have "
                     "the same length")
    if b.dtype(0) == DType.STRING:  # string -> int64; a repeated key keeps its last value (onnxruntime)
        table = dict(zip(strs, ints))
        keys, values = np.array(list(table), dtype=object), np.asarray(list(table.values()), np.int64)
        default = np.array([int(b.attr("default_int64", -1))], np.int64)
    else:  # int64 -> string
        table = dict(zip(ints, strs))
        keys, values = np.asarray(list(table), np.int64), np.array(list(table.values()), dtype=object)
        default = np.array([text(b.attr("default_string", "_Unused"))], dtype=object)
    b.op("LabelEncoder", b.input(0), domain=ML, version=4, out=b.output(0),
         keys_tensor=keys, values_tensor=values, default_tensor=default)
