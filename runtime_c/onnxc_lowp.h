/* Low-precision element types <-> float/double: float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0),
 * float4e2m1 and the sub-byte integers int4/uint4/int2/uint2.
 *
 * Storage (ir/types.py): float8/float4 elements are their bit patterns, one per uint8_t byte (float4
 * in the low nibble); int4/int2 are sign-extended int8_t values, uint4/uint2 uint8_t values. Packing
 * happens only at the file boundary.
 *
 * Decoding (onnxc_<t>_to_float) is exact. Encoding rounds to nearest even, once: the core works on
 * double, so float, float16 (exact in float) and double sources all round a single time.
 * `saturate` follows the Cast spec tables:
 *   saturate=1: +-inf and finite values whose rounding exceeds the largest finite value become
 *               +-max; NaN stays NaN.
 *   saturate=0: overflow and +-inf become +-inf (e5m2), NaN with the sign (e4m3fn) or the NaN
 *               0x80 (the fnuz types, which have neither inf nor -0).
 * NaN encodes as the type's quiet NaN (sign kept where the type has signed NaNs). float4e2m1 has no
 * inf/NaN: it always saturates, and NaN encodes as a zero of the opposite sign (ml_dtypes, hence the
 * ONNX reference implementation and conformance data, do so; the ONNX float4 notes say 6).
 * float8e8m0 (exponent only, 2^(v-127), 0xFF NaN, no zero, no sign): |x| is rounded in the
 * `round_mode` (0 up = toward +inf, 1 down = toward 0, 2 nearest with ties up); results beyond
 * 2^127 or below 2^-127, +-inf and (non saturating) zero are E8M0_MAX/E8M0_MIN when saturating and
 * NaN otherwise, as the spec table says; NaN -> NaN.
 * Sub-byte integers: float -> int4/uint4/int2/uint2 rounds to nearest even and keeps the low bits
 * (ONNX int4/int2 notes); NaN, +-inf and values beyond int64 give 0. Integers keep their low bits.
 * Everything here is static inline: Cast and the quantizers call it per element, and the format
 * parameters fold into constants once inlined.
 */
#ifndef ONNXC_LOWP_H
#define ONNXC_LOWP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "onnxc_half.h"

/* special-value conventions of a minifloat format */
#define ONNXC_LOWP_IEEE 0 /* inf and NaNs in the top exponent (e5m2) */
#define ONNXC_LOWP_FN 1   /* no inf; S.1111.111 is NaN (e4m3fn) */
#define ONNXC_LOWP_FNUZ 2 /* no inf, no -0; 0x80 is the only NaN */
#define ONNXC_LOWP_NONE 3 /* neither inf nor NaN (e2m1) */

/* |x| as a code of a format with `mbits` mantissa bits and exponent `bias`, rounded to nearest
 * even, exponent unbounded above (the caller compares with the largest finite code). x finite. */
static inline uint32_t onnxc_lowp_code(uint64_t a, int mbits, int bias) {
    if ((a >> 52) == 0) return 0; /* zero or double subnormal: far below every format's range */
    int64_t te = (int64_t)(a >> 52) - 1023 + bias; /* biased target exponent */
    if (te > 64) return 0xffffu;                    /* overflows every format */
    uint64_t full = (a & 0xfffffffffffffull) | (1ull << 52);
    int shift = 52 - mbits + (te < 1 ? (int)(1 - te) : 0);
    if (shift >= 54) return 0; /* below half the smallest subnormal */
    uint64_t q = full >> shift, rem = full & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    /* normal: q holds the implicit one at bit mbits, so (te-1) << mbits completes the exponent and a
     * rounding carry bumps it; subnormal: q is the code (a carry gives the smallest normal) */
    return (uint32_t)(te >= 1 ? ((uint64_t)(te - 1) << mbits) + q : q);
}

/* double -> bit pattern of an `nbits`-wide minifloat (sign in the top bit) whose largest finite
 * magnitude code is `maxc`. */
