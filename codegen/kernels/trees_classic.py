"""Kernels of ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (ml opsets 1 and 3), the
tree ops scikit-learn models export to (skl2onnx, onnxmltools).

Both flatten their ``nodes_*`` attributes (nodes named by ``(treeid, nodeid)``, modes as strings)
into the Forest of ``trees.py`` and run its row walk: a branch node becomes a Forest node, a LEAF
node becomes a Forest leaf whose ``target_*``/``class_*`` entries (several per leaf: one per class
for a random forest) are a range of the parallel target/weight tables. A tree is the run of nodes
sharing a treeid, rooted at its first node (which may be a leaf). v3's ``*_as_tensor`` attributes
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.ml import ML, classic_class_labels, classic_tree_targets

from .base import KernelCtx, kernel
from .ctables import literal, typed_table
from .ml_post import use_probit
from .trees import Forest, _check_acyclic, walk_rows

_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
          "LEAF": -1}
_AGGS = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
_POSTS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32})

@dataclass
class Classic:
    """A classic tree op's Forest plus what its kernel needs beside it."""

    forest: Forest
    weight_ids: list[int]        # every target/class id listed (leaf or not), for the classifier's rules
    weights_nonneg: bool         # every listed weight >= 0
    base: list[float]
    post: int
    agg: int
    always: set[int]             # targets some tree gives a weight on every path (no tracking needed)


def _bad(node: Node, msg: str) -> ShapeError:
    return ShapeError(f"{node.describe()}: {msg}")


def _list(node: Node, name: str, kind=int, required: bool = True) -> list:
    v = node.attr(name)
    if v is None:
        if required:
            raise _bad(node, f"attribute {name!r} is required")
        return []
    return [kind(x) for x in np.asarray(v).reshape(-1).tolist()] if kind is not str else [str(x) for x in v]


def _reals(node: Node, name: str) -> list[float] | None:
    """``name`` (float list, rounded to float) or ``name_as_tensor`` (its own precision); not both."""
    a, t = node.attr(name), node.attr(f"{name}_as_tensor")
    if a is not None and t is not None:
        raise _bad(node, f"only one of {name!r} and '{name}_as_tensor' may be set")
    if t is not None:
        return [float(v) for v in np.asarray(t, dtype=np.float64).reshape(-1).tolist()]
    if a is not None:
        return [float(np.float32(v)) for v in np.asarray(a, dtype=np.float64).reshape(-1).tolist()]
    return None


def _string(node: Node, name: str, default: str, table: dict) -> int:
    s = str(node.attr(name, default))
    if s not in table:
        raise _bad(node, f"{name} {s!r} is not one of {', '.join(table)}")
    return table[s]


