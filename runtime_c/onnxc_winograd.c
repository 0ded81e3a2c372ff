/* onnxc_winograd.c: the implementation of onnxc_winograd.h (compiled once into the runtime library). */
#include "onnxc_winograd.h"
#include "onnxc_act.h"
#include "onnxc_pool.h"

#include <stdatomic.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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
    int32_t rel[ONNXC_WINO_L]; /* off[l] - off[0], when every one fits (narrow): the gathers vectorize */
    int narrow;
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
    tl->narrow = 1;
    for (int l = 0; l < ONNXC_WINO_L; l++) {
        const int64_t r = tl->off[l] - tl->off[0];
        tl->narrow &= r >= INT32_MIN && r <= INT32_MAX;
        tl->rel[l] = (int32_t)r;
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
 * v + p * ps (32 lanes each). Not inlined, nor is onnxc_wino_output: inlined together into onnxc_wino_task, both
 * compile to slower code (64 -> 64 at 40x40: 0.78 against 0.71 ms). */
static __attribute__((noinline)) void onnxc_wino_input(const float *xc, int64_t XW, const onnxc_wino_tiles *tl,
                                                       float *v, int64_t ps) {
    float d[36 * ONNXC_WINO_L], t[36 * ONNXC_WINO_L];
    if (onnxc_wino_one_row(tl)) { /* consecutive tiles of one row: patches 4 apart */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                const float *s = xc + tl->off[0] + i * XW + j;
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_L; l++) d[(i * 6 + j) * ONNXC_WINO_L + l] = s[4 * l];
            }
    } else if (tl->narrow) { /* 32-bit offsets from the first tile's patch: vector gathers */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                const float *s = xc + tl->off[0] + i * XW + j;
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_L; l++) d[(i * 6 + j) * ONNXC_WINO_L + l] = s[tl->rel[l]];
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
static __attribute__((noinline)) void onnxc_wino_output(const float *m, int64_t ps, const onnxc_wino_tiles *tl,
                                                        int64_t M, int64_t co, int64_t OH, int64_t OW,
                                                        const onnxc_sg_epi *epi, float *y) {
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

/* The work of onnxc_wino_conv, one task per (group of panels, part of the output channels) on the runtime's pool
 * (onnxc_pool.h). A task runs all three steps on its own buffers: the input transform of its panels (every
 * channel) into V, the 36 GEMMs of its output channels into P, the output transform of those channels. V and P
 * stay in the core's own cache from the step that writes them to the step that reads them; only U and the
 * padded input are shared, and read-only. */
typedef struct {
    const float *U, *xp;
    float *y;
    const onnxc_sg_epi *epi;
    int64_t T, TH, TW, C, M, XP, XW, OH, OW, PA;
    int64_t panels, groups, mparts, mblk; /* panels of 32 tiles, their groups, the cuts of M (in 12-row panels) */
    int64_t gmax;                         /* most panels in a group (the buffers' size) */
    _Atomic int status;
    float *buf[ONNXC_POOL_MAX];           /* per slot: V (36 x C x 32 gmax), then P (36 x M x 32 gmax) */
} onnxc_wino_par;

static void onnxc_wino_task(void *ctx, int64_t item, int slot) {
    onnxc_wino_par *W = (onnxc_wino_par *)ctx;
    const int64_t C = W->C, M = W->M, gi = item / W->mparts, mi = item % W->mparts;
    const int64_t p0 = gi * W->panels / W->groups, p1 = (gi + 1) * W->panels / W->groups, np = p1 - p0;
    const int64_t m0 = mi * W->mblk / W->mparts * ONNXC_SG_MR;
    int64_t m1 = (mi + 1) * W->mblk / W->mparts * ONNXC_SG_MR;
    m1 = m1 < M ? m1 : M;
    if (np <= 0 || m0 >= m1) return;
    if (!W->buf[slot])
        W->buf[slot] = (float *)onnxc_alloc((size_t)(36 * (C + M) * W->gmax * ONNXC_WINO_L) * sizeof(float));
    float *V = W->buf[slot];
    if (!V) {
        atomic_store_explicit(&W->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    const int64_t Tp = np * ONNXC_WINO_L, mn = m1 - m0, vs = C * Tp, ms = mn * Tp; /* point strides of V and P */
    float *P = V + 36 * vs;
    onnxc_wino_tiles tl;
    for (int64_t pan = 0; pan < np; pan++) {
        onnxc_wino_locate((p0 + pan) * ONNXC_WINO_L, W->T, W->TH, W->TW, C * W->XP, W->XW, &tl);
        for (int64_t c = 0; c < C; c++)
            onnxc_wino_input(W->xp + c * W->XP, W->XW, &tl, V + pan * C * ONNXC_WINO_L + c * ONNXC_WINO_L, vs);
    }
    for (int p = 0; p < 36; p++)
        onnxc_sgemm_ex(1, mn, Tp, C, 1.0f, W->U + p * W->PA + m0 * C, 0, ONNXC_SG_PACKED, V + p * vs, 0,
                       ONNXC_SG_PACKED_B_HOT, 0.0f, P + p * ms, Tp, NULL);
    for (int64_t pan = 0; pan < np; pan++) {
        onnxc_wino_locate((p0 + pan) * ONNXC_WINO_L, W->T, W->TH, W->TW, C * W->XP, W->XW, &tl);
        for (int64_t co = m0; co < m1; co++)
            onnxc_wino_output(P + (co - m0) * Tp + pan * ONNXC_WINO_L, ms, &tl, M, co, W->OH, W->OW, W->epi, W->y);
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
        const int64_t ws = C * 9; /* between the output channels of the filter */
        for (int64_t c = 0; c < C; c++) {
            /* tap k of the panel's 12 output channels, as vectors (gathers: scalar stores read back as a
             * vector would stall on store forwarding), zero past M */
            const float *wc = F->w + (m0 * C + c) * 9;
#if defined(__AVX512F__) && ONNXC_WINO_MR == 12
            const __mmask16 lanes = (__mmask16)((1u << mr) - 1u);
            const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0),
                                                  _mm512_set1_epi32((int)ws));
            for (int k = 0; k < 9; k++) {
                const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, at, wc + k, 4);
                _mm512_storeu_pd(g[k], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                _mm256_storeu_pd(g[k] + 8, _mm512_castpd512_pd256(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1))));
            }
#else
            for (int k = 0; k < 9; k++) {
#pragma omp simd
                for (int l = 0; l < ONNXC_WINO_MR; l++) g[k][l] = l < mr ? (double)wc[l * ws + k] : 0.0;
            }
#endif
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

/* The estimated time of a task of onnxc_wino_conv with `tiles` tiles (its GEMMs in steps of 16 columns) and
 * `rows` output channels, in multiply-adds of its GEMMs: the input transform costs about 43 per tile and input
 * channel, the output transform 29 per tile and output channel, and each task 36 GEMM calls (1t, 64 -> 64). */
static double onnxc_wino_cost(int64_t tiles, int64_t rows, int64_t C) {
    const double t16 = (double)((tiles + 15) / 16 * 16);
    return t16 * (43.0 * (double)C + (double)rows * ((double)C + 29.0)) + 36.0 * 2000.0;
}

/* How onnxc_wino_conv cuts its work: `groups` groups of panels (32 tiles each) whose V and P fit `budget` floats,
 * each cut into `mparts` parts of the output channels (each part transforms the input again). Among the group
 * sizes the budget allows and up to 8 parts, the one whose tasks, dealt to the least loaded of `threads`
 * threads in order as the pool does, finish first; at equal time the fewer tasks. */
static void onnxc_wino_plan(int threads, int64_t T, int64_t C, int64_t M, int64_t budget, int64_t *groups,
                            int64_t *mparts) {
    const int64_t panels = (T + ONNXC_WINO_L - 1) / ONNXC_WINO_L, mblk = (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR;
    int64_t gmax = budget / (36 * (C + M) * ONNXC_WINO_L);
    gmax = gmax < 1 ? 1 : gmax > panels ? panels : gmax;
    *groups = (panels + gmax - 1) / gmax;
    *mparts = 1;
    if (threads <= 1) return;
    const int nt = threads < ONNXC_POOL_MAX ? threads : ONNXC_POOL_MAX;
    double best = -1.0;
    int64_t best_items = 0;
    for (int64_t g = gmax; g >= 1; g--) {
        const int64_t ng = (panels + g - 1) / g;
        if (g < gmax && (panels + g) / (g + 1) == ng) continue; /* the same groups as a larger size */
        for (int64_t mp = 1; mp <= mblk && mp <= 8; mp++) {
            double load[ONNXC_POOL_MAX] = {0};
            for (int64_t gi = 0; gi < ng; gi++) {
                const int64_t p0 = gi * panels / ng, p1 = (gi + 1) * panels / ng;
                const int64_t t1 = p1 * ONNXC_WINO_L < T ? p1 * ONNXC_WINO_L : T, tiles = t1 - p0 * ONNXC_WINO_L;
                for (int64_t mi = 0; mi < mp; mi++) {
                    int64_t r0 = mi * mblk / mp * ONNXC_SG_MR, r1 = (mi + 1) * mblk / mp * ONNXC_SG_MR;
                    r1 = r1 < M ? r1 : M;
                    onnxc_deal(load, nt, onnxc_wino_cost(tiles, r1 - r0, C));
                }
            }
            const double span = onnxc_span(load, nt);
            if (best < 0 || span < best * 0.999 || (span <= best * 1.001 && ng * mp < best_items)) {
                best = span;
                best_items = ng * mp;
                *groups = ng;
                *mparts = mp;
            }
        }
    }
}

/* See onnxc_winograd.h. */
int onnxc_wino_conv(int threads, const float *x, const float *U, float *y, int64_t N, int64_t C, int64_t IH,
                    int64_t IW, int64_t M, int64_t OH, int64_t OW, int64_t PH, int64_t PW, const onnxc_sg_epi *epi,
                    int64_t budget) {
    const int64_t TH = (OH + 3) / 4, TW = (OW + 3) / 4, T = N * TH * TW;
    if (T <= 0 || M <= 0) return 0;
    const int64_t PA = onnxc_sg_packed_a_size(M, C), XH = TH * 4 + 2, XW = TW * 4 + 2, XP = XH * XW;
    float *xp = (float *)onnxc_alloc((size_t)(N * C * XP) * sizeof(float));
    if (!xp) return ONNXC_ERR_MEMORY;
    {
        const int64_t n = onnxc_chunks(threads, (double)(N * C * XP), ONNXC_COPY_GRAIN);
        const onnxc_wino_padpar Q = {x, xp, N * C, IH, IW, PH, PW, XH, XW, (N * C + n - 1) / n};
        onnxc_parallel(threads, (N * C + Q.per - 1) / Q.per, onnxc_wino_pad_task, (void *)&Q);
    }
    const int64_t panels = (T + ONNXC_WINO_L - 1) / ONNXC_WINO_L, mblk = (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR;
    int64_t groups, mparts;
    onnxc_wino_plan(threads, T, C, M, budget, &groups, &mparts);
    const int64_t gmax = (panels + groups - 1) / groups;
    onnxc_wino_par W = {U, xp, y, epi, T, TH, TW, C, M, XP, XW, OH, OW, PA,
                        panels, groups, mparts, mblk, gmax, 0, {NULL}};
    onnxc_parallel(threads, groups * mparts, onnxc_wino_task, &W);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) free(W.buf[i]);
    free(xp);
    return W.status;
}
