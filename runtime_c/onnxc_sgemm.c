/* onnxc_sgemm.c: the implementation of onnxc_sgemm.h (compiled once into the runtime library). */
#include "onnxc_gemm_tune.h"
#include "onnxc_gemm.h"
#include "onnxc_sgemm_kern.h"
#include "onnxc_pool.h"
#include "onnxc_cut.h"

#include <stdatomic.h>

#define ONNXC_SG_STRIPES 4 /* stripes per thread in a threaded GEMM, handed out as threads come (a busy core takes fewer) */

/* the portable float GEMM (onnxc_sx*): vectors and tiny products take it */
#define ONNXC_GEMM_T float
#define ONNXC_GEMM_NR ONNXC_SGEMM_NR
#define ONNXC_GEMM_FN(name) onnxc_sx##name
#include "onnxc_gemm_impl.h"

/* One GEMM problem, as handed to the stripes. */
typedef struct {
    int64_t K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb;
    int fa, fb;
    float *C;
    int64_t ldc;
    const onnxc_sg_epi *epi;
    int b_pre; /* B was packed before the call (weights, read from memory): see onnxc_sg_stripe */
    int64_t pc; /* onnxc_sg_stripe's current K slice (for A read in place) */
} onnxc_sg_job;


/* Pack rows [0, mc) x cols [0, kc) of op(A) into 12-row panels of kc x 12 (the layout above, K = kc). */
void onnxc_sg_pack_a(int trans, const float *A, int64_t lda, int64_t mc, int64_t kc,
                                   float *restrict dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += ONNXC_SG_MR, dst += kc * ONNXC_SG_MR) {
        const int64_t mr = mc - i0 < ONNXC_SG_MR ? mc - i0 : ONNXC_SG_MR;
        if (trans) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = A + p * lda + i0;
                int64_t i = 0;
                for (; i < mr; i++) dst[p * ONNXC_SG_MR + i] = src[i];
                for (; i < ONNXC_SG_MR; i++) dst[p * ONNXC_SG_MR + i] = 0;
            }
        } else if (mr == ONNXC_SG_MR) {
            const float *src = A + i0 * lda;
            for (int64_t p = 0; p < kc; p++) {
#pragma GCC unroll 12
                for (int i = 0; i < ONNXC_SG_MR; i++) dst[p * ONNXC_SG_MR + i] = src[i * lda + p];
            }
        } else {
            for (int64_t i = 0; i < ONNXC_SG_MR; i++) {
                const float *src = A + (i0 + i) * lda;
                if (i < mr)
                    for (int64_t p = 0; p < kc; p++) dst[p * ONNXC_SG_MR + i] = src[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * ONNXC_SG_MR + i] = 0;
            }
        }
    }
}

/* Pack rows [0, kc) x cols [0, nc) of op(B) into 32-column panels of kc x 32. */
void onnxc_sg_pack_b(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                   float *restrict dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += ONNXC_SG_NR, dst += kc * ONNXC_SG_NR) {
        const int64_t nr = nc - j0 < ONNXC_SG_NR ? nc - j0 : ONNXC_SG_NR;
        if (!trans) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = B + p * ldb + j0;
                float *d = dst + p * ONNXC_SG_NR;
                if (nr == ONNXC_SG_NR) {
#pragma omp simd
                    for (int j = 0; j < ONNXC_SG_NR; j++) d[j] = src[j];
                } else {
                    int64_t j = 0;
                    for (; j < nr; j++) d[j] = src[j];
                    for (; j < ONNXC_SG_NR; j++) d[j] = 0;
                }
            }
        } else {
            for (int64_t j = 0; j < ONNXC_SG_NR; j++) {
                const float *src = B + (j0 + j) * ldb;
                if (j < nr)
                    for (int64_t p = 0; p < kc; p++) dst[p * ONNXC_SG_NR + j] = src[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * ONNXC_SG_NR + j] = 0;
            }
        }
    }
}

/* One piece of a packed-B panel row (im2col): for lanes t in [q0, q1) of the 32, d[t] = s[t * sw] when
 * t is in [t0, t1), else 0; s is only read on [t0, t1) (its other addresses may lie outside the array). */
