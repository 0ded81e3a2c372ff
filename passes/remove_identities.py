"""Remove Identity and inference-mode Dropout nodes by rewiring their readers to the input."""

from __future__ import annotations

from onnxc.ir import Graph, Model

from .base import PassResult


def _removable(n) -> bool:
    if n.domain != "" or n.subgraphs() and any(True for _ in n.subgraphs()):
        return False
    if n.op_type == "Identity":
        return n.input(0) is not None and len(n.outputs) == 1
    if n.op_type == "Dropout":
        # inference: Y = X; the mask output must be unused; training_mode must be absent/constant false
        tm = n.input(2)
        if tm is not None and (tm.const is None or bool(tm.const.reshape(-1)[0])):
            return False
        return len(n.outputs) == 1 or not n.outputs[1].uses() and n.outputs[1] not in (n.graph.outputs or [])
    return False


def _remove_graph(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        for sg in n.subgraphs():
            changed |= _remove_graph(sg)
        if not _removable(n):
            continue
        src, out = n.inputs[0], n.outputs[0]
        if out in g.outputs:
            continue  # a graph output keeps its own value: its name is public
        g.remove(n)
        out.replace_all_uses_with(src)
        changed = True
    return changed


def remove_identities(model: Model) -> PassResult:
    return PassResult(model, _remove_graph(model.graph))
