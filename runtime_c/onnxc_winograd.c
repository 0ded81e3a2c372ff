/* onnxc_winograd.c: the implementation of onnxc_winograd.h (compiled once into the runtime library). */
#include "onnxc_winograd.h"
#include "onnxc_act.h"
#include "onnxc_pool.h"

#define ONNXC_WINO_L ONNXC_SG_NR /* tiles transformed together: one packed B panel */

/* Transform matrices (rows), the BT and AT of codegen/kernels/conv_winograd.py (tests check the identity):
 *   B^T = [1/4 0 -5/4 0 1 0; 0 -1/4 -1/4 1 1 0; 0 1/4 -1/4 -1 1 0; 0 -1/2 -1 1/2 1 0; 0 1/2 -1 -1/2 1 0;
 *          0 1/4 0 -5/4 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 1/2 -1/2 0; 0 1 1 1/4 1/4 0; 0 1 -1 1/8 -1/8 1]  */

/* Where the 32 tiles of a panel start: the image (-1 past the last tile), the top-left output row and
 * column, and the offset of the tile's 6x6 patch in the zero-padded input (onnxc_wino_pad; tiles past
 * the last read tile 0's patch: their columns of the product are never stored). */
typedef struct {
    int64_t img[ONNXC_WINO_L], h0[ONNXC_WINO_L], w0[ONNXC_WINO_L], off[ONNXC_WINO_L];
} onnxc_wino_tiles;

/* o = B^T s (6 x 6) on ONNXC_WINO_L lanes: s[k * ss + l], o[i * os + l] */
static inline void onnxc_wino_bt(const float *restrict s, int64_t ss, float *restrict o, int64_t os) {
#pragma omp simd
    for (int l = 0; l < ONNXC_WINO_L; l++) {
        const float s0 = s[0 * ss + l]; const float s1 = s[1 * ss + l]; const float s2 = s[2 * ss + l]; const float s3 = s[3 * ss + l]; const float s4 = s[4 * ss + l]; const float s5 = s[5 * ss + l];
        o[0 * os + l] = 0.25f * s0 - 1.25f * s2 + s4;
        o[1 * os + l] = -0.25f * s1 - 0.25f * s2 + s3 + s4;
        o[2 * os + l] = 0.25f * s1 - 0.25f * s2 - s3 + s4;
        o[3 * os + l] = -0.5f * s1 - s2 + 0.5f * s3 + s4;
        o[4 * os + l] = 0.5f * s1 - s2 - 0.5f * s3 + s4;
        o[5 * os + l] = 0.25f * s1 - 1.25f * s3 + s5;
    }
}

/* o = A^T s (4 x 6) on ONNXC_WINO_L lanes: s[k * ss + l], o[i * os + l] */
static inline void onnxc_wino_at(const float *restrict s, int64_t ss, float *restrict o, int64_t os) {
#pragma omp simd
    for (int l = 0; l < ONNXC_WINO_L; l++) {
        const float s0 = s[0 * ss + l]; const float s1 = s[1 * ss + l]; const float s2 = s[2 * ss + l]; const float s3 = s[3 * ss + l]; const float s4 = s[4 * ss + l]; const float s5 = s[5 * ss + l];
        o[0 * os + l] = s0 + s1 + s2 + s3 + s4;
        o[1 * os + l] = s1 - s2 + 0.5f * s3 - 0.5f * s4;
        o[2 * os + l] = s1 + s2 + 0.25f * s3 + 0.25f * s4;
        o[3 * os + l] = s1 - s2 + 0.125f * s3 - 0.125f * s4 + s5;
    }
}

static inline void onnxc_wino_locate(int64_t t0, int64_t T, int64_t TH, int64_t TW, int64_t CXP, int64_t XW,
                                     onnxc_wino_tiles *tl) {
    for (int l = 0; l < ONNXC_WINO_L; l++) {
        const int64_t t = t0 + l;
        if (t >= T) {
            tl->img[l] = -1, tl->h0[l] = tl->w0[l] = tl->off[l] = 0;
            continue;
        }
        const int64_t r = t % (TH * TW);
        tl->img[l] = t / (TH * TW), tl->h0[l] = r / TW * 4, tl->w0[l] = r % TW * 4;
        tl->off[l] = tl->img[l] * CXP + tl->h0[l] * XW + tl->w0[l];
    }
}

