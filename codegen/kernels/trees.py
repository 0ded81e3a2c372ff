"""Kernel of ai.onnx.ml TreeEnsemble (opset 5), and the Forest every tree-ensemble kernel runs.

A forest of ten thousand trees is data, not code: its attributes are validated and flattened with
numpy (never a Python object per node) into a Forest of flat arrays, which ``walk_rows`` stores in the
model's weights blob in the layout of runtime_c/onnxc_forest.h (16 bytes a node: feature and truth
mask, float threshold, children; leaf weights apart) for the runtime's walk. The generated C is the
same few lines whatever the number of nodes. Checks, with errors naming the node: every node and leaf
reference in range, trees acyclic (Kahn's layering over all trees at once, a numpy step per depth
level, which also gives each tree's depth for the complete-tree walk), targets in range, one membership set
per BRANCH_MEMBER node, feature indices below 2**28.

Semantics (as onnxruntime): comparisons run in double where a threshold is not a float or the input is
double (float otherwise: the same result), integer inputs are compared as float; a NaN feature follows
the true branch where ``nodes_missing_value_tracks_true`` says so. Leaf weights aggregate per target in
double (SUM, AVERAGE = SUM / number of trees, MIN, MAX; a target no leaf reached is 0), then
``post_transform`` applies per row: SOFTMAX, LOGISTIC, SOFTMAX_ZERO (zeros stay zero) or PROBIT (the
normal quantile, sqrt(2) erfinv(2x - 1)). Blocks of rows run on the runtime's pool when the model may
use several threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.ml import ML, tree_targets

from ..templating import render
from . import half, ml_post
from .base import KernelCtx, kernel
from .parcall import par_call
from .trees_layout import forest_tables, tree_depths


@dataclass
class Forest:
    """A tree ensemble as flat arrays. Node references: ``>= 0`` a branch node, ``< 0`` leaf ``-ref - 1``."""

    roots: np.ndarray        # per tree: its root (a reference)
    feature: np.ndarray      # per branch node: the feature it reads
    mode: np.ndarray         # per branch node: 0 LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER
    split: np.ndarray        # per branch node: the threshold (float64)
    true_ref: np.ndarray     # per branch node: the child taken when the test holds
    false_ref: np.ndarray
    missing: np.ndarray      # per branch node: a NaN feature takes the true branch
    leaf_target: np.ndarray  # per leaf weight: its target
    leaf_weight: np.ndarray  # per leaf weight (float64)
    leaf_start: np.ndarray | None = None  # CSR over the weights (n_leaves + 1); None: leaf l has weight l
    set_off: np.ndarray | None = None     # per branch node: its set in ``members`` (-1: not MEMBER)
    set_len: np.ndarray | None = None
    members: np.ndarray | None = None     # the sorted sets of BRANCH_MEMBER nodes, one after the other
    depths: np.ndarray | None = None      # per tree: branch nodes on its longest path (tree_depths)
    levels: list | None = None            # per depth the branch nodes there, when no node has two parents

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_start) - 1 if self.leaf_start is not None else len(self.leaf_weight)


def ints(node: Node, name: str, default=None) -> np.ndarray:
    """Attribute ``name`` as a flat int64 array; ``default`` when absent (an error when that is None)."""
    v = node.attr(name)
    if v is None:
        if default is None:
            raise ShapeError(f"{node.describe()}: attribute {name!r} is required")
        return np.asarray(default, dtype=np.int64)
    return np.asarray(v, dtype=np.int64).reshape(-1)


def floats(node: Node, name: str) -> np.ndarray:
    v = node.attr(name)
    return np.zeros(0) if v is None else np.asarray(v, dtype=np.float64).reshape(-1)


def membership(mode: np.ndarray, values: np.ndarray, bad) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(set_off, set_len, members): the NaN-delimited sets of ``values``, one per BRANCH_MEMBER node in node
    order, each sorted without repeats."""
    is_member = mode == 6
    ends = np.flatnonzero(np.isnan(values))
    if len(ends) != int(is_member.sum()):
        raise bad(f"membership_values holds {len(ends)} NaN-delimited sets for {int(is_member.sum())} "
                  "BRANCH_MEMBER nodes")
    set_of = np.cumsum(np.isnan(values)) - np.isnan(values)  # the set each value belongs to
    keep = ~np.isnan(values) & (set_of < len(ends))
    order = np.lexsort((values[keep], set_of[keep]))
    vals, sets = values[keep][order], set_of[keep][order]
    fresh = np.ones(len(vals), bool)
    fresh[1:] = (vals[1:] != vals[:-1]) | (sets[1:] != sets[:-1])
    vals, sets = vals[fresh], sets[fresh]
    counts = np.bincount(sets, minlength=len(ends))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    set_off = np.full(len(mode), -1, np.int64)
    set_len = np.zeros(len(mode), np.int64)
    set_off[is_member], set_len[is_member] = starts, counts
    return set_off, set_len, vals


