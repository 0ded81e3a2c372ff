/* onnxc_conv_rows.c: the implementation of onnxc_conv_rows.h (compiled once into the runtime library). */
#include "onnxc_conv_rows.h"
#include "onnxc_gemm_tune.h"
#include "onnxc_gemm.h"
#include "onnxc_sgemm_kern.h"
#include "onnxc_pool.h"
#include "onnxc_cut.h"

#include <stdatomic.h>
#include <string.h>

/* Convolution with stride 1 or 2 along W: Y (M x OP, OP = OD*OH*OW, leading dimension OP) =
 * act(A cols + bias + R) with A the packed filter (M x K) and column (od, oh, ow) of row k of cols being
 * xp[koff[k] + (od * SD * XH + oh * SH) * XW + ow * SW]: xp is the zero-padded input (planes of
 * XD x XH x XW, readable for ONNXC_SG_XSLACK floats past its end) and koff[k] the offset of tap
 * k = (c, kd, kh, kw).
 * Output positions go in tiles of 32; a tile is a few row segments, and its K slice of B is built with
 * one fixed 32-float copy per segment and tap (each overwriting the previous one's overrun; no bounds
 * logic: the padding is in xp) into an L1-sized panel shared by the row panels of A. Threads take chunks of
 * tiles, or of tiles and output channels when the tiles are few (onnxc_cut.h); all K slices of a tile in one
 * chunk, so the slices of an output add up in the same order whoever runs them. */
typedef struct {
    int64_t M, K, XH, XW, OD, OH, OW, SD, SH, SW, OP;
    onnxc_cut cut;
    const float *Ap, *xp;
    const int64_t *koff;
    float *Y;
    const onnxc_sg_epi *epi;
    _Atomic int status;
    float *bp[ONNXC_POOL_MAX]; /* per slot: one panel of KC x 32, plus the overrun of the last row's copies */
} onnxc_sg_rows_par;

#define ROWS_COPY 16.0 /* a tile's B-panel copy costs about the GEMM of 16 output channels (onnxc_cut.h) */
#define ROWS_PF 8 /* taps ahead whose source rows the B-panel copy prefetches (128->64 3x3 20x20: -2%) */

/* The K slice pc .. pc + kc of tile t's B panel (kc x 32) into d: one fixed 32-float copy per row segment and tap
 * (each overwriting the previous one's overrun: d needs one row of slack). */
static void onnxc_sg_rows_panel(const onnxc_sg_rows_par *P, int64_t t, int64_t pc, int64_t kc, float *restrict d) {
    const int64_t XH = P->XH, XW = P->XW, OH = P->OH, OW = P->OW, SD = P->SD, SH = P->SH, SW = P->SW, OP = P->OP;
    const float *xp = P->xp;
    const int64_t *koff = P->koff;
    const int64_t j0 = t * ONNXC_SG_NR;
    const int nr = OP - j0 < ONNXC_SG_NR ? (int)(OP - j0) : ONNXC_SG_NR;
    int64_t so[ONNXC_SG_NR]; /* segment sources in xp (before koff) */
    int dof[ONNXC_SG_NR], ns = 0;
    for (int64_t j = j0; j < j0 + nr; ns++) {
        const int64_t r = j / OW, ow = j % OW, od = r / OH, oh = r % OH;
        so[ns] = (od * SD * XH + oh * SH) * XW + ow * SW;
        dof[ns] = (int)(j - j0);
        j += OW - ow;
    }
    for (int64_t p = 0; p < kc; p++) {
        const float *src = xp + koff[pc + p];
        float *dp = d + p * ONNXC_SG_NR;
        if (ROWS_PF && p + ROWS_PF < kc) { /* a later tap's rows (taps jump rows and planes) */
            const float *ps = xp + koff[pc + p + ROWS_PF];
            for (int q = 0; q < ns; q++) {
                __builtin_prefetch(ps + so[q], 0, 3);
                __builtin_prefetch((const char *)(ps + so[q]) + 64 * SW, 0, 3);
            }
        }
        if (SW == 1) {
            for (int q = 0; q < ns; q++) {
                const float *sq = src + so[q];
                float *dq = dp + dof[q];
#pragma omp simd
                for (int l = 0; l < ONNXC_SG_NR; l++) dq[l] = sq[l];
            }
        } else {
            for (int q = 0; q < ns; q++) {
                const float *sq = src + so[q];
                float *dq = dp + dof[q];
#pragma omp simd
                for (int l = 0; l < ONNXC_SG_NR; l++) dq[l] = sq[2 * l];
            }
        }
    }
}

