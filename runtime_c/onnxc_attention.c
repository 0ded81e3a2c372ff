/* onnxc_attention.c: the softmax rows of onnxc_attention.h (compiled once into the runtime library). */
#include <float.h>
#include <math.h>

#include "onnxc_attention.h"
#include "onnxc_vmath.h"
#include "onnxc_vmath_kern.h"

/* The smallest x - max whose exponential is kept in a row of n (see the top of onnxc_attention.h). */
static inline float onnxc_att_floor(int64_t n) {
    return -87.33654475f + logf((float)(n > 1 ? n : 1)); /* log(FLT_MIN) = -87.3365... */
}

#if defined(__AVX512F__)
static inline __mmask16 onnxc_att_tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* sum of e_j = exp(x[j] - m) (0 below the floor), stored to y[j]. */
static inline float onnxc_att_expsum(const float *x, float m, float *y, int64_t n) {
    __m512 s = _mm512_setzero_ps(), mv = _mm512_set1_ps(m), lo = _mm512_set1_ps(onnxc_att_floor(n));
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = onnxc_att_tail(n - j);
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv);
        const __mmask16 keep = _mm512_mask_cmp_ps_mask(k, d, lo, _CMP_GE_OQ) | _mm512_mask_cmp_ps_mask(k, d, d,
                                                                                                   _CMP_UNORD_Q);
        const __m512 e = _mm512_maskz_mov_ps(keep, onnxc_vexpf16(d));
        if (y) _mm512_mask_storeu_ps(y + j, k, e);
        s = _mm512_add_ps(s, e);
    }
    return _mm512_reduce_add_ps(s);
}
#else
static inline float onnxc_att_expsum(const float *x, float m, float *y, int64_t n) {
    const float lo = onnxc_att_floor(n);
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++) {
        const float d = x[j] - m;
        const float e = d >= lo || d != d ? onnxc_vexpf(d) : 0.0f;
        if (y) y[j] = e;
        s += e;
    }
    return s;
}
#endif

void onnxc_att_softmax_row(const float *x, float *y, int64_t n) {
    if (n <= 0) return;
    const float m = onnxc_vm_max_f32(x, n);
    onnxc_vm_scale_f32(y, 1 / onnxc_att_expsum(x, m, y, n), n);
}

float onnxc_att_logsumexp_shift(const float *x, int64_t n, float *m) {
    *m = onnxc_vm_max_f32(x, n);
    return logf(onnxc_att_expsum(x, *m, NULL, n));
}

/* s[j] = s[j] (op) c + mask[j * ms], in place. */
static inline void onnxc_att_prepare(float *restrict s, int64_t n, int mode, float c, const float *mask, int64_t ms) {
    if (mode == ONNXC_ATT_MUL) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) s[j] = s[j] * c;
    } else if (mode == ONNXC_ATT_DIV) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) s[j] = s[j] / c;
    }
    if (mask && ms == 1) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) s[j] += mask[j];
    } else if (mask) {
        for (int64_t j = 0; j < n; j++) s[j] += mask[j * ms];
    }
}

void onnxc_att_scores_row(float *s, int64_t n, int mode, float c, const float *mask, int64_t ms) {
    onnxc_att_prepare(s, n, mode, c, mask, ms);
    onnxc_att_softmax_row(s, s, n);
}
