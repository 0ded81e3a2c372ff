"""Shape, fold and symbolic-value rules of Cast and CastLike.

Numeric conversions follow the C kernel (codegen/kernels/cast.py): float -> integer truncates toward
zero and saturates (NaN -> 0), integer -> integer keeps the low bits, anything -> bool is ``!= 0``.
float8/float4/float8e8m0 and int4/uint4/int2/uint2 follow runtime_c/onnxc_lowp.h through their numpy
twins in lowp_np.py (``saturate`` and ``round_mode`` attributes). Integer shape tensors keep their
symbolic values through casts between int32 and int64.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, UnsupportedOpError

from .common import fail, same, tensor_type
from .elementwise_np import from_double
from .lowp_np import (
    FORMATS,
    LOWP_FLOATS,
    ROUND_MODES,
    SUBBYTE_INTS,
    decode,
    encode,
    encode_e8m0,
    float_to_subbyte,
    wrap_int,
)
from .registry import fold_rule, shape_rule

# Cast-1 names its target type with a string
_NAMES = {t.name: t for t in DType} | {"FLOAT32": DType.FLOAT, "FLOAT64": DType.DOUBLE}
_UNSUPPORTED_TYPES = {27: "float6e2m3", 28: "float6e3m2"}  # ONNX element types the IR does not have


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
    if int(to) in _UNSUPPORTED_TYPES:
        raise UnsupportedOpError(f"{node.describe()}: {_UNSUPPORTED_TYPES[int(to)]} tensors are not supported yet",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    try:
        t = DType(int(to))
    except ValueError:
        raise fail(node, f"attribute to={to} is not an ONNX element type") from None
    if t == DType.UNDEFINED:
        raise fail(node, "attribute to=0 (UNDEFINED) is not an element type")
    return t


def cast_attrs(node: Node) -> tuple[bool, str]:
    """``saturate`` (float8 targets, default 1) and ``round_mode`` (float8e8m0 targets, default "up")."""
    mode = node.attr("round_mode", "up")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in ROUND_MODES:
        raise fail(node, f"attribute round_mode={mode!r} must be one of {list(ROUND_MODES)}")
    return bool(node.attr("saturate", 1)), mode


# types whose tensors keep the symbolic values (Dims) of an int shape tensor cast to them
SYM_TARGETS = (DType.INT64, DType.INT32, DType.FLOAT, DType.DOUBLE)


@shape_rule("Cast", "CastLike")
def _cast(node: Node) -> list:
    to = target_type(node)
    cast_attrs(node)
    src = node.inputs[0]
    if src.sym_value is not None and src.dtype in (DType.INT64, DType.INT32) and to in SYM_TARGETS:
        node.outputs[0].sym_value = src.sym_value  # float values of dims: for float Range (shape_ops.py)
    return [same(node, 0, to)]


NUMERIC = frozenset({DType.FLOAT, DType.DOUBLE, DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64,
                     DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
HALF = frozenset({DType.FLOAT16, DType.BFLOAT16})
LOWP = LOWP_FLOATS | frozenset(SUBBYTE_INTS)
CASTABLE = NUMERIC | HALF | LOWP  # types Cast converts between (kernel and fold rule)


def half_to_float(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 values of float16 / bfloat16 storage (exact); other arrays unchanged."""
    if dtype == DType.BFLOAT16:
        return (np.asarray(x, np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == DType.FLOAT16:
        return np.asarray(x, np.float16).astype(np.float32)
    return x


def to_values(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Values of ``dtype`` storage: float32 for half, float8, float4 and float8e8m0 (exact); int4/int2
    storage already holds the values (int8/uint8); other arrays unchanged."""
    if dtype in LOWP_FLOATS:
        return decode(x, dtype)
    return half_to_float(x, dtype)


def float_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 values: round to nearest even, NaN stays quiet NaN."""
    u = np.asarray(x, np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def cast_array(x: np.ndarray, to: DType, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """numpy twin of the C conversion: ``x`` holds values (see ``to_values``); returns ``to`` storage."""
    if to in FORMATS:
        return encode(x.astype(np.float64), to, saturate)
    if to == DType.FLOAT8E8M0:
        return encode_e8m0(x.astype(np.float64), saturate, round_mode)
    if to in SUBBYTE_INTS:
        return float_to_subbyte(x, to) if x.dtype.kind == "f" else wrap_int(x.astype(np.int64), to)
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
    saturate, mode = cast_attrs(node)
    if src == to and not (to == DType.FLOAT8E5M2 and saturate):  # saturating e5m2 maps +-inf to +-max
        return [np.asarray(xs[0])]
    with np.errstate(all="ignore"):
        return [cast_array(to_values(np.asarray(xs[0]), src), to, saturate, mode)]


# -- BitCast (opset 26): the same bits read as another type of the same bit width -------------------

_NARROW_BITS = {DType.INT4: 4, DType.UINT4: 4, DType.FLOAT4E2M1: 4, DType.INT2: 2, DType.UINT2: 2}


def bit_width(t: DType) -> int:
    """Bits of one element as ONNX counts them (bool 8, int4 4, complex64 64...)."""
    return _NARROW_BITS.get(t, t.itemsize * 8)


@shape_rule("BitCast")
def _bitcast(node: Node) -> list:
    src, to = tensor_type(node, 0).dtype, target_type(node)
    if DType.STRING in (src, to):
        raise fail(node, "BitCast does not apply to string tensors")
    if bit_width(src) != bit_width(to):
        raise fail(node, f"cannot reinterpret {src.short} ({bit_width(src)} bits) as {to.short} "
                         f"({bit_width(to)} bits): BitCast needs equal bit widths")
    return [same(node, 0, to)]


def bitcast_array(x: np.ndarray, src: DType, to: DType) -> np.ndarray:
    """numpy twin of the BitCast kernel on IR storage. Sub-byte elements keep their low bits (int4/int2
    sign-extended); a bool target reads any nonzero byte as true (C bools hold only 0 and 1)."""
    x = np.asarray(x, order="C")  # (ascontiguousarray would make scalars 1-d)
    if src == to:
        return x
    if to == DType.BOOL:
        return x.view(np.uint8) != 0
    if src in _NARROW_BITS:
        low = x.view(np.uint8) & np.uint8((1 << _NARROW_BITS[src]) - 1)
        return wrap_int(low, to) if to in SUBBYTE_INTS else low
    return x.view(to.np)


@fold_rule("BitCast")
def _fold_bitcast(node: Node, xs: list) -> list | None:
    return [bitcast_array(np.asarray(xs[0]), node.inputs[0].dtype, target_type(node))]
