/* onnxc_conv_implicit.h: 2-D float convolution as an implicit GEMM (AVX-512): the micro-kernel reads its B
 * rows straight from a zero-padded, phase-split copy of the input, with no column matrix and no packing.
 * onnxc_ci_conv is implemented in onnxc_conv_implicit.c (compiled once into the runtime library); onnxc_ci_pad_planes
 * and onnxc_ci_slack are inline (below).
 *
 *   void onnxc_ci_pad_planes(const float *x, int64_t Cg, int64_t IH, int64_t IW, int64_t PH, int64_t PW,
 *                            int64_t SH, int64_t SW, int64_t XHs, int64_t XWs, float *xp);
 *       (the caller zeroes the onnxc_ci_slack(XWs) floats past the planes; the generated code splits the
 *       channels among the pool's threads)
 *   int onnxc_ci_conv(int threads, int64_t M, int64_t K, const float *Ap, const float *xp, const int64_t *koff,
 *                     int64_t XWs, int64_t OH, int64_t OW, float *Y, const onnxc_sg_epi *epi);
 *
 * The copy xp holds, for every input channel c and stride phase (ph, pw) (ph < SH, pw < SW), the plane of
 * padded rows ph, ph + SH, ... and columns pw, pw + SW, ..., XHs x XWs floats: output (oh, ow) of tap
 * (kh, kw) reads plane (c, kh % SH, kw % SW) at (oh + kh / SH, ow + kw / SW) (dilations folded into kh, kw).
 * So with koff[k] the offset of tap k's plane corner (kh / SH rows and kw / SW columns in), tap k for
 * the *virtual* position v = oh * XWs + ow is xp[koff[k] + v]: any 32 consecutive virtual positions are
 * one contiguous run of every B row. Virtual positions with ow >= OW (the XWs - OW right-hand columns
 * of each virtual row) are computed and dropped: the valid lanes of a tile are stored contiguously
 * with a compress store (they are consecutive output positions), the residual read with an expand load.
 *
 * Y (M x OH*OW) = act(W cols + bias + R); Ap the filter packed as the GEMM's A (onnxc_sgemm.h layout),
 * K = Cg * KH * KW in slices of ONNXC_SG_KC. Threads split the tiles of each slice. xp needs
 * onnxc_ci_slack(XWs) readable floats past its last plane. The products and sums are those of the
 * packed GEMM on the same slices, so results equal onnxc_sg_conv_rows bit for bit.
 */
#ifndef ONNXC_CONV_IMPLICIT_H
#define ONNXC_CONV_IMPLICIT_H

#include "onnxc_gemm.h"

/* The kernels need AVX-512; the declarations and the plain-C copies below are there on every target (a
 * generated parallel helper is emitted outside the caller's #if ONNXC_CI_AVAILABLE), and elsewhere the
 * functions are stubs returning ONNXC_ERR_RUNTIME that nothing calls. */
#if defined(__AVX512F__)
#define ONNXC_CI_AVAILABLE 1
#else
#define ONNXC_CI_AVAILABLE 0
#endif
#ifndef ONNXC_CI_PF
#define ONNXC_CI_PF 16 /* B rows prefetched ahead; koff holds this many entries past K (copies of the last).
                         16 rather than 8: inputs come from the other core's cache too */
#endif

static inline int64_t onnxc_ci_slack(int64_t XWs) { return XWs + 2 * ONNXC_SG_NR; }

/* Inline: generated code calls it with constant sizes, so the row copies and clears compile to moves
 * instead of memcpy / memset calls (twice as fast for a 56 x 56 map, 7x for 7 x 7). */
static inline void onnxc_ci_pad_phase(const float *x, int64_t c, int64_t ph, int64_t IH, int64_t IW, int64_t PH,
                                      int64_t PW, int64_t SH, int64_t SW, int64_t XHs, int64_t XWs, float *restrict xp) {
    for (int64_t pw = 0; pw < SW; pw++) {
        float *plane = xp + ((c * SH + ph) * SW + pw) * XHs * XWs;
        for (int64_t r = 0; r < XHs; r++) {
            float *d = plane + r * XWs;
            const int64_t ih = r * SH + ph - PH;
            if (ih < 0 || ih >= IH) {
                memset(d, 0, (size_t)XWs * sizeof(float));
                continue;
            }
            const float *src = x + (c * IH + ih) * IW + pw - PW; /* column q reads src[q * SW] */
            /* q0 .. q1: the columns with 0 <= q * SW + pw - PW < IW */
            int64_t q0 = PW - pw > 0 ? (PW - pw + SW - 1) / SW : 0;
            int64_t q1 = IW + PW - pw > 0 ? (IW + PW - pw + SW - 1) / SW : 0;
            if (q0 > XWs) q0 = XWs;
            if (q1 > XWs) q1 = XWs;
            if (q1 < q0) q1 = q0;
            for (int64_t q = 0; q < q0; q++) d[q] = 0.0f;
            if (SW == 1) {
                memcpy(d + q0, src + q0, (size_t)(q1 - q0) * sizeof(float));
            } else {
                for (int64_t q = q0; q < q1; q++) d[q] = src[q * SW];
            }
            for (int64_t q = q1; q < XWs; q++) d[q] = 0.0f;
        }
    }
}

/* (onnxc_ci_pad_phase: the planes of channel c's row phase ph, the generated code's unit of work on the pool:
 * a 3-channel stem with stride 2 gives 6 of them) */
static inline void onnxc_ci_pad_planes(const float *x, int64_t Cg, int64_t IH, int64_t IW, int64_t PH, int64_t PW,
                                       int64_t SH, int64_t SW, int64_t XHs, int64_t XWs, float *restrict xp) {
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t ph = 0; ph < SH; ph++) onnxc_ci_pad_phase(x, c, ph, IH, IW, PH, PW, SH, SW, XHs, XWs, xp);
}


/* Y = act(W cols + bias + R): see the top of this file. Returns 0. */
ONNXC_RT_API int onnxc_ci_conv(int threads, int64_t M, int64_t K, const float *Ap, const float *xp,
                               const int64_t *koff, int64_t XWs, int64_t OH, int64_t OW, float *Y,
                               const onnxc_sg_epi *epi);

/* onnxc_ci_conv writing output row m at Y + m * ldy (ldy >= OH * OW): a band of a larger output
 * (codegen/kernels/conv_dwpw.py). */
ONNXC_RT_API int onnxc_ci_conv_ld(int threads, int64_t M, int64_t K, const float *Ap, const float *xp,
                                  const int64_t *koff, int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy,
                                  const onnxc_sg_epi *epi);

#endif /* ONNXC_CONV_IMPLICIT_H */