static inline void onnxc_sg_panel_piece(float *restrict d, const float *s, int64_t sw, int q0, int q1, int t0,
                                        int t1) {
    if (t0 < q0) t0 = q0;
    if (t1 > q1) t1 = q1;
    if (t1 < t0) t1 = t0;
#if defined(__AVX512F__)
    const uint32_t keep = (uint32_t)(((uint64_t)1 << q1) - ((uint64_t)1 << q0));
    const uint32_t load = (uint32_t)(((uint64_t)1 << t1) - ((uint64_t)1 << t0));
    if (sw == 1) {
        _mm512_mask_storeu_ps(d, (__mmask16)keep, _mm512_maskz_loadu_ps((__mmask16)load, s));
        _mm512_mask_storeu_ps(d + 16, (__mmask16)(keep >> 16), _mm512_maskz_loadu_ps((__mmask16)(load >> 16), s + 16));
    } else {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32((int)sw));
        const __m512 z = _mm512_setzero_ps();
        _mm512_mask_storeu_ps(d, (__mmask16)keep, _mm512_mask_i32gather_ps(z, (__mmask16)load, idx, s, 4));
        _mm512_mask_storeu_ps(d + 16, (__mmask16)(keep >> 16),
                              _mm512_mask_i32gather_ps(z, (__mmask16)(load >> 16), idx, s + 16 * sw, 4));
    }
#else
    int t = q0;
    for (; t < t0; t++) d[t] = 0;
    for (; t < t1; t++) d[t] = s[t * sw];
    for (; t < q1; t++) d[t] = 0;
#endif
}

/* im2col of a chunk of output positions [j0, j0 + ncol) straight into packed B panels (KG rows of 32):
 * row k = (c, kd, kh, kw) of the column matrix of a 3-D convolution (2-D and 1-D with size-1 axes) on
 * the input planes x (Cg planes of ID x IH x IW) with kernel, strides, dilations and leading pads given
 * per axis; zeros where the window reads padding, and in the padding columns of the last panel. */
typedef struct {
    const float *x;
    int64_t ID, IH, IW, OH, OW, KG, j0, ncol, per;
    const int64_t *kdim, *stride, *dil, *pad;
    float *colp;
} onnxc_sg_im2col_par;

static void onnxc_sg_im2col_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_sg_im2col_par *P = (const onnxc_sg_im2col_par *)ctx;
    const float *x = P->x;
    const int64_t ID = P->ID, IH = P->IH, IW = P->IW, OH = P->OH, OW = P->OW, KG = P->KG, j0 = P->j0, ncol = P->ncol;
    const int64_t *kdim = P->kdim, *stride = P->stride, *dil = P->dil, *pad = P->pad;
    float *restrict colp = P->colp;
    const int64_t KD = kdim[0], KH = kdim[1], KW = kdim[2], KK = KD * KH * KW, IP = ID * IH * IW;
    const int64_t SD = stride[0], SH = stride[1], SW = stride[2], DD = dil[0], DH = dil[1], DW = dil[2];
    const int64_t PD = pad[0], PH = pad[1], PW = pad[2], PS = KG * ONNXC_SG_NR; /* PS: panel stride */
    const int64_t ncolp = (ncol + ONNXC_SG_NR - 1) / ONNXC_SG_NR * ONNXC_SG_NR;
    const int64_t rfirst = j0 / OW, rlast = (j0 + ncol - 1) / OW;
    const int64_t k1 = (chunk + 1) * P->per < KG ? (chunk + 1) * P->per : KG;
    for (int64_t k = chunk * P->per; k < k1; k++) {
        const int64_t c = k / KK, kk = k % KK;
        const int64_t kd = kk / (KH * KW), kh = (kk / KW) % KH, kw = kk % KW;
        const float *xc = x + c * IP;
        float *dk = colp + k * ONNXC_SG_NR;
        const int64_t woff = kw * DW - PW;
        int64_t lo = woff >= 0 ? 0 : (-woff + SW - 1) / SW;
        int64_t hi = IW - woff <= 0 ? 0 : (IW - woff + SW - 1) / SW;
        if (hi > OW) hi = OW;
        if (lo > hi) lo = hi;
        int64_t od = rfirst / OH, oh = rfirst % OH, rb = rfirst * OW - j0;
        for (int64_t r = rfirst; r <= rlast; r++, rb += OW, oh = oh + 1 == OH ? (od++, 0) : oh + 1) {
            /* this row covers chunk columns [rb, re), valid (inside the input) on [vb, ve) */
            const int64_t id = od * SD - PD + kd * DD, ih = oh * SH - PH + kh * DH;
            const int inside = id >= 0 && id < ID && ih >= 0 && ih < IH;
            const float *src = inside ? xc + (id * IH + ih) * IW + woff : xc;
            const int64_t re = rb + OW < ncol ? rb + OW : ncol;
            const int64_t vb = inside ? rb + lo : re, ve = inside ? rb + hi : re;
            int64_t jb = rb > 0 ? rb : 0;
            float *d = dk + jb / ONNXC_SG_NR * PS;
            while (jb < re) {
                const int64_t base = jb - jb % ONNXC_SG_NR, pe = base + ONNXC_SG_NR;
                const int64_t t0 = vb - base, t1 = ve - base;
                onnxc_sg_panel_piece(d, src + (base - rb) * SW, SW, (int)(jb - base), (int)((re < pe ? re : pe) - base),
                                     (int)(t0 < 0 ? 0 : t0 > ONNXC_SG_NR ? ONNXC_SG_NR : t0),
                                     (int)(t1 < 0 ? 0 : t1 > ONNXC_SG_NR ? ONNXC_SG_NR : t1));
                d += PS;
                jb = pe;
            }
        }
        if (ncolp > ncol) /* zero columns past the chunk in its last panel */
            onnxc_sg_panel_piece(dk + ncol / ONNXC_SG_NR * PS, xc, 1, (int)(ncol % ONNXC_SG_NR), ONNXC_SG_NR, 0, 0);
    }
}

