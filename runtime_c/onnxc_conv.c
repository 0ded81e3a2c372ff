/* onnxc_conv.c: the implementation of onnxc_conv.h (compiled once into the runtime library). */
#include "onnxc_conv.h"
#include "onnxc_pool.h"

/* The transposed copy tmp (OP x M) -> Y (M x OP) of onnxc_sg_conv_small, rows of Y split among threads; with
 * the epilogue when the GEMM could not apply it (a residual: it is laid out like Y). */
typedef struct {
    int64_t M, OP, per;
    const float *tmp;
    float *Y;
    const onnxc_sg_epi *epi;
} onnxc_sg_small_par;

static void onnxc_sg_small_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_sg_small_par *P = (const onnxc_sg_small_par *)ctx;
    const int64_t M = P->M, OP = P->OP, m0 = chunk * P->per, m1 = m0 + P->per < M ? m0 + P->per : M;
    for (int64_t m = m0; m < m1; m++) {
        float *restrict y = P->Y + m * OP;
        for (int64_t p = 0; p < OP; p++) y[p] = P->tmp[p * M + m];
        if (P->epi) onnxc_sg_epilogue(P->epi, y, OP, m, 0, 1, OP);
    }
}

int onnxc_sg_conv_small(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W, int fw,
                        float *restrict tmp, float *Y, const onnxc_sg_epi *epi) {
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
    const int64_t n = onnxc_chunks(threads, (double)M * (double)OP * (epi ? 8.0 : 1.0), 65536.0);
    const onnxc_sg_small_par P = {M, OP, (M + n - 1) / n, tmp, Y, epi};
    onnxc_parallel(threads, (M + P.per - 1) / P.per, onnxc_sg_small_task, (void *)&P);
    return 0;
}