def forest(node: Node) -> Forest:
    """Validate a TreeEnsemble's attributes and flatten its trees; errors name the node."""
    def bad(msg: str) -> ShapeError:
        return ShapeError(f"{node.describe()}: {msg}")

    feature, modes = ints(node, "nodes_featureids"), ints(node, "nodes_modes")
    tnode, fnode = ints(node, "nodes_truenodeids"), ints(node, "nodes_falsenodeids")
    tleaf, fleaf = ints(node, "nodes_trueleafs"), ints(node, "nodes_falseleafs")
    splits = floats(node, "nodes_splits")
    n = len(feature)
    missing = ints(node, "nodes_missing_value_tracks_true", np.zeros(n, np.int64))
    lists = {"nodes_modes": modes, "nodes_truenodeids": tnode, "nodes_falsenodeids": fnode,
             "nodes_trueleafs": tleaf, "nodes_falseleafs": fleaf, "nodes_splits": splits,
             "nodes_missing_value_tracks_true": missing}
    for name, vals in lists.items():
        if len(vals) != n:
            raise bad(f"{name} has {len(vals)} entries, nodes_featureids has {n}")
    targets, weights = ints(node, "leaf_targetids"), floats(node, "leaf_weights")
    if len(targets) != len(weights):
        raise bad(f"leaf_targetids has {len(targets)} entries, leaf_weights has {len(weights)}")
    nt = tree_targets(node)
    if ((targets < 0) | (targets >= nt)).any():
        raise bad(f"leaf_targetids must be in [0, {nt})")
    if ((modes < 0) | (modes > 6)).any():
        raise bad("nodes_modes entries must be in [0, 6]")
    if (feature < 0).any():
        raise bad("nodes_featureids must not be negative")
    refs = []
    for leaf, ref in ((tleaf, tnode), (fleaf, fnode)):
        limit = np.where(leaf != 0, len(targets), n)
        out = np.flatnonzero((ref < 0) | (ref >= limit))
        if len(out):
            k = int(out[0])
            raise bad(f"node {k} refers to {'leaf' if leaf[k] else 'node'} {int(ref[k])}, out of range "
                      f"[0, {int(limit[k])})")
        refs.append(np.where(leaf != 0, -ref - 1, ref))
    set_off, set_len, members = membership(modes, floats(node, "membership_values"), bad)
    roots = ints(node, "tree_roots")
    out = np.flatnonzero((roots < 0) | (roots >= n))
    if len(out):
        raise bad(f"tree root {int(roots[out[0]])} is out of range [0, {n})")
    f = Forest(roots, feature, modes, splits, refs[0], refs[1], missing != 0, targets, weights,
               set_off=set_off, set_len=set_len, members=members)
    f.depths = tree_depths(f, lambda k, t: bad(f"the tree at root {int(roots[t])} has a cycle through node {k}"))
    return f


def _accepts(node: Node) -> str | None:
    agg, post = int(node.attr("aggregate_function", 1)), int(node.attr("post_transform", 0))
    if agg not in (0, 1, 2, 3):
        return f"aggregate_function {agg} is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)"
    if post not in (0, 1, 2, 3, 4):
        return f"post_transform {post} is not one of 0..4"
    return None


POSTS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")  # post_transform values, by number


