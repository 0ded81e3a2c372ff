"""Kernels of ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (ml opsets 1 and 3), the
tree ops scikit-learn models export to (skl2onnx, onnxmltools).

Both flatten their ``nodes_*`` attributes (nodes named by ``(treeid, nodeid)``, modes as strings)
into the Forest of ``trees.py`` with numpy (the (treeid, nodeid) pairs ranked into sorted keys that
children and weights are looked up in: no Python object per node) and run its walk over tables in the
weights blob: a branch node becomes a Forest node, a LEAF node becomes a Forest leaf whose
``target_*``/``class_*`` entries (several per leaf: one per class for a random forest) are a range of
the parallel target/weight tables. A tree is the run of nodes sharing a treeid, rooted at its first
node (which may be a leaf). v3's ``*_as_tensor`` attributes
are used at their own precision (double); v1's float lists are float. Validated at compile time,
with errors naming the node and attribute: list lengths, mode/aggregate/post-transform strings,
duplicate node ids, children and weights naming missing nodes, cycles, target/class ids, leaves
without a weight.

The numbers follow onnxruntime (what users compare with), computed in double where onnxruntime uses
float (inputs of float type compare against float thresholds either way; int inputs are converted
to float before the comparison, as in onnxruntime):

- Regressor: per target ``SUM`` / ``AVERAGE`` (sum / number of trees) / ``MIN`` / ``MAX`` of the
  leaf weights, plus ``base_values`` when it has one value per target; a target no leaf gave a
  weight reads 0 (base value or not); then ``post_transform`` — with one target only PROBIT applies
  (onnxruntime ignores the others there) and only a leaf's first weight counts.
- Classifier: per class the sum of the weights plus ``base_values``; a class that got no score (no
  weight, no base value) reads 0. More than 2 classes: the label is the first class of highest score
  among the classes that got one. Two classes (onnxruntime's binary rules, checked case by case
  against onnxruntime 1.32): with one score column (one class id, no base value or one, and
  no weight for the other class — gradient boosting) s becomes [1 - s, s] when every weight is >= 0
  (label: the second class when s > 0.5), else [-s, s] (label: second class when s > 0); LOGISTIC
  gives [logistic(-s), logistic(s)], PROBIT [probit(s), NaN] (onnxruntime leaves that cell
  unwritten), the other transforms none. Otherwise both columns are transformed; with two base
  values and a class-1 score, score 1 is base[1] + score 0 and score 0 its negation. The label
  thresholds are as above with one class id; with both class ids used (a binary random forest) the
  label is 1 when the class-1 score is > 0, else 0 — the literal 1/0 for ``classlabels_int64s`` (as
  onnxruntime), the class at index 1/0 for ``classlabels_strings``.
- PROBIT is onnxruntime's (and onnx.reference's) approximation sqrt(2) erfinv(2p - 1) with Winitzki's
  erfinv (a = 0.147), in float; SOFTMAX_ZERO leaves values with |v| <= 1e-7 at v exp(-max).

onnx.reference differs: a NaN feature follows ``nodes_missing_value_tracks_true`` alone (onnxruntime:
the comparison, so NaN goes true at BRANCH_NEQ); its regressor starts MIN/MAX at +-FLT_MAX (a target
no leaf reached keeps it), reads no ``*_as_tensor`` weights and applies no post transform; its binary classifier always writes [1 - s, s] (NONE, PROBIT) or
[-s, s] (others) and then applies the post transform to both columns, labelling by argmax. Where it
agrees with onnxruntime the tests compare with both. onnxruntime rejects double ``*_as_tensor``
attributes for float inputs and a single class label; onnxc accepts the former (comparing in
double) and rejects the latter at compile time.

The per-row C after the walk is in templates/trees_classic_regressor.c.j2 and
trees_classic_classifier.c.j2, with the post transforms in trees_classic_post.c.j2.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.ml import ML, classic_class_labels, classic_tree_targets

from ..cexpr import c_literal
from ..templating import render
from .base import KernelCtx, kernel
from .ctables import typed_table
from .ml_post import use_probit
from .trees import Forest, ints, walk_rows
from .trees_layout import tree_depths

_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
          "LEAF": -1}
_AGGS = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
_POSTS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
_POST_NAMES = {v: k for k, v in _POSTS.items()}
_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32})


@dataclass
class Classic:
    """A classic tree op's Forest plus what its kernel needs beside it."""

    forest: Forest
    weight_ids: np.ndarray       # every target/class id listed (leaf or not), for the classifier's rules
    weights_nonneg: bool         # every listed weight >= 0
    base: list[float]
    post: int
    agg: int
    always: set[int]             # targets some tree gives a weight on every leaf (no tracking needed)


