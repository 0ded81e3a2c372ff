/* onnxc_act.h: the activations a GEMM / convolution epilogue applies to an output row while it is hot.
 *
 *   void onnxc_act_row_f(int act, float a, float b, float *x, int64_t n);    in place, x[0..n)
 *   void onnxc_act_row_d(int act, double a, double b, double *x, int64_t n);
 *
 * act is one of the codes below (codegen/kernels/epilogue.py maps node attributes to them); a and b
 * are its parameters. Semantics follow the ONNX ops (NaN in, NaN out):
 *   RELU         max(x, 0)                          CLIP        min(max(x, a), b)
 *   LEAKYRELU    x < 0 ? a * x : x                  SIGMOID     1 / (1 + exp(-x))
 *   HARDSIGMOID  max(0, min(1, a * x + b))          HARDSWISH   x * max(0, min(1, x * (1 / 6) + 1 / 2))
 *   TANH         tanh(x)                            SWISH       x * sigmoid(a * x)
 *   GELU         x / 2 * (1 + erf(x / sqrt(2)))     GELU_TANH   x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
 *   MISH         x * tanh(softplus(x)), computed as x * n / (n + 2) with n = e^x (e^x + 2)
 *
 * float: with AVX-512, Sigmoid, Swish and GELU's tanh form run on 16-lane intrinsics (onnxc_act_row16: the
 * exp of onnxc_vmath_rows.h, a reciprocal instead of a division; 1.35x the speed of the portable loop).
 * The rest, and every activation on other targets, go through the branch-free functions of onnxc_vmath.h
 * (within 2 ulp), so their loops vectorize (ONNXC_VM_SIMD: 16 lanes on AVX-512, 8 on AVX2, the compiler's
 * portable vectors elsewhere), with the formulas of the elementwise kernels (codegen/kernels/elementwise.py).
 * double uses libm.
 *
 * Header-only on purpose (static inline, not in the runtime library): generated code calls these once per
 * output row (a depthwise row can be 7 elements) with a constant act code, so inlined the switch folds
 * away and only that activation's loop is compiled. The runtime's own .c files (GEMM and GEMV epilogues,
 * Winograd) include it as well.
 */
#ifndef ONNXC_ACT_H
#define ONNXC_ACT_H

#include "onnxc.h"
#include "onnxc_vmath.h"

enum {
    ONNXC_ACT_NONE = 0,
    ONNXC_ACT_RELU = 1,
    ONNXC_ACT_CLIP = 2,
    ONNXC_ACT_LEAKYRELU = 3,
    ONNXC_ACT_SIGMOID = 4,
    ONNXC_ACT_HARDSIGMOID = 5,
    ONNXC_ACT_HARDSWISH = 6,
    ONNXC_ACT_TANH = 7,
    ONNXC_ACT_SWISH = 8,
    ONNXC_ACT_GELU = 9,
    ONNXC_ACT_GELU_TANH = 10,
    ONNXC_ACT_MISH = 11,
};

/* Mish: tanh(log(1 + e)) = ((1 + e)^2 - 1) / ((1 + e)^2 + 1) = n / (n + 2), n = e (e + 2), e = exp(x); past
 * x = 20 the ratio rounds to 1 (the clamp keeps n finite); NaN stays NaN. */
static inline float onnxc_vmishf(float x) {
    float e = onnxc_vexpf(onnxc_vm_sel(x > 20.0f, 20.0f, x));
    float n = e * (e + 2.0f);
    return x * (n / (n + 2.0f));
}
static inline double onnxc_mish_d(double x) {
    double e = exp(x > 40.0 ? 40.0 : x);
    double n = e * (e + 2.0);
    return x != x ? x : x * (n / (n + 2.0));
}

#if defined(__AVX512F__)
#include "onnxc_vmath_rows.h"

/* sigmoid of 16 floats: 1 / (1 + exp(-x)), in 15 instructions (the activation of every SiLU/Swish network runs
 * through here, often inside a GEMM tile: EfficientNet spends a third of its time in it). exp(t), t = -x clamped
 * to [-88, 104]: t = n ln2 + r with ln2 in two parts, exp(r) = 1 + r q(r) with q a degree-4 polynomial fitted for
 * relative error on [-ln2/2, ln2/2] (9e-8), 2^n by SCALEF; past t = 89 the exponential overflows to inf and the
 * division gives 0. Measured against double over [-110, 110] (results from FLT_MIN up): 3.3 ulp, where the
 * previous form (exp(-|x|), a degree-7 exp, RCP14 and a Newton step, a blend) had 2.4 and took 1.4x the time.
 * NaN stays NaN (MINPS/MAXPS return their second operand on NaN). */
