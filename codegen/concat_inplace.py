"""Concat without copies: the producers of a Concat's inputs write straight into their slice of its output.

Inception and DenseNet concatenate branch outputs along channels at batch 1; each input is then one
contiguous block of the output, so instead of copying, each producer's output buffer is a *slice*
(codegen/lower.py ``Buffer.kind == "slice"``) of the Concat's buffer and the Concat emits no code.

A Concat qualifies when its output is a tensor of a non-string type whose dims are bound from the
graph inputs (no run-time dims), is not a graph output, every dim before the (normalized) axis is the
literal 1, and every input

- is produced in this graph by a node whose kernel writes its own output buffer (not a view, not an
  allocating kernel, no run-time dims), so the write can be redirected;
- is not a graph input, output or constant, appears once in this Concat and in no other Concat
  already planned in place (a value has one home).

Other readers of an input are fine: they read the slice. Nested concats (DenseNet: each Concat's
output is the next one's first input) nest slices. Overlap is impossible: slices of one Concat are
disjoint and a producer cannot read the Concat's output, which depends on it; the memory plan keeps
the Concat's buffer live from the first write into any slice (``_Lowerer.plan_lifetimes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import Dim, DType, Graph, Node, TensorType, Value
from onnxc.ir.dims import free_symbols

from .kernels import registry as kb


@dataclass
class Slice:
    """Value ``of`` (a Concat's output) holds this value at element ``offset``."""

    of: Value
    offset: Dim


def _redirectable(v: Value | None, g: Graph) -> bool:
    if v is None or v.const is not None or v in g.outputs or v in g.inputs:
        return False
    p = v.producer
    if p is None or p.graph is not g or p.defines_dims:
        return False
    kd = kb.lookup(p)
    return kd is not None and not kd.alias and not kd.allocates


def _axis(node: Node, rank: int) -> int | None:
    a = node.attr("axis", None)
    if a is None or not -rank <= int(a) < rank:
        return None
    return int(a) % rank


def plan(g: Graph, bound: set[str]) -> tuple[dict[int, Slice], set[int]]:
    """(slices by value id, ids of the Concat nodes that become no-ops)."""
    slices: dict[int, Slice] = {}
    noops: set[int] = set()
    for node in g.nodes:
        if node.op_type != "Concat" or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        t = out.type
        if not isinstance(t, TensorType) or t.shape is None or t.dtype == DType.STRING or out in g.outputs:
            continue
        if kb.lookup(node) is None or any(free_symbols(d) - bound for d in t.shape):
            continue
        rank = len(t.shape)
        axis = _axis(node, rank) if rank else None
        if axis is None or any(d != 1 for d in t.shape[:axis]):
            continue
        ins = node.inputs
        if not ins or any(not _redirectable(v, g) or v.id in slices or ins.count(v) != 1 for v in ins):
            continue
        if any(not isinstance(v.type, TensorType) or v.type.shape is None or len(v.type.shape) != rank
               for v in ins):
            continue
        inner: Dim = 1
        for d in t.shape[axis + 1:]:
            inner = inner * d
        offset: Dim = 0
        for v in ins:
            slices[v.id] = Slice(out, offset)
            offset = offset + v.type.shape[axis] * inner
        noops.add(node.id)
    return slices, noops