/* Whether the panel's tiles are all in one tile row of one image (consecutive, 4 columns apart). */
static inline int onnxc_wino_one_row(const onnxc_wino_tiles *tl) {
    const int e = ONNXC_WINO_L - 1;
    return tl->img[0] == tl->img[e] && tl->h0[0] == tl->h0[e];
}

/* xp (N x C planes of XH x XW) = x with PH / PW zero rows / columns before and zeros after. */
static inline void onnxc_wino_pad(const float *x, int64_t NC, int64_t IH, int64_t IW, int64_t PH, int64_t PW,
                                  int64_t XH, int64_t XW, float *restrict xp) {
    const int64_t h1 = IH < XH - PH ? IH : XH - PH, w1 = IW < XW - PW ? IW : XW - PW;
    for (int64_t q = 0; q < NC; q++) {
        const float *xc = x + q * IH * IW;
        float *d = xp + q * XH * XW;
        for (int64_t h = 0; h < XH; h++) {
            float *dr = d + h * XW;
            const int64_t ih = h - PH;
            if (ih < 0 || ih >= h1) {
                memset(dr, 0, (size_t)XW * sizeof(float));
                continue;
            }
            memset(dr, 0, (size_t)PW * sizeof(float));
            memcpy(dr + PW, xc + ih * IW, (size_t)w1 * sizeof(float));
            memset(dr + PW + w1, 0, (size_t)(XW - PW - w1) * sizeof(float));
        }
    }
}

/* Input transform of channel c (plane xc of the padded input) for one panel of tiles: V[p] rows at
 * v + p * ps (32 lanes each). */
static inline void onnxc_wino_input(const float *xc, int64_t XW, const onnxc_wino_tiles *tl, float *v, int64_t ps) {
    float d[36 * ONNXC_WINO_L], t[36 * ONNXC_WINO_L];
    if (onnxc_wino_one_row(tl)) { /* consecutive tiles of one row: patches 4 apart */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                const float *s = xc + tl->off[0] + i * XW + j;
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_L; l++) d[(i * 6 + j) * ONNXC_WINO_L + l] = s[4 * l];
            }
    } else {
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                const float *s = xc + i * XW + j;
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_L; l++) d[(i * 6 + j) * ONNXC_WINO_L + l] = s[tl->off[l]];
            }
    }
    for (int j = 0; j < 6; j++) onnxc_wino_bt(d + j * ONNXC_WINO_L, 6 * ONNXC_WINO_L, t + j * ONNXC_WINO_L, 6 * ONNXC_WINO_L);
    for (int i = 0; i < 6; i++) onnxc_wino_bt(t + i * 6 * ONNXC_WINO_L, ONNXC_WINO_L, v + i * 6 * ps, ps);
}

/* Output transform of channel co for one panel of tiles (products at m + p * ps), then the epilogue and
 * the scatter of the 4x4 tiles into y. */
