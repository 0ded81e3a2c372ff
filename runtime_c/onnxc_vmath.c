/* onnxc_vmath.c: the row loops of onnxc_vmath.h (max, exp-sum, scale; compiled once into the runtime library).
 * The per-element functions (onnxc_vexpf, ...) stay static inline in the header: generated loops inline
 * and vectorize them. */
#include "onnxc_vmath.h"
#include "onnxc_vmath_kern.h"

#if defined(__AVX512F__)
static inline __mmask16 onnxc_vm_tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

float onnxc_vm_max_f32(const float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(x[0]);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        __m512 v = _mm512_maskz_loadu_ps(k, x + j);
        m = _mm512_mask_max_ps(m, k, v, m);          /* v > m ? v : m: a NaN in v leaves m */
    }
    return _mm512_reduce_max_ps(m);
}

float onnxc_vm_expsum_f32(const float *x, float m, float *y, int64_t n) {
    __m512 s = _mm512_setzero_ps(), mv = _mm512_set1_ps(m);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        __m512 e = onnxc_vexpf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv));
        if (y) _mm512_mask_storeu_ps(y + j, k, e);
        s = _mm512_mask_add_ps(s, k, s, e);
    }
    return _mm512_reduce_add_ps(s);
}

void onnxc_vm_scale_f32(float *y, float a, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = onnxc_vm_tail(n - j);
        _mm512_mask_storeu_ps(y + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), av));
    }
}
#else
float onnxc_vm_max_f32(const float *x, int64_t n) {
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

float onnxc_vm_expsum_f32(const float *x, float m, float *y, int64_t n) {
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

void onnxc_vm_scale_f32(float *y, float a, int64_t n) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] *= a;
}
#endif
