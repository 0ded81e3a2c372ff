/* onnxc_quant.c: the integer GEMM of onnxc_quant.h (compiled once into the runtime library). */
#include "onnxc_quant.h"
#include "onnxc_pool.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

/* The double formula for elements [j0, j1) (the reference rule; also the lanes the float path defers). */
static void onnxc_requant_span(const int32_t *acc, int64_t j0, int64_t j1, int32_t bias, const float *mult,
                               int mult_per, int32_t zy, int s8, void *y) {
    const double lo = s8 ? -128.0 : 0.0, hi = s8 ? 127.0 : 255.0;
    for (int64_t j = j0; j < j1; j++) {
        const double r = onnxc_requant((int32_t)((uint32_t)acc[j] + (uint32_t)bias), mult[mult_per ? j : 0],
                                       (double)zy, lo, hi);
        if (s8)
            ((int8_t *)y)[j] = (int8_t)r;
        else
            ((uint8_t *)y)[j] = (uint8_t)r;
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* The lanes m of 16 of onnxc_requant_row's float path: stores them and returns nonzero when one of them needs the
 * double formula (a tie after rounding in float, or |v| >= 2^24). The last lanes of a row take the masked form
 * (the double formula for them cost a few nanoseconds each: a 7x7 depthwise map's last output per channel). */
static inline __attribute__((always_inline)) int onnxc_requant16m(const int32_t *acc, __mmask16 m, __m512i vb, __m512 mu,
                                                                  __m512 vz, __m512 lo, __m512 hi, void *y, int narrow) {
    const __m512i big = _mm512_set1_epi32(1 << 24);
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512i v = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, (const void *)acc), vb);
    const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), mu, vz);
    const __m512 r = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 tie = _mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(_mm512_sub_ps(f, r)), half, _CMP_EQ_OQ);
    const __mmask16 wide = narrow ? 0 : _mm512_mask_cmpge_epi32_mask(m, _mm512_abs_epi32(v), big);
    const __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
    /* the low byte of the clamped int32 is the int8 or uint8 value */
    _mm_mask_storeu_epi8(y, m, _mm512_cvtepi32_epi8(q));
    return (tie | wide) != 0;
}

static inline __attribute__((always_inline)) int onnxc_requant16(const int32_t *acc, __m512i vb, __m512 mu, __m512 vz,
                                                                 __m512 lo, __m512 hi, void *y, int narrow) {
    return onnxc_requant16m(acc, (__mmask16)0xFFFF, vb, mu, vz, lo, hi, y, narrow);
}
#endif

void onnxc_requant_row(const int32_t *acc, int64_t n, int32_t bias, const float *mult, int mult_per, int32_t zy,
                       int s8, void *y) {
    int64_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512i vb = _mm512_set1_epi32(bias);
    const __m512 vz = _mm512_set1_ps((float)zy);
    const __m512 lo = _mm512_set1_ps(s8 ? -128.0f : 0.0f), hi = _mm512_set1_ps(s8 ? 127.0f : 255.0f);
    const __m512 m0 = _mm512_set1_ps(mult[0]);
    for (; j + 16 <= n; j += 16) {
        const __m512 mu = mult_per ? _mm512_loadu_ps(mult + j) : m0;
        if (onnxc_requant16(acc + j, vb, mu, vz, lo, hi, (uint8_t *)y + j, 0))
            onnxc_requant_span(acc, j, j + 16, bias, mult, mult_per, zy, s8, y);
    }
    if (j < n) {
        const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        const __m512 mu = mult_per ? _mm512_maskz_loadu_ps(m, mult + j) : m0;
        if (onnxc_requant16m(acc + j, m, vb, mu, vz, lo, hi, (uint8_t *)y + j, 0))
            onnxc_requant_span(acc, j, n, bias, mult, mult_per, zy, s8, y);
        j = n;
    }
#endif
    onnxc_requant_span(acc, j, n, bias, mult, mult_per, zy, s8, y);
}

void onnxc_requant_tile(const int32_t *acc, int64_t lda, int64_t rows, int64_t n, const int32_t *bias,
                        const float *mult, int32_t zy, int s8, void *y, int64_t ldy, int narrow) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512 vz = _mm512_set1_ps((float)zy);
    const __m512 lo = _mm512_set1_ps(s8 ? -128.0f : 0.0f), hi = _mm512_set1_ps(s8 ? 127.0f : 255.0f);
