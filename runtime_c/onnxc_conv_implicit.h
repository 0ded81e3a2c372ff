/* onnxc_conv_implicit.h: 2-D float convolution as an implicit GEMM (AVX-512): the micro-kernel reads its B
 * rows straight from a zero-padded, phase-split copy of the input, with no column matrix and no packing.
 *
 *   void onnxc_ci_pad(const float *x, int64_t Cg, int64_t IH, int64_t IW, int64_t PH, int64_t PW,
 *                     int64_t SH, int64_t SW, int64_t XHs, int64_t XWs, float *xp);
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
#include "onnxc_sgemm_kern.h"

#if defined(__AVX512F__)
#define ONNXC_CI_AVAILABLE 1
#ifndef ONNXC_CI_PF
#define ONNXC_CI_PF 8 /* B rows prefetched ahead; koff holds this many entries past K (copies of the last) */
#endif

static inline int64_t onnxc_ci_slack(int64_t XWs) { return XWs + 2 * ONNXC_SG_NR; }

static inline void onnxc_ci_pad(const float *x, int64_t Cg, int64_t IH, int64_t IW, int64_t PH, int64_t PW, int64_t SH,
                                int64_t SW, int64_t XHs, int64_t XWs, float *restrict xp) {
    for (int64_t c = 0; c < Cg; c++) {
        for (int64_t ph = 0; ph < SH; ph++) {
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
    }
    memset(xp + Cg * SH * SW * XHs * XWs, 0, (size_t)onnxc_ci_slack(XWs) * sizeof(float));
}

/* R rows (4, 8 or 12) of one tile: 32 virtual positions starting at xb (= xp + v0), B row p at
 * xb + koff[p]. y: output row 0 at the tile's first valid position (ldy floats between rows); m0 / m1
 * the valid lanes (full: all 32, stored plainly); add: accumulate onto y (a later K slice); e: the
 * epilogue applied in registers (its rows start at ei; its residual at column yp of Y). */
static inline __attribute__((always_inline)) void onnxc_ci_k512(const int R, int64_t kc, const float *restrict a,
                                                                const float *xb, const int64_t *koff, float *y,
                                                                int64_t ldy, int mr, __mmask16 m0, __mmask16 m1,
                                                                int full, int add, const onnxc_sg_epi *e, int64_t ei,
                                                                int64_t yp) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        /* the next tile's output lines (for writing): its 12 rows are streams far apart the hardware
         * prefetcher does not follow, and Y is usually not in cache */
        if (i < mr) {
            __builtin_prefetch(y + i * ldy + 32, 1, 3);
            __builtin_prefetch(y + i * ldy + 48, 1, 3);
        }
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++) {
        const float *b = xb + koff[p], *bn = xb + koff[p + ONNXC_CI_PF];
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        _mm_prefetch((const char *)(a + 16 * ONNXC_SG_MR), _MM_HINT_T0);
        _mm_prefetch((const char *)bn, _MM_HINT_T0);
        _mm_prefetch((const char *)(bn + 31), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
        a += ONNXC_SG_MR;
    }
    const int n0 = __builtin_popcount(m0);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        if (i >= mr) break;
        float *yi = y + i * ldy;
        __m512 x0 = acc[i][0], x1 = acc[i][1];
        if (add) {
            x0 = _mm512_add_ps(x0, full ? _mm512_loadu_ps(yi) : _mm512_maskz_expandloadu_ps(m0, yi));
            x1 = _mm512_add_ps(x1, full ? _mm512_loadu_ps(yi + 16) : _mm512_maskz_expandloadu_ps(m1, yi + n0));
        }
        if (e) {
            if (e->bias) {
                const __m512 bv = _mm512_set1_ps(e->bias[ei + i]);
                x0 = _mm512_add_ps(x0, bv);
                x1 = _mm512_add_ps(x1, bv);
            }
            if (e->res) {
                const float *r = e->res + (ei + i) * e->ldr + yp;
                x0 = _mm512_add_ps(x0, full ? _mm512_loadu_ps(r) : _mm512_maskz_expandloadu_ps(m0, r));
                x1 = _mm512_add_ps(x1, full ? _mm512_loadu_ps(r + 16) : _mm512_maskz_expandloadu_ps(m1, r + n0));
            }
            x0 = onnxc_sg_act512(e->act, e->a, e->b, x0);
            x1 = onnxc_sg_act512(e->act, e->a, e->b, x1);
        }
        if (full) {
            _mm512_storeu_ps(yi, x0);
            _mm512_storeu_ps(yi + 16, x1);
        } else {
            _mm512_mask_compressstoreu_ps(yi, m0, x0);
            _mm512_mask_compressstoreu_ps(yi + n0, m1, x1);
        }
    }
}