static inline uint8_t onnxc_lowp_encode(double x, int nbits, int mbits, int bias, uint32_t maxc, int kind,
                                        int saturate) {
    uint64_t u;
    memcpy(&u, &x, 8);
    uint8_t sign = (uint8_t)((u >> 63) << (nbits - 1));
    uint64_t a = u & 0x7fffffffffffffffull;
    uint32_t code;
    if (a > 0x7ff0000000000000ull) { /* NaN */
        switch (kind) {
        case ONNXC_LOWP_IEEE: return (uint8_t)(sign | (maxc + 1) | (1u << (mbits - 1)));
        case ONNXC_LOWP_FN: return (uint8_t)(sign | (maxc + 1));
        case ONNXC_LOWP_FNUZ: return 0x80;
        default: return (uint8_t)(sign ^ (1u << (nbits - 1)));
        }
    }
    code = a == 0x7ff0000000000000ull ? 0xffffu : onnxc_lowp_code(a, mbits, bias);
    if (code > maxc) { /* overflow, or +-inf */
        if (saturate || kind == ONNXC_LOWP_NONE) return (uint8_t)(sign | maxc);
        if (kind == ONNXC_LOWP_FNUZ) return 0x80;
        return (uint8_t)(sign | (maxc + 1)); /* e5m2: inf; e4m3fn: NaN */
    }
    if (code == 0 && kind == ONNXC_LOWP_FNUZ) return 0;
    return (uint8_t)(sign | code);
}

/* bit pattern -> float (exact) */
static inline float onnxc_lowp_decode(uint8_t v, int nbits, int mbits, int bias, int kind) {
    uint32_t sign = (uint32_t)((v >> (nbits - 1)) & 1u) << 31;
    uint32_t mag = v & ((1u << (nbits - 1)) - 1u), e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
    uint32_t emax = (1u << (nbits - 1 - mbits)) - 1u;
    if ((kind == ONNXC_LOWP_FNUZ && v == 0x80) || (kind == ONNXC_LOWP_FN && mag == (1u << (nbits - 1)) - 1u) ||
        (kind == ONNXC_LOWP_IEEE && e == emax && m))
        return onnxc_bits_f32(sign | 0x7fc00000u);
    if (kind == ONNXC_LOWP_IEEE && e == emax) return onnxc_bits_f32(sign | 0x7f800000u);
    if (e == 0) { /* zero / subnormal: m * 2^(1 - bias - mbits), exact */
        float f = (float)m * onnxc_bits_f32((uint32_t)(127 + 1 - bias - mbits) << 23);
        return sign ? -f : f;
    }
    return onnxc_bits_f32(sign | ((e - (uint32_t)bias + 127u) << 23) | (m << (23 - mbits)));
}

#define ONNXC_LOWP_TYPE(T, NBITS, MBITS, BIAS, MAXC, KIND)                                              \
    static inline float onnxc_##T##_to_float(uint8_t v) { return onnxc_lowp_decode(v, NBITS, MBITS, BIAS, KIND); } \
    static inline uint8_t onnxc_double_to_##T(double x, int saturate) {                                  \
        return onnxc_lowp_encode(x, NBITS, MBITS, BIAS, MAXC, KIND, saturate);                          \
    }                                                                                                    \
    static inline uint8_t onnxc_float_to_##T(float x, int saturate) {                                    \
        return onnxc_lowp_encode((double)x, NBITS, MBITS, BIAS, MAXC, KIND, saturate);                  \
    }

ONNXC_LOWP_TYPE(f8e4m3fn, 8, 3, 7, 0x7eu, ONNXC_LOWP_FN)       /* max 448 */
ONNXC_LOWP_TYPE(f8e4m3fnuz, 8, 3, 8, 0x7fu, ONNXC_LOWP_FNUZ)   /* max 240 */
ONNXC_LOWP_TYPE(f8e5m2, 8, 2, 15, 0x7bu, ONNXC_LOWP_IEEE)      /* max 57344 */
ONNXC_LOWP_TYPE(f8e5m2fnuz, 8, 2, 16, 0x7fu, ONNXC_LOWP_FNUZ)  /* max 57344 */
ONNXC_LOWP_TYPE(f4e2m1, 4, 1, 1, 0x7u, ONNXC_LOWP_NONE)        /* max 6 */