static inline void onnxc_wino_output(const float *m, int64_t ps, const onnxc_wino_tiles *tl, int64_t M, int64_t co,
                                     int64_t OH, int64_t OW, const onnxc_sg_epi *epi, float *y) {
    float t[24 * ONNXC_WINO_L], o[16 * ONNXC_WINO_L];
    for (int j = 0; j < 6; j++) onnxc_wino_at(m + j * ps, 6 * ps, t + j * ONNXC_WINO_L, 6 * ONNXC_WINO_L);
    for (int i = 0; i < 4; i++) onnxc_wino_at(t + i * 6 * ONNXC_WINO_L, ONNXC_WINO_L, o + i * 4 * ONNXC_WINO_L, ONNXC_WINO_L);
    const float bv = epi && epi->bias ? epi->bias[co] : 0.0f;
    const float *res = epi ? epi->res : NULL;
    if (bv != 0.0f) {
#pragma omp simd
        for (int k = 0; k < 16 * ONNXC_WINO_L; k++) o[k] += bv;
    }
    if (res) {
        for (int l = 0; l < ONNXC_WINO_L; l++) {
            if (tl->img[l] < 0) continue;
            const float *r = res + ((tl->img[l] * M + co) * OH + tl->h0[l]) * OW + tl->w0[l];
            const int64_t hn = OH - tl->h0[l] < 4 ? OH - tl->h0[l] : 4, wn = OW - tl->w0[l] < 4 ? OW - tl->w0[l] : 4;
            for (int64_t i = 0; i < hn; i++)
                for (int64_t j = 0; j < wn; j++) o[(i * 4 + j) * ONNXC_WINO_L + l] += r[i * OW + j];
        }
    }
    if (epi && epi->act) onnxc_act_row_f(epi->act, epi->a, epi->b, o, 16 * ONNXC_WINO_L);
    if (onnxc_wino_one_row(tl) && tl->img[0] >= 0 && tl->h0[0] + 4 <= OH && tl->w0[ONNXC_WINO_L - 1] + 4 <= OW) {
        float *yt = y + ((tl->img[0] * M + co) * OH + tl->h0[0]) * OW + tl->w0[0];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                float *yr = yt + i * OW + j;
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_L; l++) yr[4 * l] = o[(i * 4 + j) * ONNXC_WINO_L + l];
            }
        return;
    }
    for (int l = 0; l < ONNXC_WINO_L; l++) {
        if (tl->img[l] < 0) continue;
        float *yt = y + ((tl->img[l] * M + co) * OH + tl->h0[l]) * OW + tl->w0[l];
        const int64_t hn = OH - tl->h0[l] < 4 ? OH - tl->h0[l] : 4, wn = OW - tl->w0[l] < 4 ? OW - tl->w0[l] : 4;
        if (hn == 4 && wn == 4) {
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) yt[i * OW + j] = o[(i * 4 + j) * ONNXC_WINO_L + l];
        } else {
            for (int64_t i = 0; i < hn; i++)
                for (int64_t j = 0; j < wn; j++) yt[i * OW + j] = o[(i * 4 + j) * ONNXC_WINO_L + l];
        }
    }
}

/* One block of tiles of onnxc_wino_conv, in three parallel phases (onnxc_pool.h): input transforms, the 36
 * products, output transforms; a chunk of a transform phase is qin / qout consecutive (panel, channel) items. */
typedef struct {
    const float *U;
    float *y, *xp, *V, *P;
    const onnxc_sg_epi *epi;
    int64_t t0, T, TH, TW, C, M, XP, XW, OH, OW, PA, np, Tp, vs, ms, qin, qout;
} onnxc_wino_par;

static void onnxc_wino_in_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_wino_par *W = (const onnxc_wino_par *)ctx;
    const int64_t C = W->C, q1 = (chunk + 1) * W->qin < W->np * C ? (chunk + 1) * W->qin : W->np * C;
    onnxc_wino_tiles tl;
    int64_t at = -1; /* the panel tl describes */
    for (int64_t q = chunk * W->qin; q < q1; q++) {
        const int64_t pan = q / C, c = q % C;
        if (pan != at) onnxc_wino_locate(W->t0 + pan * ONNXC_WINO_L, W->T, W->TH, W->TW, C * W->XP, W->XW, &tl), at = pan;
        onnxc_wino_input(W->xp + c * W->XP, W->XW, &tl, W->V + pan * C * ONNXC_WINO_L + c * ONNXC_WINO_L, W->vs);
    }
}

static void onnxc_wino_gemm_task(void *ctx, int64_t p, int slot) {
    (void)slot;
    const onnxc_wino_par *W = (const onnxc_wino_par *)ctx;
    onnxc_sgemm_ex(1, W->M, W->Tp, W->C, 1.0f, W->U + p * W->PA, 0, ONNXC_SG_PACKED, W->V + p * W->vs, 0,
                   ONNXC_SG_PACKED_B_HOT, 0.0f, W->P + p * W->ms, W->Tp, NULL);
}

static void onnxc_wino_out_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_wino_par *W = (const onnxc_wino_par *)ctx;
    const int64_t M = W->M, q1 = (chunk + 1) * W->qout < W->np * M ? (chunk + 1) * W->qout : W->np * M;
    onnxc_wino_tiles tl;
    int64_t at = -1;
    for (int64_t q = chunk * W->qout; q < q1; q++) {
        const int64_t pan = q / M, co = q % M;
        if (pan != at) onnxc_wino_locate(W->t0 + pan * ONNXC_WINO_L, W->T, W->TH, W->TW, W->C * W->XP, W->XW, &tl), at = pan;
        onnxc_wino_output(W->P + co * W->Tp + pan * ONNXC_WINO_L, W->ms, &tl, M, co, W->OH, W->OW, W->epi, W->y);
    }
}