/* A short reduction (K at most ONNXC_SG_KC / 2, e.g. a 1-channel 3x3 stem): the panels of G tiles at once, then
 * each row panel of A over those G tiles, so that every output row is written G * 32 floats in a row instead
 * of 32 at a time across all M rows (the conformer's 1 -> 144 3x3 stride-2 stem, output far beyond the caches:
 * 144 write streams of 128 bytes per tile). The products and sums are those of the one-tile order. */
static void onnxc_sg_rows_grouped(const onnxc_sg_rows_par *P, int64_t t0, int64_t t1, int64_t m0, int64_t m1,
                                  float *bp) {
    const int64_t K = P->K, OP = P->OP, G = ONNXC_SG_KC / K;
    const onnxc_sg_epi *epi = P->epi;
    const onnxc_sg_epi *ek = onnxc_sg_epi_in_kernel(epi) ? epi : NULL;
    for (int64_t tg = t0; tg < t1; tg += G) {
        const int64_t gn = t1 - tg < G ? t1 - tg : G;
        for (int64_t g = 0; g < gn; g++) onnxc_sg_rows_panel(P, tg + g, 0, K, bp + g * K * ONNXC_SG_NR);
        for (int64_t ir = m0; ir < m1; ir += ONNXC_SG_MR) {
            const int mr = m1 - ir < ONNXC_SG_MR ? (int)(m1 - ir) : ONNXC_SG_MR;
            for (int64_t g = 0; g < gn; g++) {
                const int64_t j0 = (tg + g) * ONNXC_SG_NR;
                const int nr = OP - j0 < ONNXC_SG_NR ? (int)(OP - j0) : ONNXC_SG_NR;
                float *c = P->Y + ir * OP + j0;
                onnxc_sg_epi_prefetch(epi, ir, j0 + ONNXC_SG_NR, mr, nr);
                onnxc_sg_micro_x(K, P->Ap + ir * K, bp + g * K * ONNXC_SG_NR, c, OP, mr, nr, 1.0f, 0.0f, NULL,
                                 ONNXC_SG_MR, ek, ir, j0);
                if (epi && !ek) onnxc_sg_epilogue(epi, c, OP, ir, j0, mr, nr);
            }
        }
    }
}