static inline __m512 onnxc_act_sigmoid16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 t = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
    t = _mm512_max_ps(_mm512_set1_ps(-88.0f), _mm512_min_ps(_mm512_set1_ps(104.0f), t));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054690583e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(8.290312252938747e-3f), r, _mm512_set1_ps(4.1897933930158615e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666763573884964e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.999915063381195e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.999997019767761e-1f));
    p = _mm512_fmadd_ps(p, r, one);
    return _mm512_div_ps(one, _mm512_add_ps(one, _mm512_scalef_ps(p, n)));
}

/* erf of 16 floats: onnxc_verff (onnxc_vmath.h) step for step, so a GELU applied in a GEMM tile and one applied
 * to a row give the same bits as the vectorized scalar form: |x| clamped to 4; above 0.927734375,
 * 1 - exp(r(t)) with the sign of x (the exponential as onnxc_vm_exp_normal, its last scaling contracted into
 * the subtraction as the compiler does); below, x + x q(x^2). NaN stays NaN (the small branch keeps it). */
static inline __m512 onnxc_act_erf16(__m512 a) {
    const __m512 at = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
    const __m512 four = _mm512_set1_ps(4.0f);
    const __m512 t = _mm512_mask_mov_ps(at, _mm512_cmp_ps_mask(at, four, _CMP_GT_OQ), four);
    const __m512 s = _mm512_mul_ps(t, t);
    __m512 r = _mm512_fmadd_ps(_mm512_set1_ps(-1.72853470e-5f), t, _mm512_set1_ps(3.83197126e-4f));
    const __m512 u = _mm512_fmadd_ps(_mm512_set1_ps(-3.88396438e-3f), t, _mm512_set1_ps(2.42546219e-2f));
    r = _mm512_fmadd_ps(r, s, u);
    r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-1.06777877e-1f));
    r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-6.34846687e-1f));
    r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-1.28717512e-1f));
    r = _mm512_fmsub_ps(r, t, t);
    /* exp(r), r in [-8.6, 0]: onnxc_vm_exp_normal */
    const __m512 shift = _mm512_set1_ps(ONNXC_VM_SHIFT);
    const __m512 e2 = _mm512_fmadd_ps(r, _mm512_set1_ps(1.44269504088896341f), shift);
    const __m512 n = _mm512_sub_ps(e2, shift);
    __m512 rr = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), r);
    rr = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440054690583e-4f), rr);
    const __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(e2), _mm512_castps_si512(shift));
    const __m512i scale = _mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), rr, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, rr, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, rr, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, rr, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, rr, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(rr, rr), rr), _mm512_set1_ps(1.0f));
    const __m512 one_minus = _mm512_fnmadd_ps(p, _mm512_castsi512_ps(scale), _mm512_set1_ps(1.0f));
    const __m512 big = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_and_si512(_mm512_castps_si512(one_minus), _mm512_set1_epi32(0x7fffffff)),
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u))));
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(-5.96761703e-4f), s, _mm512_set1_ps(4.99119423e-3f));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(-2.67681349e-2f));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.12819925e-1f));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(-3.76125336e-1f));
    q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.28379166e-1f));
    const __m512 small = _mm512_fmadd_ps(q, a, a);
    return _mm512_mask_mov_ps(small, _mm512_cmp_ps_mask(at, _mm512_set1_ps(0.927734375f), _CMP_GT_OQ), big);
}

/* Sigmoid, Swish, GELU (erf) and GELU's tanh form (x sigmoid(2u): 1 + tanh(u) = 2 sigmoid(2u), which also keeps the
 * negative tail from cancelling) on 16 lanes; av holds Swish's alpha. The AVX-512 GEMM micro-kernel applies
 * the same function in registers (onnxc_sgemm_kern.h), so both give identical bits. */
static inline int onnxc_act_is_gated16(int act) {
    return act == ONNXC_ACT_SIGMOID || act == ONNXC_ACT_SWISH || act == ONNXC_ACT_GELU_TANH || act == ONNXC_ACT_GELU;
}

