"""numpy twins of runtime_c/onnxc_lowp.h: float8, float4e2m1, float8e8m0 and int4/uint4/int2/uint2
conversions, bit for bit (constant folding must agree with the kernels).

Arrays hold the IR storage: float8/float4 bit patterns in uint8 (float4 in the low nibble), int4/int2
sign-extended in int8, uint4/uint2 in uint8. The rules (rounding, ``saturate``, special values) are
documented in the C header; this module computes the same with integer arithmetic on the float64
bit patterns, so float, float16 and double sources round once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from onnxc.ir import DType

IEEE, FN, FNUZ, NONE = 0, 1, 2, 3  # special-value conventions (see the C header)


@dataclass(frozen=True)
class MiniFloat:
    """A small float format: total bits, mantissa bits, exponent bias, largest finite code, kind."""

    nbits: int
    mbits: int
    bias: int
    maxc: int
    kind: int


FORMATS: dict[DType, MiniFloat] = {
    DType.FLOAT8E4M3FN: MiniFloat(8, 3, 7, 0x7E, FN),
    DType.FLOAT8E4M3FNUZ: MiniFloat(8, 3, 8, 0x7F, FNUZ),
    DType.FLOAT8E5M2: MiniFloat(8, 2, 15, 0x7B, IEEE),
    DType.FLOAT8E5M2FNUZ: MiniFloat(8, 2, 16, 0x7F, FNUZ),
    DType.FLOAT4E2M1: MiniFloat(4, 1, 1, 0x7, NONE),
}
SUBBYTE_INTS = {DType.INT4: 4, DType.UINT4: 4, DType.INT2: 2, DType.UINT2: 2}  # type -> bit width
LOWP_FLOATS = frozenset(FORMATS) | {DType.FLOAT8E8M0}
ROUND_MODES = {"up": 0, "down": 1, "nearest": 2}

_ABS = np.uint64(0x7FFFFFFFFFFFFFFF)
_INF = np.uint64(0x7FF0000000000000)
_MANT = np.uint64(0xFFFFFFFFFFFFF)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)


def _codes(a: np.ndarray, f: MiniFloat) -> np.ndarray:
    """|x| (float64 bits without sign, finite) as codes of ``f``, nearest even, exponent unbounded
    above (int64; values past every format are 0xFFFF) — ``onnxc_lowp_code``."""
    biased = (a >> np.uint64(52)).astype(np.int64)
    te = biased - 1023 + f.bias
    full = (a & _MANT) | np.uint64(1 << 52)
    shift = 52 - f.mbits + np.where(te < 1, 1 - te, 0)
    tiny = (biased == 0) | (shift >= 54)
    s = np.minimum(shift, 53).astype(np.uint64)
    q = full >> s
    rem = full & ((np.uint64(1) << s) - np.uint64(1))
    half = np.uint64(1) << (s - np.uint64(1))
    q = (q + ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1)))).astype(np.int64)
    code = np.where(te >= 1, ((np.maximum(te, 1) - 1) << f.mbits) + q, q)
    code = np.where(tiny, 0, code)
    return np.where(te > 64, 0xFFFF, code)


def encode(x: np.ndarray, dtype: DType, saturate: bool = True) -> np.ndarray:
    """Bit patterns (uint8) of ``x`` (any real values; float64 precision) in float8/float4 ``dtype``."""
    f = FORMATS[dtype]
    shape = np.shape(x)
    u = _bits(np.asarray(x, np.float64).reshape(-1))
    a = u & _ABS
    sign = ((u >> np.uint64(63)).astype(np.int64) << (f.nbits - 1))
    nan, inf = a > _INF, a == _INF
    with np.errstate(all="ignore"):
        code = np.where(inf, 0xFFFF, _codes(np.where(nan | inf, np.uint64(0), a), f))
    over = code > f.maxc
    if saturate or f.kind == NONE:
        over_val = sign | f.maxc
    elif f.kind == FNUZ:
        over_val = np.full_like(sign, 0x80)
    else:
        over_val = sign | (f.maxc + 1)
    out = np.where(over, over_val, sign | code)
    if f.kind == FNUZ:
        out = np.where(code == 0, 0, out)
    nan_val = {IEEE: sign | (f.maxc + 1) | (1 << (f.mbits - 1)), FN: sign | (f.maxc + 1),
               FNUZ: np.full_like(sign, 0x80), NONE: sign ^ (1 << (f.nbits - 1))}[f.kind]
    out = np.where(nan, nan_val, out)
    return out.astype(np.uint8).reshape(shape)


@functools.cache
def _table(dtype: DType) -> np.ndarray:
    """float32 value of every bit pattern of ``dtype`` (``onnxc_lowp_decode``, ``onnxc_f8e8m0_to_float``)."""
    if dtype == DType.FLOAT8E8M0:
        v = np.arange(256, dtype=np.uint32)
        bits = np.where(v == 0, np.uint32(0x00400000), v << np.uint32(23))
        out = bits.astype(np.uint32).view(np.float32).copy()
        out[255] = np.nan
        return out
    f = FORMATS[dtype]
    v = np.arange(1 << f.nbits, dtype=np.int64)
    neg = (v >> (f.nbits - 1)) & 1 == 1
    mag = v & ((1 << (f.nbits - 1)) - 1)
    e, m = mag >> f.mbits, mag & ((1 << f.mbits) - 1)
    emax = (1 << (f.nbits - 1 - f.mbits)) - 1
    val = np.where(e == 0, m * 2.0 ** (1 - f.bias - f.mbits),
                   (1 + m / 2.0 ** f.mbits) * 2.0 ** (e - f.bias).astype(np.float64))
    if f.kind == IEEE:
        val = np.where(e == emax, np.where(m == 0, np.inf, np.nan), val)
    elif f.kind == FN:
        val = np.where(mag == (1 << (f.nbits - 1)) - 1, np.nan, val)
    elif f.kind == FNUZ:
        val = np.where(v == 0x80, np.nan, val)
    return np.where(neg, -val, val).astype(np.float32)


def decode(bits: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 values (exact) of float8/float4/float8e8m0 bit patterns."""
    t = _table(dtype)
    return t[np.asarray(bits).astype(np.uint8) & np.uint8(t.size - 1)]


