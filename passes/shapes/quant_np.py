"""numpy twins of the QuantizeLinear / DequantizeLinear kernels, used to fold constant nodes (typically
DequantizeLinear on int8 weights). Same arithmetic as codegen/kernels/quant.py, element for element.

Arrays hold onnxc's storage: float16 as numpy float16, bfloat16 / float8 / float4 / float8e8m0 as
uint8/uint16 bit patterns, int4/int2 one element per byte. float8/float4 conversions use ml_dtypes;
without it those nodes are simply not folded (None).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType

from .cast import float_to_bfloat16, half_to_float
from .quant_layout import FLOAT8, INT_RANGES, QLayout

_ML_NAMES = {DType.FLOAT8E4M3FN: "float8_e4m3fn", DType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
             DType.FLOAT8E5M2: "float8_e5m2", DType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
             DType.FLOAT4E2M1: "float4_e2m1fn"}


def _ml(dt: DType):
    try:
        import ml_dtypes
    except ImportError:
        return None
    return getattr(ml_dtypes, _ML_NAMES[dt], None)


def values(a: np.ndarray, dt: DType) -> np.ndarray | None:
    """Element values of storage ``a`` of type ``dt``: float32 for emulated floats, else ``a``."""
    a = np.asarray(a)
    if dt in (DType.FLOAT16, DType.BFLOAT16):
        return half_to_float(a, dt)
    if dt == DType.FLOAT8E8M0:
        e = a.astype(np.uint8).astype(np.float32)
        return np.where(a == 0xFF, np.float32(np.nan), np.exp2(e - 127).astype(np.float32))
    if dt in _ML_NAMES:
        ml = _ml(dt)
        return None if ml is None else a.astype(np.uint8).view(ml).astype(np.float32)
    return a


def broadcast_param(p: np.ndarray, shape: tuple, lay: QLayout) -> np.ndarray:
    """A scale / zero point expanded so it broadcasts against x of ``shape``."""
    p = np.asarray(p)
    if lay.kind == "tensor":
        return p.reshape(())
    if lay.kind == "axis":
        dims = [1] * len(shape)
        dims[lay.axis] = p.size
        return p.reshape(dims)
    return np.repeat(p, lay.block, axis=lay.axis).take(range(shape[lay.axis]), axis=lay.axis)


def _round_to(q: np.ndarray, dt: DType) -> np.ndarray:
    """Round float32 values to ``dt`` (float16/bfloat16) and back; other types unchanged."""
    if dt == DType.FLOAT16:
        return q.astype(np.float16).astype(np.float32)
    if dt == DType.BFLOAT16:
        return half_to_float(float_to_bfloat16(q), DType.BFLOAT16).reshape(q.shape)
    return q


def quantize(x: np.ndarray, xt: DType, s: np.ndarray, st: DType, zp: np.ndarray | None, out: DType,
             lay: QLayout, prec: DType, saturate: bool) -> np.ndarray | None:
    """QuantizeLinear: ``saturate(round_half_even(x / s) + zp)`` for integer types; for float8/float4
    ``convert(x / s + zp)``. Returns storage of type ``out`` (None when ml_dtypes is missing)."""
    xv, sv = values(x, xt), values(s, st)
    zv = None if zp is None else values(zp, out)
    if sv is None or (zp is not None and zv is None):
        return None
    ft = np.float64 if prec == DType.DOUBLE else np.float32
    sv = broadcast_param(sv, x.shape, lay)
    xv, sv = _round_to(xv.astype(ft), prec), _round_to(sv.astype(ft), prec)
    with np.errstate(all="ignore"):
        q = _round_to(xv / sv, prec)
        z = np.zeros((), ft) if zv is None else broadcast_param(zv, x.shape, lay).astype(ft)
        if out in INT_RANGES:
            lo, hi = INT_RANGES[out]
            r = np.rint(q) + z
            return np.where(r >= lo, np.minimum(r, hi), lo).astype(out.np)
        ml = _ml(out)
        if ml is None:
            return None
        v = np.asarray(q + z if out == DType.FLOAT4E2M1 and zv is not None else np.where(z != 0, q + z, q), ft)
        if saturate and out in FLOAT8:
            import ml_dtypes

            fmax = float(ml_dtypes.finfo(ml).max)
            v = np.where(np.isnan(v), v, np.clip(v, -fmax, fmax))
        return v.astype(ml).view(np.uint8)


def dequantize(x: np.ndarray, xt: DType, s: np.ndarray, st: DType, zp: np.ndarray | None, out: DType,
               lay: QLayout) -> np.ndarray | None:
    """DequantizeLinear: ``(x - zp) * s`` in float32 (float64 for int32 x with a zero point), stored
    as ``out``. Returns None when ml_dtypes is needed but missing."""
    xv, sv = values(x, xt), values(s, st)
    zv = None if zp is None else values(zp, xt)
    if xv is None or sv is None or (zp is not None and zv is None):
        return None
    wide = xt == DType.INT32 and zv is not None
    ft = np.float64 if wide else np.float32
    sv = broadcast_param(sv, x.shape, lay).astype(ft)
    dx = xv.astype(np.float32).astype(ft)
    if zv is not None:
        dx = dx - broadcast_param(zv, x.shape, lay).astype(ft)
    with np.errstate(all="ignore"):
        y = np.asarray(dx * sv, ft)
    if out == DType.FLOAT16:
        return y.astype(np.float16)
    if out == DType.BFLOAT16:
        return float_to_bfloat16(y.astype(np.float32)).reshape(y.shape)
    return y.astype(np.float32)
