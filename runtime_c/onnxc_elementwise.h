/* Scalar helpers of the elementwise kernels (codegen/kernels/elementwise.py, cast.py).
 *
 * Every helper gives a defined result for every input, so a generated model never hits C undefined
 * behaviour on user data: integer division or modulo by zero gives 0, INT_MIN / -1 wraps, signed
 * overflow wraps (arithmetic runs in unsigned types), shifts by the bit width or more give 0 (or the
 * sign fill for an arithmetic right shift), and float -> integer conversion saturates (NaN -> 0).
 * All helpers are small static inline functions: they inline into the loops and vectorize.
 * The numpy fold rules in passes/shapes/elementwise_np.py implement the same semantics.
 */
#ifndef ONNXC_ELEMENTWISE_H
#define ONNXC_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Clamp to [0, 1], keeping NaN (HardSigmoid, HardSwish). */
#define ONNXC_CLAMP01(v) ((v) < 0 ? 0 : (v) > 1 ? 1 : (v))

/* Integer helpers shared by signed and unsigned T. W is an unsigned type at least as wide as
 * unsigned int and as T, so arithmetic in W never promotes to signed int and never overflows. */
#define ONNXC_EW_INT_COMMON(T, N, W, BITS)                                                         \
    static inline T onnxc_add_##N(T a, T b) { return (T)((W)a + (W)b); }                          \
    static inline T onnxc_sub_##N(T a, T b) { return (T)((W)a - (W)b); }                          \
    static inline T onnxc_mul_##N(T a, T b) { return (T)((W)a * (W)b); }                          \
    static inline T onnxc_max_##N(T a, T b) { return a > b ? a : b; }                             \
    static inline T onnxc_min_##N(T a, T b) { return a < b ? a : b; }                             \
    /* left shift of the two's complement bits; a count < 0 or >= width gives 0 */               \
    static inline T onnxc_shl_##N(T a, T b) {                                                     \
        return ((W)b >= (W)(BITS)) ? (T)0 : (T)((W)a << (W)b);                                    \
    }

#define ONNXC_EW_SIGNED(T, N, W, BITS, TMIN, TMAX)                                                  \
    ONNXC_EW_INT_COMMON(T, N, W, BITS)                                                              \
    static inline T onnxc_neg_##N(T a) { return (T)((W)0 - (W)a); }                                 \
    static inline T onnxc_abs_##N(T a) { return a < 0 ? (T)((W)0 - (W)a) : a; }                     \
    /* truncating division; x / 0 -> 0, MIN / -1 wraps to MIN */                                    \
    static inline T onnxc_div_##N(T a, T b) {                                                       \
        return b == 0 ? (T)0 : b == -1 ? (T)((W)0 - (W)a) : (T)(a / b);                             \
    }                                                                                               \
    /* remainder with the sign of the divisor (Python / numpy mod); x % 0 -> 0 */                   \
    static inline T onnxc_mod_##N(T a, T b) {                                                       \
        if (b == 0 || b == -1) return 0;                                                            \
        T r = (T)(a % b);                                                                           \
        return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;                                   \
    }                                                                                               \
    /* remainder with the sign of the dividend (C fmod); x % 0 -> 0 */                              \
    static inline T onnxc_fmod_##N(T a, T b) { return (b == 0 || b == -1) ? (T)0 : (T)(a % b); }    \
    /* arithmetic right shift; a count < 0 or >= width leaves only the sign fill */                 \
    static inline T onnxc_shr_##N(T a, T b) {                                                       \
        return (b < 0 || b >= (BITS)) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);                          \
    }                                                                                               \
    /* saturating conversion from double, truncating toward zero; NaN -> 0 */                       \
    static inline T onnxc_from_double_##N(double x) {                                               \
        if (x != x) return 0;                                                                       \
        if (x <= (double)(TMIN)) return TMIN;                                                       \
        if (x >= -(double)(TMIN)) return TMAX;                                                      \
        return (T)x;                                                                                \
    }

#define ONNXC_EW_UNSIGNED(T, N, W, BITS, TMAX)                                                      \
    ONNXC_EW_INT_COMMON(T, N, W, BITS)                                                              \
    static inline T onnxc_neg_##N(T a) { return (T)((W)0 - (W)a); }                                 \
    static inline T onnxc_abs_##N(T a) { return a; }                                                \
    static inline T onnxc_div_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }                  \
    static inline T onnxc_mod_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }                  \
    static inline T onnxc_fmod_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }                 \
    static inline T onnxc_shr_##N(T a, T b) { return b >= (BITS) ? (T)0 : (T)(a >> b); }            \
    static inline T onnxc_from_double_##N(double x) {                                               \
        if (x != x || x <= -1.0) return 0;                                                          \
        if (x >= (double)(TMAX) + 1.0) return TMAX;                                                 \
        return (T)x;                                                                                \
    }

