/* onnxc_conv_rows.h: the float convolution's rows path, whose B panels are copied straight from a zero-padded
 * (and, at stride 2 along W, phase-split) copy of the input, and those padded copies; the GEMM micro-kernel and
 * epilogue are onnxc_sgemm.h's. Implemented in onnxc_conv_rows.c (compiled once into the runtime library). */
#ifndef ONNXC_CONV_ROWS_H
#define ONNXC_CONV_ROWS_H

#include "onnxc_sgemm.h"

/* Convolution with stride 1 or 2 along W: Y (M x OP, OP = OD*OH*OW, leading dimension OP) =
 * act(A cols + bias + R) with A the packed filter (M x K) and column (od, oh, ow) of row k of cols being
 * xp[koff[k] + (od * SD * XH + oh * SH) * XW + ow * SW]: xp is the zero-padded input (planes of
 * XD x XH x XW, readable for ONNXC_SG_XSLACK floats past its end) and koff[k] the offset of tap
 * k = (c, kd, kh, kw).
 * Output positions go in tiles of 32; a tile is a few row segments, and its K slice of B is built with
 * one fixed 32-float copy per segment and tap (each overwriting the previous one's overrun; no bounds
 * logic: the padding is in xp) into an L1-sized panel shared by all row panels of A; with a short reduction
 * (K at most ONNXC_SG_KC / 2) the panels of several tiles are built at once and each row panel of A runs over
 * them, so output rows are written in long runs. Threads take chunks of tiles and output channels
 * (onnxc_cut.h); results do not depend on the thread count. */
ONNXC_RT_API int onnxc_sg_conv_rows(int threads, int64_t M, int64_t K, const float *Ap, const float *xp,
                                     const int64_t *koff, int64_t XH, int64_t XW, int64_t OD, int64_t OH,
                                     int64_t OW, int64_t SD, int64_t SH, int64_t SW, float *Y,
                                     const onnxc_sg_epi *epi);

/* Zero-padded copy of Cg input planes (ID x IH x IW, leading pads PD, PH, PW) into planes of XD x XH x XW
 * (cropping what the convolution never reads), followed by ONNXC_SG_XSLACK zeros. */
ONNXC_RT_API void onnxc_sg_pad_input(const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW, int64_t PD,
                                      int64_t PH, int64_t PW, int64_t XD, int64_t XH, int64_t XW, float *restrict xp);

/* onnxc_sg_pad_input with the columns of each padded row split by phase modulo SW: a row becomes SW runs of
 * XWs = ceil(XW / SW) floats (columns r, r + SW, r + 2 SW, ... in run r; pitch SW * XWs), so a strided
 * convolution reads the positions of a tap contiguously (column ow * SW + c is element ow + c / SW of run
 * c % SW) and onnxc_sg_conv_rows can run it with unit stride along W. SW == 1 is onnxc_sg_pad_input. The planes
 * are split among `threads` threads of the runtime's pool when they are large enough to pay. */
ONNXC_RT_API void onnxc_sg_pad_input_phased(int threads, const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW,
                                             int64_t PD, int64_t PH, int64_t PW, int64_t XD, int64_t XH, int64_t XW,
                                             int64_t SW, float *restrict xp);

#endif /* ONNXC_CONV_ROWS_H */