def encode_e8m0(x: np.ndarray, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """float8e8m0 bit patterns of |x| (``onnxc_double_to_f8e8m0``)."""
    mode = ROUND_MODES[round_mode]
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        m, ex = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))  # a = m * 2^ex, m in [0.5, 1)
    e = ex.astype(np.int64) - 1  # a = 2^e * (2m), 2m in [1, 2)
    if mode == 0:
        e = e + (m != 0.5)
    elif mode == 2:
        e = e + (m >= 0.75)
    lo, hi = (0, 0xFE) if saturate else (0xFF, 0xFF)
    out = np.where(e > 127, hi, np.where(e < -127, lo, e + 127))
    out = np.where(a == 0, lo, out)
    out = np.where(np.isinf(a), hi, out)
    out = np.where(np.isnan(a), 0xFF, out)
    return out.astype(np.uint8)


def wrap_int(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Low bits of integers ``x`` as ``dtype`` storage (sign-extended for int4/int2)."""
    bits = SUBBYTE_INTS[dtype]
    low = np.asarray(x).astype(np.int64) & ((1 << bits) - 1)
    if dtype in (DType.INT4, DType.INT2):
        sign = 1 << (bits - 1)
        return ((low ^ sign) - sign).astype(np.int8)
    return low.astype(np.uint8)


def float_to_subbyte(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float -> int4/uint4/int2/uint2: round half to even, keep the low bits; NaN/inf/huge -> 0."""
    r = np.rint(np.asarray(x, np.float64))
    ok = (r > -(2.0**63)) & (r < 2.0**63)
    return wrap_int(np.where(ok, r, 0.0).astype(np.int64), dtype)
