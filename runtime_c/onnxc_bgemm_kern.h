/* onnxc_bgemm_kern.h: the bfloat16 GEMM micro-kernels and the float32 -> bf16 rounding (onnxc_bgemm.h).
 * Included by onnxc_bgemm.c only. Every x86-64 runtime holds each kernel (with its own target attribute);
 * onnxc_bgemm.c picks one at run time (onnxc_isa.h).
 *
 *   void micro(int64_t kq, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc, int mr, int nr,
 *              float alpha, float beta, const onnxc_sg_epi *e, int64_t ei, int64_t ej);
 *
 * c[i * ldc + j] = alpha * sum_{q < kq} (lo(a_iq) lo(b_qj) + hi(a_iq) hi(b_qj)) + beta * c[i * ldc + j] for
 * i < mr <= 12, j < nr <= 32 (beta == 0: c is write-only), with a_iq = a[q * 12 + i] and b_qj = b[q * 32 + j]
 * the pairs of one A and one B panel. Each pair adds its high product, then its low one, each rounded once to
 * float (a product of two bf16 is exact in float): the order of VDPBF16PS, which the portable kernel follows,
 * so the two kernels agree except where VDPBF16PS flushes denormals to zero.
 * e (NULL: none) is the GEMM epilogue of the tile at (ei, ej) of C, applied in registers before the store
 * by the AVX-512 kernel when the library is built for AVX-512 and onnxc_sg_epi_in_kernel accepts it (the
 * operations of onnxc_sg_epilogue in its order: bit-identical); every other case ignores e, and the caller
 * runs onnxc_sg_epilogue (onnxc_bg_epi_in_kernel says which).
 */
#ifndef ONNXC_BGEMM_KERN_H
#define ONNXC_BGEMM_KERN_H
#include <string.h>

#include "onnxc_bgemm.h"
#include "onnxc_isa.h"
#include "onnxc_sgemm_kern.h" /* onnxc_sg_epi_in_kernel, onnxc_sg_store_row512 */

/* The bits of bf16(f) (round to nearest even; NaN stays NaN, made quiet) in the high half of a word. */
static inline uint32_t onnxc_bg_round(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t r = (x + 0x7FFFu + ((x >> 16) & 1u)) & 0xFFFF0000u;
    return (x & 0x7FFFFFFFu) > 0x7F800000u ? (x | 0x00400000u) & 0xFFFF0000u : r;
}

/* The pair (lo, hi) rounded to bf16: lo in the low half, hi in the high half. */
static inline uint32_t onnxc_bg_pair(float lo, float hi) { return onnxc_bg_round(hi) | (onnxc_bg_round(lo) >> 16); }

