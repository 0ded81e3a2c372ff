/* onnxc_conv_direct.c: the implementation of onnxc_conv_direct.h (compiled once into the runtime library): the
 * AVX-512 tile kernel and the driver onnxc_dc_conv. Empty without AVX-512. */
#include "onnxc_conv_direct.h"
#include "onnxc_sgemm_kern.h"
#include "onnxc_pool.h"
#include <stdlib.h>

#if ONNXC_DC_AVAILABLE

/* r[i] lane j -> r[j] lane i, for a 16 x 16 block of floats held in 16 registers. */
static inline __attribute__((always_inline)) void onnxc_dc_tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
    }
}

/* The activation of the epilogue, with the gated ones (sigmoid, SiLU, GELU: a polynomial each) out of line: inlined
 * into every tile width and mode of onnxc_dc_tile they made this file take 40 s to compile; a call per
 * tile is noise beside their exponentials. Same functions, so the same bits as the other kernels' epilogues. */
static __attribute__((noinline)) void onnxc_dc_gated(const onnxc_sg_epi *e, __m512 *t, int n) {
    const __m512 av = _mm512_set1_ps(e->a);
    for (int i = 0; i < n; i++) t[i] = onnxc_act_gated16(e->act, av, t[i]);
}

static inline __attribute__((always_inline)) __m512 onnxc_dc_act(const onnxc_sg_epi *e, __m512 x) {
    if (onnxc_act_is_gated16(e->act)) {
        onnxc_dc_gated(e, &x, 1);
        return x;
    }
    return onnxc_sg_act512_pl(e->act, e->a, e->b, x);
}

/* The end of a tile: R positions x V vectors of 16 channels of sums (acc[2 * i + v]: position i, vector v), with
 * bias and activation (on the channel vectors) or bias, residual and activation (on the positions of a channel, after
 * the transposition) stored into y (onnxc_dc_tile's arguments; py != 1: a column of positions). Out of the tile
 * kernel and shared by its modes: inlined into each one, it made this file take 40 s to compile. */
static inline __attribute__((always_inline)) void onnxc_dc_end(const int R, const int V, const __m512 *acc, int64_t py,
                                                               float *y, int64_t ldy, int nch, const onnxc_sg_epi *e,
                                                               int64_t ch, int64_t p) {
    const int res = e && e->res;
    const __mmask16 rm = (__mmask16)((1u << R) - 1u);
    for (int v = 0; v < V; v++) {
        const int nv = nch - 16 * v < 16 ? nch - 16 * v : 16;
        const __mmask16 cm = (__mmask16)((1u << nv) - 1u);
        __m512 t[16];
        /* no residual: bias and activation on the channel vectors, where every lane is an output */
        const __m512 bv = e && e->bias && !res ? _mm512_maskz_loadu_ps(cm, e->bias + ch + 16 * v) : _mm512_setzero_ps();
        const int gated = e && !res && onnxc_act_is_gated16(e->act);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < R) {
                __m512 x = acc[2 * i + v];
                if (e && !res) {
                    if (e->bias) x = _mm512_add_ps(x, bv);
                    if (!gated) x = onnxc_sg_act512_pl(e->act, e->a, e->b, x);
                }
                t[i] = x;
            } else {
                t[i] = _mm512_setzero_ps();
            }
        }
        if (gated) { /* through memory: t stays in registers on the other paths */
            __m512 g[16];
#pragma GCC unroll 16
            for (int i = 0; i < R; i++) g[i] = t[i];
            onnxc_dc_gated(e, g, R);
#pragma GCC unroll 16
            for (int i = 0; i < R; i++) t[i] = g[i];
        }
        onnxc_dc_tr16(t);
        for (int l = 0; l < nv; l++) {
            __m512 x = t[l];
            float tmp[16];
            if (res) { /* bias, residual and activation on the channel's row of positions */
                const int64_t m = ch + 16 * v + l;
                const float *r = e->res + m * e->ldr + p;
                if (e->bias) x = _mm512_add_ps(x, _mm512_set1_ps(e->bias[m]));
                if (py != 1) {
                    for (int i = 0; i < R; i++) tmp[i] = r[i * py];
                    r = tmp;
                }
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(rm, r));
                x = onnxc_dc_act(e, x);
            }
            float *yl = y + (int64_t)(16 * v + l) * ldy;
            if (py != 1) { /* a column of positions (onnxc_dc_conv_x's edge columns) */
                _mm512_mask_storeu_ps(tmp, rm, x);
                for (int i = 0; i < R; i++) yl[i * py] = tmp[i];
            } else {
                _mm512_mask_storeu_ps(yl, rm, x);
            }
        }
    }
}