void onnxc_sg_im2col_packed(int threads, const float *x, int64_t ID, int64_t IH, int64_t IW,
                                          int64_t OH, int64_t OW, const int64_t *kdim, const int64_t *stride,
                                          const int64_t *dil, const int64_t *pad, int64_t KG, int64_t j0,
                                          int64_t ncol, float *restrict colp) {
    const int64_t n = onnxc_chunks(threads, (double)KG * (double)ncol, 1 << 16);
    onnxc_sg_im2col_par P = {x, ID, IH, IW, OH, OW, KG, j0, ncol, (KG + n - 1) / n, kdim, stride, dil, pad, colp};
    onnxc_parallel(threads, (KG + P.per - 1) / P.per, onnxc_sg_im2col_task, &P);
}

/* Apply the epilogue to the mr x nr block of C at global position (i0, j0). */
void onnxc_sg_epilogue(const onnxc_sg_epi *e, float *c, int64_t ldc, int64_t i0, int64_t j0,
                                     int64_t mr, int64_t nr) {
    for (int64_t i = 0; i < mr; i++) {
        float *restrict ci = c + i * ldc;
        if (e->bias && e->bias_cols) {
            const float *bb = e->bias + j0;
#pragma omp simd
            for (int64_t j = 0; j < nr; j++) ci[j] += bb[j];
        } else if (e->bias) {
            const float bv = e->bias[i0 + i];
#pragma omp simd
            for (int64_t j = 0; j < nr; j++) ci[j] += bv;
        }
        if (e->res) {
            const float *r = e->res + (i0 + i) * e->ldr + j0;
#pragma omp simd
            for (int64_t j = 0; j < nr; j++) ci[j] += r[j];
        }
        if (e->act) onnxc_act_row_f(e->act, e->a, e->b, ci, nr);
    }
}

/* Tile (i, j) of C (mr x nr) from the K slice of A and B micro-panels a and b; the epilogue after the
 * last slice. pf / pfs: the prefetch stream of onnxc_sg_micro_x (onnxc_sgemm_kern.h). */
static inline void onnxc_sg_tile(const onnxc_sg_job *J, int64_t kc, const float *a, const float *b, int64_t i,
                                 int64_t j, int mr, int nr, float beta, int last, const float *pf, int64_t pfs) {
    float *c = J->C + i * J->ldc + j;
    const onnxc_sg_epi *ek = last && onnxc_sg_epi_in_kernel(J->epi) ? J->epi : NULL;
    if (last) onnxc_sg_epi_prefetch(J->epi, i, j + ONNXC_SG_NR, mr, nr);
#ifdef ONNXC_SG_DIRECT_A
    if (!a) { /* a full row panel of plain A, read in place: rows i .. i + 11, columns from pc */
        onnxc_sg_micro_rows(kc, J->A + i * J->lda + (J->pc), J->lda, b, c, J->ldc, nr, J->alpha, beta, pf, pfs, ek, i, j);
    } else
#endif
    onnxc_sg_micro_x(kc, a, b, c, J->ldc, mr, nr, J->alpha, beta, pf, pfs, ek, i, j);
    if (last && J->epi && !ek) onnxc_sg_epilogue(J->epi, c, J->ldc, i, j, mr, nr);
}

