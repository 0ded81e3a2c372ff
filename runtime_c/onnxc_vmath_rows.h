/* onnxc_vmath_rows.h: the row loops of softmax-like kernels (onnxc_attention.h, onnxc_recurrent.c), on top of
 * the per-element functions of onnxc_vmath.h.
 *
 *   float onnxc_vm_max_f32(const float *x, int64_t n)                      max of x[0..n) (n >= 1; NaN ignored)
 *   float onnxc_vm_expsum_f32(const float *x, float m, float *y, int64_t n) sum of exp(x[j] - m), stored
 *                                                                           to y[j] unless y is NULL
 *   void onnxc_vm_scale_f32(float *y, float a, int64_t n)                   y[j] *= a
 *   __m512 onnxc_vexpf16(__m512 x)                                          exp of 16 floats (AVX-512F only)
 * With AVX-512 they are written with intrinsics (16 lanes, masked tails; exp scales by vscalefps, which
 * rounds subnormal results once and overflows to inf like onnxc_vexpf; about 2x the auto-vectorized
 * loop on a softmax row); elsewhere they are the portable loops.
 *
 * Static inline on purpose, not in the runtime library: the softmax rows inline into the generated row
 * loop, where a static row length folds into constants (unrolled loops, the flush floor of
 * onnxc_attention.h computed at compile time). Called through the library they were measurably slower
 * (Softmax over rows of 8 / 32 / 128 floats: 1.6x / 1.5x / 1.15x the time). Kept apart from
 * onnxc_vmath.h so that the many kernels that only need per-element math do not parse <immintrin.h>.
 */
#ifndef ONNXC_VMATH_ROWS_H
#define ONNXC_VMATH_ROWS_H

#include <stdint.h>

#include "onnxc_vmath.h"

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __m512 onnxc_vexpf16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);   /* NaN in the second operand comes out: kept */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054690583e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 onnxc_vm_tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static inline float onnxc_vm_max_f32(const float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(x[0]);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        __m512 v = _mm512_maskz_loadu_ps(k, x + j);
        m = _mm512_mask_max_ps(m, k, v, m);          /* v > m ? v : m: a NaN in v leaves m */
    }
    return _mm512_reduce_max_ps(m);
}

static inline float onnxc_vm_expsum_f32(const float *x, float m, float *y, int64_t n) {
    __m512 s = _mm512_setzero_ps(), mv = _mm512_set1_ps(m);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        __m512 e = onnxc_vexpf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv));
        if (y) _mm512_mask_storeu_ps(y + j, k, e);
        s = _mm512_mask_add_ps(s, k, s, e);
    }
    return _mm512_reduce_add_ps(s);
}

static inline void onnxc_vm_scale_f32(float *y, float a, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        _mm512_mask_storeu_ps(y + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), av));
    }
}
#else
static inline float onnxc_vm_max_f32(const float *x, int64_t n) {
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

static inline float onnxc_vm_expsum_f32(const float *x, float m, float *y, int64_t n) {
    float s = 0;
    if (y) {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) { const float e = onnxc_vexpf(x[j] - m); y[j] = e; s += e; }
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) s += onnxc_vexpf(x[j] - m);
    }
    return s;
}

static inline void onnxc_vm_scale_f32(float *y, float a, int64_t n) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] *= a;
}
#endif

#endif /* ONNXC_VMATH_ROWS_H */