#define ONNXC_DC_END(R)                                                                                   \
    case R:                                                                                               \
        if (V2) onnxc_dc_end(R, 2, acc, py, y, ldy, nch, e, ch, p);                                        \
        else onnxc_dc_end(R, 1, acc, py, y, ldy, nch, e, ch, p);                                           \
        break;

static __attribute__((noinline)) void onnxc_dc_end_r(int r, int V2, const __m512 *acc, int64_t py, float *y,
                                                     int64_t ldy, int nch, const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    switch (r) {
        ONNXC_DC_END(1) ONNXC_DC_END(2) ONNXC_DC_END(3) ONNXC_DC_END(4) ONNXC_DC_END(5) ONNXC_DC_END(6)
        ONNXC_DC_END(7) ONNXC_DC_END(8) ONNXC_DC_END(9) ONNXC_DC_END(10) ONNXC_DC_END(11) ONNXC_DC_END(12)
    default: break;
    }
}

/* One tile: R positions (xb[koff[k] + i] for tap k of position i) times V vectors of 16 channels (w: the
 * panel, K rows of 32 floats); y: the tile's first output of its first channel, ldy floats between channels;
 * nch the channels stored; e the epilogue (its channel 0 is `ch`, its residual column `p`).
 * X = 1 (onnxc_dc_conv_x: the input read where it is): position i at xb + i * ps, tap k's filter row widx[k],
 * output (and residual) position i at y + i * py; X = 2: as X = 1 with widx the identity (a full window: the filter
 * rows in order, no index to load per tap); X = 0: ps = py = 1, the filter rows in order. PSC: ps as a constant (1
 * or 2: the broadcasts' addresses then fold into the loads), or 0. */
static inline __attribute__((always_inline)) void onnxc_dc_tile(const int R, const int V, const int X, const int PSC, int64_t k0,
                                                                int64_t k1, const float *xb, const int64_t *koff,
                                                                const int32_t *widx, int64_t ps, int64_t py,
                                                                const float *restrict w, const float *pfw,
                                                                int64_t plines, float *part, float *y, int64_t ldy, int nch,
                                                                const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = part && k0 > 0 ? _mm512_loadu_ps(part + 32 * i) : _mm512_setzero_ps();
        acc[i][1] = part && k0 > 0 && V > 1 ? _mm512_loadu_ps(part + 32 * i + 16) : _mm512_setzero_ps();
    }
    const float *w0p = w;
    if (X != 1) w += k0 * ONNXC_SG_NR;
    /* plines lines from pfw, evenly over the k1 - k0 steps (20-bit fixed point) */
    int64_t pq = 0;
    const int64_t pstep = pfw && k1 > k0 ? (plines << 20) / (k1 - k0) : 0;