def _bad(node: Node, msg: str) -> ShapeError:
    return ShapeError(f"{node.describe()}: {msg}")


def _reals(node: Node, name: str, wide: bool = True) -> np.ndarray | None:
    """``name`` (float list, rounded to float) or ``name_as_tensor`` (its own precision); not both. As
    float64, or with ``wide`` False the float list as float32 (to select from before widening)."""
    a, t = node.attr(name), node.attr(f"{name}_as_tensor")
    if a is not None and t is not None:
        raise _bad(node, f"only one of {name!r} and '{name}_as_tensor' may be set")
    if t is not None:
        return np.asarray(t, dtype=np.float64).reshape(-1)
    if a is not None:
        a = np.asarray(a, dtype=np.float32).reshape(-1)
        return a.astype(np.float64) if wide else a
    return None


def _string(node: Node, name: str, default: str, table: dict) -> int:
    s = str(node.attr(name, default))
    if s not in table:
        raise _bad(node, f"{name} {s!r} is not one of {', '.join(table)}")
    return table[s]


def _modes(node: Node) -> np.ndarray:
    """nodes_modes as codes (-1: LEAF); an unknown string is an error naming it."""
    strs = node.attr("nodes_modes")
    if strs is None:
        raise _bad(node, "attribute 'nodes_modes' is required")
    if hasattr(strs, "codes"):  # decoded as distinct values and codes (frontend/repeated.py)
        codes = np.array([_MODES.get(s, -2) for s in strs.vocab], np.int8)[strs.codes]
    else:
        codes = np.array(list(map(_MODES.get, strs, repeat(-2))), dtype=np.int8)
    if (codes == -2).any():
        wrong = sorted({str(strs[int(i)]) for i in np.flatnonzero(codes == -2)})
        raise _bad(node, f"nodes_modes holds {wrong[0]!r}, not one of {', '.join(_MODES)}")
    return codes


