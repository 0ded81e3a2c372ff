/* onnxc_cut.h: how a convolution's output tiles (32 positions each) and output channels are cut into the
 * chunks of a parallel region (onnxc_pool.h), for the GEMM-based convolutions of onnxc_sgemm.c (rows path)
 * and onnxc_conv_implicit.c.
 *
 *   onnxc_cut c = onnxc_cut_plan(threads, chunks, tiles, last, M, K, copy);
 *   onnxc_parallel(threads, c.items, task, ...);
 *   // in the task: onnxc_cut_item(&c, item, &t0, &t1, &m0, &m1): tiles [t0, t1), output channels [m0, m1)
 *
 * A chunk runs its K slices in order, each slice over its tiles and, per tile, over its output channels'
 * 12-row panels of the packed filter: a slice of the filter rows it owns is read once per chunk and then
 * served from the core's cache. Three kinds of cut:
 *   - groups of whole tiles, every output channel (the most tiles: one B panel serves every filter panel);
 *   - a grid: groups of tiles times parts of the output channels. With a filter too large for the cache and
 *     few tiles (a 14x14 map is 7 tiles; 256 -> 256 3x3 is a 2.4 MB filter), a chunk per tile would read the
 *     whole filter from L3 for every tile, where a part of the output channels reads only its rows, once;
 *   - groups of whole tiles, and the last few tiles each cut by output channels (an even share of 7 tiles).
 * A part of a tile repeats the tile's B-panel work (`copy`, in output channels' worth of GEMM: 0 for the
 * implicit path, which copies nothing). The plan taken is the one whose chunks, dealt in order to the least
 * loaded thread as the pool does, finish first; at an equal time, the fewer chunks. Every output is
 * computed by one chunk, all K slices in order: the same bits whatever the thread count.
 */
#ifndef ONNXC_CUT_H
#define ONNXC_CUT_H

#include "onnxc.h"
#include "onnxc_pool.h"
#include "onnxc_sgemm.h"

/* Filters (floats) from which a chunk's rows are taken to come from L3, not from the core's cache. */
#define ONNXC_CUT_CACHED_A (256 << 10)
/* The cost of reading one float of the filter from L3, in multiply-adds of 16 columns. */
#define ONNXC_CUT_A_COST 0.6

typedef struct {
    int64_t items;          /* chunks of the parallel region */
    int64_t groups, parts;  /* the first groups * parts chunks: groups of whole tiles times parts of M */
    int64_t wtiles, tiles;  /* the groups hold tiles [0, wtiles); tiles wtiles .. tiles - 1 are cut in tparts */
    int64_t tparts, M, mblk;
} onnxc_cut;

static inline onnxc_cut onnxc_cut_make(int64_t tiles, int64_t groups, int64_t parts, int64_t q, int64_t tparts,
                                       int64_t M) {
    const onnxc_cut c = {groups * parts + q * tparts, groups, parts, tiles - q, tiles, tparts, M,
                         (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR};
    return c;
}

/* Chunk `item` of plan c: tiles [*t0, *t1) and output channels [*m0, *m1). */
static inline void onnxc_cut_item(const onnxc_cut *c, int64_t item, int64_t *t0, int64_t *t1, int64_t *m0,
                                  int64_t *m1) {
    int64_t p, parts;
    if (item < c->groups * c->parts) {
        const int64_t g = item / c->parts;
        p = item % c->parts;
        parts = c->parts;
        *t0 = g * c->wtiles / c->groups;
        *t1 = (g + 1) * c->wtiles / c->groups;
    } else {
        const int64_t j = item - c->groups * c->parts;
        p = j % c->tparts;
        parts = c->tparts;
        *t0 = c->wtiles + j / c->tparts;
        *t1 = *t0 + 1;
    }
    *m0 = p * c->mblk / parts * ONNXC_SG_MR;
    *m1 = (p + 1) * c->mblk / parts * ONNXC_SG_MR;
    *m1 = *m1 < c->M ? *m1 : c->M;
}

/* The time plan c takes on nt threads (see the top of this file), in multiply-adds of 16 columns per K step:
 * `last` is the last tile's columns, `acost` the cost of a filter row read from L3. */
static inline double onnxc_cut_span(const onnxc_cut *c, int nt, int64_t last, double copy, double acost) {
    double load[ONNXC_POOL_MAX] = {0};
    for (int64_t i = 0; i < c->items; i++) {
        int64_t t0, t1, m0, m1;
        onnxc_cut_item(c, i, &t0, &t1, &m0, &m1);
        if (t0 >= t1 || m0 >= m1) continue;
        const double rows = (double)(m1 - m0);
        double units = (double)(t1 - t0) * 2.0; /* 16-column steps */
        if (t1 == c->tiles) units -= 2.0 - (double)((last + 15) / 16);
        const double w = units * (rows + copy) + acost * rows;
        onnxc_deal(load, nt, w);
    }
    return onnxc_span(load, nt);
}

/* `chunks`: the chunks of whole tiles the work is worth (onnxc_chunks); `last`: the columns of the last tile
 * (1 .. 32); K: the filter's columns; `copy`: see the top of this file. */
static inline onnxc_cut onnxc_cut_plan(int threads, int64_t chunks, int64_t tiles, int64_t last, int64_t M,
                                       int64_t K, double copy) {
    int64_t n = chunks < tiles ? chunks : tiles;
    n = n < 1 ? 1 : n;
    onnxc_cut best = onnxc_cut_make(tiles, n, 1, 0, 1, M);
    if (threads <= 1 || chunks <= 1) return best;
    const int nt = threads < ONNXC_POOL_MAX ? threads : ONNXC_POOL_MAX;
    const double acost = (double)M * (double)K > ONNXC_CUT_CACHED_A ? ONNXC_CUT_A_COST : 0.0;
    double span = onnxc_cut_span(&best, nt, last, copy, acost);
    const int64_t mblk = (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR, most = 4 * (int64_t)nt;
    for (int64_t g = 1; g <= tiles && g <= most; g++) { /* grids */
        for (int64_t parts = 1; parts <= mblk && g * parts <= most; parts++) {
            const onnxc_cut c = onnxc_cut_make(tiles, g, parts, 0, 1, M);
            const double s = onnxc_cut_span(&c, nt, last, copy, acost);
            if (s < span * 0.999 || (s <= span * 1.001 && c.items < best.items)) span = s, best = c;
        }
    }
    for (int64_t q = 1; q < tiles && q <= nt; q++) { /* whole tiles, the last q cut by output channels */
        const int64_t groups = n < tiles - q ? n : tiles - q;
        for (int64_t tparts = 2; tparts <= mblk && tparts <= 2 * nt; tparts++) {
            const onnxc_cut c = onnxc_cut_make(tiles, groups, 1, q, tparts, M);
            const double s = onnxc_cut_span(&c, nt, last, copy, acost);
            if (s < span * 0.999 || (s <= span * 1.001 && c.items < best.items)) span = s, best = c;
        }
    }
    return best;
}

#endif /* ONNXC_CUT_H */