ONNXC_EW_SIGNED(int8_t, int8, uint32_t, 8, INT8_MIN, INT8_MAX)
ONNXC_EW_SIGNED(int16_t, int16, uint32_t, 16, INT16_MIN, INT16_MAX)
ONNXC_EW_SIGNED(int32_t, int32, uint32_t, 32, INT32_MIN, INT32_MAX)
ONNXC_EW_SIGNED(int64_t, int64, uint64_t, 64, INT64_MIN, INT64_MAX)
ONNXC_EW_UNSIGNED(uint8_t, uint8, uint32_t, 8, UINT8_MAX)
ONNXC_EW_UNSIGNED(uint16_t, uint16, uint32_t, 16, UINT16_MAX)
ONNXC_EW_UNSIGNED(uint32_t, uint32, uint32_t, 32, UINT32_MAX)
ONNXC_EW_UNSIGNED(uint64_t, uint64, uint64_t, 64, UINT64_MAX)

/* Integer power with wrapping overflow. A negative exponent gives the truncated 1 / a^-e. */
static inline int64_t onnxc_ipow(int64_t a, int64_t e) {
    if (e < 0) return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)a, n = (uint64_t)e;
    while (n) {
        if (n & 1) r *= b;
        b *= b;
        n >>= 1;
    }
    return (int64_t)r;
}
/* A uint64 exponent as int64 with the same parity (huge exponents only matter through parity). */
static inline int64_t onnxc_pow_exp_u64(uint64_t e) {
    return e > (uint64_t)INT64_MAX ? INT64_MAX - 1 + (int64_t)(e & 1) : (int64_t)e;
}

/* Float max/min propagating NaN like numpy.maximum/minimum; modulo with the sign of the divisor. */
#define ONNXC_EW_FLOAT(T, N, FMOD, COPYSIGN)                                                        \
    static inline T onnxc_max_##N(T a, T b) { return (a != a || a > b) ? a : b; }                   \
    static inline T onnxc_min_##N(T a, T b) { return (a != a || a < b) ? a : b; }                   \
    static inline T onnxc_mod_##N(T a, T b) {                                                       \
        T r = FMOD(a, b);                                                                           \
        if (r == 0) return COPYSIGN((T)0, b);                                                       \
        return ((r < 0) != (b < 0)) ? r + b : r;                                                    \
    }

ONNXC_EW_FLOAT(float, float, fmodf, copysignf)
ONNXC_EW_FLOAT(double, double, fmod, copysign)

/* ---- float transcendental functions that vectorize ------------------------------------------------
 * libm's expf/tanhf/erff are scalar calls; these branch-free versions let the loops vectorize (about
 * 20x faster) at an accuracy of a few ulp over the whole float range (NaN and +-inf handled; results
 * were checked against double libm over every float in the ranges that matter). The double
 * versions call libm. Constants of exp/log/tanh are Cephes'; erf is N. Juffa's faithful erff. */

static inline float onnxc_bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t onnxc_float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
/* 2^n for an integer-valued n in [-126, 128) */
static inline float onnxc_pow2i(float n) { return onnxc_bits_float((uint32_t)((int32_t)n + 127) << 23); }