def classic(node: Node, prefix: str, n_out: int) -> Classic:
    """Validate a TreeEnsembleRegressor (``prefix`` "target") or TreeEnsembleClassifier ("class")
    with ``n_out`` targets/classes and flatten its trees; errors name the node and attribute."""
    tids, nids = _list(node, "nodes_treeids"), _list(node, "nodes_nodeids")
    feats, modes_s = _list(node, "nodes_featureids"), _list(node, "nodes_modes", str)
    tnode, fnode = _list(node, "nodes_truenodeids"), _list(node, "nodes_falsenodeids")
    n = len(tids)
    values = _reals(node, "nodes_values")
    missing = _list(node, "nodes_missing_value_tracks_true", required=False) or [0] * n
    for name, vals in (("nodes_nodeids", nids), ("nodes_featureids", feats), ("nodes_modes", modes_s),
                       ("nodes_truenodeids", tnode), ("nodes_falsenodeids", fnode),
                       ("nodes_values", values if values is not None else [0.0] * n),
                       ("nodes_missing_value_tracks_true", missing)):
        if len(vals) != n:
            raise _bad(node, f"{name} has {len(vals)} entries, nodes_treeids has {n}")
    values = values or [0.0] * n
    bad_modes = sorted({m for m in modes_s if m not in _MODES})
    if bad_modes:
        raise _bad(node, f"nodes_modes holds {bad_modes[0]!r}, not one of {', '.join(_MODES)}")
    modes = [_MODES[m] for m in modes_s]
    index: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(tids, nids)):
        if key in index:
            raise _bad(node, f"node {key[1]} of tree {key[0]} is defined twice")
        index[key] = i
    # weights: (treeid, nodeid, id, weight) per entry
    wt, wn, wi = (_list(node, f"{prefix}_{s}", required=False) for s in ("treeids", "nodeids", "ids"))
    ww = _reals(node, f"{prefix}_weights") or []
    for name, vals in ((f"{prefix}_nodeids", wn), (f"{prefix}_ids", wi), (f"{prefix}_weights", ww)):
        if len(vals) != len(wt):
            raise _bad(node, f"{name} has {len(vals)} entries, {prefix}_treeids has {len(wt)}")
    if any(not 0 <= t < n_out for t in wi):
        raise _bad(node, f"{prefix}_ids must be in [0, {n_out})")
    per_node: dict[int, list[int]] = {}
    for q, key in enumerate(zip(wt, wn)):
        if key not in index:
            raise _bad(node, f"{prefix}_* entry {q} names node {key[1]} of tree {key[0]}, which does not exist")
        per_node.setdefault(index[key], []).append(q)  # weights of branch nodes are ignored, as in onnxruntime
    # slots: branch nodes -> Forest nodes, leaves -> Forest leaves (refs -l - 1)
    ref, n_branch, n_leaf = [0] * n, 0, 0
    for i, m in enumerate(modes):
        if m < 0:
            ref[i], n_leaf = -n_leaf - 1, n_leaf + 1
        else:
            ref[i], n_branch = n_branch, n_branch + 1
    f = Forest([], [], [], [], [], [], [], [], [], leaf_start=[0])
    leaf_sets: dict[int, set[int]] = {}
    for i, m in enumerate(modes):
        if m < 0:
            qs = per_node.get(i)
            if not qs:
                raise _bad(node, f"leaf {nids[i]} of tree {tids[i]} has no {prefix}_* weight")
            f.leaf_target += [wi[q] for q in qs]
            f.leaf_weight += [ww[q] for q in qs]
            f.leaf_start.append(len(f.leaf_target))
            leaf_sets[-ref[i] - 1] = {wi[q] for q in qs}
            continue
        if feats[i] < 0:
            raise _bad(node, f"nodes_featureids of node {nids[i]} of tree {tids[i]} is negative")
        f.feature.append(feats[i])
        f.mode.append(m)
        f.split.append(values[i])
        f.missing.append(1 if missing[i] else 0)
        for child, refs, which in ((tnode[i], f.true_ref, "truenodeids"), (fnode[i], f.false_ref, "falsenodeids")):
            c = index.get((tids[i], child))
            if c is None:
                raise _bad(node, f"nodes_{which} of node {nids[i]} of tree {tids[i]} names node {child}, "
                           "which does not exist in that tree")
            refs.append(ref[c])
    f.set_off, f.set_len = [0] * n_branch, [0] * n_branch
    seen: set[int] = set()
    always: set[int] = set()
    for i, t in enumerate(tids):
        if t in seen:
            continue
        seen.add(t)
        root = ref[i]
        f.roots.append(root)
        if root >= 0:
            _check_acyclic(f, root, lambda msg: _bad(node, msg))
        always |= _reached_by_all(f, root, leaf_sets)
    return Classic(f, wi, all(w >= 0 for w in ww), _reals(node, "base_values") or [],
                   _string(node, "post_transform", "NONE", _POSTS), _string(node, "aggregate_function", "SUM", _AGGS),
                   always)


def _reached_by_all(f: Forest, root: int, leaf_sets: dict[int, set[int]]) -> set[int]:
    """Targets every leaf of the tree at ``root`` carries a weight for."""
    out: set[int] | None = None
    stack, done = [root], set()
    while stack:
        k = stack.pop()
        if k < 0:
            s = leaf_sets[-k - 1]
            out = set(s) if out is None else out & s
        elif k not in done:
            done.add(k)
            stack += [f.true_ref[k], f.false_ref[k]]
    return out or set()


# -- post transforms (onnxruntime's write_scores), on double s[0..c) ------------------------------

def _post(ctx: KernelCtx, post: int, s: str, c: int) -> list[str]:
    if post == 1:
        return [f"{{ double m_ = {s}[0], t_ = 0.0;",
                f"for (int64_t j = 1; j < {c}; j++) if ({s}[j] > m_) m_ = {s}[j];",
                f"for (int64_t j = 0; j < {c}; j++) {{ {s}[j] = exp({s}[j] - m_); t_ += {s}[j]; }}",
                f"for (int64_t j = 0; j < {c}; j++) {s}[j] /= t_; }}"]
    if post == 2:
        return [f"for (int64_t j = 0; j < {c}; j++) {s}[j] = {_logistic(s + '[j]')};"]
    if post == 3:
        return [f"{{ double m_ = {s}[0], t_ = 0.0;",
                f"for (int64_t j = 1; j < {c}; j++) if ({s}[j] > m_) m_ = {s}[j];",
                "const double e_ = exp(-m_);",
                f"for (int64_t j = 0; j < {c}; j++) {{ if ({s}[j] > 1e-7 || {s}[j] < -1e-7) "
                f"{{ {s}[j] = exp({s}[j] - m_); t_ += {s}[j]; }} else {s}[j] *= e_; }}",
                f"for (int64_t j = 0; j < {c}; j++) {s}[j] /= t_; }}"]
    if post == 4:
        use_probit(ctx)
        return [f"for (int64_t j = 0; j < {c}; j++) {s}[j] = onnxc_ml_probit({s}[j]);"]
    return []


