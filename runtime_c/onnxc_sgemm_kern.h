/* onnxc_sgemm_kern.h: the float GEMM micro-kernels, one per instruction set, chosen by the compile target.
 * Included by the runtime's implementation files (onnxc_sgemm.c, onnxc_conv_implicit.c); not by models.
 *
 *   static inline void onnxc_sg_micro(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
 *                              int mr, int nr, float alpha, float beta);
 *
 * c[i * ldc + j] = alpha * sum_{p < kc} a[p * 12 + i] * b[p * 32 + j] + beta * c[i * ldc + j] for i < mr <= 12,
 * j < nr <= 32 (beta == 0: c is write-only). `a` is one panel of packed A (kc rows of ONNXC_SG_MR = 12
 * floats), `b` one panel of packed B (kc rows of ONNXC_SG_NR = 32 floats); both are zero-padded by the
 * packing, so a kernel may compute the whole 12 x 32 tile but stores only mr x nr.
 *
 * onnxc_sg_micro_x(kc, a, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej) adds two things:
 * - a prefetch stream: while it computes, it prefetches into L2 the floats pf[p * pfs .. p * pfs + 32)
 *   for every p < kc (pf NULL: none). Callers point it at the operand panel they will need next when that
 *   one comes cold from memory (weights), so it is requested a whole panel ahead instead of stalling the
 *   next micro-kernel (onnxc_sgemm.h onnxc_sg_stripe);
 * - the GEMM epilogue e (bias, residual, activation; the tile is at (ei, ej) of C) applied in registers
 *   before the store, where ONNXC_SG_EPI_IN_KERNEL is 1 (AVX-512) and e's activation is one
 *   onnxc_sg_epi_in_kernel accepts; elsewhere e is ignored and the caller runs onnxc_sg_epilogue.
 *   Same operations in the same order as onnxc_sg_epilogue, so the results are bit-identical.
 *
 * The panel sizes are one layout for every target (weights packed at compile time do not depend on the
 * machine); each kernel tiles the 12 x 32 panel with its own register block:
 *   AVX-512F          12x32, 6 variants (4/8/12 rows x 1/2 vectors): 24 zmm accumulators, broadcasts
 *                     from packed A, masked stores on edges; onnxc_sg_micro_rows reads 12 rows of a
 *                     row-major A in place (ONNXC_SG_DIRECT_A)
 *   AVX2 + FMA        6x16 sub-tiles (12 ymm accumulators)
 *   NEON (aarch64)    12x8 sub-tiles (24 q accumulators, fmla by lane)
 *   portable C        4x8 sub-tiles the compiler vectorizes
 */
#ifndef ONNXC_SGEMM_KERN_H
#define ONNXC_SGEMM_KERN_H
#include "onnxc_sgemm.h"

/* Prefetch the residual rows of the mr x nr tile at (i0, j0) (when the epilogue has one), so the epilogue
 * that follows the tile's micro-kernel finds them in cache: its 12 rows are 12 streams far apart, which
 * the hardware prefetcher does not follow. */
static inline void onnxc_sg_epi_prefetch(const onnxc_sg_epi *e, int64_t i0, int64_t j0, int mr, int nr) {
    if (!e || !e->res) return;
    for (int i = 0; i < mr; i++) {
        const float *r = e->res + (i0 + i) * e->ldr + j0;
        __builtin_prefetch(r);
        if (nr > 16) __builtin_prefetch(r + 16);
    }
}


#if defined(__AVX512F__)
#include <immintrin.h>
#define ONNXC_SG_ISA "avx512"

#define ONNXC_SG_EPI_IN_KERNEL 1

/* The activations the kernel applies in registers, exactly as onnxc_act_row_f (MAXPS / MINPS return their
 * second operand on NaN and on equal values, which keeps NaN and -0.0 as the scalar comparisons do; Sigmoid,
 * Swish and both GELU forms are onnxc_act_gated16, which onnxc_act_row_f runs as well). */
