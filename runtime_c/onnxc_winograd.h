/* onnxc_winograd.h: 3x3 stride-1 float convolution by Winograd F(4x4, 3x3) on the packed GEMM (onnxc_sgemm.h);
 * implemented in onnxc_winograd.c (compiled once into the runtime library).
 *
 *   int onnxc_wino_conv(int threads, const float *x, const float *U, float *y, int64_t N, int64_t C,
 *                       int64_t IH, int64_t IW, int64_t M, int64_t OH, int64_t OW, int64_t PH, int64_t PW,
 *                       const onnxc_sg_epi *epi, int64_t budget);
 *
 * y (N x M x OH x OW) = act(conv(x, w) + bias + R) for x (N x C x IH x IW) and a 3x3 filter w with unit
 * strides and dilations, leading pads PH / PW (the trailing pads only show in OH / OW). The output is cut
 * into 4x4 tiles, each reading a 6x6 input patch (zeros outside the input). With the transforms
 *   V = B^T d B (input patch), U = G w G^T (filter: at compile time, codegen/kernels/conv_winograd.py, or per call, onnxc_wino_filter),
 *   Y = A^T (sum over c of U[c] .* V[c]) A,
 * the 36 element-wise products over the channels are 36 GEMMs [M x C] x [C x tiles]: 36 * M * C
 * multiplications per 16 outputs instead of 9 * 16 * M * C (4x fewer). The interpolation points are
 * 0, 1, -1, 1/2, -1/2 and infinity, whose float32 error is about half that of 0, +-1, +-2.
 *
 * U holds 36 packed A operands (M x C each, the layout of onnxc_sg_pack_a), point p = 6 i + j at
 * p * onnxc_sg_packed_a_size(M, C). The input is first copied into a zero-padded buffer covering every tile's
 * patch (so the gathers need no bounds checks). Tiles of all images are numbered together, in panels of 32 (the
 * GEMM's B panel width), and the work is cut into tasks on `threads` threads of the runtime's pool: a group of
 * panels whose transformed input and products, `36 (C + M) 32` floats a panel, stay within `budget` floats (the
 * core's L2), times a part of the output channels when the groups alone would leave threads idle
 * (onnxc_wino_plan). Each task runs everything on its own buffers: the input transform writes V straight into
 * packed B panels (36 operands C x tiles), the 36 GEMMs of its output channels, and the output transform,
 * which adds bias and residual, applies the activation and scatters the 4x4 tiles into y. V and P never move
 * between cores, and every output is computed by one task in the same order whatever the thread count (the
 * same bits). Returns 0 or ONNXC_ERR_MEMORY.
 */
#ifndef ONNXC_WINOGRAD_H
#define ONNXC_WINOGRAD_H

#include "onnxc.h"
#include "onnxc_sgemm.h"

/* U = the 36 packed A operands above for a filter w (M x C x 3 x 3) in the model's layout, at run time (for
 * convolutions whose transformed filter is not stored: codegen/kernels/conv_winograd.py); U holds
 * 36 * onnxc_sg_packed_a_size(M, C) floats. The transform runs in double and is rounded once, like the stored
 * one. Returns 0 or ONNXC_ERR_MEMORY. */
ONNXC_RT_API int onnxc_wino_filter(int threads, const float *w, int64_t M, int64_t C, float *U);

/* See the top of this file. */
ONNXC_RT_API int onnxc_wino_conv(int threads, const float *x, const float *U, float *y, int64_t N, int64_t C,
                                  int64_t IH, int64_t IW, int64_t M, int64_t OH, int64_t OW, int64_t PH, int64_t PW,
                                  const onnxc_sg_epi *epi, int64_t budget);

#endif /* ONNXC_WINOGRAD_H */
