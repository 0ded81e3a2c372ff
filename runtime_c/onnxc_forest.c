/* onnxc_forest.c: the implementation of onnxc_forest.h. */
#include "onnxc_forest.h"

#include <math.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

/* The leaves l[0 .. m) of rows 0 .. m into acc (row i at acc + i * ntargets): sums of one weight a leaf or
 * of dense weights take a loop of their own (the common case: a random forest, gradient boosting). */
static void add_leaves(const onnxc_forest *f, const int32_t *l, int64_t m, double *acc) {
    const int32_t nt = f->ntargets;
    const double *w = f->weights;
    if (f->agg != ONNXC_AGG_SUM || f->layout == ONNXC_LEAF_CSR) {
        for (int64_t i = 0; i < m; i++) add_leaf(f, l[i], acc + i * nt);
    } else if (f->layout == ONNXC_LEAF_DENSE) {
        for (int64_t i = 0; i < m; i++) {
            const double *wl = w + (int64_t)l[i] * nt;
            for (int32_t j = 0; j < nt; j++) acc[i * nt + j] += wl[j];
        }
    } else if (f->targets) {
        for (int64_t i = 0; i < m; i++) acc[i * nt + f->targets[l[i]]] += w[l[i]];
    } else {
        for (int64_t i = 0; i < m; i++) acc[i * nt] += w[l[i]];
    }
}

