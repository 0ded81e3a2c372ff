"""Kernel of ai.onnx.ml TreeEnsemble (opset 5).

The attributes are validated at compile time (every reachable node and leaf index in range, trees
acyclic, targets in range, one membership set per BRANCH_MEMBER node) and flattened into static
tables: per node its feature, mode, threshold and two child references (``>= 0``: a node, ``< 0``:
leaf ``-ref - 1``). At run time every row walks every tree; comparisons run in double, as in the
reference, and a NaN feature follows the true branch where ``nodes_missing_value_tracks_true`` says
so. Leaf weights aggregate per target in double (SUM, AVERAGE = SUM / number of trees, MIN, MAX; a
target no leaf reached is 0, as in onnxruntime), then ``post_transform`` applies per row: SOFTMAX,
LOGISTIC, SOFTMAX_ZERO (zeros stay zero) or PROBIT (the normal quantile, sqrt(2) erfinv(2x - 1)).
Rows run on the runtime's pool when the model may use several threads; float inputs of single-mode
forests take the runtime's block walk (runtime_c/onnxc_forest.h).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.ml import ML, tree_targets

from . import half, ml_post
from .base import KernelCtx, kernel
from .ctables import double_table, float_lit, int_table, table
from .parfor import par_for

_CMP = {0: "v <= {s}", 1: "v < {s}", 2: "v >= {s}", 3: "v > {s}", 4: "v == {s}", 5: "v != {s}"}


@dataclass
class Forest:
    """A TreeEnsemble's trees as flat tables (see the module doc)."""

    roots: list[int]
    feature: list[int]
    mode: list[int]
    split: list[float]
    true_ref: list[int]
    false_ref: list[int]
    missing: list[int]
    leaf_target: list[int]
    leaf_weight: list[float]
    leaf_start: list[int] | None = None  # CSR over the leaf_* lists (n_leaves + 1); None: leaf l has entry l
    set_off: list[int] = field(default_factory=list)
    set_len: list[int] = field(default_factory=list)
    members: list[float] = field(default_factory=list)


def _ints(node: Node, name: str, default=None) -> list[int]:
    v = node.attr(name, default)
    if v is None:
        raise ShapeError(f"{node.describe()}: attribute {name!r} is required")
    return [int(x) for x in np.asarray(v).reshape(-1).tolist()]


def _floats(node: Node, name: str) -> list[float]:
    v = node.attr(name)
    return [] if v is None else [float(x) for x in np.asarray(v, dtype=np.float64).reshape(-1).tolist()]