static inline int onnxc_sg_epi_in_kernel(const onnxc_sg_epi *e) {
    return e && (e->act == ONNXC_ACT_NONE || e->act == ONNXC_ACT_RELU || e->act == ONNXC_ACT_CLIP ||
                 e->act == ONNXC_ACT_LEAKYRELU || e->act == ONNXC_ACT_HARDSIGMOID || e->act == ONNXC_ACT_HARDSWISH ||
                 onnxc_act_is_gated16(e->act));
}

static inline __attribute__((always_inline)) __m512 onnxc_sg_act512_pl(int act, float a, float b, __m512 x) {
    switch (act) {
    case ONNXC_ACT_RELU: return _mm512_max_ps(_mm512_setzero_ps(), x);
    case ONNXC_ACT_CLIP: return _mm512_min_ps(_mm512_set1_ps(b), _mm512_max_ps(_mm512_set1_ps(a), x));
    case ONNXC_ACT_LEAKYRELU:
        return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x, _mm512_set1_ps(a));
    case ONNXC_ACT_HARDSIGMOID: { /* (a x + b contracted to one FMA, as the row loops compile it) */
        const __m512 v = _mm512_fmadd_ps(_mm512_set1_ps(a), x, _mm512_set1_ps(b));
        return _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), v));
    }
    case ONNXC_ACT_HARDSWISH: {
        const __m512 v = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(x, _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), v)));
    }
    default: return x;
    }
}

/* The epilogue activation of the micro-kernels: the piecewise-linear ones above, and the gated ones (sigmoid, SiLU,
 * GELU) as onnxc_act.h's rows compute them. Kernels instantiated many times call the gated ones out of line
 * (onnxc_conv_direct.c): inlined everywhere their polynomials dominate the compile time. */
static inline __attribute__((always_inline)) __m512 onnxc_sg_act512(int act, float a, float b, __m512 x) {
    if (onnxc_act_is_gated16(act)) return onnxc_act_gated16(act, _mm512_set1_ps(a), x);
    return onnxc_sg_act512_pl(act, a, b, x);
}

/* One row of a finished 12 x 32 tile (V zmm vectors of accumulators a0, a1; masks m0, m1 for its columns):
 * alpha, beta times the row already in C, then the epilogue e (bias per column or per row ``row``, residual,
 * activation) and the masked store. Shared by the float32 and the bfloat16 micro-kernels (onnxc_bgemm_kern.h),
 * so both give the same bits from the same accumulators. */
static inline __attribute__((always_inline)) void onnxc_sg_store_row512(const int V, __m512 a0, __m512 a1, float *ci,
                                                                       __mmask16 m0, __mmask16 m1, __m512 va,
                                                                       __m512 vb, float beta, const onnxc_sg_epi *e,
                                                                       int64_t row, int64_t ej) {
    __m512 x0 = _mm512_mul_ps(a0, va), x1 = x0;
    if (beta != 0) x0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, ci), vb, x0);
    if (V > 1) {
        x1 = _mm512_mul_ps(a1, va);
        if (beta != 0) x1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, ci + 16), vb, x1);
    }
    if (e) {
        if (e->bias && e->bias_cols) {
            x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, e->bias + ej));
            if (V > 1) x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, e->bias + ej + 16));
        } else if (e->bias) {
            const __m512 bv = _mm512_set1_ps(e->bias[row]);
            x0 = _mm512_add_ps(x0, bv);
            if (V > 1) x1 = _mm512_add_ps(x1, bv);
        }
        if (e->res) {
            const float *r = e->res + row * e->ldr + ej;
            x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, r));
            if (V > 1) x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, r + 16));
        }
        x0 = onnxc_sg_act512(e->act, e->a, e->b, x0);
        if (V > 1) x1 = onnxc_sg_act512(e->act, e->a, e->b, x1);
    }
    _mm512_mask_storeu_ps(ci, m0, x0);
    if (V > 1) _mm512_mask_storeu_ps(ci + 16, m1, x1);
}

