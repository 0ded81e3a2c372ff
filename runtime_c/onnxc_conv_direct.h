/* onnxc_conv_direct.h: 2-D float convolution with the output channels as the vector lanes (AVX-512): each tile
 * is up to 12 consecutive output positions of one row times 32 output channels, the positions' inputs broadcast
 * straight from the phase-split padded copy of onnxc_conv_implicit.h, the filter read as the packed GEMM's B
 * operand. onnxc_dc_conv is implemented in onnxc_conv_direct.c (compiled once into the runtime library).
 *
 *   int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp, const int64_t *koff,
 *                     int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy,
 *                     const onnxc_sg_epi *epi);
 *
 * Y (M x OH*OW, rows ldy floats apart) = act(W cols + bias + R). xp and koff are those of onnxc_ci_conv (tap k of
 * output (oh, ow) is xp[koff[k] + oh * XWs + ow], koff holding ONNXC_CI_PF entries past K; `planes` of them, Cg *
 * SH * SW); Bp is W^T (K x M)
 * packed as the GEMM's B operand (codegen/kernels/gemm_layout.py pack_b: panels of 32 channels, K x 32 each).
 * Epilogue e: bias per output channel (bias_cols 0), residual R[m * ldr + p].
 *
 * Against the implicit GEMM (positions as lanes, 32 virtual positions per tile) a tile holds exactly the
 * positions of one row it computes, so narrow maps (7 to 20 wide) waste no lanes on the padding columns and
 * the row ends; the price is a 16 x 16 transpose per tile before the store, small beside K steps of 2R FMAs.
 * The K loop runs whole in registers (no slices). Threads take blocks of rows (and of channel panels when the
 * rows are fewer than the chunks), so a thread reads only the input rows its outputs need.
 */
#ifndef ONNXC_CONV_DIRECT_H
#define ONNXC_CONV_DIRECT_H

#include "onnxc_conv_implicit.h"

#define ONNXC_DC_AVAILABLE ONNXC_CI_AVAILABLE /* (declared everywhere, stubs without AVX-512) */
ONNXC_RT_API int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp,
                               const int64_t *koff, int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y,
                               int64_t ldy, const onnxc_sg_epi *epi);
/* The same convolution read straight from X[n, g] (Cg x IH x IW, unpadded): tiles whose windows lie inside the
 * input take the taps at fixed offsets, the edge columns and rows lists of their valid taps; no copy. Taken from
 * ONNXC_DCX_MIN_OW output columns on (narrower maps: the edges would weigh, the copy is small). Returns 0, or
 * ONNXC_ERR_MEMORY. */
#ifndef ONNXC_DCX_MIN_OW
#define ONNXC_DCX_MIN_OW 24
#endif
ONNXC_RT_API int onnxc_dc_conv_x(int threads, int64_t M, int64_t Cg, int64_t IH, int64_t IW, int64_t KH, int64_t KW,
                                 int64_t SH, int64_t SW, int64_t DH, int64_t DW, int64_t PH, int64_t PW, int64_t OH,
                                 int64_t OW, const float *Bp, const float *x, float *Y, int64_t ldy,
                                 const onnxc_sg_epi *epi);

#endif /* ONNXC_CONV_DIRECT_H */