#pragma GCC unroll 2
    for (int64_t k = k0; k < k1; k++) {
        const float *b = xb + koff[k];
        if (X == 1) w = w0p + (int64_t)widx[k] * ONNXC_SG_NR;
        /* the tile's first and last positions ONNXC_CI_PF taps ahead: a row of 12 floats spans two lines, and an
           input a threaded producer just wrote is half in the other core's cache (MobileNetV3's 672 -> 112
           pointwise after its squeeze-excite Mul: 0.196 -> 0.13 ms at 2 threads) */
        _mm_prefetch((const char *)(xb + koff[k + ONNXC_CI_PF]), _MM_HINT_T0);
        if (R > 1) _mm_prefetch((const char *)(xb + koff[k + ONNXC_CI_PF] + (X ? (R - 1) * ps : R - 1)), _MM_HINT_T0);
        if (pfw) { /* a share of the filter's next panel or slice, on its way from memory while this one computes */
            _mm_prefetch((const char *)(pfw + ((pq >> 20) << 4)), _MM_HINT_T1);
            pq += pstep;
        }
        const __m512 w0 = _mm512_loadu_ps(w), w1 = V > 1 ? _mm512_loadu_ps(w + 16) : w0;
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512 a = _mm512_set1_ps(b[X ? i * (PSC ? PSC : ps) : i]);
            acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
            if (V > 1) acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
        }
        if (X != 1) w += ONNXC_SG_NR;
    }
    if (X == 0 && !y) { /* a slice before the last: the partial sums wait in part (X = 0 only) */
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            _mm512_storeu_ps(part + 32 * i, acc[i][0]);
            if (V > 1) _mm512_storeu_ps(part + 32 * i + 16, acc[i][1]);
        }
        return;
    }
    __m512 a[24];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        a[2 * i] = acc[i][0];
        if (V > 1) a[2 * i + 1] = acc[i][1];
    }
    onnxc_dc_end_r(R, V > 1, a, py, y, ldy, nch, e, ch, p);
}

#define ONNXC_DC_TILE(R)                                                                                  \
    case R:                                                                                               \
        if (V2) onnxc_dc_tile(R, 2, 0, 1, k0, k1, xb, koff, NULL, 1, 1, w, pfw, pl, part, y, ldy, nch, e, ch, p); \
        else onnxc_dc_tile(R, 1, 0, 1, k0, k1, xb, koff, NULL, 1, 1, w, pfw, pl, part, y, ldy, nch, e, ch, p);    \
        break;

/* onnxc_dc_tile for r positions, taps [k0, k1) (y NULL: not the last slice). */
static void onnxc_dc_tile_r(int r, int V2, int64_t k0, int64_t k1, const float *xb, const int64_t *koff,
                            const float *w, const float *pfw, int64_t pl, float *part, float *y, int64_t ldy, int nch,
                            const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    switch (r) {
        ONNXC_DC_TILE(1) ONNXC_DC_TILE(2) ONNXC_DC_TILE(3) ONNXC_DC_TILE(4) ONNXC_DC_TILE(5) ONNXC_DC_TILE(6)
        ONNXC_DC_TILE(7) ONNXC_DC_TILE(8) ONNXC_DC_TILE(9) ONNXC_DC_TILE(10) ONNXC_DC_TILE(11) ONNXC_DC_TILE(12)
    default: break;
    }
}

#define ONNXC_DC_TILE_X(R)                                                                                \
    case R:                                                                                               \
        if (full && ps <= 2) {                                                                            \
            if (V2 && ps == 1) onnxc_dc_tile(R, 2, 2, 1, 0, nk, xb, xoff, NULL, 1, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p); \
            else if (V2) onnxc_dc_tile(R, 2, 2, 2, 0, nk, xb, xoff, NULL, 2, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p);   \
            else if (ps == 1) onnxc_dc_tile(R, 1, 2, 1, 0, nk, xb, xoff, NULL, 1, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p); \
            else onnxc_dc_tile(R, 1, 2, 2, 0, nk, xb, xoff, NULL, 2, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p);           \
        } else if (V2) onnxc_dc_tile(R, 2, 1, 0, 0, nk, xb, xoff, widx, ps, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p); \
        else onnxc_dc_tile(R, 1, 1, 0, 0, nk, xb, xoff, widx, ps, py, w, pfw, pl, NULL, y, ldy, nch, e, ch, p);           \
        break;

/* onnxc_dc_tile reading the input in place: r positions ps floats apart (their outputs py apart), the nk taps
 * of a list (xoff, widx); full: the list of a whole window (widx the identity, not read). */