static inline __attribute__((always_inline)) __m512 onnxc_act_gated16(int act, __m512 av, __m512 v) {
    if (act == ONNXC_ACT_SIGMOID) return onnxc_act_sigmoid16(v);
    if (act == ONNXC_ACT_SWISH) return _mm512_mul_ps(v, onnxc_act_sigmoid16(_mm512_mul_ps(av, v)));
    if (act == ONNXC_ACT_GELU) /* 0.5 x (1 + erf(x / sqrt 2)), the row loop's order */
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                             _mm512_add_ps(_mm512_set1_ps(1.0f),
                                           onnxc_act_erf16(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752440f)))));
    const __m512 k = _mm512_set1_ps(0.044715f), c = _mm512_set1_ps(2 * 0.79788456080286535588f);
    const __m512 u = _mm512_mul_ps(c, _mm512_fmadd_ps(_mm512_mul_ps(k, v), _mm512_mul_ps(v, v), v));
    return _mm512_mul_ps(v, onnxc_act_sigmoid16(u));
}

/* The rows of those activations, 16 lanes at a time with masked tails; 0 for the other activations. */
static inline int onnxc_act_row16(int act, float a, float *restrict x, int64_t n) {
    if (!onnxc_act_is_gated16(act)) return 0;
    const __m512 av = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = onnxc_vm_tail(n - j);
        _mm512_mask_storeu_ps(x + j, m, onnxc_act_gated16(act, av, _mm512_maskz_loadu_ps(m, x + j)));
    }
    return 1;
}
#define ONNXC_ACT_FAST_F(act, a, x, n) onnxc_act_row16((act), (a), (x), (n))
#else
#define ONNXC_ACT_FAST_F(act, a, x, n) 0
#endif
#define ONNXC_ACT_FAST_D(act, a, x, n) 0

#define ONNXC_ACT_ROW(T, sfx, FAST, SIMD, SIGMOID, TANH, ERF, MISH)                                   \
    static inline void onnxc_act_row_##sfx(int act, T a, T b, T *restrict x, int64_t n) {           \
        if (FAST(act, a, x, n)) return;                                                            \
        switch (act) {                                                                             \
        case ONNXC_ACT_RELU:                                                                       \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) x[j] = x[j] < 0 ? (T)0 : x[j];      \
            break;                                                                                 \
        case ONNXC_ACT_CLIP:                                                                       \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = x[j] < a ? a : x[j];                                                         \
                x[j] = v > b ? b : v;                                                              \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_LEAKYRELU:                                                                  \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) x[j] = x[j] < 0 ? a * x[j] : x[j];  \
            break;                                                                                 \
        case ONNXC_ACT_SIGMOID:                                                                    \
            SIMD for (int64_t j = 0; j < n; j++) x[j] = SIGMOID(x[j]);                              \
            break;                                                                                 \
        case ONNXC_ACT_HARDSIGMOID:                                                                \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = a * x[j] + b;                                                                \
                v = v < 0 ? (T)0 : v;                                                              \
                x[j] = v > 1 ? (T)1 : v;                                                           \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_HARDSWISH:                                                                  \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = x[j] * ((T)1 / 6) + (T)0.5;                                                  \
                v = v < 0 ? (T)0 : v;                                                              \
                x[j] = x[j] * (v > 1 ? (T)1 : v);                                                  \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_TANH:                                                                       \
            SIMD for (int64_t j = 0; j < n; j++) x[j] = TANH(x[j]);                                 \
            break;                                                                                 \
        case ONNXC_ACT_SWISH:                                                                      \
            SIMD for (int64_t j = 0; j < n; j++) x[j] = x[j] * SIGMOID(a * x[j]);                   \
            break;                                                                                 \
        case ONNXC_ACT_GELU:                                                                       \
            SIMD for (int64_t j = 0; j < n; j++)                                                    \
                x[j] = (T)0.5 * x[j] * (1 + ERF(x[j] * (T)0.70710678118654752440));               \
            break;                                                                                 \
        case ONNXC_ACT_GELU_TANH:                                                                  \
            SIMD for (int64_t j = 0; j < n; j++) {                                                  \
                const T v = x[j];                                                                  \
                const T u = (T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v);             \
                x[j] = (T)0.5 * v * (1 + TANH(u));                                                 \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_MISH:                                                                       \
            SIMD for (int64_t j = 0; j < n; j++) x[j] = MISH(x[j]);                                 \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

ONNXC_ACT_ROW(float, f, ONNXC_ACT_FAST_F, ONNXC_VM_SIMD, onnxc_vsigmoidf, onnxc_vtanhf, onnxc_verff, onnxc_vmishf)
ONNXC_ACT_ROW(double, d, ONNXC_ACT_FAST_D, _Pragma("omp simd"), onnxc_vm_sigmoid_double, tanh, erf, onnxc_mish_d)
#undef ONNXC_ACT_ROW

#endif /* ONNXC_ACT_H */