/* Serial blocked GEMM on rows [m0, m1) x columns [n0, n1) of C (m0 a multiple of 12 when A is packed,
 * n0 a multiple of 32 when B is packed). Ab holds MC * KC floats, Bb KC * NC (NULL when packed).
 *
 * Inside a block the micro-kernel walks along the rows of C (one A micro-panel in L1, the B panels from
 * L2): C and the residual are then a dozen sequential streams the hardware prefetcher follows, which
 * matters when K is small and the outputs dominate (a 1x1 convolution on a large map). When B is
 * pre-packed (the weights, e.g. a small-map convolution), the walk goes down the columns instead, so
 * each weight panel read from memory serves all row panels at once.
 * Operands read from memory the first time (pre-packed weights) are requested ahead through the
 * micro-kernel's prefetch stream: the next A row panel while a row is computed, the next B panel while
 * a column is. */
static inline void onnxc_sg_stripe(const onnxc_sg_job *J0, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *Ab,
                                   float *Bb) {
    onnxc_sg_job Jl = *J0;
    onnxc_sg_job *J = &Jl;
    const int64_t K = J->K;
#ifdef ONNXC_SG_DIRECT_A
    const int direct = J->fa == ONNXC_SG_PLAIN; /* full row panels of A read in place, no packing */
#else
    const int direct = 0;
#endif
    const int64_t MR = ONNXC_SG_MR, NR = ONNXC_SG_NR;
    for (int64_t jc = n0; jc < n1; jc += ONNXC_SG_NC) {
        const int64_t nc = n1 - jc < ONNXC_SG_NC ? n1 - jc : ONNXC_SG_NC, njr = (nc + NR - 1) / NR;
        for (int64_t pc = 0; pc < K; pc += ONNXC_SG_KC) {
            const int64_t kc = K - pc < ONNXC_SG_KC ? K - pc : ONNXC_SG_KC;
            const float beta = pc == 0 ? J->beta : 1.0f;
            const int last = pc + kc >= K;
            J->pc = pc;
            const float *Bs;
            int64_t bps; /* elements between B panels */
            if (J->fb == ONNXC_SG_PACKED) {
                Bs = J->B + (jc / NR) * K * NR + pc * NR;
                bps = K * NR;
            } else {
                onnxc_sg_pack_b(J->fb, J->fb ? J->B + jc * J->ldb + pc : J->B + pc * J->ldb + jc, J->ldb, kc, nc, Bb);
                Bs = Bb;
                bps = kc * NR;
            }
            for (int64_t ic = m0; ic < m1; ic += ONNXC_SG_MC) {
                const int64_t mc = m1 - ic < ONNXC_SG_MC ? m1 - ic : ONNXC_SG_MC, nir = (mc + MR - 1) / MR;
                const float *As;
                int64_t aps;
                if (J->fa == ONNXC_SG_PACKED) {
                    As = J->A + (ic / MR) * K * MR + pc * MR;
                    aps = K * MR;
                } else if (direct) { /* only a last partial row panel is packed, at its place in Ab */
                    const int64_t full = mc / MR * MR;
                    if (full < mc)
                        onnxc_sg_pack_a(0, J->A + (ic + full) * J->lda + pc, J->lda, mc - full, kc, Ab + full * kc);
                    As = Ab;
                    aps = kc * MR;
                } else {
                    onnxc_sg_pack_a(J->fa, J->fa ? J->A + pc * J->lda + ic : J->A + ic * J->lda + pc, J->lda, mc, kc,
                                    Ab);
                    As = Ab;
                    aps = kc * MR;
                }
                if (!J->b_pre) {
                    const int64_t pfs = (MR + njr - 1) / njr; /* the next A panel over this row's njr calls */
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int mr = mc - ir < MR ? (int)(mc - ir) : (int)MR;
                        const float *pfa = NULL;
                        if (J->fa == ONNXC_SG_PACKED) {
                            if (ir + MR < mc) pfa = As + (ir / MR + 1) * aps;
                            else if (ic + ONNXC_SG_MC < m1) pfa = As + nir * aps;
                            else if (pc + kc < K) pfa = J->A + (m0 / MR) * K * MR + (pc + kc) * MR;
                        }
                        for (int64_t jr = 0; jr < nc; jr += NR) {
                            const int nr = nc - jr < NR ? (int)(nc - jr) : (int)NR;
                            onnxc_sg_tile(J, kc, direct && mr == MR ? NULL : As + (ir / MR) * aps, Bs + (jr / NR) * bps,
                                          ic + ir, jc + jr, mr, nr, beta, last, pfa ? pfa + (jr / NR) * pfs * kc : NULL,
                                          pfs);
                        }
                    }
                } else {
                    const int64_t pfs = (NR + nir - 1) / nir; /* the next B panel over this column's nir calls */
                    for (int64_t jr = 0; jr < nc; jr += NR) {
                        const int nr = nc - jr < NR ? (int)(nc - jr) : (int)NR;
                        const float *bp = Bs + (jr / NR) * bps, *pfb = NULL;
                        if (ic == m0) { /* first use of these weight panels */
                            if (jr + NR < nc) pfb = bp + bps;
                            else if (pc + kc < K) pfb = J->B + (jc / NR) * K * NR + (pc + kc) * NR;
                            else if (jc + nc < n1) pfb = J->B + ((jc + nc) / NR) * K * NR;
                        }
                        for (int64_t ir = 0; ir < mc; ir += MR) {
                            const int mr = mc - ir < MR ? (int)(mc - ir) : (int)MR;
                            onnxc_sg_tile(J, kc, direct && mr == MR ? NULL : As + (ir / MR) * aps, bp, ic + ir,
                                          jc + jr, mr, nr, beta, last, pfb ? pfb + (ir / MR) * pfs * kc : NULL, pfs);
                        }
                    }
                }
            }
        }
    }
}

