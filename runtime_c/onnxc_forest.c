/* onnxc_forest.c: the implementation of onnxc_forest.h. */
#include "onnxc_forest.h"

#include <math.h>
#include <string.h>

#define FEAT(nd) ((nd)->feat & ONNXC_TREE_FEAT_MASK)
/* Bit c of the node's truth mask, c the outcome of comparing v with s (see onnxc_forest.h). */
#define MASKED(fm, v, s) \
    (((fm) >> (ONNXC_TREE_MASK_SHIFT + ((v) < (s)) + 2 * ((v) > (s)) + 3 * ((v) == (s)))) & 1u)

/* The number of leaf node nd (stored in place of its threshold). */
static inline int32_t leaf_of(const onnxc_tnode *nd) {
    int32_t l;
    memcpy(&l, &nd->split, sizeof l);
    return l;
}

static inline void add1(int agg, double *a, double w) {
    switch (agg) {
    case ONNXC_AGG_SUM: *a += w; break;
    case ONNXC_AGG_SUM_TRACKED: *a = *a != *a ? w : *a + w; break;
    case ONNXC_AGG_MIN: if (*a != *a || w < *a) *a = w; break;
    default: if (*a != *a || w > *a) *a = w; break;
    }
}

/* Leaf l's weights into one row's acc. */
static inline void add_leaf(const onnxc_forest *f, int32_t l, double *acc) {
    const int agg = f->agg;
    if (f->layout == ONNXC_LEAF_SINGLE) {
        add1(agg, acc + (f->targets ? f->targets[l] : 0), f->weights[l]);
    } else if (f->layout == ONNXC_LEAF_DENSE) {
        const double *w = f->weights + (int64_t)l * f->ntargets;
        for (int32_t j = 0; j < f->ntargets; j++) add1(agg, acc + j, w[j]);
    } else {
        for (int32_t q = f->starts[l]; q < f->starts[l + 1]; q++)
            add1(agg, acc + (f->targets ? f->targets[q] : 0), f->weights[q]);
    }
}