def forest(node: Node) -> Forest:
    """Validate a TreeEnsemble's attributes and flatten its trees; errors name the node."""
    def bad(msg: str) -> ShapeError:
        return ShapeError(f"{node.describe()}: {msg}")

    feature, modes = _ints(node, "nodes_featureids"), _ints(node, "nodes_modes")
    tnode, fnode = _ints(node, "nodes_truenodeids"), _ints(node, "nodes_falsenodeids")
    tleaf, fleaf = _ints(node, "nodes_trueleafs"), _ints(node, "nodes_falseleafs")
    splits = _floats(node, "nodes_splits")
    n = len(feature)
    missing = _ints(node, "nodes_missing_value_tracks_true", [0] * n)
    lists = {"nodes_modes": modes, "nodes_truenodeids": tnode, "nodes_falsenodeids": fnode,
             "nodes_trueleafs": tleaf, "nodes_falseleafs": fleaf, "nodes_splits": splits,
             "nodes_missing_value_tracks_true": missing}
    for name, vals in lists.items():
        if len(vals) != n:
            raise bad(f"{name} has {len(vals)} entries, nodes_featureids has {n}")
    targets, weights = _ints(node, "leaf_targetids"), _floats(node, "leaf_weights")
    if len(targets) != len(weights):
        raise bad(f"leaf_targetids has {len(targets)} entries, leaf_weights has {len(weights)}")
    nt = tree_targets(node)
    if any(not 0 <= t < nt for t in targets):
        raise bad(f"leaf_targetids must be in [0, {nt})")
    if any(not 0 <= m <= 6 for m in modes):
        raise bad("nodes_modes entries must be in [0, 6]")
    if any(f < 0 for f in feature):
        raise bad("nodes_featureids must not be negative")
    f = Forest([], feature, modes, splits, [], [], [1 if m else 0 for m in missing], targets, weights)
    for k in range(n):
        for leaf, ref, refs in ((tleaf[k], tnode[k], f.true_ref), (fleaf[k], fnode[k], f.false_ref)):
            limit = len(targets) if leaf else n
            if not 0 <= ref < limit:
                raise bad(f"node {k} refers to {'leaf' if leaf else 'node'} {ref}, out of range [0, {limit})")
            refs.append(-ref - 1 if leaf else ref)
    members = _floats(node, "membership_values")
    sets, cur = [], []
    for v in members:
        if math.isnan(v):
            sets.append(sorted(set(cur)))
            cur = []
        else:
            cur.append(v)
    n_member = sum(1 for m in modes if m == 6)
    if len(sets) != n_member:
        raise bad(f"membership_values holds {len(sets)} NaN-delimited sets for {n_member} BRANCH_MEMBER nodes")
    it = iter(sets)
    for m in modes:
        s = next(it) if m == 6 else []
        f.set_off.append(len(f.members))
        f.set_len.append(len(s))
        f.members += s
    for r in _ints(node, "tree_roots"):
        if not 0 <= r < n:
            raise bad(f"tree root {r} is out of range [0, {n})")
        _check_acyclic(f, r, bad)
        f.roots.append(r)
    return f


def _check_acyclic(f: Forest, root: int, bad) -> None:
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    stack = [(root, 0)]
    while stack:
        k, i = stack.pop()
        if i == 0:
            if state.get(k) == 1:
                raise bad(f"the tree at root {root} has a cycle through node {k}")
            if state.get(k) == 2:
                continue
            state[k] = 1
        children = [c for c in (f.true_ref[k], f.false_ref[k]) if c >= 0]
        if i < len(children):
            stack.append((k, i + 1))
            c = children[i]
            if state.get(c) == 1:
                raise bad(f"the tree at root {root} has a cycle through node {c}")
            if state.get(c) != 2:
                stack.append((c, 0))
        else:
            state[k] = 2


def _accepts(node: Node) -> str | None:
    agg, post = int(node.attr("aggregate_function", 1)), int(node.attr("post_transform", 0))
    if agg not in (0, 1, 2, 3):
        return f"aggregate_function {agg} is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)"
    if post not in (0, 1, 2, 3, 4):
        return f"post_transform {post} is not one of 0..4"
    return None


def _post(post: int, t: int) -> list[str]:
    """C applying post_transform ``post`` to ``acc[0..t)``."""
    if post == 1:
        return ["{ double m = acc[0], s = 0.0;", f"for (int64_t j = 1; j < {t}; j++) if (acc[j] > m) m = acc[j];",
                f"for (int64_t j = 0; j < {t}; j++) {{ acc[j] = exp(acc[j] - m); s += acc[j]; }}",
                f"for (int64_t j = 0; j < {t}; j++) acc[j] /= s; }}"]
    if post == 2:
        return [f"for (int64_t j = 0; j < {t}; j++) acc[j] = 1.0 / (1.0 + exp(-acc[j]));"]
    if post == 3:
        return ["{ double m = acc[0], s = 0.0;", f"for (int64_t j = 1; j < {t}; j++) if (acc[j] > m) m = acc[j];",
                f"for (int64_t j = 0; j < {t}; j++) if (acc[j] != 0.0) {{ acc[j] = exp(acc[j] - m); s += acc[j]; }}",
                f"if (s > 0.0) for (int64_t j = 0; j < {t}; j++) acc[j] /= s; }}"]
    if post == 4:
        return [f"for (int64_t j = 0; j < {t}; j++) acc[j] = onnxc_probit(acc[j]);"]
    return []