/* y[j] (j < N) = alpha * sum_p x[p * incx] Bp[p][j] + beta * y[j], Bp packed (K x N). */
static inline void onnxc_sg_gemv_packed_b(int64_t N, int64_t K, float alpha, const float *x, int64_t incx,
                                   const float *Bp, float beta, float *y) {
    for (int64_t j0 = 0; j0 < N; j0 += ONNXC_SG_NR) {
        const float *b = Bp + (j0 / ONNXC_SG_NR) * K * ONNXC_SG_NR;
        float acc[ONNXC_SG_NR] = {0};
        for (int64_t p = 0; p < K; p++) {
            const float xp = x[p * incx];
#pragma omp simd
            for (int j = 0; j < ONNXC_SG_NR; j++) acc[j] += xp * b[p * ONNXC_SG_NR + j];
        }
        const int64_t n = N - j0 < ONNXC_SG_NR ? N - j0 : ONNXC_SG_NR;
        for (int64_t j = 0; j < n; j++) y[j0 + j] = beta == 0 ? alpha * acc[j] : alpha * acc[j] + beta * y[j0 + j];
    }
}

/* y[i * incy] (i < M) = alpha * sum_p Ap[i][p] x[p * incx] + beta * y[i * incy], Ap packed (M x K). */
static inline void onnxc_sg_gemv_packed_a(int64_t M, int64_t K, float alpha, const float *Ap, const float *x,
                                   int64_t incx, float beta, float *y, int64_t incy) {
    for (int64_t i0 = 0; i0 < M; i0 += ONNXC_SG_MR) {
        const float *a = Ap + (i0 / ONNXC_SG_MR) * K * ONNXC_SG_MR;
        float acc[ONNXC_SG_MR] = {0};
        for (int64_t p = 0; p < K; p++) {
            const float xp = x[p * incx];
#pragma omp simd
            for (int i = 0; i < ONNXC_SG_MR; i++) acc[i] += a[p * ONNXC_SG_MR + i] * xp;
        }
        const int64_t m = M - i0 < ONNXC_SG_MR ? M - i0 : ONNXC_SG_MR;
        for (int64_t i = 0; i < m; i++)
            y[(i0 + i) * incy] = beta == 0 ? alpha * acc[i] : alpha * acc[i] + beta * y[(i0 + i) * incy];
    }
}

/* The matrix-vector products above with their panels on the pool: a fully connected layer at batch 1 streams
 * its whole weight from memory, which two cores do about twice as fast as one. */
typedef struct {
    int along_b;             /* onnxc_sg_gemv_packed_b (1) or _a (0) */
    int64_t n, K, per;       /* rows or columns; panels per chunk */
    float alpha, beta;
    const float *x, *P;
    int64_t incx, incy;
    float *y;
} onnxc_sg_gv_par;