static void onnxc_sg_conv_rows_task(void *ctx, int64_t chunk, int slot) {
    onnxc_sg_rows_par *P = (onnxc_sg_rows_par *)ctx;
    const int64_t K = P->K, OP = P->OP;
    const float *Ap = P->Ap;
    float *Y = P->Y;
    const onnxc_sg_epi *epi = P->epi;
    if (!P->bp[slot]) P->bp[slot] = (float *)onnxc_alloc((size_t)(ONNXC_SG_KC + 1) * ONNXC_SG_NR * sizeof(float));
    float *bp = P->bp[slot];
    if (!bp) {
        atomic_store_explicit(&P->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    int64_t t0, t1, m0, m1;
    onnxc_cut_item(&P->cut, chunk, &t0, &t1, &m0, &m1);
    if (2 * K <= ONNXC_SG_KC) {
        onnxc_sg_rows_grouped(P, t0, t1, m0, m1, bp);
        return;
    }
    for (int64_t pc = 0; pc < K; pc += ONNXC_SG_KC) {
        const int64_t kc = K - pc < ONNXC_SG_KC ? K - pc : ONNXC_SG_KC;
        const int last = pc + kc >= K;
        int first = 1;
        for (int64_t t = t0; t < t1; t++) {
            const int64_t j0 = t * ONNXC_SG_NR;
            const int nr = OP - j0 < ONNXC_SG_NR ? (int)(OP - j0) : ONNXC_SG_NR;
            onnxc_sg_rows_panel(P, t, pc, kc, bp);
            float *y = Y + j0;
            for (int64_t ir = m0; ir < m1; ir += ONNXC_SG_MR) {
                const int mr = m1 - ir < ONNXC_SG_MR ? (int)(m1 - ir) : ONNXC_SG_MR;
                float *c = y + ir * OP;
                if (last) onnxc_sg_epi_prefetch(epi, ir, j0 + ONNXC_SG_NR, mr, nr);
                /* the thread's first tile of a slice reads the filter from memory: request the next panel */
                const float *pf = NULL;
                if (first) {
                    if (ir + ONNXC_SG_MR < m1) pf = Ap + (ir + ONNXC_SG_MR) * K + pc * ONNXC_SG_MR;
                    else if (pc + kc < K) pf = Ap + m0 * K + (pc + kc) * ONNXC_SG_MR;
                }
                const onnxc_sg_epi *ek = last && onnxc_sg_epi_in_kernel(epi) ? epi : NULL;
                onnxc_sg_micro_x(kc, Ap + ir * K + pc * ONNXC_SG_MR, bp, c, OP, mr, nr, 1.0f,
                                 pc == 0 ? 0.0f : 1.0f, pf, ONNXC_SG_MR, ek, ir, j0);
                if (last && epi && !ek) onnxc_sg_epilogue(epi, c, OP, ir, j0, mr, nr);
            }
            first = 0;
        }
    }
}

int onnxc_sg_conv_rows(int threads, int64_t M, int64_t K, const float *Ap, const float *xp,
                                     const int64_t *koff, int64_t XH, int64_t XW, int64_t OD, int64_t OH,
                                     int64_t OW, int64_t SD, int64_t SH, int64_t SW, float *Y,
                                     const onnxc_sg_epi *epi) {
    const int64_t OP = OD * OH * OW, tiles = (OP + ONNXC_SG_NR - 1) / ONNXC_SG_NR;
    if (M <= 0 || tiles <= 0) return 0;
    const int64_t nch = onnxc_chunks(threads, (double)M * (double)K * (double)OP, ONNXC_GEMM_PAR_MIN);
    onnxc_sg_rows_par P = {M, K, XH, XW, OD, OH, OW, SD, SH, SW, OP,
                           onnxc_cut_plan(threads, nch, tiles, OP - (tiles - 1) * ONNXC_SG_NR, M, K, ROWS_COPY),
                           Ap, xp, koff, Y, epi, 0, {NULL}};
    onnxc_parallel(threads, P.cut.items, onnxc_sg_conv_rows_task, &P);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) free(P.bp[i]);
    return P.status ? ONNXC_ERR_MEMORY : 0;
}

/* onnxc_sg_pad_input without the slack. */
static void onnxc_sg_pad_planes(const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW, int64_t PD, int64_t PH,
                                int64_t PW, int64_t XD, int64_t XH, int64_t XW, float *restrict xp) {
    const int64_t w0 = PW > 0 ? PW : 0, s0 = PW > 0 ? 0 : -PW; /* first padded column written, its source */
    int64_t wn = IW - s0 < XW - w0 ? IW - s0 : XW - w0;           /* columns copied per row */
    if (wn < 0) wn = 0;
    for (int64_t c = 0; c < Cg; c++) {
        for (int64_t zd = 0; zd < XD; zd++) {
            for (int64_t zh = 0; zh < XH; zh++) {
                float *d = xp + ((c * XD + zd) * XH + zh) * XW;
                const int64_t id = zd - PD, ih = zh - PH;
                if (id < 0 || id >= ID || ih < 0 || ih >= IH || wn == 0) {
                    memset(d, 0, (size_t)XW * sizeof(float));
                    continue;
                }
                const float *src = x + ((c * ID + id) * IH + ih) * IW + s0;
                for (int64_t w = 0; w < w0; w++) d[w] = 0;
                memcpy(d + w0, src, (size_t)wn * sizeof(float));
                for (int64_t w = w0 + wn; w < XW; w++) d[w] = 0;
            }
        }
    }
}

/* See onnxc_sgemm.h. */
void onnxc_sg_pad_input(const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW, int64_t PD,
                                      int64_t PH, int64_t PW, int64_t XD, int64_t XH, int64_t XW, float *restrict xp) {
    onnxc_sg_pad_planes(x, Cg, ID, IH, IW, PD, PH, PW, XD, XH, XW, xp);
    memset(xp + Cg * XD * XH * XW, 0, ONNXC_SG_XSLACK * sizeof(float));
}

/* onnxc_sg_pad_input with the columns of each padded row split by phase modulo SW: a row becomes SW runs of
 * XWs = ceil(XW / SW) floats (columns r, r + SW, r + 2 SW, ... in run r; pitch SW * XWs), so a strided
 * convolution reads the positions of a tap contiguously (column ow * SW + c is element ow + c / SW of run
 * c % SW) and onnxc_sg_conv_rows can run it with unit stride along W. SW == 1 is onnxc_sg_pad_input. */
static void onnxc_sg_pad_planes_phased(const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW, int64_t PD,
                                       int64_t PH, int64_t PW, int64_t XD, int64_t XH, int64_t XW, int64_t SW,
                                       float *restrict xp) {
    if (SW <= 1) {
        onnxc_sg_pad_planes(x, Cg, ID, IH, IW, PD, PH, PW, XD, XH, XW, xp);
        return;
    }
    const int64_t XWs = (XW + SW - 1) / SW, XWp = XWs * SW;
    for (int64_t c = 0; c < Cg; c++) {
        for (int64_t zd = 0; zd < XD; zd++) {
            for (int64_t zh = 0; zh < XH; zh++) {
                float *d = xp + ((c * XD + zd) * XH + zh) * XWp;
                const int64_t id = zd - PD, ih = zh - PH;
                if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
                    memset(d, 0, (size_t)XWp * sizeof(float));
                    continue;
                }
                const float *src = x + ((c * ID + id) * IH + ih) * IW;
                for (int64_t r = 0; r < SW; r++, d += XWs) {
                    /* d[i] = padded column i * SW + r = input column i * SW + r - PW, when inside [0, IW) and XW */
                    const int64_t off = r - PW;
                    int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
                    int64_t hi = IW - off <= 0 ? 0 : (IW - off + SW - 1) / SW;
                    const int64_t wmax = XW - r <= 0 ? 0 : (XW - r + SW - 1) / SW;
                    if (hi > wmax) hi = wmax;
                    if (lo > hi) lo = hi;
                    const float *s = src + off;
                    for (int64_t i = 0; i < lo; i++) d[i] = 0;
                    if (SW == 2) {
#pragma omp simd
                        for (int64_t i = lo; i < hi; i++) d[i] = s[2 * i];
                    } else {
                        for (int64_t i = lo; i < hi; i++) d[i] = s[i * SW];
                    }
                    for (int64_t i = hi; i < XWs; i++) d[i] = 0;
                }
            }
        }
    }
}