class _Index:
    """The node named (treeid, nodeid), found by binary search in the sorted keys of all nodes (ids packed
    into one int64 when they fit in 32 bits, else ranked among the ids used; nodes already in key order
    need no sort). When the ids are dense (trees 0, 1, 2... one after the other, each tree's nodes 0, 1,
    2..., as converters write them), a node is found by arithmetic: its tree's first position plus its id."""

    def __init__(self, node: Node, tids: np.ndarray, nids: np.ndarray):
        self.first = self.order = None
        if self._dense(tids, nids):  # ids in order, no duplicate: no keys needed
            return
        small = all(len(a) == 0 or (a.min() >= 0 and a.max() < 1 << 31) for a in (tids, nids))
        self.ranks = None if small else (np.unique(tids), np.unique(nids))
        key = self._key(tids, nids)
        if len(key) and (key[1:] > key[:-1]).all():  # in order already: no sort, no duplicate
            self.keys = key
            return
        self.order = np.argsort(key, kind="stable")
        self.keys = key[self.order]
        twice = np.flatnonzero(self.keys[1:] == self.keys[:-1])
        if len(twice):
            i = int(self.order[twice[0] + 1])
            raise _bad(node, f"node {int(nids[i])} of tree {int(tids[i])} is defined twice")

    def _dense(self, tids: np.ndarray, nids: np.ndarray) -> bool:
        """Whether ids are dense (trees 0, 1, 2... one after the other, each tree's nodes 0, 1, 2...); if so
        set ``first`` and ``count``: per tree its first position and its node count."""
        if not len(tids):
            return False
        new = tids[1:] != tids[:-1]
        first = np.flatnonzero(np.concatenate(([True], new)))
        if not ((tids[first] == np.arange(len(first))).all() and (nids[first] == 0).all()
                and ((nids[1:] - nids[:-1] == 1) | new).all()):
            return False
        self.first, self.count = first, np.diff(np.append(first, len(nids))).astype(np.uint64)
        return True

    def _key(self, tids: np.ndarray, nids: np.ndarray) -> np.ndarray:
        """One int64 per (tid, nid); -1 for pairs that cannot be a node's."""
        if self.ranks is None:
            ok = (tids >= 0) & (tids < 1 << 31) & (nids >= 0) & (nids < 1 << 31)
            return np.where(ok, (tids << 32) | nids, -1)
        t, k = _rank(self.ranks[0], tids), _rank(self.ranks[1], nids)
        return np.where((t >= 0) & (k >= 0), t * len(self.ranks[1]) + k, -1)

    def find(self, tids: np.ndarray, nids: np.ndarray) -> np.ndarray:
        """Per (tid, nid) the node's position, -1 where no such node exists."""
        if self.first is not None:  # negative ids compare as huge unsigned ones
            ok = tids.view(np.uint64) < len(self.first)
            t = tids if ok.all() else np.where(ok, tids, 0)
            ok &= nids.view(np.uint64) < self.count[t]
            at = self.first[t]
            at += nids
            return at if ok.all() else np.where(ok, at, -1)
        p = _rank(self.keys, self._key(tids, nids))
        return p if self.order is None else np.where(p >= 0, self.order[p], -1)


def _trees(tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per tree the position of its first node, in order of appearance; per node a tree number)."""
    new = np.ones(len(tids), bool)
    new[1:] = tids[1:] != tids[:-1]
    if len(tids) < 2 or (tids[1:] >= tids[:-1]).all():  # grouped, ascending: one pass
        tree = np.cumsum(new)
        tree -= 1
        return np.flatnonzero(new), tree
    _, first, tree = np.unique(tids, return_index=True, return_inverse=True)
    return np.sort(first), tree.reshape(-1)


def _rank(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per value of ``v`` its position in the sorted distinct values ``u``, -1 where absent."""
    if not len(u):
        return np.full(len(v), -1, np.int64)
    p = np.minimum(np.searchsorted(u, v), len(u) - 1)
    return np.where(u[p] == v, p, -1)


