"""Fuse scaled dot-product attention into one onnxc::FusedAttention node (codegen/kernels/attention.py).

Exporters (PyTorch/Hugging Face BERT, GPT-2, ViT...) write attention op by op:

    S = MatMul(Q, Kt)            Q [..., Lq, D], Kt [..., D, Lk]
    S = Div(S, c) | Mul(S, c)    optional, c a float32 scalar constant
    S = Add(S, mask)             optional, mask broadcasting to S (either operand order)
    P = Softmax(S, axis=-1)
    O = MatMul(P, V)             V [..., Lk, Dv]

which materializes the [..., Lq, Lk] scores four times. The fused kernel computes a block of query
rows at a time with its scores in cache. Transposes are folded into the node too: a Transpose (or a
chain of them) producing Q, Kt or V, and a Transpose of O, become strided operands of the kernel's
GEMMs instead of copies (the "split heads" perm [0, 2, 1, 3], the key perm [0, 2, 3, 1], the
"merge heads" transpose of the output), as long as one of each matrix's two axes keeps unit stride.

Conditions: float32 everywhere; Q, Kt, V of the same rank with equal batch axes (no MatMul
broadcasting); the softmax over the last axis; every intermediate (S, its scaled and masked forms,
P, and each absorbed transpose's output) read only by the next node of the pattern and not a graph
output; the mask's dims (aligned right) 1 or equal to the scores'. Anything else is left unfused.

The node: inputs (q, kt, v[, mask]); attributes ``q_perm``/``k_perm``/``v_perm`` (for each logical
axis of Q / Kt / V, the axis of the input holding it), ``out_perm`` (for each axis of O, the axis of
the output holding it), ``scale_mode`` (0 none, 1 multiply, 2 divide) and ``scale``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import Attr, DType, Graph, Model, Node, TensorType, Value

from .base import PassResult, in_subgraphs

DOMAIN = "onnxc"
OP = "FusedAttention"
SCALE_NONE, SCALE_MUL, SCALE_DIV = 0, 1, 2


@dataclass
class _Match:
    out: Value
    q: Value | None = None
    kt: Value | None = None
    v: Value | None = None
    mask: Value | None = None
    perms: list[list[int]] = field(default_factory=list)  # q, kt, v, out
    scale_mode: int = SCALE_NONE
    scale: float = 1.0
    dead: list[Node] = field(default_factory=list)


def _std(node: Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and node.domain in ("", "ai.onnx")


def _shape(v: Value | None) -> tuple | None:
    t = None if v is None else v.type
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    return tuple(t.shape)


def _f32(v: Value | None) -> bool:
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DType.FLOAT and _shape(v) is not None


def _only_reader(v: Value, public: set[int]) -> Node | None:
    """The single node reading ``v`` (once), when ``v`` is not a graph output."""
    uses = v.uses()
    if v.id in public or len(uses) != 1:
        return None
    return uses[0][0]


def _scalar(v: Value | None) -> float | None:
    if v is None or v.const is None or v.dtype != DType.FLOAT:
        return None
    a = np.asarray(v.const)
    return float(a.reshape(-1)[0]) if a.size == 1 else None


def _scores(v: Value, m: _Match, public: set[int]) -> Node | None:
    """The MatMul computing ``v``, possibly through a scale by a scalar (recorded in ``m``), or None."""
    node = v.producer
    if _std(node, "Div") or _std(node, "Mul"):
        if _only_reader(v, public) is None:
            return None
        a, c = node.input(0), _scalar(node.input(1))
        if c is None and node.op_type == "Mul":
            a, c = node.input(1), _scalar(node.input(0))
        if c is None or a is None or _shape(v) != _shape(a):
            return None
        m.scale_mode, m.scale = (SCALE_DIV if node.op_type == "Div" else SCALE_MUL), c
        m.dead.append(node)
        v = a
        node = v.producer
    if not _std(node, "MatMul") or _only_reader(v, public) is None:
        return None
    return node


def _absorb(v: Value, reader: Node, public: set[int], rank: int) -> tuple[Value, list[int], list[Node]]:
    """Follow Transposes producing ``v`` (each read by the next alone) while one matrix axis keeps unit
    stride; returns (source, perm: logical axis -> source axis, absorbed nodes)."""
    perm, nodes = list(range(rank)), []
    while _std(v.producer, "Transpose") and _only_reader(v, public) is reader:
        t = v.producer
        src = t.input(0)
        p = t.attr("perm", None)
        p = list(range(rank))[::-1] if p is None else [int(i) for i in p]
        if len(p) != rank or _shape(src) is None:
            break
        new = [p[a] for a in perm]
        if rank - 1 not in (new[-1], new[-2]):
            break
        perm, v, reader = new, src, t
        nodes.append(t)
    return v, perm, nodes


def _mask_ok(mask: Value, scores: tuple) -> bool:
    ms = _shape(mask)
    if not _f32(mask) or len(ms) > len(scores):
        return False
    return all(d == 1 or d == s for d, s in zip(ms[::-1], scores[::-1]))


def match(sm: Node, public: set[int]) -> _Match | None:
    """The attention pattern ending at Softmax ``sm`` (see the module doc), or None."""
    x = sm.input(0)
    if not _std(sm, "Softmax") or not _f32(x) or not _f32(sm.outputs[0]):
        return None
    rank = len(_shape(x))
    axis = int(sm.attr("axis", -1 if sm.version >= 13 else 1))
    if rank < 2 or (axis + rank if axis < 0 else axis) != rank - 1:
        return None
    pv = _only_reader(sm.outputs[0], public)
    if not _std(pv, "MatMul") or pv.input(0) is not sm.outputs[0] or not _f32(pv.input(1)) \
            or not _f32(pv.outputs[0]):
        return None
    m = _Match(pv.outputs[0], dead=[pv, sm])
    qk = None
    if _std(x.producer, "Add") and _only_reader(x, public) is sm:
        add = x.producer
        for si in (0, 1):
            s, mask = add.input(si), add.input(1 - si)
            if s is None or mask is None or _shape(s) != _shape(x) or not _mask_ok(mask, _shape(x)):
                continue
            trial = _Match(m.out)
            qk = _scores(s, trial, public)
            if qk is not None:
                m.mask, m.scale_mode, m.scale = mask, trial.scale_mode, trial.scale
                m.dead += [add] + trial.dead
                break
    if qk is None and m.mask is None:
        qk = _scores(x, m, public)
    if qk is None or not _f32(qk.input(0)) or not _f32(qk.input(1)):
        return None
    q, kt, v = qk.input(0), qk.input(1), pv.input(1)
    qs, ks, vs = _shape(q), _shape(kt), _shape(v)
    if not (len(qs) == len(ks) == len(vs) == rank) or not (qs[:-2] == ks[:-2] == vs[:-2]) or vs[-2] != ks[-1]:
        return None
    m.dead.append(qk)
    srcs = []
    for val, reader in ((q, qk), (kt, qk), (v, pv)):
        src, perm, nodes = _absorb(val, reader, public, rank)
        srcs.append(src)
        m.perms.append(perm)
        m.dead += nodes
    m.q, m.kt, m.v = srcs
    out_perm = list(range(rank))
    t = _only_reader(m.out, public)
    if _std(t, "Transpose") and _f32(t.outputs[0]):
        p = t.attr("perm", None)
        p = list(range(rank))[::-1] if p is None else [int(i) for i in p]
        if len(p) == rank and p[-1] == rank - 1:
            out_perm = [p.index(a) for a in range(rank)]
            m.out = t.outputs[0]
            m.dead.append(t)
    m.perms.append(out_perm)
    return m


def _ints(name: str, v: list[int]) -> Attr:
    return Attr(name, "INTS", [int(i) for i in v])


def fuse_graph(g: Graph) -> bool:
    changed = in_subgraphs(g, fuse_graph)
    public = {v.id for v in g.outputs}
    for sm in list(g.nodes):
        if sm.graph is not g:
            continue
        m = match(sm, public)
        if m is None:
            continue
        anchor = m.dead[0]  # the P x V MatMul: every input is defined before it
        attrs = {a.name: a for a in (_ints("q_perm", m.perms[0]), _ints("k_perm", m.perms[1]),
                                     _ints("v_perm", m.perms[2]), _ints("out_perm", m.perms[3]),
                                     Attr("scale_mode", "INT", m.scale_mode), Attr("scale", "FLOAT", m.scale))}
        ins = [m.q, m.kt, m.v] + ([m.mask] if m.mask is not None else [])
        fused = Node(OP, ins, [], attrs, domain=DOMAIN, name=(sm.name or m.out.name) + "_attention")
        g.insert_before(anchor, fused)
        for n in m.dead:
            g.remove(n)
        fused.add_output(m.out)
        changed = True
    return changed


def fuse_attention(model: Model) -> PassResult:
    return PassResult(model, fuse_graph(model.graph))