/* The zero-padded copy of the input, planes split among the threads. */
typedef struct {
    const float *x;
    float *xp;
    int64_t NC, IH, IW, PH, PW, XH, XW, per;
} onnxc_wino_padpar;

static void onnxc_wino_pad_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_wino_padpar *Q = (const onnxc_wino_padpar *)ctx;
    const int64_t q0 = chunk * Q->per, n = Q->NC - q0 < Q->per ? Q->NC - q0 : Q->per;
    onnxc_wino_pad(Q->x + q0 * Q->IH * Q->IW, n, Q->IH, Q->IW, Q->PH, Q->PW, Q->XH, Q->XW, Q->xp + q0 * Q->XH * Q->XW);
}

/* The filter transform of onnxc_wino_filter for the 12-row panels [q0, q1) of the packed operands:
 * U[p] (m, c) = (G w[m, c] G^T)[p], vectorized over the panel's 12 output channels and written straight
 * in the packed A layout (onnxc_sg_pack_a: panel q holds C rows of 12 floats), with zero rows past M
 * (G's rows: 4 0 0; 2/3 2/3 2/3; 2/3 -2/3 2/3; -8/3 -4/3 -2/3; -8/3 4/3 -2/3; 0 0 1, as in
 * codegen/kernels/conv_winograd.py). */
typedef struct {
    const float *w;
    float *U;
    int64_t M, C, per, PA;
} onnxc_wino_fpar;

#define ONNXC_WINO_MR ONNXC_SG_MR

/* o[0..5][l] = G (a, b, d)^T on the 12 lanes (o rows os apart), in double like the compile-time transform */
static inline void onnxc_wino_g(const double *restrict a, const double *restrict b, const double *restrict d,
                                double *restrict o, int64_t os) {
    const double k = 2.0 / 3.0;
#pragma omp simd
    for (int l = 0; l < ONNXC_WINO_MR; l++) {
        o[l] = 4.0 * a[l];
        o[os + l] = k * (a[l] + b[l] + d[l]);
        o[2 * os + l] = k * (a[l] - b[l] + d[l]);
        o[3 * os + l] = -k * (4.0 * a[l] + 2.0 * b[l] + d[l]);
        o[4 * os + l] = -k * (4.0 * a[l] - 2.0 * b[l] + d[l]);
        o[5 * os + l] = d[l];
    }
}

static void onnxc_wino_filter_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_wino_fpar *F = (const onnxc_wino_fpar *)ctx;
    const int64_t M = F->M, C = F->C, nq = (M + ONNXC_WINO_MR - 1) / ONNXC_WINO_MR;
    const int64_t q0 = chunk * F->per, q1 = q0 + F->per < nq ? q0 + F->per : nq;
    double g[9][ONNXC_WINO_MR], t[3][6][ONNXC_WINO_MR], r[6][ONNXC_WINO_MR];
    for (int64_t q = q0; q < q1; q++) {
        const int64_t m0 = q * ONNXC_WINO_MR, mr = M - m0 < ONNXC_WINO_MR ? M - m0 : ONNXC_WINO_MR;
        for (int k = 0; k < 9; k++)
            for (int l = (int)mr; l < ONNXC_WINO_MR; l++) g[k][l] = 0.0; /* rows past M: zero panel rows */
        for (int64_t c = 0; c < C; c++) {
            for (int64_t l = 0; l < mr; l++) {
                const float *w = F->w + ((m0 + l) * C + c) * 9;
                for (int k = 0; k < 9; k++) g[k][l] = w[k];
            }
            for (int kw = 0; kw < 3; kw++) onnxc_wino_g(g[kw], g[3 + kw], g[6 + kw], t[kw][0], ONNXC_WINO_MR);
            float *o = F->U + q * C * ONNXC_WINO_MR + c * ONNXC_WINO_MR;
            for (int i = 0; i < 6; i++) { /* row i of (G w) G^T: G applied to (t[0][i], t[1][i], t[2][i]) */
                onnxc_wino_g(t[0][i], t[1][i], t[2][i], r[0], ONNXC_WINO_MR);
                for (int j = 0; j < 6; j++) {
                    float *op = o + (6 * i + j) * F->PA;
#pragma omp simd
                    for (int l = 0; l < ONNXC_WINO_MR; l++) op[l] = (float)r[j][l];
                }
            }
        }
    }
}

