/* onnxc_igemm_q4.h: the im2col by words of 4 channels of the integer convolutions (onnxc_igemm_q4.c, compiled
 * once into the runtime library), for the 8-bit GEMM of onnxc_igemm.h. */
#ifndef ONNXC_IGEMM_Q4_H
#define ONNXC_IGEMM_Q4_H

#include "onnxc_igemm.h"

/* The im2col of a 1-D / 2-D convolution whose input channels come in fours (onnxc_igemm_q4.c), with k ordered
 * (c / 4, kh, kw, c % 4) (the filter's columns permuted to match): onnxc_ig_q4_planes writes x4, Cq planes of
 * XH x XW words, word (r, w) of plane cq holding the 4 bytes of input channels 4 cq .. 4 cq + 3 at row r - PH,
 * column w - PW (the zero point x_zp outside the input), flipped to uint8 (to_u8) or int8 as
 * onnxc_ig_im2col_packed; XH = (OH - 1) SH + (KH - 1) DH + 1 and XW likewise (the rows and columns the windows
 * read). onnxc_ig_im2col_q4 then writes the packed B panels (ONNXC_IG_PACKED_HOT, K = 4 Cq KH KW) of output
 * positions [j0, j0 + ncol) from x4. */
ONNXC_RT_API void onnxc_ig_q4_planes(int threads, const void *x, int x_u8, int32_t x_zp, int to_u8, int64_t Cq,
                                     int64_t IH, int64_t IW, int64_t PH, int64_t PW, int64_t XH, int64_t XW,
                                     uint32_t *x4);
ONNXC_RT_API void onnxc_ig_im2col_q4(int threads, const uint32_t *x4, int64_t Cq, int64_t XH, int64_t XW, int64_t OW,
                                     int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH, int64_t DW,
                                     int64_t j0, int64_t ncol, uint8_t *restrict colp);

#endif /* ONNXC_IGEMM_Q4_H */
