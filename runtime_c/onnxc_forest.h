/* onnxc_forest.h: the tree walk and leaf aggregation of tree ensembles (ai.onnx.ml TreeEnsemble*,
 * codegen/kernels/trees.py), implemented in onnxc_forest.c (compiled once into the runtime library).
 *
 *   onnxc_forest_scores(&forest, x, ld, n, acc);      float rows
 *   onnxc_forest_scores_f64(&forest, x, ld, n, acc);  double rows
 *
 * For rows r < n of x (row r at x + r * ld) every tree is walked to a leaf and the leaf's weights are
 * aggregated into acc[r * ntargets + j] (double): SUM adds (acc starts at 0), SUM_TRACKED adds but starts
 * at NaN, so a target no leaf reached stays NaN, MIN and MAX keep the extreme (starting at NaN). Averages
 * and post transforms are the caller's.
 *
 * The forest is data (the model's weights blob), not code: the generated C does not grow with the trees.
 * A node is 16 bytes (onnxc_tnode): the feature it reads with the leaf flag and its truth mask in the top
 * 5 bits, its float threshold and the indices of its two children; a leaf (ONNXC_TREE_LEAF, feature 0)
 * holds its number in place of the threshold and points at itself. Tree t starts at node roots[t] (a
 * leaf for a one-leaf tree) and its longest path has depths[t] branch nodes. Each tree is laid out in
 * preorder, true child first (codegen/kernels/trees_layout.py): a path reads memory forward.
 *
 * The test of a branch node: with c the outcome of comparing the feature v with the threshold s (0: v or
 * s is NaN, 1: v < s, 2: v > s, 3: v == s), the walk takes the first child when bit c of the mask is set
 * (BRANCH_LEQ: bits 1 and 3; NEQ: 0, 1, 2; a node tracking missing values to its true side also sets
 * bit 0; a NaN threshold is stored as 0 with the constant outcome in the mask). ``mode`` says how a
 * forest's nodes test: ONNXC_TREE_LEQ .. ONNXC_TREE_NEQ when every node compares that way and tracks no
 * missing value (the mask is then not read); the same plus ONNXC_TREE_MISSING when nodes may track
 * missing values (only bit 0 of the mask is read; NaN thresholds kept); ONNXC_TREE_MASK for per-node
 * masks (mixed modes; about 1.7 times the time of a uniform walk); ONNXC_TREE_MEMBER when some nodes are
 * BRANCH_MEMBER: sets[2k] >= 0 marks one, whose test is ``v`` in members[sets[2k] .. sets[2k] +
 * sets[2k + 1]) (sorted) or the mask's bit 0. ``splitd`` (one per node), when set, holds
 * thresholds compared in double instead of the float ones (double inputs, thresholds that are not
 * floats; the masked test is used then).
 *
 * Leaves (``layout``): SINGLE: leaf l has weight weights[l] for target targets[l] (target 0 without
 * targets); DENSE: weights[l * ntargets + j] for every target j; CSR: weights[q] for targets[q] (0
 * without targets), q in [starts[l], starts[l + 1]).
 *
 * Complete trees (``cbase`` set; only forests of a uniform mode LEQ .. NEQ without missing tracking and
 * float thresholds): tree t of depth D = depths[t] is also laid out as a complete binary tree of 2^D - 1
 * slots from cbase[t] in cfeat/csplit, slot j's children being slots 2j + 1 (the test holds) and 2j + 2;
 * a leaf above the bottom fills its subtree with slots whose outcome does not matter (feature 0) and whose
 * bottom slots all name it. Its 2^D leaf numbers start at cleaf[cbase[t] + t]. A step is then index
 * arithmetic (no child to load): with AVX-512, 64 rows walk a tree in 4 vectors of 16, the slots of
 * the top 6 levels (at most 32) held in registers and picked by permutes, deeper ones gathered.
 *
 * Why this walk: a row's path through one tree is a chain of dependent loads (node, feature, next node)
 * and a branch that goes either way at random. Node walks take a row through 8 trees at a time, one per
 * lane, each lane stepping by a select (no branch on the test) and taking the next tree when it reaches a
 * leaf, so 8 chains of cache misses overlap (a forest of millions of nodes does not fit in cache); with
 * more than one row, the rows pass a group of trees of about 128 KiB of nodes before the next group, so
 * the group is read from memory once per call. Complete trees from ONNXC_FOREST_MIN_BLOCK rows walk a
 * tree with every row before the next tree; fewer rows take 4 trees at a time.
 */