#endif
    for (int64_t r = 0; r < rows; r++) {
        const int32_t *a = acc + r * lda, b = bias ? bias[r] : 0;
        uint8_t *yr = (uint8_t *)y + r * ldy;
        int64_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
        const __m512i vb = _mm512_set1_epi32(b);
        const __m512 mu = _mm512_set1_ps(mult[r]);
        if (narrow) {
            for (; j + 16 <= n; j += 16)
                if (onnxc_requant16(a + j, vb, mu, vz, lo, hi, yr + j, 1))
                    onnxc_requant_span(a, j, j + 16, b, mult + r, 0, zy, s8, yr);
        } else {
            for (; j + 16 <= n; j += 16)
                if (onnxc_requant16(a + j, vb, mu, vz, lo, hi, yr + j, 0))
                    onnxc_requant_span(a, j, j + 16, b, mult + r, 0, zy, s8, yr);
        }
        if (j < n) {
            const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
            if (onnxc_requant16m(a + j, m, vb, mu, vz, lo, hi, yr + j, narrow))
                onnxc_requant_span(a, j, n, b, mult + r, 0, zy, s8, yr);
            j = n;
        }
#endif
        onnxc_requant_span(a, j, n, b, mult + r, 0, zy, s8, yr);
    }
#if !(defined(__AVX512F__) && defined(__AVX512BW__))
    (void)narrow;
#endif
}

/* The tiles: column chunks of NC (even) columns times blocks of 4 rows, numbered column chunk major. */
typedef struct {
    int64_t N2, K, NC, mblocks, tiles, nch, lda, ldb, ldc;
    const int16_t *A, *BT;
    uint32_t *C;
} onnxc_qgemm_args;

/* Tiles [tiles * ch / nch, tiles * (ch + 1) / nch): each writes its own 4 rows x NC columns of C. */
static void onnxc_qgemm_tiles(void *p, int64_t ch, int slot) {
    const onnxc_qgemm_args *g = (const onnxc_qgemm_args *)p;
    (void)slot;
    const int64_t K = g->K, lda = g->lda, ldb = g->ldb, ldc = g->ldc;
    for (int64_t t = g->tiles * ch / g->nch, t1 = g->tiles * (ch + 1) / g->nch; t < t1; t++) {
        const int64_t nc = t / g->mblocks, m = t % g->mblocks * 4;
        const int64_t nend = (nc + 1) * g->NC < g->N2 ? (nc + 1) * g->NC : g->N2;
        const int16_t *restrict a0 = g->A + m * lda, *restrict a1 = a0 + lda, *restrict a2 = a1 + lda;
        const int16_t *restrict a3 = a2 + lda;
        for (int64_t n = nc * g->NC; n < nend; n += 2) {
            const int16_t *restrict b0 = g->BT + n * ldb, *restrict b1 = b0 + ldb;
            uint32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0, s20 = 0, s21 = 0, s30 = 0, s31 = 0;
            for (int64_t k = 0; k < K; k++) {
                const int32_t y0 = b0[k], y1 = b1[k];
                s00 += (uint32_t)(a0[k] * y0); s01 += (uint32_t)(a0[k] * y1);
                s10 += (uint32_t)(a1[k] * y0); s11 += (uint32_t)(a1[k] * y1);
                s20 += (uint32_t)(a2[k] * y0); s21 += (uint32_t)(a2[k] * y1);
                s30 += (uint32_t)(a3[k] * y0); s31 += (uint32_t)(a3[k] * y1);
            }
            uint32_t *c = g->C + m * ldc + n;
            c[0] = s00; c[1] = s01; c[ldc] = s10; c[ldc + 1] = s11;
            c[2 * ldc] = s20; c[2 * ldc + 1] = s21; c[3 * ldc] = s30; c[3 * ldc + 1] = s31;
        }
    }
}

void onnxc_qgemm_s16(int64_t M, int64_t N, int64_t K, const int16_t *A, int64_t lda, const int16_t *BT, int64_t ldb,
                     uint32_t *C, int64_t ldc, int threads) {
    const int64_t M4 = M - M % 4, N2 = N - N % 2;
    int64_t NC = (int64_t)(49152 / (K > 0 ? K : 1)) & ~(int64_t)1;
    if (NC < 2) NC = 2;
    const int64_t nchunks = (N2 + NC - 1) / NC, mblocks = M4 / 4;
    onnxc_qgemm_args g = {N2, K, NC, mblocks, nchunks * mblocks, 1, lda, ldb, ldc, A, BT, C};
    /* on the pool from 1 << 18 multiply-adds (two grains), in up to 4 chunks of tiles a thread */
    const int64_t k = onnxc_chunks(threads, (double)M4 * (double)N * (double)K, 1 << 17);
    g.nch = k < g.tiles ? k : g.tiles;
    if (g.nch <= 1) {
        g.nch = 1;
        onnxc_qgemm_tiles(&g, 0, 0);
    } else {
        onnxc_parallel(threads, g.nch, onnxc_qgemm_tiles, &g);
    }
    for (int64_t m = 0; m < M; m++) { /* the last column (N odd) of full row blocks, and the last rows */
        for (int64_t n = m < M4 ? N2 : 0; n < N; n++) {
            const int16_t *restrict a = A + m * lda, *restrict b = BT + n * ldb;
            uint32_t s = 0;
            for (int64_t k = 0; k < K; k++) s += (uint32_t)(a[k] * (int32_t)b[k]);
            C[m * ldc + n] = s;
        }
    }
}
