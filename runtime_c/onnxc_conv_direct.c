/* onnxc_conv_direct.c: the implementation of onnxc_conv_direct.h (compiled once into the runtime library): the
 * AVX-512 tile kernel and the driver onnxc_dc_conv. Empty without AVX-512. */
#include "onnxc_conv_direct.h"
#include "onnxc_sgemm_kern.h"
#include "onnxc_pool.h"

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

/* One tile: R positions (xb[koff[k] + i] for tap k of position i) times V vectors of 16 channels (w: the
 * panel, K rows of 32 floats); y: the tile's first output of its first channel, ldy floats between channels;
 * nch the channels stored; e the epilogue (its channel 0 is `ch`, its residual column `p`). */
static inline __attribute__((always_inline)) void onnxc_dc_tile(const int R, const int V, int64_t k0, int64_t k1,
                                                                const float *xb, const int64_t *koff,
                                                                const float *restrict w, const float *pfw,
                                                                float *part, float *y, int64_t ldy, int nch,
                                                                const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = part && k0 > 0 ? _mm512_loadu_ps(part + 32 * i) : _mm512_setzero_ps();
        acc[i][1] = part && k0 > 0 && V > 1 ? _mm512_loadu_ps(part + 32 * i + 16) : _mm512_setzero_ps();
    }
    w += k0 * ONNXC_SG_NR;
#pragma GCC unroll 2
    for (int64_t k = k0; k < k1; k++) {
        const float *b = xb + koff[k];
        _mm_prefetch((const char *)(xb + koff[k + ONNXC_CI_PF]), _MM_HINT_T0);
        if (pfw) { /* the next slice of the filter, on its way from memory while this one computes */
            _mm_prefetch((const char *)pfw, _MM_HINT_T1);
            _mm_prefetch((const char *)(pfw + 16), _MM_HINT_T1);
            pfw += ONNXC_SG_NR;
        }
        const __m512 w0 = _mm512_loadu_ps(w), w1 = V > 1 ? _mm512_loadu_ps(w + 16) : w0;
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512 a = _mm512_set1_ps(b[i]);
            acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
            if (V > 1) acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
        }
        w += ONNXC_SG_NR;
    }
    if (!y) { /* a slice before the last: the partial sums wait in part */
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            _mm512_storeu_ps(part + 32 * i, acc[i][0]);
            if (V > 1) _mm512_storeu_ps(part + 32 * i + 16, acc[i][1]);
        }
        return;
    }
    const int res = e && e->res;
    const __mmask16 rm = (__mmask16)((1u << R) - 1u);
    for (int v = 0; v < V; v++) {
        const int nv = nch - 16 * v < 16 ? nch - 16 * v : 16;
        const __mmask16 cm = (__mmask16)((1u << nv) - 1u);
        __m512 t[16];
        /* no residual: bias and activation on the channel vectors, where every lane is an output */
        const __m512 bv = e && e->bias && !res ? _mm512_maskz_loadu_ps(cm, e->bias + ch + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < R) {
                __m512 x = acc[i][v];
                if (e && !res) {
                    if (e->bias) x = _mm512_add_ps(x, bv);
                    x = onnxc_sg_act512(e->act, e->a, e->b, x);
                }
                t[i] = x;
            } else {
                t[i] = _mm512_setzero_ps();
            }
        }
        onnxc_dc_tr16(t);
        for (int l = 0; l < nv; l++) {
            __m512 x = t[l];
            if (res) { /* bias, residual and activation on the channel's row of positions */
                const int64_t m = ch + 16 * v + l;
                if (e->bias) x = _mm512_add_ps(x, _mm512_set1_ps(e->bias[m]));
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(rm, e->res + m * e->ldr + p));
                x = onnxc_sg_act512(e->act, e->a, e->b, x);
            }
            _mm512_mask_storeu_ps(y + (int64_t)(16 * v + l) * ldy, rm, x);
        }
    }
}

#define ONNXC_DC_TILE(R)                                                                                  \
    case R:                                                                                               \
        if (V2) onnxc_dc_tile(R, 2, k0, k1, xb, koff, w, pfw, part, y, ldy, nch, e, ch, p);               \
        else onnxc_dc_tile(R, 1, k0, k1, xb, koff, w, pfw, part, y, ldy, nch, e, ch, p);                  \
        break;

/* onnxc_dc_tile for r positions, taps [k0, k1) (y NULL: not the last slice). */
static void onnxc_dc_tile_r(int r, int V2, int64_t k0, int64_t k1, const float *xb, const int64_t *koff,
                            const float *w, const float *pfw, float *part, float *y, int64_t ldy, int nch,
                            const onnxc_sg_epi *e, int64_t ch, int64_t p) {
    switch (r) {
        ONNXC_DC_TILE(1) ONNXC_DC_TILE(2) ONNXC_DC_TILE(3) ONNXC_DC_TILE(4) ONNXC_DC_TILE(5) ONNXC_DC_TILE(6)
        ONNXC_DC_TILE(7) ONNXC_DC_TILE(8) ONNXC_DC_TILE(9) ONNXC_DC_TILE(10) ONNXC_DC_TILE(11) ONNXC_DC_TILE(12)
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
                const float *pfw = !sliced ? NULL : k1 < K ? w + k1 * NR : pn + 1 < pn1 ? w + K * NR : NULL;
                for (int64_t t = b0; t < b1; t++) {
                    const int64_t oh = t / nt, i = t % nt, ow = i * base + (i < extra ? i : extra);
                    const int r = (int)(base + (i < extra));
                    const int64_t p = oh * OW + ow;
                    onnxc_dc_tile_r(r, nch > 16, k0, k1, P->xp + oh * P->XWs + ow, P->koff, w, pfw,
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
    const int64_t n = onnxc_chunks(threads, (double)M * (double)K * (double)(OH * OW), ONNXC_GEMM_PAR_MIN);
    /* blocks of tiles first (a thread then reads only the input rows of its outputs), the channel panels split
     * too when the tiles are fewer than the chunks; but a filter larger than the cache is split by panels first,
     * so that each panel is read once, not once per block of tiles (512 -> 512 3x3 at 7 x 7: 9.4 MB) */
    int64_t tblocks, pgroups;
    if ((double)M * (double)K * sizeof(float) > ONNXC_DC_CACHED_W) {
        pgroups = n < panels ? n : panels;
        const int64_t tb = (n + pgroups - 1) / pgroups;
        tblocks = tb < tiles ? tb : tiles;
    } else {
        tblocks = n < tiles ? n : tiles;
        const int64_t pg = (n + tblocks - 1) / tblocks;
        pgroups = pg < panels ? pg : panels;
    }
    onnxc_dc_par P = {M, K, XWs, OW, ldy, ntiles, tiles, tblocks, pgroups, panels,
                      planes * XWs * (int64_t)sizeof(float), Bp, xp, koff, Y, epi};
    onnxc_parallel(threads, tblocks * pgroups, onnxc_dc_task, &P);
    return 0;
}

#endif /* ONNXC_DC_AVAILABLE */