typedef struct {
    const float *x;
    float *xp;
    int64_t Cg, ID, IH, IW, PD, PH, PW, XD, XH, XW, SW, per, plane;
} onnxc_sg_pad_par;

static void onnxc_sg_pad_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_sg_pad_par *Q = (const onnxc_sg_pad_par *)ctx;
    const int64_t c0 = chunk * Q->per, n = Q->Cg - c0 < Q->per ? Q->Cg - c0 : Q->per;
    onnxc_sg_pad_planes_phased(Q->x + c0 * Q->ID * Q->IH * Q->IW, n, Q->ID, Q->IH, Q->IW, Q->PD, Q->PH, Q->PW, Q->XD,
                               Q->XH, Q->XW, Q->SW, Q->xp + c0 * Q->plane);
}

/* See onnxc_sgemm.h. */
void onnxc_sg_pad_input_phased(int threads, const float *x, int64_t Cg, int64_t ID, int64_t IH, int64_t IW,
                                             int64_t PD, int64_t PH, int64_t PW, int64_t XD, int64_t XH, int64_t XW,
                                             int64_t SW, float *restrict xp) {
    const int64_t XWp = SW > 1 ? (XW + SW - 1) / SW * SW : XW, plane = XD * XH * XWp;
    const int64_t n = Cg > 0 ? onnxc_chunks(threads, (double)(Cg * plane), ONNXC_COPY_GRAIN) : 1;
    const onnxc_sg_pad_par Q = {x, xp, Cg, ID, IH, IW, PD, PH, PW, XD, XH, XW, SW, (Cg + n - 1) / n, plane};
    if (n > 1) onnxc_parallel(threads, (Cg + Q.per - 1) / Q.per, onnxc_sg_pad_task, (void *)&Q);
    else onnxc_sg_pad_planes_phased(x, Cg, ID, IH, IW, PD, PH, PW, XD, XH, XW, SW, xp);
    memset(xp + Cg * plane, 0, ONNXC_SG_XSLACK * sizeof(float));
}