/* The leaves l[0 .. q) of one row into its acc (as add_leaves). */
static inline void add_leaves_row(const onnxc_forest *f, const int32_t *l, int64_t q, double *acc) {
    const int32_t nt = f->ntargets;
    if (f->agg != ONNXC_AGG_SUM || f->layout == ONNXC_LEAF_CSR) {
        for (int64_t u = 0; u < q; u++) add_leaf(f, l[u], acc);
    } else if (f->layout == ONNXC_LEAF_DENSE) {
        for (int64_t u = 0; u < q; u++)
            for (int32_t j = 0; j < nt; j++) acc[j] += f->weights[(int64_t)l[u] * nt + j];
    } else {
        for (int64_t u = 0; u < q; u++) acc[f->targets ? f->targets[l[u]] : 0] += f->weights[l[u]];
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

/* The end of the trees from t0 that n rows pass before the next ones: all of them for one row, else trees
 * spanning about ROW_SPAN nodes, which stay in cache while every row passes them (a tree's nodes are
 * contiguous: its span is the next tree's root minus its own; 64 trees when roots are not in order).
 * 128 KiB measured best on a 10,000-tree forest of 85 MB (256 KiB and 1 MiB 10-20% slower at 64-256 rows;
 * 64 KiB no faster). */
#define ROW_SPAN 8192
static int64_t tree_span(const onnxc_forest *f, int64_t t0, int64_t n) {
    if (n <= 1) return f->ntrees;
    int64_t t1 = t0 + 1;
    while (t1 < f->ntrees && t1 - t0 < 4096) {
        const int64_t span = (int64_t)f->roots[t1] - f->roots[t0];
        if (span < 0) return t0 + 64 < f->ntrees ? t0 + 64 : f->ntrees;
        if (span >= ROW_SPAN) break;
        t1++;
    }
    return t1;
}

/* Rows one by one, ROW_LANES trees of a row at a time, each lane leaving its tree at its leaf and taking
 * the next tree then: a path is a chain of dependent loads (node, feature, next node) that misses the cache
 * in a forest larger than it, and the lanes' chains overlap those misses. The step is a select, not a
 * branch (which way a row goes is random); only reaching a leaf (about once per depth steps) branches. */
#define ROW_LANES 8
#define ROW_WALK(NAME, XT, TEST)                                                                         \
    static void NAME(const onnxc_forest *f, const XT *x, int64_t ld, int64_t n, double *acc) {           \
        const onnxc_tnode *nodes = f->nodes;                                                             \
        const double *splitd = f->splitd;                                                                \
        const int32_t nt = f->ntargets;                                                                  \
        const int64_t ntrees = f->ntrees;                                                                \
        (void)splitd;                                                                                    \
        for (int64_t t0 = 0, t1; t0 < ntrees; t0 = t1) {                                                 \
            t1 = tree_span(f, t0, n);                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                            \
                const XT *row = x + i * ld;                                                              \
                double *a = acc + i * nt;                                                                \
                int32_t k[ROW_LANES];                                                                    \
                int64_t t = t0;                                                                          \
                int live = 0;                                                                            \
                for (int u = 0; u < ROW_LANES; u++) {                                                    \
                    k[u] = t < t1 ? f->roots[t++] : -1;                                                  \
                    live += k[u] >= 0;                                                                   \
                }                                                                                        \
                while (live) {                                                                           \
                    for (int u = 0; u < ROW_LANES; u++) {                                                \
                        const int32_t kk = k[u];                                                         \
                        if (kk < 0) continue;                                                            \
                        const onnxc_tnode *nd = nodes + kk;                                              \
                        if (nd->feat & ONNXC_TREE_LEAF) {                                                \
                            add_leaf(f, leaf_of(nd), a);                                                 \
                            k[u] = t < t1 ? f->roots[t++] : -1;                                          \
                            live -= k[u] < 0;                                                            \
                            continue;                                                                    \
                        }                                                                                \
                        const XT v = row[FEAT(nd)];                                                      \
                        const int32_t go = -(int32_t)(!!(TEST));                                         \
                        k[u] = (nd->t & go) | (nd->f & ~go);                                             \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }

#define WALKS(SUFFIX, TEST) ROW_WALK(rows_##SUFFIX, float, TEST)

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
ROW_WALK(rows_f64, double, MASKED(nd->feat, v, splitd[kk]))
ROW_WALK(rows_member, float, MASKED(nd->feat, v, nd->split) | member(f, kk, v))
ROW_WALK(rows_memberd, float, MASKED(nd->feat, (double)v, splitd[kk]) | member(f, kk, v))
ROW_WALK(rows_member_f64, double, MASKED(nd->feat, v, splitd[kk]) | member(f, kk, v))

/* Complete trees (onnxc_forest.h): rows [0, n) through every tree, tree by tree; a step is k = 2k + 1 + !TEST
 * (v: the feature, s: the threshold of slot k). Portable: 16 rows at a time, their chains interleaved. */
#define COMPLETE_ROWS 16
#define COMPLETE_WALK(NAME, TEST)                                                                        \
    static void NAME(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc) {        \
        const int32_t nt = f->ntargets;                                                                  \
        for (int64_t t = 0; t < f->ntrees; t++) {                                                        \
            const int32_t d = f->depths[t], inner = (1 << d) - 1;                                        \
            const int32_t *F = f->cfeat + f->cbase[t], *L = f->cleaf + f->cbase[t] + t;                  \
            const float *S = f->csplit + f->cbase[t];                                                    \
            for (int64_t r0 = 0; r0 < n; r0 += COMPLETE_ROWS) {                                          \
                const int64_t m = n - r0 < COMPLETE_ROWS ? n - r0 : COMPLETE_ROWS;                       \
                int32_t k[COMPLETE_ROWS];                                                                \
                const float *xr[COMPLETE_ROWS];                                                          \
                for (int64_t i = 0; i < COMPLETE_ROWS; i++) {                                            \
                    xr[i] = x + (r0 + (i < m ? i : 0)) * ld;                                             \
                    k[i] = 0;                                                                            \
                }                                                                                        \
                for (int32_t st = 0; st < d; st++) {                                                     \
                    _Pragma("GCC unroll 16")                                                             \
                    for (int64_t i = 0; i < COMPLETE_ROWS; i++) {                                        \
                        const int32_t kk = k[i];                                                         \
                        const float v = xr[i][F[kk]], s = S[kk];                                         \
                        k[i] = 2 * kk + 2 - (int32_t)(TEST);                                             \
                    }                                                                                    \
                }                                                                                        \
                for (int64_t i = 0; i < COMPLETE_ROWS; i++) k[i] = L[k[i] - inner];                      \
                add_leaves(f, k, m, acc + r0 * nt);                                                      \
            }                                                                                            \
        }                                                                                                \
    }

/* Complete trees, few rows: each row through 4 trees at a time, their chains interleaved (no branch: a row
 * unlike the last one costs no mispredictions). */
#define COMPLETE_TREES 4
#define COMPLETE_ROW_WALK(NAME, TEST)                                                                    \
    static void NAME(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc) {        \
        const int32_t nt = f->ntargets;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                                \
            const float *row = x + i * ld;                                                               \
            for (int64_t t = 0; t < f->ntrees; t += COMPLETE_TREES) {                                    \
                const int64_t q = f->ntrees - t < COMPLETE_TREES ? f->ntrees - t : COMPLETE_TREES;       \
                const int32_t *F[COMPLETE_TREES];                                                        \
                const float *S[COMPLETE_TREES];                                                          \
                int32_t k[COMPLETE_TREES], d[COMPLETE_TREES], dmin = INT32_MAX, dmax = 0;                \
                for (int64_t u = 0; u < COMPLETE_TREES; u++) { /* missing trees: tree t again */         \
                    const int64_t tu = t + (u < q ? u : 0);                                              \
                    F[u] = f->cfeat + f->cbase[tu];                                                      \
                    S[u] = f->csplit + f->cbase[tu];                                                     \
                    d[u] = f->depths[tu];                                                                \
                    k[u] = 0;                                                                            \
                    dmin = d[u] < dmin ? d[u] : dmin;                                                    \
                    dmax = d[u] > dmax ? d[u] : dmax;                                                    \
                }                                                                                        \
                for (int32_t st = 0; st < dmin; st++)                                                    \
                    for (int64_t u = 0; u < COMPLETE_TREES; u++) {                                       \
                        const int32_t kk = k[u];                                                         \
                        const float v = row[F[u][kk]], s = S[u][kk];                                     \
                        k[u] = 2 * kk + 2 - (int32_t)(TEST);                                             \
                    }                                                                                    \
                for (int32_t st = dmin; st < dmax; st++) /* trees of other depths */                     \
                    for (int64_t u = 0; u < COMPLETE_TREES; u++) {                                       \
                        const int32_t kk = k[u];                                                         \
                        if (st >= d[u]) continue;                                                        \
                        const float v = row[F[u][kk]], s = S[u][kk];                                     \
                        k[u] = 2 * kk + 2 - (int32_t)(TEST);                                             \
                    }                                                                                    \
                for (int64_t u = 0; u < q; u++) k[u] = f->cleaf[f->cbase[t + u] + t + u + k[u] - ((1 << d[u]) - 1)]; \
                add_leaves_row(f, k, q, acc + i * nt);                                                   \
            }                                                                                            \
        }                                                                                                \
    }
COMPLETE_ROW_WALK(complete_rows_leq, v <= s)
COMPLETE_ROW_WALK(complete_rows_lt, v < s)
COMPLETE_ROW_WALK(complete_rows_gte, v >= s)
COMPLETE_ROW_WALK(complete_rows_gt, v > s)
COMPLETE_ROW_WALK(complete_rows_eq, v == s)
COMPLETE_ROW_WALK(complete_rows_neq, v != s)

#if defined(__AVX512F__)
/* AVX-512: 4 vectors of 16 rows walk a tree together (four independent chains of gathers); levels of at
 * most 32 slots come from two registers by a permute instead of two gathers. PRED: the _CMP_* of the test. */
#define COMPLETE_VECS 4
#define COMPLETE_STEP(KB, FV, SV)                                                                        \
    do {                                                                                                 \
        const __m512 v_ = _mm512_i32gather_ps(_mm512_add_epi32(off[b], (FV)), xb, 4);                    \
        const __mmask16 c_ = _mm512_cmp_ps_mask(v_, (SV), PRED_);                                        \
        const __m512i k2_ = _mm512_add_epi32(_mm512_add_epi32((KB), (KB)), two);                         \
        (KB) = _mm512_mask_sub_epi32(k2_, c_, k2_, one);                                                 \
    } while (0)
#define COMPLETE_WALK_AVX512(NAME, PRED)                                                                 \
    static void NAME(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc) {        \
        enum { PRED_ = PRED, G = 16 * COMPLETE_VECS };                                                   \
        const int32_t nt = f->ntargets;                                                                  \
        const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2);                            \
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);    \
        for (int64_t t = 0; t < f->ntrees; t++) { /* a tree stays in cache while every row passes it */ \
            const int32_t d = f->depths[t], inner = (1 << d) - 1;                                        \
            const int32_t *F = f->cfeat + f->cbase[t], *L = f->cleaf + f->cbase[t] + t;                  \
            const float *S = f->csplit + f->cbase[t];                                                    \
            for (int64_t r0 = 0; r0 < n; r0 += G) {                                                      \
                const int64_t m = n - r0 < G ? n - r0 : G;                                               \
                const float *xb = x + r0 * ld;                                                           \
                __m512i off[COMPLETE_VECS];                                                              \
                for (int b = 0; b < COMPLETE_VECS; b++) { /* rows past m read row r0 */                  \
                    const __m512i r = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * b));                 \
                    const __mmask16 in = _mm512_cmplt_epi32_mask(r, _mm512_set1_epi32((int32_t)m));      \
                    off[b] = _mm512_maskz_mullo_epi32(in, r, _mm512_set1_epi32((int32_t)ld));            \
                }                                                                                        \
                __m512i k[COMPLETE_VECS];                                                                \
                for (int b = 0; b < COMPLETE_VECS; b++) k[b] = _mm512_setzero_si512();                   \
                int32_t st = 0;                                                                          \
                for (; st < d && st <= 5; st++) { /* level st: slots 2^st - 1 .. 2^(st+1) - 2 */         \
                    const int32_t lo = (1 << st) - 1, cnt = 1 << st;                                     \
                    const __mmask16 lm = cnt >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cnt) - 1);   \
                    const __m512i f0 = _mm512_maskz_loadu_epi32(lm, F + lo);                             \
                    const __m512 s0 = _mm512_maskz_loadu_ps(lm, S + lo);                                 \
                    const __m512i f1 = cnt > 16 ? _mm512_loadu_si512(F + lo + 16) : f0;                  \
                    const __m512 s1 = cnt > 16 ? _mm512_loadu_ps(S + lo + 16) : s0;                      \
                    const __m512i base = _mm512_set1_epi32(lo);                                          \
                    for (int b = 0; b < COMPLETE_VECS; b++) {                                            \
                        const __m512i j = _mm512_sub_epi32(k[b], base);                                  \
                        COMPLETE_STEP(k[b], _mm512_permutex2var_epi32(f0, j, f1),                        \
                                      _mm512_permutex2var_ps(s0, j, s1));                                \
                    }                                                                                    \
                }                                                                                        \
                for (; st < d; st++)                                                                     \
                    for (int b = 0; b < COMPLETE_VECS; b++)                                              \
                        COMPLETE_STEP(k[b], _mm512_i32gather_epi32(k[b], F, 4), _mm512_i32gather_ps(k[b], S, 4)); \
                int32_t lv[G]; /* the leaves reached */                                                  \
                const __m512i bottom = _mm512_set1_epi32(inner);                                         \
                for (int b = 0; b < COMPLETE_VECS; b++)                                                  \
                    _mm512_storeu_si512(lv + 16 * b, _mm512_i32gather_epi32(_mm512_sub_epi32(k[b], bottom), L, 4)); \
                add_leaves(f, lv, m, acc + r0 * nt);                                                     \
            }                                                                                            \
        }                                                                                                \
    }