static void onnxc_dc_tile_x(int r, int V2, int full, int64_t nk, const float *xb, const int64_t *xoff, const int32_t *widx,
                            int64_t ps, int64_t py, const float *w, const float *pfw, int64_t pl, float *y, int64_t ldy, int nch,
                            const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    switch (r) {
        ONNXC_DC_TILE_X(1) ONNXC_DC_TILE_X(2) ONNXC_DC_TILE_X(3) ONNXC_DC_TILE_X(4) ONNXC_DC_TILE_X(5)
        ONNXC_DC_TILE_X(6) ONNXC_DC_TILE_X(7) ONNXC_DC_TILE_X(8) ONNXC_DC_TILE_X(9) ONNXC_DC_TILE_X(10)
        ONNXC_DC_TILE_X(11) ONNXC_DC_TILE_X(12)
    default: break;
    }
}

/* Chunks of at most this many tiles run K in slices of ONNXC_DC_KS taps (onnxc_dc_task). */
#define ONNXC_DC_SLICE_TILES 16
#define ONNXC_DC_KS 256
/* Bytes of input rows a block of tiles reads (onnxc_dc_task). */
#define ONNXC_DC_BLOCK_BYTES (256 << 10)

/* Filter bytes above which the threads split the output channels first. */
#define ONNXC_DC_CACHED_W (1 << 20)

/* How the chunks cut the work: blocks of tiles first (a thread then reads only the input rows of its outputs),
 * the channel panels split too when the tiles are fewer than the chunks; but a filter larger than the cache is
 * split by panels first, so that each panel is read once, not once per block of tiles (512 -> 512 3x3 at 7 x 7:
 * 9.4 MB). */
static void onnxc_dc_cut(int threads, int64_t M, int64_t K, int64_t OP, int64_t tiles, int64_t panels,
                         int64_t *tblocks, int64_t *pgroups) {
    const int64_t n = onnxc_chunks(threads, (double)M * (double)K * (double)OP, ONNXC_GEMM_PAR_MIN);
    if ((double)M * (double)K * sizeof(float) > ONNXC_DC_CACHED_W) {
        *pgroups = n < panels ? n : panels;
        const int64_t tb = (n + *pgroups - 1) / *pgroups;
        *tblocks = tb < tiles ? tb : tiles;
    } else {
        *tblocks = n < tiles ? n : tiles;
        const int64_t pg = (n + *tblocks - 1) / *tblocks;
        *pgroups = pg < panels ? pg : panels;
    }
}

typedef struct {
    int64_t M, K, XWs, OW, ldy, ntiles, tiles, tblocks, pgroups, panels, row_bytes;
    const float *Bp, *xp;
    const int64_t *koff;
    float *Y;
    const onnxc_sg_epi *epi;
} onnxc_dc_par;

/* A block of tiles (row by row, each row in ntiles tiles of at most 12 positions, as even as they come: 20 ->
 * 10 + 10, not 12 + 8) times a group of channel panels. */