static inline float onnxc_bg_lo(uint32_t p) {
    const uint32_t x = p << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline float onnxc_bg_hi(uint32_t p) {
    const uint32_t x = p & 0xFFFF0000u;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* d[j] = onnxc_bg_pair(r0[j], r1[j]) for j < 32: one row of pairs of a B panel. */
static inline void onnxc_bg_rows32_portable(const float *r0, const float *r1, uint32_t *restrict d) {
#pragma omp simd
    for (int j = 0; j < ONNXC_BG_NR; j++) d[j] = onnxc_bg_pair(r0[j], r1[j]);
}

typedef void (*onnxc_bg_rows32_fn)(const float *r0, const float *r1, uint32_t *restrict d);

typedef void (*onnxc_bg_micro_fn)(int64_t kq, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc, int mr,
                                  int nr, float alpha, float beta, const onnxc_sg_epi *e, int64_t ei, int64_t ej);

/* -- portable ----------------------------------------------------------------------------------------- */

static void onnxc_bg_micro_portable(int64_t kq, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc, int mr,
                                    int nr, float alpha, float beta, const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    (void)e, (void)ei, (void)ej;
    float acc[ONNXC_BG_MR][ONNXC_BG_NR];
    memset(acc, 0, sizeof acc);
    for (int64_t q = 0; q < kq; q++, a += ONNXC_BG_MR, b += ONNXC_BG_NR) {
        float bl[ONNXC_BG_NR], bh[ONNXC_BG_NR];
        for (int j = 0; j < ONNXC_BG_NR; j++) {
            bl[j] = onnxc_bg_lo(b[j]);
            bh[j] = onnxc_bg_hi(b[j]);
        }
        for (int i = 0; i < mr; i++) {
            const float al = onnxc_bg_lo(a[i]), ah = onnxc_bg_hi(a[i]);
            for (int j = 0; j < ONNXC_BG_NR; j++) {
                const float t = acc[i][j] + ah * bh[j]; /* exact products: one rounding per add */
                acc[i][j] = t + al * bl[j];
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * ldc + j] = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c[i * ldc + j];
}

/* -- AVX512-BF16 -------------------------------------------------------------------------------------- */

#if ONNXC_ISA_X86
#include <immintrin.h>
#define ONNXC_BG_T512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

/* onnxc_bg_rows32_portable with VCVTNE2PS2BF16 (round to nearest even, quiet NaN; it also flushes
 * denormals to zero, where the portable rounding keeps them) and a word shuffle into pairs. */
static inline ONNXC_BG_T512 void onnxc_bg_rows32_avx512bf16(const float *r0, const float *r1, uint32_t *restrict d) {
    static const uint16_t order[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512((const void *)order);
    for (int h = 0; h < 2; h++) {
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(r1 + 16 * h), _mm512_loadu_ps(r0 + 16 * h));
        _mm512_storeu_si512((void *)(d + 16 * h), _mm512_permutexvar_epi16(idx, (__m512i)v));
    }
}

/* R rows (4, 8 or 12) and V zmm vectors (1 or 2) of the 12 x 32 tile; always inlined with constants. */
static inline __attribute__((always_inline)) ONNXC_BG_T512 void
onnxc_bg_k512(const int R, const int V, int64_t kq, const uint32_t *restrict a, const uint32_t *restrict b, float *c,
              int64_t ldc, int mr, int nr, float alpha, float beta, const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    __m512 acc[ONNXC_BG_MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        if (V > 1) _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int64_t q = 0; q < kq; q++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)b);
        const __m512bh b1 = V > 1 ? (__m512bh)_mm512_loadu_si512((const void *)(b + 16)) : b0;
        _mm_prefetch((const char *)(b + 8 * ONNXC_BG_NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + 16 * ONNXC_BG_MR), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            if (V > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
        a += ONNXC_BG_MR;
        b += ONNXC_BG_NR;
    }
    const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        if (i >= mr) break;
#if ONNXC_SG_EPI_IN_KERNEL
        onnxc_sg_store_row512(V, acc[i][0], acc[i][1], c + i * ldc, m0, m1, va, vb, beta, e, ei + i, ej);
#else /* (the caller applies the epilogue) */
        (void)e, (void)ei, (void)ej;
        float *ci = c + i * ldc;
        __m512 x0 = _mm512_mul_ps(acc[i][0], va), x1 = x0;
        if (beta != 0) x0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, ci), vb, x0);
        if (V > 1) {
            x1 = _mm512_mul_ps(acc[i][1], va);
            if (beta != 0) x1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, ci + 16), vb, x1);
        }
        _mm512_mask_storeu_ps(ci, m0, x0);
        if (V > 1) _mm512_mask_storeu_ps(ci + 16, m1, x1);
#endif
    }
}

static ONNXC_BG_T512 void onnxc_bg_micro_avx512bf16(int64_t kq, const uint32_t *a, const uint32_t *b, float *c,
                                                    int64_t ldc, int mr, int nr, float alpha, float beta,
                                                    const onnxc_sg_epi *e, int64_t ei, int64_t ej) {
    if (nr > 16) {
        if (mr > 8) onnxc_bg_k512(12, 2, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
        else if (mr > 4) onnxc_bg_k512(8, 2, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
        else onnxc_bg_k512(4, 2, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
    } else {
        if (mr > 8) onnxc_bg_k512(12, 1, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
        else if (mr > 4) onnxc_bg_k512(8, 1, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
        else onnxc_bg_k512(4, 1, kq, a, b, c, ldc, mr, nr, alpha, beta, e, ei, ej);
    }
}
#endif /* ONNXC_ISA_X86 */

/* Whether the micro-kernel of ISA level ``level`` applies the epilogue e itself (see the top). */
static inline int onnxc_bg_epi_in_kernel(int level, const onnxc_sg_epi *e) {
    return level == ONNXC_ISA_AVX512BF16 && ONNXC_SG_EPI_IN_KERNEL && onnxc_sg_epi_in_kernel(e);
}

#endif /* ONNXC_BGEMM_KERN_H */