/* Whether v is in the set of BRANCH_MEMBER node k (0 for other nodes). */
static inline int member(const onnxc_forest *f, int32_t k, double v) {
    const int32_t off = f->sets[2 * (int64_t)k];
    if (off < 0) return 0;
    const double *s = f->members + off;
    int32_t lo = 0, hi = f->sets[2 * (int64_t)k + 1];
    const int32_t len = hi;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (s[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && s[lo] == v;
}

/* Rows [0, n) through every tree, tree by tree (the tree stays in cache while every row passes it: a big
 * forest is read from memory once per call, not once per block), each tree in blocks of up to
 * ONNXC_FOREST_BLOCK rows; TEST is the node's test of v (``nd``: the node, ``kk``: its index). */
#define BLOCK_WALK(NAME, XT, TEST)                                                                       \
    static void NAME(const onnxc_forest *f, const XT *x, int64_t ld, int64_t n, double *acc) {           \
        const onnxc_tnode *nodes = f->nodes;                                                             \
        const double *splitd = f->splitd;                                                                \
        const int32_t nt = f->ntargets;                                                                  \
        int32_t k[ONNXC_FOREST_BLOCK];                                                                   \
        int64_t off[ONNXC_FOREST_BLOCK];                                                                 \
        (void)splitd;                                                                                    \
        for (int64_t t = 0; t < f->ntrees; t++) {                                                        \
            for (int64_t r0 = 0; r0 < n; r0 += ONNXC_FOREST_BLOCK) {                                     \
                const int64_t m = n - r0 < ONNXC_FOREST_BLOCK ? n - r0 : ONNXC_FOREST_BLOCK;             \
                for (int64_t i = 0; i < ONNXC_FOREST_BLOCK; i++) {                                       \
                    off[i] = (r0 + (i < m ? i : 0)) * ld;                                                \
                    k[i] = f->roots[t];                                                                  \
                }                                                                                        \
                for (int32_t s = f->depths[t]; s > 0; s--) {                                             \
                    _Pragma("omp simd")                                                                  \
                    for (int64_t i = 0; i < ONNXC_FOREST_BLOCK; i++) {                                   \
                        const int32_t kk = k[i];                                                         \
                        const onnxc_tnode *nd = nodes + kk;                                              \
                        const XT v = x[off[i] + FEAT(nd)];                                               \
                        k[i] = (TEST) ? nd->t : nd->f;                                                   \
                    }                                                                                    \
                }                                                                                        \
                for (int64_t i = 0; i < m; i++)                                                          \
                    add_leaf(f, leaf_of(nodes + k[i]), acc + (r0 + i) * nt);                             \
            }                                                                                            \
        }                                                                                                \
    }

/* Rows one by one, leaving each tree at its leaf. */
#define ROW_WALK(NAME, XT, TEST)                                                                         \
    static void NAME(const onnxc_forest *f, const XT *x, int64_t ld, int64_t n, double *acc) {           \
        const onnxc_tnode *nodes = f->nodes;                                                             \
        const double *splitd = f->splitd;                                                                \
        const int32_t nt = f->ntargets;                                                                  \
        (void)splitd;                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                                \
            const XT *row = x + i * ld;                                                                  \
            double *a = acc + i * nt;                                                                    \
            for (int64_t t = 0; t < f->ntrees; t++) {                                                    \
                int32_t kk = f->roots[t];                                                                \
                const onnxc_tnode *nd = nodes + kk;                                                      \
                while (!(nd->feat & ONNXC_TREE_LEAF)) {                                                  \
                    const XT v = row[FEAT(nd)];                                                          \
                    if (__builtin_expect(!!(TEST), 1)) kk = nd->t; /* a branch, not a cmov: */           \
                    else kk = nd->f; /* the core runs ahead into the next trees */                       \
                    nd = nodes + kk;                                                                     \
                }                                                                                        \
                add_leaf(f, leaf_of(nd), a);                                                             \
            }                                                                                            \
        }                                                                                                \
    }

#define WALKS(SUFFIX, TEST)                   \
    BLOCK_WALK(block_##SUFFIX, float, TEST)   \
    ROW_WALK(rows_##SUFFIX, float, TEST)

/* A NaN feature takes the true branch where bit 0 of the node's mask says so. */
#define MISSING(nd, v) (((nd)->feat >> ONNXC_TREE_MASK_SHIFT) & (uint32_t)((v) != (v)))

WALKS(leq, v <= nd->split)
WALKS(lt, v < nd->split)
WALKS(gte, v >= nd->split)
WALKS(gt, v > nd->split)
WALKS(eq, v == nd->split)
WALKS(neq, v != nd->split)
WALKS(leq_m, (v <= nd->split) | MISSING(nd, v))
WALKS(lt_m, (v < nd->split) | MISSING(nd, v))
WALKS(gte_m, (v >= nd->split) | MISSING(nd, v))
WALKS(gt_m, (v > nd->split) | MISSING(nd, v))
WALKS(eq_m, (v == nd->split) | MISSING(nd, v))
WALKS(mask, MASKED(nd->feat, v, nd->split))
WALKS(maskd, MASKED(nd->feat, (double)v, splitd[kk]))
BLOCK_WALK(block_f64, double, MASKED(nd->feat, v, splitd[kk]))
ROW_WALK(rows_f64, double, MASKED(nd->feat, v, splitd[kk]))
ROW_WALK(rows_member, float, MASKED(nd->feat, v, nd->split) | member(f, kk, v))
ROW_WALK(rows_memberd, float, MASKED(nd->feat, (double)v, splitd[kk]) | member(f, kk, v))
ROW_WALK(rows_member_f64, double, MASKED(nd->feat, v, splitd[kk]) | member(f, kk, v))

typedef void (*walk_f32)(const onnxc_forest *, const float *, int64_t, int64_t, double *);
typedef void (*walk_f64)(const onnxc_forest *, const double *, int64_t, int64_t, double *);

static void init(const onnxc_forest *f, int64_t n, double *acc) {
    const double v = f->agg == ONNXC_AGG_SUM ? 0.0 : NAN;
    for (int64_t i = 0; i < n * f->ntargets; i++) acc[i] = v;
}

void onnxc_forest_scores(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc) {
    static const walk_f32 blocks[] = {block_leq, block_lt, block_gte, block_gt, block_eq, block_neq, block_mask, NULL,
                                      block_leq_m, block_lt_m, block_gte_m, block_gt_m, block_eq_m, block_neq};
    static const walk_f32 rows[] = {rows_leq, rows_lt, rows_gte, rows_gt, rows_eq, rows_neq, rows_mask, NULL,
                                    rows_leq_m, rows_lt_m, rows_gte_m, rows_gt_m, rows_eq_m, rows_neq};
    init(f, n, acc);
    if (f->mode == ONNXC_TREE_MEMBER) {
        (f->splitd ? rows_memberd : rows_member)(f, x, ld, n, acc);
        return;
    }
    const int mode = f->splitd || f->mode < 0 || f->mode > ONNXC_TREE_NEQ_M ? -1 : f->mode;
    if (n < ONNXC_FOREST_MIN_BLOCK) {
        (mode < 0 ? rows_maskd : rows[mode])(f, x, ld, n, acc);
        return;
    }
    (mode < 0 ? block_maskd : blocks[mode])(f, x, ld, n, acc);
}

void onnxc_forest_scores_f64(const onnxc_forest *f, const double *x, int64_t ld, int64_t n, double *acc) {
    init(f, n, acc);
    if (f->mode == ONNXC_TREE_MEMBER || n < ONNXC_FOREST_MIN_BLOCK) {
        (f->mode == ONNXC_TREE_MEMBER ? rows_member_f64 : rows_f64)(f, x, ld, n, acc);
        return;
    }
    block_f64(f, x, ld, n, acc);
}