/* ---- float8e8m0: 2^(v - 127); 0xFF is NaN */

#define ONNXC_E8M0_UP 0
#define ONNXC_E8M0_DOWN 1
#define ONNXC_E8M0_NEAREST 2

static inline float onnxc_f8e8m0_to_float(uint8_t v) {
    if (v == 0xff) return onnxc_bits_f32(0x7fc00000u);
    return onnxc_bits_f32(v ? (uint32_t)v << 23 : 0x00400000u); /* 2^-127 is a float subnormal */
}

static inline uint8_t onnxc_double_to_f8e8m0(double x, int saturate, int round_mode) {
    uint64_t u;
    memcpy(&u, &x, 8);
    uint64_t a = u & 0x7fffffffffffffffull; /* the sign is ignored (negative inputs are unspecified) */
    if (a > 0x7ff0000000000000ull) return 0xff;
    if (a == 0x7ff0000000000000ull) return saturate ? 0xfe : 0xff;
    if (a == 0) return saturate ? 0x00 : 0xff;
    int64_t e;
    uint64_t frac;
    if ((a >> 52) == 0) { /* double subnormal: normalize */
        int lz = __builtin_clzll(a) - 11;
        e = -1022 - lz;
        frac = (a << lz) & 0xfffffffffffffull;
    } else {
        e = (int64_t)(a >> 52) - 1023;
        frac = a & 0xfffffffffffffull;
    }
    /* |x| = 2^e * (1 + frac / 2^52) */
    if (round_mode == ONNXC_E8M0_UP) e += frac != 0;
    else if (round_mode == ONNXC_E8M0_NEAREST) e += frac >= (1ull << 51); /* 1.5 * 2^e and above */
    if (e > 127) return saturate ? 0xfe : 0xff;
    if (e < -127) return saturate ? 0x00 : 0xff;
    return (uint8_t)(e + 127);
}

static inline uint8_t onnxc_float_to_f8e8m0(float x, int saturate, int round_mode) {
    return onnxc_double_to_f8e8m0((double)x, saturate, round_mode);
}

/* ---- int4 / uint4 / int2 / uint2: low bits of an integer, sign-extended for the signed types */

static inline int8_t onnxc_wrap_int4(int64_t v) { return (int8_t)((int)(((uint64_t)v & 0xfu) ^ 0x8u) - 8); }
static inline uint8_t onnxc_wrap_uint4(int64_t v) { return (uint8_t)((uint64_t)v & 0xfu); }
static inline int8_t onnxc_wrap_int2(int64_t v) { return (int8_t)((int)(((uint64_t)v & 0x3u) ^ 0x2u) - 2); }
static inline uint8_t onnxc_wrap_uint2(int64_t v) { return (uint8_t)((uint64_t)v & 0x3u); }

/* float -> integer for the sub-byte types: round to nearest even, NaN/inf/beyond int64 -> 0 */
static inline int64_t onnxc_lowp_rint_i64(double x) {
    double r = rint(x);
    return (r > -9223372036854775808.0 && r < 9223372036854775808.0) ? (int64_t)r : 0;
}

static inline int8_t onnxc_double_to_int4(double x) { return onnxc_wrap_int4(onnxc_lowp_rint_i64(x)); }
static inline uint8_t onnxc_double_to_uint4(double x) { return onnxc_wrap_uint4(onnxc_lowp_rint_i64(x)); }
static inline int8_t onnxc_double_to_int2(double x) { return onnxc_wrap_int2(onnxc_lowp_rint_i64(x)); }
static inline uint8_t onnxc_double_to_uint2(double x) { return onnxc_wrap_uint2(onnxc_lowp_rint_i64(x)); }

#endif