def classic(node: Node, prefix: str, n_out: int) -> Classic:
    """Validate a TreeEnsembleRegressor (``prefix`` "target") or TreeEnsembleClassifier ("class")
    with ``n_out`` targets/classes and flatten its trees; errors name the node and attribute."""
    tids, nids = ints(node, "nodes_treeids"), ints(node, "nodes_nodeids")
    feats, modes = ints(node, "nodes_featureids"), _modes(node)
    tnode, fnode = ints(node, "nodes_truenodeids"), ints(node, "nodes_falsenodeids")
    n = len(tids)
    values = _reals(node, "nodes_values", wide=False)  # widened once the branch nodes are selected
    missing = ints(node, "nodes_missing_value_tracks_true", np.zeros(0, np.int64))
    missing = missing if len(missing) else np.zeros(n, np.int64)
    for name, vals in (("nodes_nodeids", nids), ("nodes_featureids", feats), ("nodes_modes", modes),
                       ("nodes_truenodeids", tnode), ("nodes_falsenodeids", fnode),
                       ("nodes_values", values if values is not None else tids),
                       ("nodes_missing_value_tracks_true", missing)):
        if len(vals) != n:
            raise _bad(node, f"{name} has {len(vals)} entries, nodes_treeids has {n}")
    values = values if values is not None else np.zeros(n)
    index = _Index(node, tids, nids)
    branch = modes >= 0
    where = lambda i: f"node {int(nids[i])} of tree {int(tids[i])}"  # noqa: E731
    neg = np.flatnonzero(branch & (feats < 0))
    if len(neg):
        raise _bad(node, f"nodes_featureids of {where(neg[0])} is negative")
    b, lv = np.flatnonzero(branch), np.flatnonzero(~branch)
    ref = np.empty(n, np.int32 if n < 1 << 31 else np.int64)  # branch index, or -leaf - 1
    ref[b], ref[lv] = np.arange(len(b), dtype=ref.dtype), -1 - np.arange(len(lv), dtype=ref.dtype)
    kids, tids_b = [], tids[b]
    for child, which in ((tnode, "truenodeids"), (fnode, "falsenodeids")):
        c = index.find(tids_b, child[b])
        if (c < 0).any():
            i = int(np.flatnonzero(c < 0)[0])
            raise _bad(node, f"nodes_{which} of {where(b[i])} names node {int(child[b[i]])}, which does not "
                       "exist in that tree")
        kids.append(ref[c])
    leaf_start, targets, weights, wi, ww = _leaf_weights(node, prefix, n_out, index, ref, (tids, nids))
    first, tree = _trees(tids)
    roots = ref[first]
    f = Forest(roots, feats[b], modes[b], values[b].astype(np.float64), kids[0], kids[1], missing[b] != 0, targets, weights,
               leaf_start=leaf_start)
    f.depths = tree_depths(f, lambda k, t: _bad(node, f"tree {int(tids[b[k]])} has a cycle through node "
                                                      f"{int(nids[b[k]])}"))
    always = _always(tree[lv], leaf_start, targets, n_out)
    base = _reals(node, "base_values")
    return Classic(f, wi, bool((ww >= 0).all()), [] if base is None else base.tolist(),
                   _string(node, "post_transform", "NONE", _POSTS), _string(node, "aggregate_function", "SUM", _AGGS),
                   always)


def _leaf_weights(node: Node, prefix: str, n_out: int, index: _Index, ref: np.ndarray, ids: tuple) -> tuple:
    """(leaf_start, targets, weights) in CSR over the leaves (node order), and every listed id and weight
    (``ref``: per node its branch index, or -1 - its leaf index). Weights of branch nodes are ignored, as
    in onnxruntime."""
    wt, wn, wi = (ints(node, f"{prefix}_{s}", np.zeros(0, np.int64)) for s in ("treeids", "nodeids", "ids"))
    ww = _reals(node, f"{prefix}_weights")
    ww = np.zeros(0) if ww is None else ww
    for name, vals in ((f"{prefix}_nodeids", wn), (f"{prefix}_ids", wi), (f"{prefix}_weights", ww)):
        if len(vals) != len(wt):
            raise _bad(node, f"{name} has {len(vals)} entries, {prefix}_treeids has {len(wt)}")
    if ((wi < 0) | (wi >= n_out)).any():
        raise _bad(node, f"{prefix}_ids must be in [0, {n_out})")
    at = index.find(wt, wn)
    if (at < 0).any():
        q = int(np.flatnonzero(at < 0)[0])
        raise _bad(node, f"{prefix}_* entry {q} names node {int(wn[q])} of tree {int(wt[q])}, which does not exist")
    ref_at = ref[at]
    on_leaf = ref_at < 0
    leaf = -1 - ref_at[on_leaf]
    counts = np.bincount(leaf, minlength=int((ref < 0).sum()))
    if (counts == 0).any():
        i = int(np.flatnonzero(ref < 0)[np.flatnonzero(counts == 0)[0]])
        raise _bad(node, f"leaf {int(ids[1][i])} of tree {int(ids[0][i])} has no {prefix}_* weight")
    start = np.concatenate(([0], np.cumsum(counts)))
    if len(leaf) < 2 or (leaf[1:] >= leaf[:-1]).all():  # listed in leaf order already (as converters write)
        if on_leaf.all():  # (no weight on a branch node: nothing to drop)
            return start, wi, ww, wi, ww
        return start, wi[on_leaf], ww[on_leaf], wi, ww
    order = np.argsort(leaf, kind="stable")
    return start, wi[on_leaf][order], ww[on_leaf][order], wi, ww