static inline int onnxc_ci_conv(int threads, int64_t M, int64_t K, const float *Ap, const float *xp,
                                const int64_t *koff, int64_t XWs, int64_t OH, int64_t OW, float *Y,
                                const onnxc_sg_epi *epi) {
    const int64_t NR = ONNXC_SG_NR, OP = OH * OW, VP = OH * XWs, tiles = (VP + NR - 1) / NR;
    if (M <= 0 || OP <= 0) return 0;
    const int nt = threads > 1 && (double)M * (double)K * (double)OP >= ONNXC_GEMM_PAR_MIN
                       ? (tiles < threads ? (int)tiles : threads) : 1;
    const onnxc_sg_epi *ek = onnxc_sg_epi_in_kernel(epi) ? epi : NULL;
#pragma omp parallel num_threads(nt) if (nt > 1)
    for (int64_t pc = 0; pc < K; pc += ONNXC_SG_KC) {
        const int64_t kc = K - pc < ONNXC_SG_KC ? K - pc : ONNXC_SG_KC;
        const int last = pc + kc >= K;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t v0 = t * NR;
            /* valid lanes: virtual positions below VP whose column is below OW */
            uint32_t valid = 0;
            int64_t oh = v0 / XWs, ow = v0 % XWs;
            for (int l = 0; l < (int)NR && v0 + l < VP; l++) {
                if (ow < OW) valid |= 1u << l;
                if (++ow == XWs) {
                    ow = 0;
                    oh++;
                }
            }
            if (!valid) continue;
            const int f = __builtin_ctz(valid); /* first valid lane: its output position */
            const int64_t yp = (v0 + f) / XWs * OW + (v0 + f) % XWs;
            const int full = valid == 0xFFFFFFFFu; /* then the 32 outputs are consecutive */
            const __mmask16 m0 = (__mmask16)(valid & 0xFFFF), m1 = (__mmask16)(valid >> 16);
            const int nvalid = __builtin_popcount(valid);
            const float *xb = xp + v0;
            for (int64_t ir = 0; ir < M; ir += ONNXC_SG_MR) {
                const int mr = M - ir < ONNXC_SG_MR ? (int)(M - ir) : (int)ONNXC_SG_MR;
                const float *a = Ap + ir * K + pc * ONNXC_SG_MR;
                float *y = Y + ir * OP + yp;
                const onnxc_sg_epi *e = last ? ek : NULL;
                if (mr > 8) onnxc_ci_k512(12, kc, a, xb, koff + pc, y, OP, mr, m0, m1, full, pc > 0, e, ir, yp);
                else if (mr > 4) onnxc_ci_k512(8, kc, a, xb, koff + pc, y, OP, mr, m0, m1, full, pc > 0, e, ir, yp);
                else onnxc_ci_k512(4, kc, a, xb, koff + pc, y, OP, mr, m0, m1, full, pc > 0, e, ir, yp);
                if (last && epi && !ek) onnxc_sg_epilogue(epi, y, OP, ir, yp, mr, nvalid);
            }
        }
    }
    return 0;
}

#else
#define ONNXC_CI_AVAILABLE 0
#endif

#endif /* ONNXC_CONV_IMPLICIT_H */
