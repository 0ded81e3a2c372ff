"""Array work of the tree-ensemble kernels (codegen/kernels/trees.py): checking that trees are acyclic
and measuring their depths, and packing a Forest into the tables of runtime_c/onnxc_forest.h that go
to the weights blob.

Everything is numpy over all trees at once: a forest of millions of nodes takes a few numpy steps per
depth level, never a Python object per node.

Acyclicity and depths (``tree_depths``): when no node has two parents and no root has one (real
forests), the levels below the roots are already acyclic layers. Otherwise the nodes reachable from the
roots are found level by level; Kahn's algorithm then peels them in layers (a node once every reachable
parent is peeled); reachable nodes left over lie on or below a cycle. Heights are computed over the
layers in reverse, so trees that share nodes (TreeEnsemble allows it) get their true longest path,
which the complete-tree layout relies on.

Packing (``forest_tables``): 16 bytes a node (feature | leaf flag << 27 | truth mask << 28, float
threshold, children; a leaf points at itself and holds its number instead of a threshold), tree after
tree, each in preorder with the true child first (a path reads memory forward; only when no node has
two parents), per tree its root node and depth, thresholds in double when a threshold is not a float or
the input is double, BRANCH_MEMBER sets as (offset, length) pairs into a sorted value table, and the
leaf weights (one per leaf, dense per target, or CSR) in the leaves' order.

Complete trees (``complete_tables``): forests whose nodes all compare one way (LEQ .. NEQ, no missing-value
tracking, float thresholds) and whose trees are shallow also get each tree as a complete binary tree
(slot j's children at 2j + 1 and 2j + 2, a leaf above the bottom repeated under itself), which the runtime
walks with index arithmetic instead of child loads (2-3 times faster on scikit-learn and boosting forests).
Only while the slots stay within 4 times the nodes (and COMPLETE_SLOTS): a deep tree keeps the node walk.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxc.ir import Node, ShapeError

# Truth mask per mode (LEQ, LT, GTE, GT, EQ, NEQ, MEMBER): bit c set when outcome c sends a row to the
# true child; c = 0 unordered (NaN), 1 less, 2 greater, 3 equal (runtime_c/onnxc_forest.h).
_MASKS = np.array([0b1010, 0b0010, 0b1100, 0b0100, 0b1000, 0b0111, 0b0000], np.uint32)
FEATURE_BITS, MASK_SHIFT = 27, 28
LEAF = 1 << FEATURE_BITS                  # ONNXC_TREE_LEAF: the node is a leaf
MODE_MASK, MODE_MEMBER, MISSING = 6, 7, 8  # ONNXC_TREE_MASK, ONNXC_TREE_MEMBER, ONNXC_TREE_MISSING
SINGLE, DENSE, CSR = 0, 1, 2              # ONNXC_LEAF_*
COMPLETE_DEPTH = 12                       # the deepest tree laid out complete (4095 slots)
COMPLETE_SLOTS = 1 << 21                  # the most slots of a forest's complete trees (12 bytes each)


def _reachable(roots: np.ndarray, tref: np.ndarray, fref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reached, tree): whether each branch node is reachable from a root, and one tree reaching it."""
    n = len(tref)
    seen = np.zeros(n, bool)
    tree = np.full(n, -1, np.int64)
    front, first = np.unique(roots[roots >= 0], return_index=True)
    tree[front] = np.flatnonzero(roots >= 0)[first]
    seen[front] = True
    while len(front):
        kids = np.concatenate((tref[front], fref[front]))
        trees = np.concatenate((tree[front], tree[front]))
        keep = kids >= 0
        keep[keep] = ~seen[kids[keep]]
        front, first = np.unique(kids[keep], return_index=True)
        tree[front] = trees[keep][first]
        seen[front] = True
    return seen, tree


def _one_parent(refs: tuple[np.ndarray, ...], n: int) -> np.ndarray | None:
    """Whether each of nodes 0..n-1 is named at most once by the non-negative entries of ``refs``: then per
    node whether it is named (a child), else None."""
    named, total = np.zeros(n, bool), 0
    for r in refs:
        kids = r[r >= 0] if len(r) and r.min() < 0 else r
        named[kids] = True
        total += len(kids)
    return named if np.count_nonzero(named) == total else None