COMPLETE_WALK_AVX512(complete_leq, _CMP_LE_OQ)
COMPLETE_WALK_AVX512(complete_lt, _CMP_LT_OQ)
COMPLETE_WALK_AVX512(complete_gte, _CMP_GE_OQ)
COMPLETE_WALK_AVX512(complete_gt, _CMP_GT_OQ)
COMPLETE_WALK_AVX512(complete_eq, _CMP_EQ_OQ)
COMPLETE_WALK_AVX512(complete_neq, _CMP_NEQ_UQ)
#else
COMPLETE_WALK(complete_leq, v <= s)
COMPLETE_WALK(complete_lt, v < s)
COMPLETE_WALK(complete_gte, v >= s)
COMPLETE_WALK(complete_gt, v > s)
COMPLETE_WALK(complete_eq, v == s)
COMPLETE_WALK(complete_neq, v != s)
#endif

typedef void (*walk_f32)(const onnxc_forest *, const float *, int64_t, int64_t, double *);
typedef void (*walk_f64)(const onnxc_forest *, const double *, int64_t, int64_t, double *);

static void init(const onnxc_forest *f, int64_t n, double *acc) {
    const double v = f->agg == ONNXC_AGG_SUM ? 0.0 : NAN;
    for (int64_t i = 0; i < n * f->ntargets; i++) acc[i] = v;
}