static void onnxc_dc_task(void *ctx, int64_t item, int slot) {
    (void)slot;
    const onnxc_dc_par *P = (const onnxc_dc_par *)ctx;
    const int64_t K = P->K, OW = P->OW, NR = ONNXC_SG_NR, nt = P->ntiles;
    const int64_t tb = item % P->tblocks, pg = item / P->tblocks;
    const int64_t t0 = tb * P->tiles / P->tblocks, t1 = (tb + 1) * P->tiles / P->tblocks;
    const int64_t pn0 = pg * P->panels / P->pgroups, pn1 = (pg + 1) * P->panels / P->pgroups;
    const int64_t base = OW / nt, extra = OW % nt;
    /* few tiles and a long filter panel: K in slices, every tile of the chunk per slice, so a slice of the panel
     * comes from memory once and then from L1, and the next slice is prefetched meanwhile (512 -> 512 3x3 at
     * 7 x 7, a 9.4 MB filter: 7 tiles per panel) */
    float part[ONNXC_DC_SLICE_TILES * 12 * 32];
    const int sliced = t1 - t0 <= ONNXC_DC_SLICE_TILES && K > 2 * ONNXC_DC_KS;
    const int64_t ks = sliced ? ONNXC_DC_KS : K;
    /* otherwise the tiles in blocks of rows whose input stays in L2 while every panel runs over them (a
     * 144 -> 144 stride-2 layer on 199 x 39: 4.5 MB of phase planes, read once instead of once per panel) */
    int64_t bt = ONNXC_DC_BLOCK_BYTES / (P->row_bytes > 0 ? P->row_bytes : 1) * nt;
    if (bt < nt) bt = nt;
    if (sliced) bt = t1 - t0;
    for (int64_t b0 = t0; b0 < t1; b0 += bt) {
        const int64_t b1 = t1 - b0 < bt ? t1 : b0 + bt;
        for (int64_t pn = pn0; pn < pn1; pn++) {
            const int64_t ch = pn * NR;
            const int nch = P->M - ch < NR ? (int)(P->M - ch) : (int)NR;
            const float *w = P->Bp + ch * K;
            for (int64_t k0 = 0; k0 < K; k0 += ks) {
                const int64_t k1 = K - k0 < ks ? K : k0 + ks;
                /* the next slice (sliced) or panel, its lines shared out among the block's tiles */
                const float *next = k1 < K ? w + k1 * NR : pn + 1 < pn1 ? w + K * NR : NULL;
                const int64_t nl = 2 * (k1 < K ? (K - k1 < ks ? K - k1 : ks) : K < ks ? K : ks), nb = b1 - b0;
                for (int64_t t = b0; t < b1; t++) {
                    const int64_t l0 = (t - b0) * nl / nb, l1 = (t - b0 + 1) * nl / nb;
                    const int64_t oh = t / nt, i = t % nt, ow = i * base + (i < extra ? i : extra);
                    const int r = (int)(base + (i < extra));
                    const int64_t p = oh * OW + ow;
                    onnxc_dc_tile_r(r, nch > 16, k0, k1, P->xp + oh * P->XWs + ow, P->koff, w,
                                    next ? next + l0 * 16 : NULL, l1 - l0,
                                    sliced ? part + (t - b0) * 12 * 32 : NULL, k1 < K ? NULL : P->Y + ch * P->ldy + p,
                                    P->ldy, nch, P->epi, ch, p);
                }
            }
        }
    }
}

int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp, const int64_t *koff,
                  int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    if (M <= 0 || OH <= 0 || OW <= 0) return 0;
    const int64_t panels = (M + ONNXC_SG_NR - 1) / ONNXC_SG_NR, ntiles = (OW + 11) / 12, tiles = OH * ntiles;
    int64_t tblocks, pgroups;
    onnxc_dc_cut(threads, M, K, OH * OW, tiles, panels, &tblocks, &pgroups);
    onnxc_dc_par P = {M, K, XWs, OW, ldy, ntiles, tiles, tblocks, pgroups, panels,
                      planes * XWs * (int64_t)sizeof(float), Bp, xp, koff, Y, epi};
    onnxc_parallel(threads, tblocks * pgroups, onnxc_dc_task, &P);
    return 0;
}

/* -- onnxc_dc_conv_x: the input read where it is ------------------------------------------------------------ */

/* The taps (c, kh, kw) with kh in [kh0, kh1) and kw in [kw0, kw1), all channels: their input offsets from a
 * position's window corner and their filter rows; ONNXC_CI_PF entries past n for the prefetch. */
typedef struct {
    int64_t kh0, kh1, kw0, kw1, n, stamp; /* n < 0: not built */
    int64_t *xoff;
    int32_t *widx;
} onnxc_dcx_list;

#define ONNXC_DCX_LISTS 4

typedef struct {
    int64_t M, Cg, IH, IW, KH, KW, SH, SW, DH, DW, PH, PW, OH, OW, ldy, tblocks, pgroups, panels;
    int64_t ohA, ohB, owA, owB; /* rows / columns whose windows lie inside the input */
    const float *Bp, *x;
    float *Y;
    const onnxc_sg_epi *epi;
    onnxc_dcx_list *lists; /* ONNXC_DCX_LISTS per participant */
} onnxc_dcx_par;

