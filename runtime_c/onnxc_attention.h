/* onnxc_attention.h: softmax rows without subnormal numbers, and the fused attention of one row block.
 *
 *   void onnxc_att_softmax_row(const float *x, float *y, int64_t n)
 *       y = softmax(x) over n elements (y may be x).
 *   float onnxc_att_logsumexp_shift(const float *x, int64_t n, float *m)
 *       *m = max(x), returns log(sum exp(x - *m)) (LogSoftmax).
 *   void onnxc_att_scores_row(float *s, int64_t n, int mode, float c, const float *mask, int64_t ms)
 *       s = softmax(s * c | s / c | s, + mask[j * ms]) in place (mode ONNXC_ATT_{NONE,MUL,DIV}; mask NULL: none).
 *
 * Why not the plain exp rows: an additive attention mask (-10000 or -inf on padded keys) drives exp
 * into the subnormal range, and on x86 every subnormal result or operand costs a microcode assist
 * (~100 cycles) in the exp, in the normalization and again in the next MatMul reading the
 * probabilities: a masked 12x128x128 softmax ran 7x slower than an unmasked one. Here an exponential
 * whose normalized result could be subnormal is flushed to zero: with d = x - max, e = exp(d) is kept
 * when d >= log(FLT_MIN) + log(n), so e >= FLT_MIN * n and, as the sum s <= n, e / s >= FLT_MIN. The
 * flushed probabilities are below FLT_MIN * n / s (1e-35 for n = 128): far under any tolerance.
 * The max, the sum and the scaling by 1 / sum are computed as in softmax.py's rows (onnxc_vmath_rows.h),
 * so unmasked rows give the same bits.
 *
 * Static inline, not in the runtime library: called once per row from the generated loop, they
 * inline there and a static row length folds into constants (see onnxc_vmath_rows.h; through the
 * library, Softmax rows of 8 to 128 floats took 1.15x to 1.6x the time).
 */
#ifndef ONNXC_ATTENTION_H
#define ONNXC_ATTENTION_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "onnxc_vmath_rows.h"

enum { ONNXC_ATT_NONE = 0, ONNXC_ATT_MUL = 1, ONNXC_ATT_DIV = 2 };

/* The smallest x - max whose exponential is kept in a row of n (see the top of this file). */
static inline float onnxc_att_floor(int64_t n) {
    return -87.33654475f + logf((float)(n > 1 ? n : 1)); /* log(FLT_MIN) = -87.3365... */
}

#if defined(__AVX512F__)
#include <immintrin.h>

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

static inline void onnxc_att_softmax_row(const float *x, float *y, int64_t n) {
    if (n <= 0) return;
    const float m = onnxc_vm_max_f32(x, n);
    onnxc_vm_scale_f32(y, 1 / onnxc_att_expsum(x, m, y, n), n);
}

static inline float onnxc_att_logsumexp_shift(const float *x, int64_t n, float *m) {
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

static inline void onnxc_att_scores_row(float *s, int64_t n, int mode, float c, const float *mask, int64_t ms) {
    onnxc_att_prepare(s, n, mode, c, mask, ms);
    onnxc_att_softmax_row(s, s, n);
}

#endif /* ONNXC_ATTENTION_H */