void onnxc_forest_scores(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc) {
    static const walk_f32 rows[] = {rows_leq, rows_lt, rows_gte, rows_gt, rows_eq, rows_neq, rows_mask, NULL,
                                    rows_leq_m, rows_lt_m, rows_gte_m, rows_gt_m, rows_eq_m, rows_neq};
    init(f, n, acc);
    if (f->mode == ONNXC_TREE_MEMBER) {
        (f->splitd ? rows_memberd : rows_member)(f, x, ld, n, acc);
        return;
    }
    const int mode = f->splitd || f->mode < 0 || f->mode > ONNXC_TREE_NEQ_M ? -1 : f->mode;
    static const walk_f32 completes[] = {complete_leq, complete_lt, complete_gte, complete_gt, complete_eq,
                                         complete_neq};
    static const walk_f32 complete_rows[] = {complete_rows_leq, complete_rows_lt, complete_rows_gte,
                                             complete_rows_gt, complete_rows_eq, complete_rows_neq};
    if (f->cbase && mode >= 0 && mode <= ONNXC_TREE_NEQ) {
        (n < ONNXC_FOREST_MIN_BLOCK || ld >= (1 << 24) ? complete_rows[mode] : completes[mode])(f, x, ld, n, acc);
        return;
    }
    (mode < 0 ? rows_maskd : rows[mode])(f, x, ld, n, acc);
}

void onnxc_forest_scores_f64(const onnxc_forest *f, const double *x, int64_t ld, int64_t n, double *acc) {
    init(f, n, acc);
    (f->mode == ONNXC_TREE_MEMBER ? rows_member_f64 : rows_f64)(f, x, ld, n, acc);
}