/* See onnxc_winograd.h. */
int onnxc_wino_filter(int threads, const float *w, int64_t M, int64_t C, float *U) {
    if (M <= 0 || C <= 0) return 0;
    const int64_t nq = (M + ONNXC_WINO_MR - 1) / ONNXC_WINO_MR;
    const int64_t n = onnxc_chunks(threads, (double)(M * C) * 300.0, 65536.0);
    onnxc_wino_fpar F = {w, U, M, C, (nq + n - 1) / n, onnxc_sg_packed_a_size(M, C)};
    onnxc_parallel(threads, (nq + F.per - 1) / F.per, onnxc_wino_filter_task, &F);
    return 0;
}

/* See onnxc_winograd.h. */
int onnxc_wino_conv(int threads, const float *x, const float *U, float *y, int64_t N, int64_t C, int64_t IH,
                    int64_t IW, int64_t M, int64_t OH, int64_t OW, int64_t PH, int64_t PW, const onnxc_sg_epi *epi,
                    int64_t budget) {
    const int64_t TH = (OH + 3) / 4, TW = (OW + 3) / 4, T = N * TH * TW;
    if (T <= 0 || M <= 0) return 0;
    int64_t TB = budget / (36 * (C + M)) / ONNXC_WINO_L * ONNXC_WINO_L;
    const int64_t Tall = (T + ONNXC_WINO_L - 1) / ONNXC_WINO_L * ONNXC_WINO_L;
    if (TB < ONNXC_WINO_L) TB = ONNXC_WINO_L;
    if (TB > Tall) TB = Tall;
    const int64_t PA = onnxc_sg_packed_a_size(M, C), XH = TH * 4 + 2, XW = TW * 4 + 2, XP = XH * XW;
    float *xp = (float *)onnxc_alloc((size_t)(N * C * XP) * sizeof(float));
    float *V = (float *)onnxc_alloc((size_t)(36 * C * TB) * sizeof(float));
    float *P = (float *)onnxc_alloc((size_t)(36 * M * TB) * sizeof(float));
    if (!xp || !V || !P) {
        free(xp);
        free(V);
        free(P);
        return ONNXC_ERR_MEMORY;
    }
    {
        const int64_t n = onnxc_chunks(threads, (double)(N * C * XP), ONNXC_COPY_GRAIN);
        const onnxc_wino_padpar Q = {x, xp, N * C, IH, IW, PH, PW, XH, XW, (N * C + n - 1) / n};
        onnxc_parallel(threads, (N * C + Q.per - 1) / Q.per, onnxc_wino_pad_task, (void *)&Q);
    }
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        const int64_t np = ((T - t0 < TB ? T - t0 : TB) + ONNXC_WINO_L - 1) / ONNXC_WINO_L, Tp = np * ONNXC_WINO_L;
        const int64_t vs = C * Tp, ms = M * Tp; /* point strides of V and P */
        const int64_t nin = onnxc_chunks(threads, (double)(np * C), 1.0), nout = onnxc_chunks(threads, (double)(np * M), 1.0);
        const onnxc_wino_par W = {U, y, xp, V, P, epi, t0, T, TH, TW, C, M, XP, XW, OH, OW, PA, np, Tp, vs, ms,
                                  (np * C + nin - 1) / nin, (np * M + nout - 1) / nout};
        onnxc_parallel(threads, (np * C + W.qin - 1) / W.qin, onnxc_wino_in_task, (void *)&W);
        onnxc_parallel(threads, 36, onnxc_wino_gemm_task, (void *)&W);
        onnxc_parallel(threads, (np * M + W.qout - 1) / W.qout, onnxc_wino_out_task, (void *)&W);
    }
    free(xp);
    free(V);
    free(P);
    return 0;
}