@kernel("TreeEnsemble", domain=ML, types={DType.FLOAT, DType.DOUBLE, DType.FLOAT16}, accepts=_accepts)
def tree_ensemble(ctx: KernelCtx) -> str:
    f = forest(ctx.node)
    y = ctx.outs[0]
    nt, agg, post = tree_targets(ctx.node), int(ctx.attr("aggregate_function", 1)), int(ctx.attr("post_transform", 0))
    if post == 4:
        ml_post.use(ctx)  # onnxc_probit
    finish = []
    if agg == 0:
        finish.append(f"for (int64_t j = 0; j < {nt}; j++) acc[j] /= {max(len(f.roots), 1)};")
    if agg in (2, 3):
        finish.append(f"for (int64_t j = 0; j < {nt}; j++) if (acc[j] != acc[j]) acc[j] = 0.0;")
    finish += _post(post, nt)
    store = half.store(y.dtype, "(float)acc[j]") if y.dtype in half.HALF else f"({y.ctype})acc[j]"
    finish.append(f"for (int64_t j = 0; j < {nt}; j++) out0[r * {nt} + j] = {store};")
    return walk_rows(ctx, f, nt, agg, finish)


def _leaf_layout(f: Forest, nt: int) -> str:
    """"single" (leaf l: entry l), "dense" (leaf l: targets 0..nt-1 at l * nt) or "csr"."""
    if f.leaf_start is None:
        return "single"
    starts = f.leaf_start
    if all(b - a == nt for a, b in zip(starts, starts[1:])) and all(t == k % nt for k, t in enumerate(f.leaf_target)):
        return "dense"
    if all(b - a == 1 for a, b in zip(starts, starts[1:])):
        return "single"
    return "csr"


def walk_rows(ctx: KernelCtx, f: Forest, nt: int, agg: int, finish: list[str], track: bool = False) -> str:
    """The C body that walks every tree of ``f`` for every row of input 0 (shape [N, F] or [F]) and
    aggregates the weights of the leaves reached into ``double acc[nt]`` (``agg``: 0 AVERAGE and 1 SUM
    add, 2 MIN, 3 MAX); ``finish`` is C run per row ``r`` after the walk: it post-processes ``acc`` and
    writes the outputs. ``acc[j]`` is NaN where no leaf gave target j a weight when ``track`` is set or
    ``agg`` is MIN/MAX, else 0. Integer inputs compare as float (as onnxruntime's float thresholds).

    Float inputs of forests whose nodes all compare one way (<=, <, >=, >) against float thresholds, with
    no missing-value tracking, take the runtime's block walk (runtime_c/onnxc_forest.h: 16 rows through one
    tree at a time); the others walk row by row here. Rows (blocks of rows) run on the runtime's pool."""
    x = ctx.ins[0]
    if x.dtype in half.HALF:
        half.use(ctx)
    n_rows, n_feat = ("1", x.dims[0]) if x.rank == 1 else (x.dims[0], x.dims[1])
    head = [f"const int64_t n_ = {n_rows}, f_ = {n_feat};"]
    lines = list(head)
    if f.feature:
        lines.append(f"if (f_ <= {max(f.feature)}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the trees read "
                     f"feature {max(f.feature)}, but the input has %lld features\", {ctx.who}, (long long)f_);")
    exact_single = all(math.isnan(s) or float(np.float32(s)) == s for s in f.split)
    ntrees = len(f.roots)
    depth = max(1, round(math.log2(len(f.feature) / max(ntrees, 1) + 1)))  # a path's nodes, roughly
    work = f"n_ * {max(ntrees, 1) * depth * 4}"  # about 4 elements' time per node visited (a row block's step)
    tab = {"lw": double_table(ctx, f.leaf_weight)}
    if x.dtype == DType.FLOAT and f.feature and exact_single and len(set(f.mode)) == 1 and f.mode[0] in _CMP \
            and f.mode[0] < 4 and not any(f.missing):
        body = _block_walk(ctx, f, nt, agg, finish, track, tab)
        return "\n".join(lines + par_for(ctx, "b_", f"(n_ + {BLOCK - 1}) / {BLOCK}", body, work=work, head=head)
                         + ["return 0;"])
    body = _row_walk(ctx, f, nt, agg, finish, track, tab, exact_single)
    return "\n".join(lines + par_for(ctx, "r", "n_", body, work=work, head=head) + ["return 0;"])


