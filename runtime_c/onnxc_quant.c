/* onnxc_quant.c: the integer GEMM of onnxc_quant.h (compiled once into the runtime library). */
#include "onnxc_quant.h"
#include "onnxc_pool.h"

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