/* The valid taps [t0, t1) along an axis for a window starting at i0 (dilation d, k taps, n inputs). */
static inline void onnxc_dcx_range(int64_t i0, int64_t d, int64_t k, int64_t n, int64_t *t0, int64_t *t1) {
    int64_t a = i0 >= 0 ? 0 : (-i0 + d - 1) / d, b = n - i0 > 0 ? (n - i0 + d - 1) / d : 0;
    if (b > k) b = k;
    if (a > b) a = b;
    *t0 = a;
    *t1 = b;
}

/* The list of the window at output (oh, ow) (full_h / full_w: every kh / kw is valid there), from the
 * participant's few lists when one matches, else built over the least recently used. */
static const onnxc_dcx_list *onnxc_dcx_at(const onnxc_dcx_par *P, onnxc_dcx_list *L, int64_t oh, int64_t ow,
                                          int full_h, int full_w) {
    int64_t kh0 = 0, kh1 = P->KH, kw0 = 0, kw1 = P->KW;
    if (!full_h) onnxc_dcx_range(oh * P->SH - P->PH, P->DH, P->KH, P->IH, &kh0, &kh1);
    if (!full_w) onnxc_dcx_range(ow * P->SW - P->PW, P->DW, P->KW, P->IW, &kw0, &kw1);
    int64_t now = 0;
    onnxc_dcx_list *l = &L[0];
    for (int i = 0; i < ONNXC_DCX_LISTS; i++) {
        now = L[i].stamp > now ? L[i].stamp : now;
        if (L[i].stamp < l->stamp) l = &L[i];
    }
    for (int i = 0; i < ONNXC_DCX_LISTS; i++)
        if (L[i].n >= 0 && L[i].kh0 == kh0 && L[i].kh1 == kh1 && L[i].kw0 == kw0 && L[i].kw1 == kw1) {
            L[i].stamp = now + 1;
            return &L[i];
        }
    int64_t n = 0;
    for (int64_t c = 0; c < P->Cg; c++)
        for (int64_t kh = kh0; kh < kh1; kh++)
            for (int64_t kw = kw0; kw < kw1; kw++, n++) {
                l->xoff[n] = (c * P->IH + kh * P->DH) * P->IW + kw * P->DW;
                l->widx[n] = (int32_t)((c * P->KH + kh) * P->KW + kw);
            }
    for (int i = 0; i < ONNXC_CI_PF; i++) l->xoff[n + i] = n ? l->xoff[n - 1] : 0;
    l->kh0 = kh0, l->kh1 = kh1, l->kw0 = kw0, l->kw1 = kw1, l->n = n, l->stamp = now + 1;
    return l;
}

/* Blocks of output rows times groups of channel panels; in a chunk, sub-blocks of rows whose input stays in L2
 * while every panel runs over them: the inner columns in row tiles, each edge column in column tiles down the
 * sub-block's inner rows, the corners one position at a time. */
