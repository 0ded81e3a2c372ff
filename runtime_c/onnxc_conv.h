/* onnxc_conv.h: float convolution pieces on top of the packed GEMM (onnxc_sgemm.h). onnxc_sg_conv_small is
 * implemented in onnxc_conv.c (compiled once into the runtime library); onnxc_sg_conv_cols is inline (below).
 *
 *   int onnxc_sg_conv_small(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W,
 *                           int fw, float *tmp, float *Y, const onnxc_sg_epi *epi);
 *   int onnxc_sg_conv_small_ld(int threads, int64_t M, int64_t K, int64_t OP, const float *col, const float *W,
 *                              int fw, float *tmp, float *Y, int64_t ldy, const onnxc_sg_epi *epi);
 *
 * Y (M x OP, row-major) = act(W cols + bias + R) for a convolution with few output positions (a 7 x 7 map):
 * col is the column matrix (K x OP, row-major, leading dimension OP) and W the filter, either packed at
 * compile time as the GEMM's B operand of W^T (fw = ONNXC_SG_PACKED, codegen/kernels/gemm_layout.py
 * pack_b) or plain M x K (fw = ONNXC_SG_TRANS). The GEMM runs transposed, tmp (OP x M) = cols^T W^T, so
 * the positions are the micro-kernel's rows (4-row granularity) and the channels its 32 columns: a map of
 * 49 positions costs 52 rows instead of 64 columns. Without a residual the GEMM applies bias (per column of
 * tmp) and activation in its epilogue; tmp is then transposed into Y, rows of Y split among the threads, with
 * the epilogue there when there is a residual (laid out like Y). onnxc_sg_conv_small_ld writes row m of Y at
 * Y + m * ldy (a band of positions of a larger map; the residual's rows are epi->ldr apart).
 *
 *   void onnxc_sg_conv_cols(const float *xp, const int64_t *koff, int64_t K, int64_t XH, int64_t XWp,
 *                           int64_t OD, int64_t OH, int64_t OW, int64_t SD, int64_t SH, float *col);
 *
 * The column matrix (K x OD*OH*OW) of a zero-padded, phase-split input (onnxc_sg_pad_input_phased; koff[k]
 * the offset of tap k in it): every row is OD*OH contiguous copies of OW floats.
 */
#ifndef ONNXC_CONV_H
#define ONNXC_CONV_H

#include "onnxc_gemm.h"

/* Inline: generated code calls it with a constant OW, so each row copy compiles to a few moves instead
 * of a memcpy call (32k rows of 7 floats for a 3x3 conv on 512 channels of a 7x7 map). */
static inline void onnxc_sg_conv_cols(const float *xp, const int64_t *koff, int64_t K, int64_t XH, int64_t XWp,
                                      int64_t OD, int64_t OH, int64_t OW, int64_t SD, int64_t SH,
                                      float *restrict col) {
    for (int64_t k = 0; k < K; k++) {
        const float *src = xp + koff[k];
        for (int64_t od = 0; od < OD; od++) {
            for (int64_t oh = 0; oh < OH; oh++, col += OW)
                memcpy(col, src + (od * SD * XH + oh * SH) * XWp, (size_t)OW * sizeof(float));
        }
    }
}

ONNXC_RT_API int onnxc_sg_conv_small(int threads, int64_t M, int64_t K, int64_t OP, const float *col,
                                      const float *W, int fw, float *restrict tmp, float *Y,
                                      const onnxc_sg_epi *epi);
ONNXC_RT_API int onnxc_sg_conv_small_ld(int threads, int64_t M, int64_t K, int64_t OP, const float *col,
                                         const float *W, int fw, float *restrict tmp, float *Y, int64_t ldy,
                                         const onnxc_sg_epi *epi);

#endif /* ONNXC_CONV_H */
