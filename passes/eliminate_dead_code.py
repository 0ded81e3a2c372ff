"""Dead-code elimination: drop nodes and initializers nothing reads.

A node is live when one of its outputs is a graph output or is read by a live node (subgraph
bodies count as readers of the outer values they reference). Ops with side effects do not exist in
the ONNX inference domains, so no node is kept for its own sake.
"""

from __future__ import annotations

from onnxc.ir import Graph, Model

from .base import PassResult
from .fold_constants import is_shape_computation


def _outer_reads(g: Graph) -> set[int]:
    """Ids of values a graph (and its subgraphs) reads that it does not define."""
    defined = {v.id for v in g.inputs} | {v.id for v in g.initializers.values()}
    reads: set[int] = set()
    for n in g.nodes:
        for v in n.inputs:
            if v is not None:
                reads.add(v.id)
        for sg in n.subgraphs():
            reads |= _outer_reads(sg)
        defined |= {o.id for o in n.outputs}
    reads |= {v.id for v in g.outputs}
    return reads - defined


def dce_graph(g: Graph) -> bool:
    live: set[int] = {v.id for v in g.outputs}
    keep = []
    bodies_changed = False
    for n in reversed(g.nodes):
        if any(o.id in live for o in n.outputs):
            keep.append(n)
            live |= {v.id for v in n.inputs if v is not None}
            for sg in n.subgraphs():
                bodies_changed |= dce_graph(sg)
                live |= _outer_reads(sg)
    changed = len(keep) != len(g.nodes)
    if changed:
        kept = set(keep)
        dead = [n for n in g.nodes if n not in kept]
        for n in dead:
            if is_shape_computation(n):  # its values were used symbolically: it folded away
                g.folded.append(n.describe())
            n.detach()
        g.nodes = list(reversed(keep))
    for name, v in list(g.initializers.items()):
        if not v._uses and v.id not in {o.id for o in g.outputs}:
            del g.initializers[name]
            changed = True
    return changed or bodies_changed


def eliminate_dead_code(model: Model) -> PassResult:
    return PassResult(model, dce_graph(model.graph))