static void onnxc_dcx_task(void *ctx, int64_t item, int slot) {
    const onnxc_dcx_par *P = (const onnxc_dcx_par *)ctx;
    onnxc_dcx_list *L = P->lists + (int64_t)slot * ONNXC_DCX_LISTS;
    const int64_t NR = ONNXC_SG_NR, K = P->Cg * P->KH * P->KW, OW = P->OW, IW = P->IW, ldy = P->ldy;
    const int64_t tb = item % P->tblocks, pg = item / P->tblocks;
    const int64_t oh0 = tb * P->OH / P->tblocks, oh1 = (tb + 1) * P->OH / P->tblocks;
    const int64_t pn0 = pg * P->panels / P->pgroups, pn1 = (pg + 1) * P->panels / P->pgroups;
    const int64_t row_bytes = P->Cg * P->SH * IW * (int64_t)sizeof(float);
    int64_t rb = ONNXC_DC_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    if (rb < 1) rb = 1;
    const int64_t inner = P->owB - P->owA, nt = (inner + 11) / 12, base = nt ? inner / nt : 0, extra = nt ? inner % nt : 0;
    for (int64_t b0 = oh0; b0 < oh1; b0 += rb) {
        const int64_t b1 = oh1 - b0 < rb ? oh1 : b0 + rb;
        const int64_t hA = b0 > P->ohA ? b0 : P->ohA, hB = b1 < P->ohB ? b1 : P->ohB; /* inner rows */
        for (int64_t pn = pn0; pn < pn1; pn++) {
            const int64_t ch = pn * NR;
            const int nch = P->M - ch < NR ? (int)(P->M - ch) : (int)NR, V2 = nch > 16;
            const float *w = P->Bp + ch * K;
            float *Yc = P->Y + ch * ldy;
            /* the next panel's lines, shared out among the inner tiles (a filter cold from memory) */
            const float *next = pn + 1 < pn1 ? w + K * NR : NULL;
            const int64_t nl = 2 * K, nq = (b1 - b0) * nt > 0 ? (b1 - b0) * nt : 1;
            for (int64_t oh = b0; oh < b1; oh++) {
                const float *xr = P->x + (oh * P->SH - P->PH) * IW - P->PW;
                if (nt) {
                    const onnxc_dcx_list *l = onnxc_dcx_at(P, L, oh, P->owA, oh >= P->ohA && oh < P->ohB, 1);
                    for (int64_t t = 0, ow = P->owA; t < nt; t++) {
                        const int r = (int)(base + (t < extra));
                        const int64_t q = (oh - b0) * nt + t, l0 = q * nl / nq, l1 = (q + 1) * nl / nq;
                        onnxc_dc_tile_x(r, V2, l->n == K, l->n, xr + ow * P->SW, l->xoff, l->widx, P->SW, 1, w,
                                        next ? next + l0 * 16 : NULL, l1 - l0, Yc + oh * OW + ow,
                                        ldy, nch, P->epi, ch, oh * OW + ow);
                        ow += r;
                    }
                }
                if (oh >= hA && oh < hB) continue;
                for (int64_t ow = 0; ow < OW; ow = ow + 1 == P->owA ? P->owB : ow + 1) { /* corners */
                    if (ow == P->owA && ow < P->owB) ow = P->owB; /* (no left edge) */
                    if (ow >= OW) break;
                    const onnxc_dcx_list *l = onnxc_dcx_at(P, L, oh, ow, 0, 0);
                    onnxc_dc_tile_x(1, V2, l->n == K, l->n, xr + ow * P->SW, l->xoff, l->widx, 1, 1, w, NULL, 0, Yc + oh * OW + ow, ldy,
                                    nch, P->epi, ch, oh * OW + ow);
                }
            }
            for (int64_t ow = 0; ow < OW && hA < hB; ow = ow + 1 == P->owA ? P->owB : ow + 1) { /* edge columns */
                if (ow == P->owA && ow < P->owB) ow = P->owB; /* (no left edge) */
                if (ow >= OW) break;
                const onnxc_dcx_list *l = onnxc_dcx_at(P, L, hA, ow, 1, 0);
                const int64_t n = hB - hA, ntc = (n + 11) / 12, bc = n / ntc, ec = n % ntc;
                for (int64_t t = 0, oh = hA; t < ntc; t++) {
                    const int r = (int)(bc + (t < ec));
                    const float *xb = P->x + (oh * P->SH - P->PH) * IW - P->PW + ow * P->SW;
                    onnxc_dc_tile_x(r, V2, l->n == K, l->n, xb, l->xoff, l->widx, P->SH * IW, OW, w, NULL, 0, Yc + oh * OW + ow, ldy, nch,
                                    P->epi, ch, oh * OW + ow);
                    oh += r;
                }
            }
        }
    }
}

