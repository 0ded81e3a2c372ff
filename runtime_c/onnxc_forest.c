/* onnxc_forest.c: the implementation of onnxc_forest.h. */
#include "onnxc_forest.h"

/* One block of up to ONNXC_FOREST_BLOCK rows through every tree; CMP is the node's test of v. */
#define ONNXC_FOREST_WALK(NAME, CMP)                                                                     \
    static void NAME(const onnxc_tnode *nodes, const int32_t *roots, const int32_t *depths, int64_t ntrees, \
                     int32_t nbranch, const float *x, int64_t ld, int64_t n, int32_t *leaves) {          \
        int32_t k[ONNXC_FOREST_BLOCK];                                                                   \
        int64_t off[ONNXC_FOREST_BLOCK];                                                                 \
        for (int64_t i = 0; i < ONNXC_FOREST_BLOCK; i++) off[i] = (i < n ? i : 0) * ld;                  \
        for (int64_t t = 0; t < ntrees; t++) {                                                           \
            for (int64_t i = 0; i < ONNXC_FOREST_BLOCK; i++) k[i] = roots[t];                            \
            for (int32_t s = depths[t]; s > 0; s--) {                                                    \
                _Pragma("omp simd")                                                                      \
                for (int64_t i = 0; i < ONNXC_FOREST_BLOCK; i++) {                                       \
                    const onnxc_tnode *nd = nodes + k[i];                                                \
                    const float v = x[off[i] + nd->feat];                                                \
                    k[i] = (CMP) ? nd->t : nd->f;                                                        \
                }                                                                                        \
            }                                                                                            \
            for (int64_t i = 0; i < n; i++) leaves[i * ntrees + t] = k[i] - nbranch;                     \
        }                                                                                                \
    }

/* Few rows: each row alone, leaving a tree as soon as it reaches a leaf (the block's padded lanes and
 * fixed step count would cost more than the branches). */
#define ONNXC_FOREST_ROWS(NAME, CMP)                                                                     \
    static void NAME(const onnxc_tnode *nodes, const int32_t *roots, int64_t ntrees, int32_t nbranch,   \
                     const float *x, int64_t ld, int64_t n, int32_t *leaves) {                           \
        for (int64_t i = 0; i < n; i++) {                                                                \
            const float *row = x + i * ld;                                                               \
            for (int64_t t = 0; t < ntrees; t++) {                                                       \
                int32_t k = roots[t];                                                                    \
                while (k < nbranch) {                                                                    \
                    const onnxc_tnode *nd = nodes + k;                                                   \
                    const float v = row[nd->feat];                                                       \
                    k = (CMP) ? nd->t : nd->f;                                                           \
                }                                                                                        \
                leaves[i * ntrees + t] = k - nbranch;                                                    \
            }                                                                                            \
        }                                                                                                \
    }

ONNXC_FOREST_WALK(walk_leq, v <= nd->split)
ONNXC_FOREST_WALK(walk_lt, v < nd->split)
ONNXC_FOREST_WALK(walk_gte, v >= nd->split)
ONNXC_FOREST_WALK(walk_gt, v > nd->split)
ONNXC_FOREST_ROWS(rows_leq, v <= nd->split)
ONNXC_FOREST_ROWS(rows_lt, v < nd->split)
ONNXC_FOREST_ROWS(rows_gte, v >= nd->split)
ONNXC_FOREST_ROWS(rows_gt, v > nd->split)

void onnxc_forest_leaves(int mode, const onnxc_tnode *nodes, const int32_t *roots, const int32_t *depths,
                         int64_t ntrees, int32_t nbranch, const float *x, int64_t ld, int64_t n, int32_t *leaves) {
    if (n < ONNXC_FOREST_MIN_BLOCK) {
        switch (mode) {
        case ONNXC_TREE_LT: rows_lt(nodes, roots, ntrees, nbranch, x, ld, n, leaves); break;
        case ONNXC_TREE_GTE: rows_gte(nodes, roots, ntrees, nbranch, x, ld, n, leaves); break;
        case ONNXC_TREE_GT: rows_gt(nodes, roots, ntrees, nbranch, x, ld, n, leaves); break;
        default: rows_leq(nodes, roots, ntrees, nbranch, x, ld, n, leaves); break;
        }
        return;
    }
    for (int64_t r0 = 0; r0 < n; r0 += ONNXC_FOREST_BLOCK) {
        const int64_t m = n - r0 < ONNXC_FOREST_BLOCK ? n - r0 : ONNXC_FOREST_BLOCK;
        const float *xb = x + r0 * ld;
        int32_t *lb = leaves + r0 * ntrees;
        switch (mode) {
        case ONNXC_TREE_LT: walk_lt(nodes, roots, depths, ntrees, nbranch, xb, ld, m, lb); break;
        case ONNXC_TREE_GTE: walk_gte(nodes, roots, depths, ntrees, nbranch, xb, ld, m, lb); break;
        case ONNXC_TREE_GT: walk_gt(nodes, roots, depths, ntrees, nbranch, xb, ld, m, lb); break;
        default: walk_leq(nodes, roots, depths, ntrees, nbranch, xb, ld, m, lb); break;
        }
    }
}
