/* onnxc_conv.c: the implementation of onnxc_conv.h (compiled once into the runtime library). */
#include "onnxc_conv.h"
#include "onnxc_pool.h"

/* The transposed copy tmp (OP x M) -> Y (M x OP) of onnxc_sg_conv_small, rows of Y split among threads; with
 * the epilogue when the GEMM could not apply it (a residual: it is laid out like Y). */
typedef struct {
    int64_t M, OP, per, ldy;
    const float *tmp;
    float *Y;
    const onnxc_sg_epi *epi;
} onnxc_sg_small_par;

#if defined(__AVX__)
#include <immintrin.h>
/* dst[i * ldd + j] = src[j * lds + i] for an 8 x 8 block, in registers. */
static inline void onnxc_sg_tr8(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#define ONNXC_SG_TR 8
#else
#define ONNXC_SG_TR 1
#endif

/* Rows [m0, m1) of Y = tmp^T: blocks of 8 x 8 transposed in registers, the edges element by element (a scalar
 * copy ran at 0.8 ns an element: 36 us of a 49-position, 960-channel layer's 100). */
static void onnxc_sg_small_transpose(const float *tmp, int64_t M, int64_t OP, int64_t m0, int64_t m1, float *Y,
                                     int64_t ldy) {
    int64_t m = m0;
#if ONNXC_SG_TR > 1
    for (; m + ONNXC_SG_TR <= m1; m += ONNXC_SG_TR) {
        int64_t p = 0;
        for (; p + ONNXC_SG_TR <= OP; p += ONNXC_SG_TR) onnxc_sg_tr8(tmp + p * M + m, M, Y + m * ldy + p, ldy);
        for (; p < OP; p++)
            for (int64_t i = 0; i < ONNXC_SG_TR; i++) Y[(m + i) * ldy + p] = tmp[p * M + m + i];
    }
#endif
    for (; m < m1; m++)
        for (int64_t p = 0; p < OP; p++) Y[m * ldy + p] = tmp[p * M + m];
}

static void onnxc_sg_small_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_sg_small_par *P = (const onnxc_sg_small_par *)ctx;
    const int64_t M = P->M, OP = P->OP, m0 = chunk * P->per, m1 = m0 + P->per < M ? m0 + P->per : M;
    onnxc_sg_small_transpose(P->tmp, M, OP, m0, m1, P->Y, P->ldy);
    if (P->epi)
        for (int64_t m = m0; m < m1; m++) onnxc_sg_epilogue(P->epi, P->Y + m * P->ldy, OP, m, 0, 1, OP);
}

int onnxc_sg_conv_small(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W, int fw,
                        float *restrict tmp, float *Y, const onnxc_sg_epi *epi) {
    return onnxc_sg_conv_small_ld(threads, M, K, OP, col, W, fw, tmp, Y, OP, epi);
}

int onnxc_sg_conv_small_ld(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W, int fw,
                           float *restrict tmp, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    if (M <= 0 || OP <= 0) return 0;
    /* without a residual, bias (one per column of tmp) and activation run in the GEMM's epilogue, in parallel and
     * in registers; the copy into Y is then a plain transpose */
    onnxc_sg_epi cols;
    const onnxc_sg_epi *in_gemm = NULL;
    if (epi && !epi->res) {
        cols = *epi;
        cols.bias_cols = 1;
        in_gemm = &cols;
        epi = NULL;
    }
    const int st = onnxc_sgemm_ex(threads, OP, M, K, 1.0f, col, OP, ONNXC_SG_TRANS, W, K, fw, 0.0f, tmp, M, in_gemm);
    if (st) return st;
    /* rows of Y (channels) in as many chunks as the GEMM's column stripes (4 per thread) once the copy is a few
     * microseconds: each thread then copies much of what it computed, and the layer after (a depthwise one, by
     * channels) reads it from the same core */
    const int64_t n = onnxc_chunks(threads, (double)M * (double)OP * (epi ? 8.0 : 1.0), 4096.0);
    const onnxc_sg_small_par P = {M, OP, (M + n - 1) / n, ldy, tmp, Y, epi};
    onnxc_parallel(threads, (M + P.per - 1) / P.per, onnxc_sg_small_task, (void *)&P);
    return 0;
}