def tree_depths(f, cycle: Callable[[int, int], Exception]) -> np.ndarray:
    """Per tree of Forest ``f`` the branch nodes on its longest path; ``cycle(k, t)`` is raised when branch
    node k, reached from tree t, lies on a cycle."""
    tref, fref = f.true_ref, f.false_ref
    n = len(tref)
    child = _one_parent((tref, fref), n)
    if child is not None and not child[f.roots[f.roots >= 0]].any():
        return _tree_heights(f, n)  # every node has one parent at most, roots none: trees, no cycle
    seen, tree = _reachable(f.roots, tref, fref)
    reach = np.flatnonzero(seen)
    edges = np.concatenate((tref[reach], fref[reach]))
    indeg = np.bincount(edges[edges >= 0], minlength=n)
    front = reach[indeg[reach] == 0]
    layers, peeled = [], 0
    while len(front):
        layers.append(front)
        peeled += len(front)
        kids = np.concatenate((tref[front], fref[front]))
        kids, counts = np.unique(kids[kids >= 0], return_counts=True)
        indeg[kids] -= counts
        front = kids[indeg[kids] == 0]
    if peeled < len(reach):
        k = int(reach[indeg[reach] > 0][0])  # on or below a cycle: follow unpeeled children onto it
        visited = set()
        while k not in visited:
            visited.add(k)
            k = next(int(c) for c in (tref[k], fref[k]) if c >= 0 and indeg[c] > 0)
        raise cycle(k, int(tree[k]))
    return _heights(f, layers, n)


def _tree_heights(f, n: int) -> np.ndarray:
    """tree_depths when no node has two parents: the levels below the roots are the layers, and a tree is as
    deep as the deepest level its root reaches (each level carries, per node, the root above it). The levels
    are kept in ``f.levels`` for the preorder layout."""
    layers, front = [], np.unique(f.roots[f.roots >= 0])
    top, depth = front, np.zeros(n, np.int64)
    while len(front):
        layers.append(front)
        depth[top] = len(layers)  # levels only deepen: the last write is the deepest
        kids = np.concatenate((f.true_ref[front], f.false_ref[front]))
        keep = kids >= 0
        front, top = kids[keep], np.concatenate((top, top))[keep]
    f.levels = layers
    return np.where(f.roots >= 0, depth[np.maximum(f.roots, 0)], 0)


def _heights(f, layers: list[np.ndarray], n: int) -> np.ndarray:
    """Per tree its depth, from layers of branch nodes in which every node comes after its parents."""
    tref, fref = f.true_ref, f.false_ref
    height = np.zeros(n + 1, np.int64)  # height[n] = 0: where leaf references point
    for layer in reversed(layers):
        t, fl = np.where(tref[layer] >= 0, tref[layer], n), np.where(fref[layer] >= 0, fref[layer], n)
        height[layer] = 1 + np.maximum(height[t], height[fl])
    return np.where(f.roots >= 0, height[np.where(f.roots >= 0, f.roots, n)], 0)


def _leaves(f, nt: int) -> tuple[int, np.ndarray | None, np.ndarray | None]:
    """(layout, targets or None, starts or None) of the leaf weights."""
    if f.leaf_start is None:
        layout = SINGLE
    else:
        counts = np.diff(f.leaf_start)
        if (counts == nt).all() and (f.leaf_target == np.arange(len(f.leaf_target)) % max(nt, 1)).all():
            layout = DENSE
        else:
            layout = SINGLE if (counts == 1).all() else CSR
    targets = f.leaf_target.astype(np.int32) if layout != DENSE and f.leaf_target.any() else None
    starts = f.leaf_start.astype(np.int32) if layout == CSR else None
    return layout, targets, starts


def _is_float(split: np.ndarray) -> bool:
    """Whether every threshold that is not NaN is exactly a float."""
    s = split[~np.isnan(split)]
    with np.errstate(over="ignore"):
        return bool((s.astype(np.float32).astype(np.float64) == s).all())