BLOCK = 16  # rows of one block walk (runtime_c/onnxc_forest.h ONNXC_FOREST_BLOCK)


def _init(agg: int, track: bool) -> str:
    return "0.0" if agg in (0, 1) and not track else "NAN"  # NaN marks a target no leaf reached


def _block_walk(ctx: KernelCtx, f: Forest, nt: int, agg: int, finish: list[str], track: bool,
                tab: dict) -> list[str]:
    """Body of one block ``b_`` of rows: the runtime walks them to their leaves, then per row the leaves'
    weights are aggregated and ``finish`` runs."""
    ctx.helper("onnxc_forest", '#include "onnxc_forest.h"')
    nb = len(f.feature)
    n_leaves = len(f.leaf_start) - 1 if f.leaf_start is not None else len(f.leaf_weight)
    node = lambda ref: ref if ref >= 0 else nb - ref - 1  # noqa: E731  (leaf l is node nb + l)
    rows = [f"{{{ft}, {float_lit(sp, True)}, {node(t)}, {node(fl)}}}" for ft, sp, t, fl in
            zip(f.feature, f.split, f.true_ref, f.false_ref)]
    rows += [f"{{0, 0.0f, {nb + q}, {nb + q}}}" for q in range(n_leaves)]
    nodes = table(ctx, "onnxc_tnode", rows)
    roots = int_table(ctx, [node(r) for r in f.roots], "int32_t")
    depths = int_table(ctx, _depths(f), "int32_t")
    nt_ = len(f.roots)
    return [f"const int64_t r0_ = b_ * {BLOCK}, rn_ = n_ - r0_ < {BLOCK} ? n_ - r0_ : {BLOCK};",
            f"int32_t *lv_ = (int32_t *)malloc((size_t)(rn_ * {nt_}) * sizeof(int32_t));",
            f"if (!lv_) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ctx.who});",
            f"onnxc_forest_leaves({f.mode[0]}, {nodes}, {roots}, {depths}, {nt_}, {nb}, in0 + r0_ * f_, f_, rn_, lv_);",
            "for (int64_t r = r0_; r < r0_ + rn_; r++) {",
            f"double acc[{max(nt, 1)}];",
            f"for (int64_t j = 0; j < {nt}; j++) acc[j] = {_init(agg, track)};",
            f"for (int64_t t = 0; t < {nt_}; t++) {{",
            f"const int32_t l = lv_[(r - r0_) * {nt_} + t];",
            *_leaf_add(ctx, f, nt, agg, track, tab), "}", *finish, "}", "free(lv_);"]


def _depths(f: Forest) -> list[int]:
    """Per tree the branch nodes on its longest path (the trees are acyclic: checked when built)."""
    depth: dict[int, int] = {}
    for root in f.roots:
        stack = [root] if root >= 0 else []
        while stack:
            k = stack[-1]
            kids = [c for c in (f.true_ref[k], f.false_ref[k]) if c >= 0 and c not in depth]
            if kids:
                stack.extend(kids)
                continue
            stack.pop()
            depth[k] = 1 + max((depth[c] for c in (f.true_ref[k], f.false_ref[k]) if c >= 0), default=0)
    return [depth[r] if r >= 0 else 0 for r in f.roots]


