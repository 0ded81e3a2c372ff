"""Kernel of TfIdfVectorizer (ai.onnx, opset 9).

At compile time the pool of n-grams becomes a trie (built exactly as the reference and onnxruntime
build theirs: n-gram ids count every pool entry, also of sizes outside [min_gram_length,
max_gram_length], and a repeated n-gram keeps the last id) and then tables, data in the weights blob
(a big pool costs the C compiler nothing): the sorted vocabulary of pool items, and per trie node its
children (sorted token numbers, child node) and the output column it counts into (or -1). At run time
each row's items become token numbers by binary search, then for each skip distance every start
position walks the trie, counting every n-gram of at least the current minimum size; unigrams count in
the first pass only. The counts are weighted per ``mode``: TF (counts), IDF (weight, or 1, where the
count is positive), TFIDF (count * weight).

The C structure is in templates/tfidf.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.ml import tfidf_output_size

from ..templating import c_string, render
from .base import KernelCtx, kernel
from .strpool import string_pool

MODES = ("TF", "IDF", "TFIDF")


class Trie:
    """Node 0 is the root; ``children[k]`` maps a pool item to a node, ``ngram[k]`` is its n-gram id."""

    def __init__(self) -> None:
        self.children: list[dict] = [{}]
        self.ngram: list[int] = [0]

    def child(self, k: int, item) -> int:
        c = self.children[k].get(item)
        if c is None:
            c = len(self.children)
            self.children[k][item] = c
            self.children.append({})
            self.ngram.append(0)
        return c


def build_trie(node: Node) -> tuple[Trie, list]:
    """The n-gram trie of the pool and the pool items; errors name the node."""
    ints, strs = node.attr("pool_int64s"), node.attr("pool_strings")
    if (ints is None) == (strs is None):
        raise ShapeError(f"{node.describe()}: exactly one of pool_int64s and pool_strings must be set")
    pool = [int(v) for v in ints] if ints is not None else [
        v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in strs]
    counts = [int(c) for c in node.attr("ngram_counts", [])]
    lo, hi = int(node.attr("min_gram_length", 1)), int(node.attr("max_gram_length", 1))
    trie, next_id = Trie(), 1
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        if not 0 <= start <= end <= len(pool):
            raise ShapeError(f"{node.describe()}: ngram_counts {counts} do not fit a pool of {len(pool)} items")
        n = (end - start) // size
        if not lo <= size <= hi:
            next_id += n
            continue
        for g in range(n):
            k = 0
            for item in pool[start + g * size:start + (g + 1) * size]:
                k = trie.child(k, item)
            trie.ngram[k] = next_id
            next_id += 1
    return trie, pool


def _accepts(node: Node) -> str | None:
    if node.attr("mode") not in MODES:
        return f"mode {node.attr('mode')!r} is not one of {list(MODES)}"
    return None


@kernel("TfIdfVectorizer", types={DType.STRING, DType.INT32, DType.INT64}, accepts=_accepts)
def tfidf(ctx: KernelCtx) -> str:
    node, x = ctx.node, ctx.ins[0]
    trie, _ = build_trie(node)
    lo, hi = int(node.attr("min_gram_length", 1)), int(node.attr("max_gram_length", 1))
    skip = int(node.attr("max_skip_count", 0))
    indexes = [int(i) for i in node.attr("ngram_indexes", [])]
    size = tfidf_output_size(node)
    weights = [float(w) for w in node.attr("weights", []) or []]
    if weights and len(weights) < size:
        raise ShapeError(f"{node.describe()}: weights has {len(weights)} entries for {size} outputs")
    if lo < 1 or hi < lo or skip < 0 or any(i < 0 for i in indexes):
        raise ShapeError(f"{node.describe()}: invalid gram lengths [{lo}, {hi}], max_skip_count {skip} or ngram_indexes")
    strings = x.dtype == DType.STRING
    if strings != (node.attr("pool_strings") is not None):
        raise ShapeError(f"{node.describe()}: a {x.dtype.short} input needs "
                         f"{'pool_strings' if strings else 'pool_int64s'}")
    vocab = sorted({item for ch in trie.children for item in ch},
                   key=(lambda s: s.encode("utf-8", "surrogateescape")) if strings else None)
    token = {item: i for i, item in enumerate(vocab)}
    start, toks, kids, out = [0], [], [], []
    for k, ch in enumerate(trie.children):
        for item, c in sorted(ch.items(), key=lambda e: token[e[0]]):
            toks.append(token[item])
            kids.append(c)
        start.append(len(toks))
        g = trie.ngram[k]
        if g > len(indexes):
            raise ShapeError(f"{node.describe()}: n-gram {g} has no entry in ngram_indexes ({len(indexes)} entries)")
        out.append(indexes[g - 1] if g else -1)
    if strings:
        item = string_pool(ctx, "vocab", vocab)
    else:
        voc = ctx.blob_table("vocab", np.asarray(vocab, dtype=np.int64))
        item = lambda i: f"{voc}[{i}]"  # noqa: E731
    t_start, t_tok, t_kid, t_out = (ctx.blob_table(name, np.asarray(v, dtype=np.int32)) for name, v in
                                    (("start", start), ("tok", toks), ("kid", kids), ("out", out)))
    rows, cols = (x.dims[0], x.dims[1]) if x.rank == 2 else ("1", x.dims[0] if x.rank == 1 else "1")
    less = f"strcmp({item('mid')}, v) < 0" if strings else f"{item('mid')} < v"
    equal = f"strcmp({item('lo')}, v) == 0" if strings else f"{item('lo')} == v"
    vdecl = "const char *v = row[j];" if strings else "const int64_t v = (int64_t)row[j];"
    if weights:
        w_tab = ctx.blob_table("weights", np.asarray(weights[:size], dtype=np.float32))
    weight = (lambda i: f"{w_tab}[{i}]") if weights else (lambda i: "1.0f")
    mode = node.attr("mode")
    finish = "" if mode == "TF" or (mode == "TFIDF" and not weights) else mode
    return render("tfidf.c.j2", rows=rows, cols=cols, who=c_string(node.describe()), T=x.ctype, size=size,
                  vdecl=vdecl, nvocab=len(vocab), less=less, equal=equal, lo=lo, hi=hi, skip=skip, start=t_start,
                  tokt=t_tok, kid=t_kid, out=t_out, finish=finish, weight=weight("i"))
