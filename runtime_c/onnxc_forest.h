/* onnxc_forest.h: the tree walk of tree ensembles (ai.onnx.ml TreeEnsemble*, codegen/kernels/trees.py),
 * implemented in onnxc_forest.c (compiled once into the runtime library).
 *
 *   onnxc_forest_leaves(mode, nodes, roots, depths, ntrees, nbranch, x, ld, n, leaves);
 *
 * For rows r < n of x (row r at x + r * ld, float features) and every tree t, writes the leaf that row r
 * reaches in tree t to leaves[r * ntrees + t]. A node is 16 bytes (onnxc_tnode): the feature it reads,
 * its float threshold and the indices of its two children. nodes[0 .. nbranch) are branch nodes; leaf l
 * is node nbranch + l, whose children are itself (feature 0, any threshold). Tree t starts at node
 * roots[t] (a leaf node for a one-leaf tree) and its longest path has depths[t] branch nodes. Every
 * branch node of a forest compares the same way (mode: ONNXC_TREE_LEQ, _LT, _GTE or _GT: the first
 * child when `x[feat] <= split`, ...); NaN features take the second child.
 *
 * Why a runtime walk: a row's path through one tree is a chain of dependent loads (node, feature, next
 * node) and a branch that goes either way at random. Here a block of rows walks one tree together for
 * exactly depths[t] steps (a row that reached its leaf stays there: leaves point at themselves), so the
 * step is a select without branches, the chains of the block's rows overlap, and the tree's upper nodes
 * stay in L1 for the whole block. Calls with fewer than ONNXC_FOREST_MIN_BLOCK rows (batch 1) walk row by
 * row instead, leaving each tree at its leaf.
 */
#ifndef ONNXC_FOREST_H
#define ONNXC_FOREST_H

#include "onnxc.h"

typedef struct {
    int32_t feat;   /* feature index */
    float split;    /* threshold */
    int32_t t, f;   /* the children (node indices) taken when the test holds / does not hold */
} onnxc_tnode;

enum { ONNXC_TREE_LEQ = 0, ONNXC_TREE_LT = 1, ONNXC_TREE_GTE = 2, ONNXC_TREE_GT = 3 };

#define ONNXC_FOREST_BLOCK 16    /* rows walking one tree together */
#define ONNXC_FOREST_MIN_BLOCK 4 /* fewer rows walk one by one, leaving each tree at its leaf */

/* See the top of this file. */
ONNXC_RT_API void onnxc_forest_leaves(int mode, const onnxc_tnode *nodes, const int32_t *roots, const int32_t *depths,
                                      int64_t ntrees, int32_t nbranch, const float *x, int64_t ld, int64_t n,
                                      int32_t *leaves);

#endif /* ONNXC_FOREST_H */