def _logistic(v: str) -> str:
    return f"(({v}) < 0 ? 1.0 - 1.0 / (1.0 + exp({v})) : 1.0 / (1.0 + exp(-({v}))))"


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
        f.leaf_target, f.leaf_weight = [0] * (len(f.leaf_start) - 1), [f.leaf_weight[q] for q in f.leaf_start[:-1]]
        f.leaf_start = None
    if c.base and len(c.base) != nt:
        raise _bad(ctx.node, f"base_values has {len(c.base)} entries for {nt} targets")
    track = not set(range(nt)) <= c.always  # a target no leaf reached reads 0, base value or not (onnxruntime)
    finish = []
    if c.agg == 0:
        finish.append(f"for (int64_t j = 0; j < {nt}; j++) acc[j] /= {max(len(c.forest.roots), 1)};")
    if c.base:
        base = typed_table(ctx, DType.DOUBLE, c.base)
        finish.append(f"for (int64_t j = 0; j < {nt}; j++) acc[j] += {base}[j];")
    if track or c.agg in (2, 3):
        finish.append(f"for (int64_t j = 0; j < {nt}; j++) if (acc[j] != acc[j]) acc[j] = 0.0;")
    finish += _post(ctx, c.post, "acc", nt) if nt > 1 or c.post == 4 else []
    finish.append(f"for (int64_t j = 0; j < {nt}; j++) out0[r * {nt} + j] = (float)acc[j];")
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
    has = (lambda k: f"(acc[{k}] == acc[{k}])") if track else (lambda k: "1")
    lines = ([f"int h_[{nc}];", f"for (int64_t j = 0; j < {nc}; j++) {{ h_[j] = acc[j] == acc[j]; "
              "if (!h_[j]) acc[j] = 0.0; }"] if track else [])
    has = (lambda k: f"h_[{k}]") if track else has
    label_tab = typed_table(ctx, ltype, labels)
    if nc > 2:
        for k, b in enumerate(c.base):
            lines.append(f"acc[{k}] += {literal(b, DType.DOUBLE)};" + (f" h_[{k}] = 1;" if track else ""))
        lines += ["int64_t best = -1;", f"for (int64_t j = 0; j < {nc}; j++) "
                  f"if ({has('j')} && (best < 0 || acc[j] > acc[best])) best = j;",
                  "if (best < 0) best = 0;", f"out0[r] = {label_tab}[best];"]
        lines += _post(ctx, c.post, "acc", nc)
        lines.append(f"for (int64_t j = 0; j < {nc}; j++) out1[r * {nc} + j] = (float)acc[j];")
    else:
        lines += _binary(ctx, c, has, label_tab, ltype)
    return walk_rows(ctx, c.forest, nc, 1, lines, track=track)


def _binary(ctx: KernelCtx, c: Classic, has, label_tab: str, ltype: DType) -> list[str]:
    """onnxruntime's two-class rules (see the module doc) on acc[0..2), with flags ``has(k)``."""
    b = [literal(v, DType.DOUBLE) for v in c.base]
    lines = ["double s0 = acc[0], s1 = acc[1];", f"int h0 = {has(0)}, h1 = {has(1)}, pop = 0, was = -1;"]
    if len(b) == 2:
        lines.append(f"if (h1) {{ s1 = {b[1]} + s0; s0 = -s1; }} else {{ s1 += {b[1]}; s0 += {b[0]}; }}")
    elif len(b) == 1:
        lines += [f"s0 += {b[0]};", "pop = !h1;"]
    else:
        lines += ["was = 3;", "pop = !h1;"]
    lines += ["if (!h0) s0 = 0.0;", "if (!h1) s1 = 0.0;",  # a score no weight gave reads as 0
              "const double pos = (!pop && h1) ? s1 : s0;"]
    if len(set(c.weight_ids)) == 1:  # onnxruntime's binary_case_
        if c.weights_nonneg:
            lines += ["const int lab = pos > 0.5;", "if (pop) was = lab ? 0 : 1;"]
        else:
            lines += ["const int lab = pos > 0.0;", "if (pop) was = lab ? 2 : 3;"]
        lines.append(f"out0[r] = {label_tab}[lab];")
    else:
        lines.append("const int lab = pos > 0.0;")
        lines.append(f"out0[r] = {label_tab}[lab];" if ltype == DType.STRING else "out0[r] = lab;")
    lines += ["double z[2] = {s0, s1};", "if (!pop) {", *_post(ctx, c.post, "z", 2), "} else {"]
    if c.post == 4:
        use_probit(ctx)
        lines.append("z[0] = onnxc_ml_probit(s0); z[1] = NAN;")
    elif c.post == 2:
        lines.append(f"z[0] = {_logistic('-s0')}; z[1] = {_logistic('s0')};")
    else:
        lines += ["if (was == 0 || was == 1) { z[0] = 1.0 - s0; z[1] = s0; }",
                  "else if (was >= 2) { z[0] = -s0; z[1] = s0; }", "else { z[0] = s0; z[1] = NAN; }"]
    lines += ["}", "out1[r * 2] = (float)z[0];", "out1[r * 2 + 1] = (float)z[1];"]
    return lines