/* R rows (4, 8 or 12) and V zmm vectors (1 or 2) of the 12 x 32 tile; always inlined with constants.
 * D = 0: A is a packed panel (element (i, p) at a + p * 12 + i).
 * D = 1: A is read where it is, 12 rows of a row-major matrix (element (i, p) at a + i * lda + p; R = 12). GEMMs
 * whose A is an activation in row-major storage (x W with W pre-packed: every MatMul/Gemm of a transformer)
 * skip packing A; the 12 row streams advance together, which the hardware prefetcher follows. Both read the
 * same products in the same order, so both give the same bits. */
#define ONNXC_SG_DIRECT_A 1
static inline __attribute__((always_inline)) void onnxc_sg_k512(const int R, const int V, const int D, int64_t kc,
                                                                const float *restrict a, int64_t lda,
                                                                const float *restrict b, float *c, int64_t ldc,
                                                                int mr, int nr, float alpha, float beta,
                                                                const float *pf, int64_t pfs,
                                                                const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    __m512 acc[12][2];
    const float *rows[4] = {a, a + 3 * lda, a + 6 * lda, a + 9 * lda}; /* D: every third row's base */
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0); /* the tile is stored at the end */
        if (V > 1) _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++) {
        const __m512 b0 = _mm512_loadu_ps(b);
        const __m512 b1 = V > 1 ? _mm512_loadu_ps(b + 16) : b0;
        _mm_prefetch((const char *)(b + 8 * ONNXC_SG_NR), _MM_HINT_T0);
        if (!D) _mm_prefetch((const char *)(a + 16 * ONNXC_SG_MR), _MM_HINT_T0);
        if (pf) {
            _mm_prefetch((const char *)pf, _MM_HINT_T1);
            _mm_prefetch((const char *)(pf + 16), _MM_HINT_T1);
            pf += pfs;
        }
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512 ai = _mm512_set1_ps(D ? rows[i / 3][p + (i % 3) * lda] : a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            if (V > 1) acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
        if (!D) a += ONNXC_SG_MR;
        b += ONNXC_SG_NR;
    }
    const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        if (i >= mr) break;
        onnxc_sg_store_row512(V, acc[i][0], acc[i][1], c + i * ldc, m0, m1, va, vb, beta, e, ei + i, ej);
    }
}

/* onnxc_sg_micro_x for a full 12-row panel of A read in place (onnxc_sg_k512 with D = 1). */
static inline void onnxc_sg_micro_rows(int64_t kc, const float *a, int64_t lda, const float *restrict b, float *c,
                                       int64_t ldc, int nr, float alpha, float beta, const float *pf, int64_t pfs,
                                       const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    if (nr > 16) onnxc_sg_k512(12, 2, 1, kc, a, lda, b, c, ldc, 12, nr, alpha, beta, pf, pfs, e, ei, ej);
    else onnxc_sg_k512(12, 1, 1, kc, a, lda, b, c, ldc, 12, nr, alpha, beta, pf, pfs, e, ei, ej);
}