static void onnxc_sg_gv_task(void *ctx, int64_t c, int slot) {
    (void)slot;
    const onnxc_sg_gv_par *G = (const onnxc_sg_gv_par *)ctx;
    const int64_t w = G->along_b ? ONNXC_SG_NR : ONNXC_SG_MR, i0 = c * G->per * w;
    const int64_t i1 = i0 + G->per * w < G->n ? i0 + G->per * w : G->n;
    if (i0 >= i1) return;
    if (G->along_b)
        onnxc_sg_gemv_packed_b(i1 - i0, G->K, G->alpha, G->x, G->incx, G->P + i0 * G->K, G->beta, G->y + i0);
    else
        onnxc_sg_gemv_packed_a(i1 - i0, G->K, G->alpha, G->P + i0 * G->K, G->x, G->incx, G->beta, G->y + i0 * G->incy,
                               G->incy);
}

static void onnxc_sg_gemv_par(int threads, int along_b, int64_t n, int64_t K, float alpha, const float *P,
                              const float *x, int64_t incx, float beta, float *y, int64_t incy) {
    const int64_t w = along_b ? ONNXC_SG_NR : ONNXC_SG_MR, panels = (n + w - 1) / w;
    int64_t nch = onnxc_chunks(threads, (double)n * (double)K, ONNXC_GEMM_PAR_MIN);
    if (nch > panels) nch = panels;
    if (nch <= 1) {
        if (along_b) onnxc_sg_gemv_packed_b(n, K, alpha, x, incx, P, beta, y);
        else onnxc_sg_gemv_packed_a(n, K, alpha, P, x, incx, beta, y, incy);
        return;
    }
    const onnxc_sg_gv_par G = {along_b, n, K, (panels + nch - 1) / nch, alpha, beta, x, P, incx, incy, y};
    onnxc_parallel(threads, (panels + G.per - 1) / G.per, onnxc_sg_gv_task, (void *)&G);
}

/* The threaded part of onnxc_sgemm_ex: the shared operand's panels, then the blocks of C (onnxc_pool.h). */
typedef struct {
    const onnxc_sg_job *J;
    int share_a;             /* which operand `shared` holds: A (1) or B (0) */
    int64_t M, N, K, lda, ldb;
    int fa, fb;
    const float *A, *B;
    float *shared;           /* the operand all blocks share, packed once (NULL: none) */
    int64_t npanels, group;  /* its panels, and how many a packing chunk holds */
    int64_t mblk, nblk;      /* row panels (MR rows) and column panels (NR columns) of C */
    int64_t mparts, nparts;  /* C cut into mparts x nparts blocks of whole panels; block s is row part s / nparts,
                                column part s % nparts (a thread's contiguous chunks share their rows) */
    int64_t mcap, ncap, kc;  /* packing buffers of a block */
    _Atomic int status;
    float *Ab[ONNXC_POOL_MAX], *Bb[ONNXC_POOL_MAX]; /* per slot, made on first use */
} onnxc_sg_par;

static void onnxc_sg_pack_task(void *ctx, int64_t c, int slot) {
    (void)slot;
    onnxc_sg_par *P = (onnxc_sg_par *)ctx;
    const int64_t q1 = (c + 1) * P->group < P->npanels ? (c + 1) * P->group : P->npanels;
    for (int64_t q = c * P->group; q < q1; q++) {
        if (P->share_a) {
            const int64_t i0 = q * ONNXC_SG_MR;
            onnxc_sg_pack_a(P->fa, P->fa ? P->A + i0 : P->A + i0 * P->lda, P->lda,
                            P->M - i0 < ONNXC_SG_MR ? P->M - i0 : ONNXC_SG_MR, P->K, P->shared + i0 * P->K);
        } else {
            const int64_t j0 = q * ONNXC_SG_NR;
            onnxc_sg_pack_b(P->fb, P->fb ? P->B + j0 * P->ldb : P->B + j0, P->ldb, P->K,
                            P->N - j0 < ONNXC_SG_NR ? P->N - j0 : ONNXC_SG_NR, P->shared + j0 * P->K);
        }
    }
}