def _row_walk(ctx: KernelCtx, f: Forest, nt: int, agg: int, finish: list[str], track: bool, tab: dict,
              exact_single: bool) -> list[str]:
    """Body of one row ``r``: every tree walked here (any modes, thresholds and input type)."""
    x = ctx.ins[0]
    tab.update({name: int_table(ctx, vals, "int32_t") for name, vals in
                (("feat", f.feature), ("tref", f.true_ref), ("fref", f.false_ref), ("root", f.roots))})
    tab["split"] = table(ctx, "float", [float_lit(s, True) for s in f.split]) if exact_single \
        else double_table(ctx, f.split)
    modes = set(f.mode)
    if len(modes) == 1 and 6 not in modes:
        test = _CMP[f.mode[0]].format(s=f"{tab['split']}[k]")
    else:
        tab["mode"] = int_table(ctx, f.mode, "uint8_t")
        cases = [f"case {m}: go = {_CMP[m].format(s=tab['split'] + '[k]')}; break;" for m in sorted(modes) if m != 6]
        if 6 in modes:
            tab["soff"], tab["slen"] = int_table(ctx, f.set_off), int_table(ctx, f.set_len)
            tab["mem"] = double_table(ctx, f.members)
            cases.append(f"default: {{ const double *s_ = {tab['mem']} + {tab['soff']}[k]; int64_t lo = 0, "
                         f"hi = {tab['slen']}[k]; while (lo < hi) {{ const int64_t mid = (lo + hi) / 2; "
                         "if (s_[mid] < v) lo = mid + 1; else hi = mid; } "
                         f"go = lo < {tab['slen']}[k] && s_[lo] == v; }}")
        test = None
    feat = f"row[{tab['feat']}[k]]"
    load = f"(double)(float){feat}" if x.dtype.is_int else f"(double){half.load(x.dtype, feat)}"
    lines = [f"double acc[{max(nt, 1)}];",
             f"const {x.ctype} *restrict row = in0 + r * f_;",
             f"for (int64_t j = 0; j < {nt}; j++) acc[j] = {_init(agg, track)};",
             f"for (int64_t t = 0; t < {len(f.roots)}; t++) {{", f"int32_t k = {tab['root']}[t];", "while (k >= 0) {",
             f"const double v = {load};"]
    if test is not None:
        lines.append(f"int go = {test};")
    else:
        lines += ["int go = 0;", f"switch ({tab['mode']}[k]) {{", *cases, "}"]
    if any(f.missing):
        tab["miss"] = int_table(ctx, f.missing, "uint8_t")
        lines.append(f"if (v != v && {tab['miss']}[k]) go = 1;")
    lines += [f"k = go ? {tab['tref']}[k] : {tab['fref']}[k];", "}", "const int32_t l = -k - 1;"]
    return lines + _leaf_add(ctx, f, nt, agg, track, tab) + ["}", *finish]


def _leaf_add(ctx: KernelCtx, f: Forest, nt: int, agg: int, track: bool, tab: dict) -> list[str]:
    """C adding leaf ``l``'s weights into ``acc`` (per ``agg``; NaN entries are first weights when tracked)."""
    layout = _leaf_layout(f, nt)
    if layout != "dense" and any(f.leaf_target):
        tab["lt"] = int_table(ctx, f.leaf_target, "int32_t")
    target = (lambda q: f"{tab['lt']}[{q}]") if "lt" in tab else (lambda q: "0")
    add = {0: "*a += w;", 1: "*a += w;", 2: "if (*a != *a || w < *a) *a = w;",
           3: "if (*a != *a || w > *a) *a = w;"}[agg]
    if track and agg in (0, 1):
        add = "*a = *a != *a ? w : *a + w;"
    if layout == "single":
        return [f"const double w = {tab['lw']}[l];", f"double *a = acc + {target('l')};", add]
    if layout == "dense":
        return [f"const double *w_ = {tab['lw']} + (int64_t)l * {nt};",
                f"for (int64_t j = 0; j < {nt}; j++) {{", "const double w = w_[j];", "double *a = acc + j;", add, "}"]
    tab["ls"] = int_table(ctx, f.leaf_start, "int32_t")
    return [f"for (int32_t q = {tab['ls']}[l]; q < {tab['ls']}[l + 1]; q++) {{",
            f"const double w = {tab['lw']}[q];", f"double *a = acc + {target('q')};", add, "}"]


from . import trees_classic  # noqa: E402,F401  (registers TreeEnsembleClassifier/Regressor)
