"""Shape, fold and symbolic-value rules of Cast and CastLike.

Numeric conversions follow the C kernel (codegen/kernels/cast.py): float -> integer truncates toward
zero and saturates (NaN -> 0), integer -> integer keeps the low bits, anything -> bool is ``!= 0``.
Integer shape tensors keep their symbolic values through casts between int32 and int64.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node

from .common import fail, same, tensor_type
from .elementwise_np import from_double
from .registry import fold_rule, shape_rule

# Cast-1 names its target type with a string
_NAMES = {t.name: t for t in DType} | {"FLOAT32": DType.FLOAT, "FLOAT64": DType.DOUBLE}


def target_type(node: Node) -> DType:
    """The element type Cast/CastLike produces; errors name the node when ``to`` is invalid."""
    if node.op_type == "CastLike":
        return tensor_type(node, 1).dtype
    to = node.attr("to")
    if to is None:
        raise fail(node, "attribute 'to' is required")
    if isinstance(to, str):
        if to.upper() not in _NAMES:
            raise fail(node, f"attribute to={to!r} names no element type")
        return _NAMES[to.upper()]
    try:
        t = DType(int(to))
    except ValueError:
        raise fail(node, f"attribute to={to} is not an ONNX element type") from None
    if t == DType.UNDEFINED:
        raise fail(node, "attribute to=0 (UNDEFINED) is not an element type")
    return t


@shape_rule("Cast", "CastLike")
def _cast(node: Node) -> list:
    to = target_type(node)
    src = node.inputs[0]
    if src.sym_value is not None and src.dtype in (DType.INT64, DType.INT32) and to in (DType.INT64, DType.INT32):
        node.outputs[0].sym_value = src.sym_value
    return [same(node, 0, to)]


NUMERIC = frozenset({DType.FLOAT, DType.DOUBLE, DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64,
                     DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
HALF = frozenset({DType.FLOAT16, DType.BFLOAT16})
CASTABLE = NUMERIC | HALF  # types Cast converts between (kernel and fold rule)


def half_to_float(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 values of float16 / bfloat16 storage (exact); other arrays unchanged."""
    if dtype == DType.BFLOAT16:
        return (np.asarray(x, np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == DType.FLOAT16:
        return np.asarray(x, np.float16).astype(np.float32)
    return x


def float_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 values: round to nearest even, NaN stays quiet NaN."""
    u = np.asarray(x, np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def cast_array(x: np.ndarray, to: DType) -> np.ndarray:
    """numpy twin of the C conversion (``x`` holds values: half types already converted to float32)."""
    if to == DType.BFLOAT16:
        return float_to_bfloat16(x.astype(np.float32)).reshape(x.shape)
    if to == DType.BOOL:
        return x != 0
    if x.dtype.kind == "f" and to.is_int:
        return from_double(x, to.np)
    return x.astype(to.np)


@fold_rule("Cast", "CastLike")
def _fold_cast(node: Node, xs: list) -> list | None:
    to = target_type(node)
    src = node.inputs[0].dtype
    if src not in CASTABLE or to not in CASTABLE:
        return None
    if src == to:
        return [np.asarray(xs[0])]
    with np.errstate(all="ignore"):
        return [cast_array(half_to_float(np.asarray(xs[0]), src), to)]