@kernel("TreeEnsemble", domain=ML, types={DType.FLOAT, DType.DOUBLE, DType.FLOAT16}, accepts=_accepts)
def tree_ensemble(ctx: KernelCtx) -> str:
    f = forest(ctx.node)
    y = ctx.outs[0]
    nt, agg, post = tree_targets(ctx.node), int(ctx.attr("aggregate_function", 1)), int(ctx.attr("post_transform", 0))
    if post == 4:
        ml_post.use(ctx)  # onnxc_probit
    store = half.store(y.dtype, "(float)acc[j]") if y.dtype in half.HALF else f"({y.ctype})acc[j]"
    finish = render("trees_finish.c.j2", nt=nt, average=agg == 0, n_trees=max(len(f.roots), 1),
                    nan_zero=agg in (2, 3), post=POSTS[post], store=store)
    return walk_rows(ctx, f, nt, agg, finish)


CHUNK = 128  # the most rows per call of the runtime walk, which takes them through one tree after another
_AGG = {0: 0, 1: 0, 2: 2, 3: 3}  # aggregate_function -> ONNXC_AGG_* (AVERAGE divides afterwards)


def walk_rows(ctx: KernelCtx, f: Forest, nt: int, agg: int, finish: str, track: bool = False) -> str:
    """The C body that walks every tree of ``f`` for every row of input 0 (shape [N, F] or [F]) and
    aggregates the weights of the leaves reached into ``double acc[nt]`` (``agg``: 0 AVERAGE and 1 SUM
    add, 2 MIN, 3 MAX); ``finish`` is C run per row ``r`` after the walk: it post-processes ``acc`` and
    writes the outputs. ``acc[j]`` is NaN where no leaf gave target j a weight when ``track`` is set or
    ``agg`` is MIN/MAX, else 0. Integer inputs compare as float (as onnxruntime's float thresholds).

    The forest's tables go to the weights blob (trees_layout.forest_tables); the runtime walks chunks of up
    to CHUNK rows (runtime_c/onnxc_forest.h), smaller ones when that gives each thread of the pool one.
    The C is templates/trees_walk.c.j2."""
    x = ctx.ins[0]
    ctx.include("onnxc_forest.h")
    n_rows, n_feat = ("1", x.dims[0]) if x.rank == 1 else (x.dims[0], x.dims[1])
    code = 1 if track and agg in (0, 1) else _AGG[agg]
    tabs, scalars = forest_tables(f, nt, code, x.dtype == DType.DOUBLE, ctx.node)
    ptr = {k: ctx.blob_table(k, v) if v is not None else "NULL" for k, v in tabs.items()}
    ptr["nodes"] = f"(const onnxc_tnode *){ptr['nodes']}"
    fields = [f".{k} = {v}" for k, v in ptr.items()] + [f".{k} = {v}" for k, v in scalars.items()]
    depth = max(1, round(math.log2(len(f.feature) / max(len(f.roots), 1) + 1)))  # a path's nodes, roughly
    return render("trees_walk.c.j2", n_rows=n_rows, n_feat=n_feat, chunk=CHUNK, who=ctx.who, fields=fields,
                  per=f"(n_ + {ctx.threads - 1}) / {ctx.threads}" if ctx.threads > 1 else "n_",
                  top=int(f.feature.max()) if len(f.feature) else None,
                  work=f"n_ * {max(len(f.roots), 1) * depth * 4}",  # about 4 elements' time per node visited
                  par=par_call(ctx), nt=nt, finish=finish, **_block(ctx, nt))


def _block(ctx: KernelCtx, nt: int) -> dict:
    """How a chunk's scores are held and computed: on the stack or not, the runtime's scoring function or
    none (integer and half inputs: converted to float first, ``conv``)."""
    x = ctx.ins[0]
    values = {"on_stack": CHUNK * max(nt, 1) <= 4096, "stack": CHUNK * max(nt, 1), "scores": None, "conv": None}
    if x.dtype in (DType.FLOAT, DType.DOUBLE):
        values["scores"] = "onnxc_forest_scores" if x.dtype == DType.FLOAT else "onnxc_forest_scores_f64"
    elif x.dtype in half.HALF:
        half.use(ctx)
        values["conv"] = half.load(x.dtype, "in0[r0_ * f_ + i_]")
    else:  # integer inputs compare as float
        values["conv"] = "(float)in0[r0_ * f_ + i_]"
    return values


from . import trees_classic  # noqa: E402,F401  (registers TreeEnsembleClassifier/Regressor)