def _always(leaf_tree: np.ndarray, start: np.ndarray, targets: np.ndarray, n_out: int) -> set[int]:
    """Targets some tree gives a weight on every one of its leaves (``leaf_tree``: per leaf its tree)."""
    counts = np.diff(start)
    if (counts == 1).all():  # one weight a leaf: the (leaf, target) pairs are the leaves
        tree_target = leaf_tree * n_out
        tree_target += targets
    else:
        pairs = np.unique(np.repeat(np.arange(len(counts)), counts) * n_out + targets)  # (leaf, target) once
        leaf, target = pairs // n_out, pairs % n_out
        tree_target = leaf_tree[leaf] * n_out + target
    n_trees = int(leaf_tree.max()) + 1 if len(leaf_tree) else 0
    per_tree = np.bincount(leaf_tree, minlength=n_trees)
    if n_trees * n_out <= 4 * len(tree_target) + (1 << 20):
        hits = np.bincount(tree_target, minlength=n_trees * n_out).reshape(n_trees, n_out)
        return {int(t) for t in np.flatnonzero((hits == per_tree[:, None]).any(axis=0))}
    tt, hits = np.unique(tree_target, return_counts=True)
    return {int(t) for t in np.unique(tt[hits == per_tree[tt // n_out]] % n_out)}


def _accepts(node: Node) -> str | None:
    if node.op_type == "TreeEnsembleClassifier" and len(classic_class_labels(node)[0]) < 2:
        return "a single class label is not supported (onnxruntime rejects it too)"
    return None


# -- TreeEnsembleRegressor ------------------------------------------------------------------------

@kernel("TreeEnsembleRegressor", domain=ML, types=_TYPES)
def tree_ensemble_regressor(ctx: KernelCtx) -> str:
    nt = classic_tree_targets(ctx.node)
    c = classic(ctx.node, "target", nt)
    if nt == 1:  # onnxruntime reads only the first weight of a leaf when there is one target
        f = c.forest
        f.leaf_target, f.leaf_weight = np.zeros(f.n_leaves, np.int64), f.leaf_weight[f.leaf_start[:-1]]
        f.leaf_start = None
    if c.base and len(c.base) != nt:
        raise _bad(ctx.node, f"base_values has {len(c.base)} entries for {nt} targets")
    track = not set(range(nt)) <= c.always  # a target no leaf reached reads 0, base value or not (onnxruntime)
    if c.post == _POSTS["PROBIT"]:
        use_probit(ctx)
    finish = render("trees_classic_regressor.c.j2", nt=nt, average=c.agg == _AGGS["AVERAGE"],
                    n_trees=max(len(c.forest.roots), 1),
                    base=typed_table(ctx, DType.DOUBLE, c.base) if c.base else None,
                    nan_zero=track or c.agg in (_AGGS["MIN"], _AGGS["MAX"]), post=_POST_NAMES[c.post],
                    post_s=nt > 1 or c.post == _POSTS["PROBIT"])
    return walk_rows(ctx, c.forest, nt, c.agg, finish, track=track)


# -- TreeEnsembleClassifier -----------------------------------------------------------------------

@kernel("TreeEnsembleClassifier", domain=ML, types=_TYPES, accepts=_accepts)
def tree_ensemble_classifier(ctx: KernelCtx) -> str:
    labels, ltype = classic_class_labels(ctx.node)
    nc = len(labels)
    c = classic(ctx.node, "class", nc)
    if len(c.base) > nc:
        raise _bad(ctx.node, f"base_values has {len(c.base)} entries for {nc} classes")
    track = not set(range(nc)) <= c.always
    label_tab = typed_table(ctx, ltype, labels)
    if c.post == _POSTS["PROBIT"]:
        use_probit(ctx)
    finish = render("trees_classic_classifier.c.j2", nc=nc, track=track, labels=label_tab,
                    base=[c_literal(v, DType.DOUBLE) for v in c.base], post=_POST_NAMES[c.post],
                    single_id=len(np.unique(c.weight_ids)) == 1, nonneg=c.weights_nonneg,
                    string_labels=ltype == DType.STRING)
    return walk_rows(ctx, c.forest, nc, 1, finish, track=track)