static inline float onnxc_exp_float(float x) {
    x = x > 88.7228393555f ? 88.8f : x;        /* beyond: +inf */
    x = x < -103.972084045f ? -104.0f : x;     /* beyond: 0 */
    float n = nearbyintf(x * 1.44269504089f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float n1 = nearbyintf(n * 0.5f);           /* 2^n = 2^n1 * 2^(n - n1): subnormal results and 2^128 */
    return p * onnxc_pow2i(n1) * onnxc_pow2i(n - n1);
}

/* c ? a : b through bit masks: both values stay unconditional, so gcc cannot sink their computation
 * into a branch (which -ftrapping-math then refuses to if-convert, and the loop stays scalar). */
static inline float onnxc_blend_float(int c, float a, float b) {
    uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    return onnxc_bits_float((onnxc_float_bits(a) & m) | (onnxc_float_bits(b) & ~m));
}

static inline float onnxc_log_float(float x) {
    int sub = x < 1.17549435e-38f;             /* subnormal: scale by 2^23 first */
    uint32_t u = onnxc_float_bits(onnxc_blend_float(sub, x * 8388608.0f, x));
    float e = (float)((int32_t)(u >> 23) - 127) + onnxc_blend_float(sub, -23.0f, 0.0f);
    float m = onnxc_bits_float((u & 0x007fffffu) | 0x3f800000u);   /* mantissa in [1, 2) */
    int big = m > 1.41421356f;
    m = onnxc_blend_float(big, m * 0.5f, m);
    e = onnxc_blend_float(big, e + 1.0f, e);
    float f = m - 1.0f, z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z - 2.12194440e-4f * e - 0.5f * z;
    float r = f + y + 0.693359375f * e;
    r = onnxc_blend_float(x == 0, -INFINITY, r);
    r = onnxc_blend_float((x < 0) | (x != x), NAN, r);
    return onnxc_blend_float(x == INFINITY, x, r);
}

/* log(1 + y), exact for tiny y (Goldberg's correction) */
static inline float onnxc_log1p_float(float y) {
    float u = 1.0f + y, d = u - 1.0f;
    return onnxc_blend_float(d == 0, y, onnxc_log_float(u) * (y / d));
}

/* exp(x) - 1: Taylor series near 0 where the subtraction would cancel */
static inline float onnxc_expm1_float(float x) {
    float t = 1.0f / 40320;
    t = t * x + 1.0f / 5040;
    t = t * x + 1.0f / 720;
    t = t * x + 1.0f / 120;
    t = t * x + 1.0f / 24;
    t = t * x + 1.0f / 6;
    t = t * x + 0.5f;
    t = t * x * x + x;
    return fabsf(x) < 0.5f ? t : onnxc_exp_float(x) - 1.0f;
}

/* floor and ceil through nearbyint, which vectorizes (floorf does not under -ftrapping-math) */
static inline float onnxc_floor_float(float x) { float r = nearbyintf(x), d = r - 1.0f; return r > x ? d : r; }
static inline float onnxc_ceil_float(float x) { float r = nearbyintf(x), u = r + 1.0f; return r < x ? u : r; }
static inline double onnxc_floor_double(double x) { double r = nearbyint(x), d = r - 1.0; return r > x ? d : r; }
static inline double onnxc_ceil_double(double x) { double r = nearbyint(x), u = r + 1.0; return r < x ? u : r; }

static inline float onnxc_sigmoid_float(float x) { return 1.0f / (1.0f + onnxc_exp_float(-x)); }

static inline float onnxc_tanh_float(float x) {
    float a = fabsf(x), z = x * x;
    float s = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
               + 1.33314422036e-1f) * z - 3.33332819422e-1f;
    float small = s * z * x + x;
    float big = copysignf(1.0f - 2.0f / (onnxc_exp_float(2.0f * a) + 1.0f), x);
    return a < 0.625f ? small : big;
}

static inline float onnxc_erf_float(float a) {
    float t = fabsf(a), s = a * a;
    float r = fmaf(-1.72853470e-5f, t, 3.83197126e-4f);
    float u = fmaf(-3.88396438e-3f, t, 2.42546219e-2f);
    r = fmaf(r, s, u);
    r = fmaf(r, t, -1.06777877e-1f);
    r = fmaf(r, t, -6.34846687e-1f);
    r = fmaf(r, t, -1.28717512e-1f);
    r = fmaf(r, t, -t);
    float big = copysignf(1.0f - onnxc_exp_float(r), a);
    float q = -5.96761703e-4f;
    q = fmaf(q, s, 4.99119423e-3f);
    q = fmaf(q, s, -2.67681349e-2f);
    q = fmaf(q, s, 1.12819925e-1f);
    q = fmaf(q, s, -3.76125336e-1f);
    q = fmaf(q, s, 1.28379166e-1f);
    float small = fmaf(q, a, a);
    return t > 0.927734375f ? big : small;
}

/* log(1 + exp(x)) without overflow */
static inline float onnxc_softplus_float(float x) {
    return (x > 0 ? x : 0) + onnxc_log1p_float(onnxc_exp_float(-fabsf(x)));
}

static inline double onnxc_exp_double(double x) { return exp(x); }
static inline double onnxc_log_double(double x) { return log(x); }
static inline double onnxc_expm1_double(double x) { return expm1(x); }
static inline double onnxc_sigmoid_double(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline double onnxc_tanh_double(double x) { return tanh(x); }
static inline double onnxc_erf_double(double x) { return erf(x); }
static inline double onnxc_softplus_double(double x) { return (x > 0 ? x : 0) + log1p(exp(-fabs(x))); }

#endif /* ONNXC_ELEMENTWISE_H */