int onnxc_dc_conv_x(int threads, int64_t M, int64_t Cg, int64_t IH, int64_t IW, int64_t KH, int64_t KW, int64_t SH,
                    int64_t SW, int64_t DH, int64_t DW, int64_t PH, int64_t PW, int64_t OH, int64_t OW,
                    const float *Bp, const float *x, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    if (M <= 0 || OH <= 0 || OW <= 0) return 0;
    const int64_t K = Cg * KH * KW, panels = (M + ONNXC_SG_NR - 1) / ONNXC_SG_NR;
    int64_t tblocks, pgroups; /* (blocks of rows) */
    onnxc_dc_cut(threads, M, K, OH * OW, OH, panels, &tblocks, &pgroups);
    const int parts = threads > 1 ? threads : 1;
    const int64_t per = K + ONNXC_CI_PF;
    onnxc_dcx_list *lists = (onnxc_dcx_list *)malloc(sizeof(onnxc_dcx_list) * ONNXC_DCX_LISTS * parts);
    char *mem = (char *)malloc((size_t)per * (sizeof(int64_t) + sizeof(int32_t)) * ONNXC_DCX_LISTS * parts);
    if (!lists || !mem) {
        free(lists);
        free(mem);
        return ONNXC_ERR_MEMORY;
    }
    for (int i = 0; i < ONNXC_DCX_LISTS * parts; i++) {
        lists[i].n = -1;
        lists[i].stamp = 0;
        lists[i].xoff = (int64_t *)mem + (int64_t)i * per;
        lists[i].widx = (int32_t *)((int64_t *)mem + (int64_t)ONNXC_DCX_LISTS * parts * per) + (int64_t)i * per;
    }
    /* the rows and columns whose windows lie inside the input */
    int64_t ohA = (PH + SH - 1) / SH, ohB = IH - 1 - (KH - 1) * DH + PH >= 0 ? (IH - 1 - (KH - 1) * DH + PH) / SH + 1 : 0;
    int64_t owA = (PW + SW - 1) / SW, owB = IW - 1 - (KW - 1) * DW + PW >= 0 ? (IW - 1 - (KW - 1) * DW + PW) / SW + 1 : 0;
    if (ohA > OH) ohA = OH;
    if (ohB > OH) ohB = OH;
    if (ohB < ohA) ohB = ohA;
    if (owA > OW) owA = OW;
    if (owB > OW) owB = OW;
    if (owB < owA) owB = owA;
    onnxc_dcx_par P = {M, Cg, IH, IW, KH, KW, SH, SW, DH, DW, PH, PW, OH, OW, ldy, tblocks, pgroups, panels,
                       ohA, ohB, owA, owB, Bp, x, Y, epi, lists};
    onnxc_parallel(threads, tblocks * pgroups, onnxc_dcx_task, &P);
    free(lists);
    free(mem);
    return 0;
}

#else
int onnxc_dc_conv(int threads, int64_t M, int64_t K, const float *Bp, const float *xp, const int64_t *koff,
                  int64_t planes, int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    (void)threads, (void)M, (void)K, (void)Bp, (void)xp, (void)koff, (void)planes, (void)XWs, (void)OH, (void)OW;
    (void)Y, (void)ldy, (void)epi;
    return ONNXC_ERR_RUNTIME;
}

int onnxc_dc_conv_x(int threads, int64_t M, int64_t Cg, int64_t IH, int64_t IW, int64_t KH, int64_t KW, int64_t SH,
                    int64_t SW, int64_t DH, int64_t DW, int64_t PH, int64_t PW, int64_t OH, int64_t OW,
                    const float *Bp, const float *x, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    (void)threads, (void)M, (void)Cg, (void)IH, (void)IW, (void)KH, (void)KW, (void)SH, (void)SW, (void)DH, (void)DW;
    (void)PH, (void)PW, (void)OH, (void)OW, (void)Bp, (void)x, (void)Y, (void)ldy, (void)epi;
    return ONNXC_ERR_RUNTIME;
}
#endif /* ONNXC_DC_AVAILABLE */