static inline void onnxc_sg_micro_x(int64_t kc, const float *restrict a, const float *restrict b, float *c,
                                    int64_t ldc, int mr, int nr, float alpha, float beta, const float *pf,
                                    int64_t pfs, const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    if (nr > 16) {
        if (mr > 8) onnxc_sg_k512(12, 2, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
        else if (mr > 4) onnxc_sg_k512(8, 2, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
        else onnxc_sg_k512(4, 2, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
    } else {
        if (mr > 8) onnxc_sg_k512(12, 1, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
        else if (mr > 4) onnxc_sg_k512(8, 1, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
        else onnxc_sg_k512(4, 1, 0, kc, a, 0, b, c, ldc, mr, nr, alpha, beta, pf, pfs, e, ei, ej);
    }
}

static inline void onnxc_sg_micro(int64_t kc, const float *restrict a, const float *restrict b, float *c, int64_t ldc,
                                  int mr, int nr, float alpha, float beta) {
    onnxc_sg_micro_x(kc, a, b, c, ldc, mr, nr, alpha, beta, NULL, 0, NULL, 0, 0);
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ONNXC_SG_ISA "avx2"

/* One 6 x 16 sub-tile (V = 2 ymm vectors, or 1 when nr <= 8); mr <= 6, nr <= 16. */
static inline __attribute__((always_inline)) void onnxc_sg_k256(const int V, int64_t kc, const float *restrict a,
                                                                const float *restrict b, float *c, int64_t ldc,
                                                                int mr, int nr, float alpha, float beta,
                                                                const float *pf, int64_t pfs) {
    __m256 acc[6][2];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        acc[i][0] = _mm256_setzero_ps();
        acc[i][1] = _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < kc; p++) {
        const __m256 b0 = _mm256_loadu_ps(b);
        const __m256 b1 = V > 1 ? _mm256_loadu_ps(b + 8) : b0;
        if (pf) {
            _mm_prefetch((const char *)pf, _MM_HINT_T1);
            _mm_prefetch((const char *)(pf + 16), _MM_HINT_T1);
            pf += pfs;
        }
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            if (V > 1) acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
        a += ONNXC_SG_MR;
        b += ONNXC_SG_NR;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
    const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
        __m256 x0 = _mm256_mul_ps(acc[i][0], va);
        if (beta != 0) x0 = _mm256_fmadd_ps(_mm256_maskload_ps(ci, k0), vb, x0);
        _mm256_maskstore_ps(ci, k0, x0);
        if (V > 1) {
            __m256 x1 = _mm256_mul_ps(acc[i][1], va);
            if (beta != 0) x1 = _mm256_fmadd_ps(_mm256_maskload_ps(ci + 8, k1), vb, x1);
            _mm256_maskstore_ps(ci + 8, k1, x1);
        }
    }
}

static inline void onnxc_sg_micro_x(int64_t kc, const float *restrict a, const float *restrict b, float *c,
                                    int64_t ldc, int mr, int nr, float alpha, float beta, const float *pf,
                                    int64_t pfs, const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    (void)e;
    (void)ei;
    (void)ej;
    for (int i0 = 0; i0 < mr; i0 += 6) {
        const int m = mr - i0 < 6 ? mr - i0 : 6;
        for (int j0 = 0; j0 < nr; j0 += 16) {
            const int n = nr - j0 < 16 ? nr - j0 : 16;
            if (n > 8) onnxc_sg_k256(2, kc, a + i0, b + j0, c + i0 * ldc + j0, ldc, m, n, alpha, beta, pf, pfs);
            else onnxc_sg_k256(1, kc, a + i0, b + j0, c + i0 * ldc + j0, ldc, m, n, alpha, beta, pf, pfs);
            pf = NULL; /* the first sub-tile requests the whole stream */
        }
    }
}

static inline void onnxc_sg_micro(int64_t kc, const float *restrict a, const float *restrict b, float *c, int64_t ldc,
                                  int mr, int nr, float alpha, float beta) {
    onnxc_sg_micro_x(kc, a, b, c, ldc, mr, nr, alpha, beta, NULL, 0, NULL, 0, 0);
}

#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define ONNXC_SG_ISA "neon"

/* One 12 x 8 sub-tile: 24 q accumulators, 3 q registers of A, 2 of B. */
static inline void onnxc_sg_k_neon(int64_t kc, const float *restrict a, const float *restrict b, float *c,
                                   int64_t ldc, int mr, int nr, float alpha, float beta) {
    float32x4_t acc[12][2];
    for (int i = 0; i < 12; i++) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
    for (int64_t p = 0; p < kc; p++) {
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4), a2 = vld1q_f32(a + 8);
#define ONNXC_SG_NEON_ROW(i, av, l)                           \
    acc[i][0] = vfmaq_laneq_f32(acc[i][0], b0, av, l); \
    acc[i][1] = vfmaq_laneq_f32(acc[i][1], b1, av, l);
        ONNXC_SG_NEON_ROW(0, a0, 0) ONNXC_SG_NEON_ROW(1, a0, 1) ONNXC_SG_NEON_ROW(2, a0, 2)
        ONNXC_SG_NEON_ROW(3, a0, 3) ONNXC_SG_NEON_ROW(4, a1, 0) ONNXC_SG_NEON_ROW(5, a1, 1)
        ONNXC_SG_NEON_ROW(6, a1, 2) ONNXC_SG_NEON_ROW(7, a1, 3) ONNXC_SG_NEON_ROW(8, a2, 0)
        ONNXC_SG_NEON_ROW(9, a2, 1) ONNXC_SG_NEON_ROW(10, a2, 2) ONNXC_SG_NEON_ROW(11, a2, 3)
#undef ONNXC_SG_NEON_ROW
        a += ONNXC_SG_MR;
        b += ONNXC_SG_NR;
    }
    float t[12][8];
    for (int i = 0; i < 12; i++) {
        vst1q_f32(t[i], acc[i][0]);
        vst1q_f32(t[i] + 4, acc[i][1]);
    }
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++) ci[j] = beta == 0 ? alpha * t[i][j] : alpha * t[i][j] + beta * ci[j];
    }
}

static inline void onnxc_sg_micro(int64_t kc, const float *restrict a, const float *restrict b, float *c, int64_t ldc,
                           int mr, int nr, float alpha, float beta) {
    for (int j0 = 0; j0 < nr; j0 += 8)
        onnxc_sg_k_neon(kc, a, b + j0, c + j0, ldc, mr, nr - j0 < 8 ? nr - j0 : 8, alpha, beta);
}

#else
#define ONNXC_SG_ISA "portable"

/* Portable C: 4 x 8 sub-tiles with a constant-trip inner loop the compiler vectorizes. */
static inline void onnxc_sg_micro(int64_t kc, const float *restrict a, const float *restrict b, float *c, int64_t ldc,
                           int mr, int nr, float alpha, float beta) {
    for (int i0 = 0; i0 < mr; i0 += 4) {
        for (int j0 = 0; j0 < nr; j0 += 8) {
            float acc[4][8] = {{0}};
            for (int64_t p = 0; p < kc; p++) {
                const float *ap = a + p * ONNXC_SG_MR + i0, *bp = b + p * ONNXC_SG_NR + j0;
                for (int i = 0; i < 4; i++) {
#pragma omp simd
                    for (int j = 0; j < 8; j++) acc[i][j] += ap[i] * bp[j];
                }
            }
            const int m = mr - i0 < 4 ? mr - i0 : 4, n = nr - j0 < 8 ? nr - j0 : 8;
            for (int i = 0; i < m; i++) {
                float *ci = c + (i0 + i) * ldc + j0;
                for (int j = 0; j < n; j++) ci[j] = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * ci[j];
            }
        }
    }
}
#endif

#if !defined(__AVX512F__) && !(defined(__AVX2__) && defined(__FMA__))
/* NEON and portable C: no prefetch stream, no epilogue in the kernel. */
static inline void onnxc_sg_micro_x(int64_t kc, const float *restrict a, const float *restrict b, float *c,
                                    int64_t ldc, int mr, int nr, float alpha, float beta, const float *pf,
                                    int64_t pfs, const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    (void)pf;
    (void)pfs;
    (void)e;
    (void)ei;
    (void)ej;
    onnxc_sg_micro(kc, a, b, c, ldc, mr, nr, alpha, beta);
}
#endif

#ifndef ONNXC_SG_EPI_IN_KERNEL
#define ONNXC_SG_EPI_IN_KERNEL 0
static inline int onnxc_sg_epi_in_kernel(const onnxc_sg_epi *e) {
    (void)e;
    return 0;
}
#endif

#endif /* ONNXC_SGEMM_KERN_H */
