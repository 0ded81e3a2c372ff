/* float16 / bfloat16 <-> float32 conversions (element types stored as their uint16_t bit patterns).
 *
 * Kernels compute half-precision tensors in float32: every element is loaded with onnxc_h2f /
 * onnxc_bf2f and stored with onnxc_f2h / onnxc_f2bf, which round to nearest even and keep NaN a
 * NaN (quiet, sign kept). With F16C (gcc -march=native on x86) the float16 conversions are single
 * instructions; otherwise portable bit code computes the same results. onnxc_d2h converts from
 * double directly (a double -> float -> half chain could round twice).
 */
#ifndef ONNXC_HALF_H
#define ONNXC_HALF_H

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t onnxc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float onnxc_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float16 bits -> float (exact) */
static inline float onnxc_h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return onnxc_bits_f32(sign | 0x7f800000u | (m << 13));          /* inf / NaN */
    if (e == 0) {                                                                    /* zero / subnormal */
        float v = (float)m * 5.9604644775390625e-8f;                                 /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return onnxc_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

/* Round an IEEE binary value with `mbits` mantissa bits and exponent bias `bias` to float16 bits,
 * nearest even; shared by the float and double versions (fields passed as 64-bit integers). */
static inline uint16_t onnxc_to_half_bits(uint16_t sign, int64_t e, uint64_t m, int mbits, int64_t emax) {
    if (e == emax) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u | (uint16_t)(m >> (mbits - 10)) : 0));
    int64_t he = e - (emax >> 1) + 15;                    /* unbiased exponent rebiased for half */
    if (he >= 31) return (uint16_t)(sign | 0x7c00u);      /* overflow -> inf */
    uint64_t full = m | ((uint64_t)1 << mbits);           /* implicit leading one */
    int shift = mbits - 10;
    if (he <= 0) {                                        /* subnormal half (or underflow to zero) */
        if (e == 0) return sign;                          /* source zero/subnormal: far below half range */
        shift += (int)(1 - he);
        if (shift > mbits + 1) return sign;
        he = 0;                                           /* the leading one stays in the mantissa */
    } else {
        full &= ((uint64_t)1 << mbits) - 1;
    }
    uint64_t q = full >> shift, rem = full & (((uint64_t)1 << shift) - 1), half = (uint64_t)1 << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    /* a carry out of the mantissa bumps the exponent, which the addition does by itself */
    return (uint16_t)(sign | ((uint16_t)((uint64_t)he << 10) + (uint16_t)q));
}

/* float -> float16 bits, round to nearest even */
static inline uint16_t onnxc_f2h(float f) {
#if defined(__F16C__)
    return (uint16_t)_cvtss_sh(f, 0);                     /* _MM_FROUND_TO_NEAREST_INT */
#else
    uint32_t u = onnxc_f32_bits(f);
    return onnxc_to_half_bits((uint16_t)((u >> 16) & 0x8000u), (u >> 23) & 0xff, u & 0x7fffffu, 23, 0xff);
#endif
}

/* double -> float16 bits, rounded once (nearest even) */
static inline uint16_t onnxc_d2h(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return onnxc_to_half_bits((uint16_t)((u >> 48) & 0x8000u), (int64_t)((u >> 52) & 0x7ff),
                              u & 0xfffffffffffffull, 52, 0x7ff);
}

/* bfloat16 bits -> float (exact) */
static inline float onnxc_bf2f(uint16_t b) { return onnxc_bits_f32((uint32_t)b << 16); }

/* float -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN */
static inline uint16_t onnxc_f2bf(float f) {
    uint32_t u = onnxc_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