static void onnxc_sg_stripe_task(void *ctx, int64_t s, int slot) {
    onnxc_sg_par *P = (onnxc_sg_par *)ctx;
    const onnxc_sg_job *J = P->J;
    const int64_t sm = s / P->nparts, sn = s % P->nparts;
    const int64_t m0 = sm * P->mblk / P->mparts * ONNXC_SG_MR, n0 = sn * P->nblk / P->nparts * ONNXC_SG_NR;
    int64_t m1 = (sm + 1) * P->mblk / P->mparts * ONNXC_SG_MR, n1 = (sn + 1) * P->nblk / P->nparts * ONNXC_SG_NR;
    m1 = m1 < P->M ? m1 : P->M;
    n1 = n1 < P->N ? n1 : P->N;
    if (m0 >= m1 || n0 >= n1) return;
    if (J->fa != ONNXC_SG_PACKED && !P->Ab[slot]) P->Ab[slot] = (float *)onnxc_alloc((size_t)(P->mcap * P->kc) * sizeof(float));
    if (J->fb != ONNXC_SG_PACKED && !P->Bb[slot]) P->Bb[slot] = (float *)onnxc_alloc((size_t)(P->ncap * P->kc) * sizeof(float));
    if ((J->fa != ONNXC_SG_PACKED && !P->Ab[slot]) || (J->fb != ONNXC_SG_PACKED && !P->Bb[slot])) {
        atomic_store_explicit(&P->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    onnxc_sg_stripe(J, m0, m1, n0, n1, P->Ab[slot], P->Bb[slot]);
}

/* See the top of this file. */
int onnxc_sgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          int fa, const float *B, int64_t ldb, int fb, float beta, float *C, int64_t ldc,
                          const onnxc_sg_epi *epi) {
    if (M <= 0 || N <= 0) return 0;
    int status = 0;
    const int b_pre = fb == ONNXC_SG_PACKED;
    if (fb == ONNXC_SG_PACKED_B_HOT) fb = ONNXC_SG_PACKED;
    if (K <= 0 || alpha == 0) {
        onnxc_sxgemm_scale(M, N, beta, C, ldc);
    } else if (M == 1 && fb == ONNXC_SG_PACKED) {
        /* x = row 0 of op(A), whose elements are 1 apart (plain), lda apart (transposed) or 12 (packed) */
        const int64_t incx = fa == ONNXC_SG_PACKED ? ONNXC_SG_MR : fa == ONNXC_SG_TRANS ? lda : 1;
        onnxc_sg_gemv_par(threads, 1, N, K, alpha, B, A, incx, beta, C, 1);
    } else if (N == 1 && fa == ONNXC_SG_PACKED) {
        const int64_t incx = fb == ONNXC_SG_PACKED ? ONNXC_SG_NR : fb == ONNXC_SG_PLAIN ? ldb : 1;
        onnxc_sg_gemv_par(threads, 0, M, K, alpha, A, B, incx, beta, C, ldc);
    } else if (fa != ONNXC_SG_PACKED && fb != ONNXC_SG_PACKED && M == 1) {
        status = onnxc_sxgemm_row(threads, fb, N, K, alpha, A, fa ? lda : 1, B, ldb, beta, C, 1);
    } else if (fa != ONNXC_SG_PACKED && fb != ONNXC_SG_PACKED && N == 1) {
        status = onnxc_sxgemm_row(threads, !fa, M, K, alpha, B, fb ? 1 : ldb, A, lda, beta, C, ldc);
    } else if (fa != ONNXC_SG_PACKED && fb != ONNXC_SG_PACKED &&
               (double)M * (double)N * (double)K <= ONNXC_GEMM_SMALL) {
        onnxc_sxgemm_small(fa, fb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else {
        onnxc_sg_job J = {K, alpha, beta, A, B, lda, ldb, fa, fb, C, ldc, epi, b_pre, 0};
        int nt = threads > 1 && (double)M * (double)N * (double)K >= ONNXC_GEMM_PAR_MIN ? threads : 1;
        /* blocks of whole panels: stripes along N or M, whichever has more panels, ONNXC_SG_STRIPES per thread of
         * at least two panels each; when that dimension has too few panels to share out evenly (a 10x10 map's
         * 100 positions are 9 row panels: 3 stripes for 2 threads), the other one is cut too */
        const int64_t nblk = (N + ONNXC_SG_NR - 1) / ONNXC_SG_NR, mblk = (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR;
        const int along_n = nblk >= mblk;
        const int64_t blocks = along_n ? nblk : mblk, other = along_n ? mblk : nblk;
        int64_t parts = 1, cross = 1; /* stripes along the larger dimension, and cuts of the other */
        if (nt > 1) {
            const int64_t want = (int64_t)nt * ONNXC_SG_STRIPES;
            parts = want < blocks / 2 ? want : blocks / 2;
            if (parts < want) { /* too few for an even share: up to two stripes per thread, the other dimension cut */
                parts = blocks < 2 * nt ? blocks : 2 * nt;
                cross = (want + parts - 1) / parts;
                if (cross > other) cross = other;
            }
            if (parts * cross < nt) nt = (int)(parts * cross);
        }
        /* with threads, an operand several blocks read (A for stripes of columns, B for stripes of rows, either
         * when both are cut) is packed once, each thread packing some of its panels, instead of once per block */
#ifdef ONNXC_SG_DIRECT_A
        const int a_in_place = fa == ONNXC_SG_PLAIN; /* (onnxc_sg_stripe reads it where it is) */
#else
        const int a_in_place = 0;
#endif
        const int share_a = (along_n || cross > 1 ? fa != ONNXC_SG_PACKED : 0) && !a_in_place;
        const int share = nt > 1 && (share_a || (!along_n || cross > 1 ? fb != ONNXC_SG_PACKED : 0));
        const int64_t shared_n = !share ? 0 : share_a ? onnxc_sg_packed_a_size(M, K) : onnxc_sg_packed_b_size(K, N);
        float *shared = share && shared_n <= ONNXC_SG_SHARED_MAX ? (float *)onnxc_alloc((size_t)shared_n * sizeof(float))
                                                                : NULL;
        if (shared && share_a) {
            J.A = shared;
            J.fa = ONNXC_SG_PACKED;
        } else if (shared) {
            J.B = shared;
            J.fb = ONNXC_SG_PACKED;
        }
        const int64_t mparts = along_n ? cross : parts, nparts = along_n ? parts : cross;
        const int64_t kc = K < ONNXC_SG_KC ? K : ONNXC_SG_KC;
        int64_t mcap = (mblk + mparts - 1) / mparts * ONNXC_SG_MR, ncap = (nblk + nparts - 1) / nparts * ONNXC_SG_NR;
        mcap = mcap < ONNXC_SG_MC ? mcap : ONNXC_SG_MC;
        ncap = ncap < ONNXC_SG_NC ? ncap : ONNXC_SG_NC;
        mcap = (mcap + ONNXC_SG_MR - 1) / ONNXC_SG_MR * ONNXC_SG_MR;
        ncap = (ncap + ONNXC_SG_NR - 1) / ONNXC_SG_NR * ONNXC_SG_NR;
        onnxc_sg_par P = {&J, share_a, M, N, K, lda, ldb, fa, fb, A, B, shared, share_a ? mblk : nblk, 1, mblk, nblk,
                          mparts, nparts, mcap, ncap, kc, 0, {NULL}, {NULL}};
        if (shared) { /* whole panels (K x 12 of A, K x 32 of B) in the layout of a pre-packed operand */
            const int64_t pch = onnxc_chunks(nt, (double)P.npanels, 1.0);
            P.group = (P.npanels + pch - 1) / pch;
            onnxc_parallel(nt, (P.npanels + P.group - 1) / P.group, onnxc_sg_pack_task, &P);
        }
        onnxc_parallel(nt, mparts * nparts, onnxc_sg_stripe_task, &P);
        for (int i = 0; i < ONNXC_POOL_MAX; i++) {
            free(P.Ab[i]);
            free(P.Bb[i]);
        }
        status = P.status;
        free(shared);
        return status ? ONNXC_ERR_MEMORY : 0;
    }
    if (epi && !status) {
        for (int64_t i = 0; i < M; i++) onnxc_sg_epilogue(epi, C + i * ldc, ldc, i, 0, 1, N);
    }
    return status;
}

/* C = alpha * op(A) op(B) + beta * C (BLAS sgemm semantics, row-major). */
int onnxc_sgemm(int threads, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                              int64_t ldc) {
    return onnxc_sgemm_ex(threads, M, N, K, alpha, A, lda, transA ? ONNXC_SG_TRANS : ONNXC_SG_PLAIN, B, ldb,
                          transB ? ONNXC_SG_TRANS : ONNXC_SG_PLAIN, beta, C, ldc, NULL);
}

/* The naive reference kernel, for tests. */
int onnxc_sgemm_ref(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                  int64_t ldc) {
    return onnxc_sxgemm_ref(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *onnxc_sgemm_isa(void) { return ONNXC_SG_ISA; }
