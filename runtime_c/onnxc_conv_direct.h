/* onnxc_conv_direct.h: 2-D float convolution with the output channels as the vector lanes (AVX-512): each tile
 * is up to 12 output positions of one row times 32 output channels, the positions' inputs broadcast, the
 * filter read as the packed GEMM's B operand. Implemented in onnxc_conv_direct.c (compiled once into the
 * runtime library); without AVX-512 the functions are stubs nothing calls (codegen keeps a fallback).
 *
 *   int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp, const int64_t *koff,
 *                     int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy,
 *                     const onnxc_sg_epi *epi);
 *   int onnxc_dc_conv_x(int threads, int64_t M, int64_t Cg, int64_t IH, int64_t IW, int64_t KH, int64_t KW,
 *                       int64_t SH, int64_t SW, int64_t DH, int64_t DW, int64_t PH, int64_t PW, int64_t OH,
 *                       int64_t OW, const float *Bp, const float *x, float *Y, int64_t ldy, const onnxc_sg_epi *epi);
 *
 * Y (M x OH*OW, rows ldy floats apart) = act(W cols + bias + R). Bp is W^T (K x M, K = Cg * KH * KW) packed as
 * the GEMM's B operand (codegen/kernels/gemm_layout.py pack_b: panels of 32 channels, K x 32 each). Epilogue e:
 * bias per output channel (bias_cols 0), residual R[m * ldr + p].
 * - onnxc_dc_conv reads the phase-split padded copy of onnxc_ci_conv: tap k of output (oh, ow) is
 *   xp[koff[k] + oh * XWs + ow], koff holding ONNXC_CI_PF entries past K; `planes` planes (Cg * SH * SW).
 *   With few tiles per chunk and a long K, K runs in slices with partial sums, every tile per slice.
 * - onnxc_dc_conv_x reads X[n, g] (Cg x IH x IW) where it is: inner tiles take every tap at fixed offsets,
 *   edge columns run as column tiles, edge rows and corners with lists of their valid taps; no copy.
 *
 * Against the implicit GEMM (positions as lanes, 32 virtual positions per tile) a tile holds exactly the
 * positions it computes, so narrow maps (7 to 20 wide) waste no lanes on padding columns and row ends; the price
 * is a 16 x 16 transpose per tile before the store, small beside K steps of 2R FMAs. Threads take blocks of rows
 * (channel panels first when the filter is larger than the cache), so a thread reads only the input rows its
 * outputs need; the next filter panel is prefetched into L2 in shares over the current panel's tiles.
 */
#ifndef ONNXC_CONV_DIRECT_H
#define ONNXC_CONV_DIRECT_H

#include "onnxc_conv_implicit.h"

#define ONNXC_DC_AVAILABLE ONNXC_CI_AVAILABLE /* (declared everywhere, stubs without AVX-512) */
ONNXC_RT_API int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp,
                               const int64_t *koff, int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y,
                               int64_t ldy, const onnxc_sg_epi *epi);
/* (onnxc_dc_conv_x is taken from ONNXC_DCX_MIN_OW output columns on, or without padding: on narrower padded maps
 * the edges would weigh and the copy is small. Returns 0, or ONNXC_ERR_MEMORY.) */
#ifndef ONNXC_DCX_MIN_OW
#define ONNXC_DCX_MIN_OW 24
#endif
ONNXC_RT_API int onnxc_dc_conv_x(int threads, int64_t M, int64_t Cg, int64_t IH, int64_t IW, int64_t KH, int64_t KW,
                                 int64_t SH, int64_t SW, int64_t DH, int64_t DW, int64_t PH, int64_t PW, int64_t OH,
                                 int64_t OW, const float *Bp, const float *x, float *Y, int64_t ldy,
                                 const onnxc_sg_epi *epi);

#endif /* ONNXC_CONV_DIRECT_H */
