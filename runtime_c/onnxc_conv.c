/* onnxc_conv.c: the implementation of onnxc_conv.h (compiled once into the runtime library). */
#include "onnxc_conv.h"

int onnxc_sg_conv_small(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W, int fw,
                        float *restrict tmp, float *Y, const onnxc_sg_epi *epi) {
    if (M <= 0 || OP <= 0) return 0;
    const int st = onnxc_sgemm_ex(threads, OP, M, K, 1.0f, col, OP, ONNXC_SG_TRANS, W, K, fw, 0.0f, tmp, M, NULL);
    if (st) return st;
    for (int64_t m = 0; m < M; m++) {
        float *restrict y = Y + m * OP;
        for (int64_t p = 0; p < OP; p++) y[p] = tmp[p * M + m];
        if (epi) onnxc_sg_epilogue(epi, y, OP, m, 0, 1, OP);
    }
    return 0;
}