#ifndef ONNXC_FOREST_H
#define ONNXC_FOREST_H

#include "onnxc.h"

typedef struct {
    uint32_t feat;  /* feature index (low 27 bits) | ONNXC_TREE_LEAF | truth mask << 28 */
    float split;    /* threshold; a leaf: its number (int32_t bits) */
    int32_t t, f;   /* the children (node indices) taken when the test holds / does not hold */
} onnxc_tnode;

enum {
    ONNXC_TREE_LEQ = 0, ONNXC_TREE_LT = 1, ONNXC_TREE_GTE = 2, ONNXC_TREE_GT = 3, ONNXC_TREE_EQ = 4,
    ONNXC_TREE_NEQ = 5, ONNXC_TREE_MASK = 6, ONNXC_TREE_MEMBER = 7,
    ONNXC_TREE_MISSING = 8, /* added to LEQ .. NEQ: bit 0 of each node's mask sends a NaN feature true */
    ONNXC_TREE_NEQ_M = ONNXC_TREE_NEQ + ONNXC_TREE_MISSING
};
enum { ONNXC_LEAF_SINGLE = 0, ONNXC_LEAF_DENSE = 1, ONNXC_LEAF_CSR = 2 };
enum { ONNXC_AGG_SUM = 0, ONNXC_AGG_SUM_TRACKED = 1, ONNXC_AGG_MIN = 2, ONNXC_AGG_MAX = 3 };

#define ONNXC_TREE_FEAT_MASK 0x07ffffffu
#define ONNXC_TREE_LEAF 0x08000000u /* the node is a leaf */
#define ONNXC_TREE_MASK_SHIFT 28

typedef struct {
    const onnxc_tnode *nodes;  /* the branch nodes and leaves of every tree */
    const int32_t *roots;      /* per tree its first node */
    const int32_t *depths;     /* per tree the branch nodes on its longest path */
    const double *splitd;      /* NULL, or per node the threshold compared in double */
    const int32_t *sets;       /* ONNXC_TREE_MEMBER: per node (offset into members or -1, length) */
    const double *members;     /* the sorted sets of BRANCH_MEMBER nodes */
    const double *weights;     /* leaf weights (see layout) */
    const int32_t *targets;    /* per weight its target (NULL: 0, or j for DENSE) */
    const int32_t *starts;     /* CSR: per leaf the first of its weights, and the end (nleaves + 1) */
    const int32_t *cbase;      /* NULL, or per tree the first slot of its complete tree (see below) */
    const int32_t *cfeat;      /* complete trees: per slot the feature it reads */
    const float *csplit;       /* complete trees: per slot its threshold */
    const int32_t *cleaf;      /* complete trees: per bottom slot the number of its leaf */
    int64_t ntrees;
    int32_t ntargets;
    int mode, layout, agg;     /* ONNXC_TREE_*, ONNXC_LEAF_*, ONNXC_AGG_* */
} onnxc_forest;

#define ONNXC_FOREST_MIN_BLOCK 4 /* complete trees: fewer rows walk one by one, 4 trees at a time */

/* See the top of this file. */
ONNXC_RT_API void onnxc_forest_scores(const onnxc_forest *f, const float *x, int64_t ld, int64_t n, double *acc);
ONNXC_RT_API void onnxc_forest_scores_f64(const onnxc_forest *f, const double *x, int64_t ld, int64_t n,
                                          double *acc);

#endif /* ONNXC_FOREST_H */