def _preorder(f, nb: int, nl: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(perm, pos): the nodes (branch k as k, leaf l as nb + l) tree after tree, each tree in preorder with
    the true child first, so a path reads memory forward and a tree is one block, and per node its place in
    that order (-1: left out); None when a node has two parents (shared subtrees: the order is kept). Nodes
    no root reaches are left out."""
    roots = np.where(f.roots >= 0, f.roots, nb - f.roots - 1)
    if not len(roots):
        return np.zeros(0, np.int64), np.full(nb + nl, -1, np.int32)
    tc = np.where(f.true_ref >= 0, f.true_ref, nb - f.true_ref - 1)
    fc = np.where(f.false_ref >= 0, f.false_ref, nb - f.false_ref - 1)
    child = _one_parent((tc, fc), nb + nl)
    if child is None or child[roots].any() or len(np.unique(roots)) < len(roots):
        return None
    levels = f.levels  # the same sets of branch nodes, when tree_depths found them
    if levels is None:
        levels, front = [], roots[roots < nb]
        while len(front):
            levels.append(front)
            kids = np.concatenate((tc[front], fc[front]))
            front = kids[kids < nb]
    size = np.ones(nb + nl, np.int32)  # nodes in the subtree (forest_tables keeps counts below 2**31)
    kids = [(tc[level], fc[level]) for level in levels]
    for level, (t, fl) in zip(reversed(levels), reversed(kids)):
        size[level] = 1 + size[t] + size[fl]
    pos = np.full(nb + nl, -1, np.int32)
    pos[roots] = np.concatenate(([0], np.cumsum(size[roots])[:-1]))
    for level, (t, fl) in zip(levels, kids):
        at = pos[level] + 1
        pos[t] = at
        at += size[t]
        pos[fl] = at
    placed = np.flatnonzero(pos >= 0) if (pos < 0).any() else np.arange(nb + nl)
    perm = np.empty(len(placed), np.int64)
    perm[pos[placed]] = placed
    return perm, pos


def _reorder(tables: dict, rows: np.ndarray | None, perm: np.ndarray, leaves: np.ndarray, nt: int,
             layout: int) -> None:
    """Put the nodes of ``tables`` (written with their children's and roots' new places and leaf numbers)
    in the order ``perm`` (indices of the current order; the rows of ``nodes`` only when ``rows`` is that
    order, None: written in place already), the leaf weights in the order of ``leaves`` (old leaf numbers in
    the new order)."""
    if rows is not None:
        tables["nodes"] = tables["nodes"][rows]
    for k in ("splitd", "sets"):
        if tables[k] is not None:
            tables[k] = tables[k][perm]
    if layout == DENSE:
        tables["weights"] = tables["weights"].reshape(-1, nt)[leaves].reshape(-1)
        return
    if layout == SINGLE:
        pick = leaves
    else:
        starts = tables["starts"].astype(np.int64)
        counts = starts[leaves + 1] - starts[leaves]
        first = np.concatenate(([0], np.cumsum(counts)))
        pick = np.repeat(starts[leaves] - first[:-1], counts) + np.arange(first[-1])
        tables["starts"] = first.astype(np.int32)
    tables["weights"] = tables["weights"][pick]
    if tables["targets"] is not None:
        tables["targets"] = tables["targets"][pick]


def forest_tables(f, nt: int, agg: int, double_input: bool, node: Node) -> tuple[dict, dict]:
    """(tables, scalars) of the ``onnxc_forest`` struct of Forest ``f`` (runtime_c/onnxc_forest.h), by field
    name: the tables numpy arrays for the weights blob (None: NULL), the scalars ints. ``agg``: ONNXC_AGG_*."""
    nb, nl = len(f.feature), f.n_leaves
    if nb + nl >= 2**31 - 1 or len(f.leaf_weight) >= 2**31 - 1:
        raise ShapeError(f"{node.describe()}: {nb} branch nodes and {nl} leaves: more than 2**31 are not supported")
    if nb and int(f.feature.max()) >= 1 << FEATURE_BITS:
        raise ShapeError(f"{node.describe()}: feature index {int(f.feature.max())} is too large (at most "
                         f"{(1 << FEATURE_BITS) - 1})")
    member = bool((f.mode == 6).any())
    double = double_input or not _is_float(f.split)
    uniform = nb > 0 and not (double or member or (f.mode != f.mode[0]).any())
    mode = int(f.mode[0]) if uniform else (MODE_MEMBER if member else MODE_MASK)
    if uniform and mode != 5 and f.missing.any():
        mode += MISSING
    mask = _MASKS[f.mode] | f.missing.astype(np.uint32)
    split = f.split if uniform else f.split.copy()
    if not uniform:  # a NaN threshold: the outcome is constant (NEQ: true), but for tracked NaN features
        nan = np.isnan(split)
        mask[nan] = np.where(f.mode[nan] == 5, 0b1111, 0) | f.missing[nan]
        split[nan | (f.mode == 6)] = 0.0
    order = _preorder(f, nb, nl)  # rows are written at their places in it (or moved there when some are left out)
    perm, new = order if order is not None else (None, None)
    place = (lambda i: i) if new is None else new.__getitem__
    leaves = None if perm is None else perm[perm >= nb] - nb  # old leaf numbers, in the new order
    moved = perm is not None and len(perm) == nb + nl  # every node placed: rows written at their new places
    at_b, at_l = (new[:nb], new[nb:]) if moved else (slice(0, nb), slice(nb, nb + nl))
    nodes = np.zeros((nb + nl, 4), np.int32)
    nodes[at_b, 0] = (f.feature.astype(np.uint32) | (mask << MASK_SHIFT)).view(np.int32)
    with np.errstate(over="ignore"):
        nodes[at_b, 1] = split.astype(np.float32).view(np.int32)
    index = lambda ref: place(np.where(ref >= 0, ref, nb - ref - 1).astype(np.int32))  # noqa: E731
    nodes[at_b, 2], nodes[at_b, 3] = index(f.true_ref), index(f.false_ref)
    nodes[at_l, 0] = LEAF
    number = np.arange(nl, dtype=np.int32)  # a leaf's number (its weights), as the threshold's bits
    if leaves is not None:  # leaves numbered in the new order
        number = np.full(nl, -1, np.int32)
        number[leaves] = np.arange(len(leaves), dtype=np.int32)
    nodes[at_l, 1] = number
    nodes[at_l, 2] = nodes[at_l, 3] = place(np.arange(nb, nb + nl, dtype=np.int32))
    layout, targets, starts = _leaves(f, nt)
    sets = np.stack((f.set_off, f.set_len), axis=1).astype(np.int32) if member else None
    tables = {"nodes": nodes, "roots": index(f.roots), "depths": f.depths.astype(np.int32),
              "splitd": np.concatenate((split, np.zeros(nl))) if double else None,
              "sets": np.concatenate((sets, np.full((nl, 2), -1, np.int32))) if member else None,
              "members": f.members.astype(np.float64) if member else None,
              "weights": np.asarray(f.leaf_weight, np.float64), "targets": targets, "starts": starts}
    if perm is not None:
        _reorder(tables, None if moved else perm, perm, leaves, nt, layout)
    complete = complete_tables(tables["nodes"], tables["roots"], tables["depths"]) if uniform and mode <= 5 else None
    tables.update(complete or dict.fromkeys(("cbase", "cfeat", "csplit", "cleaf")))
    scalars = {"ntrees": len(f.roots), "ntargets": nt, "mode": mode, "layout": layout, "agg": agg}
    return tables, scalars


def complete_tables(nodes: np.ndarray, roots: np.ndarray, depths: np.ndarray) -> dict | None:
    """The complete trees (``cbase``, ``cfeat``, ``csplit``, ``cleaf`` of runtime_c/onnxc_forest.h) of the packed
    ``nodes`` (rows: feature | flags, threshold bits, true child, false child), one tree at each root with its
    depth; None when a tree is deeper than COMPLETE_DEPTH or the slots outgrow 4 times the nodes."""
    d = depths.astype(np.int64)
    if not len(d) or int(d.max()) > COMPLETE_DEPTH:
        return None
    inner = (np.int64(1) << d) - 1
    total = int(inner.sum())
    if total + len(d) > min(COMPLETE_SLOTS, 4 * len(nodes) + 4096):
        return None
    cbase = np.concatenate(([0], np.cumsum(inner)[:-1]))
    cfeat, csplit = np.zeros(total, np.int32), np.zeros(total, np.int32)
    cleaf = np.zeros(total + len(d), np.int32)
    trees, pos, ref = np.arange(len(d)), np.zeros(len(d), np.int64), roots.astype(np.int64)
    for level in range(int(d.max()) + 1):  # the slots of every tree at this level, left to right
        bottom = d[trees] == level  # a leaf: a leaf's children are itself, so it fills its subtree
        t = trees[bottom]
        cleaf[cbase[t] + t + pos[bottom]] = nodes[ref[bottom], 1]
        trees, pos, ref = trees[~bottom], pos[~bottom], ref[~bottom]
        slot = cbase[trees] + (1 << level) - 1 + pos
        cfeat[slot] = nodes[ref, 0] & ((1 << FEATURE_BITS) - 1)
        csplit[slot] = nodes[ref, 1]
        trees = np.repeat(trees, 2)
        pos = np.stack((2 * pos, 2 * pos + 1), axis=1).reshape(-1)
        ref = nodes[ref, 2:4].astype(np.int64).reshape(-1)
    return {"cbase": cbase.astype(np.int32), "cfeat": cfeat, "csplit": csplit.view(np.float32), "cleaf": cleaf}
