"""Replace an If whose condition is a compile-time constant by the nodes of the branch it takes.

Exporters emit If on conditions that shape inference settles (ranks, static sizes); the branch not
taken may not even be valid for the actual shapes, so it must not be inferred. The taken branch's
nodes move into the enclosing graph in place of the If; its formal inputs (the If's captures, see
lift_captures.py) are rebound to the captured values and the If's outputs to the branch outputs.
Shape inference calls this before looking for a rule and then infers the moved nodes.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Graph, Node, ShapeError, Value

from .lift_captures import captures


def inline_constant_if(node: Node) -> list[Node] | None:
    """The nodes that replaced ``node`` (now removed from its graph), or None if it is not such an If."""
    if node.op_type != "If" or node.domain:
        return None
    cond = node.input(0)
    if cond is None or cond.const is None or np.asarray(cond.const).size != 1 or np.asarray(cond.const).dtype != np.bool_:
        return None  # not foldable, or not a valid condition: the If shape rule says which
    which = "then_branch" if bool(np.asarray(cond.const).reshape(-1)[0]) else "else_branch"
    branch: Graph = node.attr(which)
    if len(branch.outputs) != len(node.outputs):
        raise ShapeError(f"{node.describe()}: its {which} returns {len(branch.outputs)} values, the node has "
                         f"{len(node.outputs)} outputs")
    g = node.graph
    caps = captures(node)
    formals = branch.inputs[len(branch.inputs) - len(caps):] if caps else []
    subst: dict[int, Value] = {f.id: c for f, c in zip(formals, caps)}
    for v in branch.initializers.values():
        v.graph = g
        g.initializers[v.name] = v
    moved = list(branch.nodes)
    for n in moved:
        for i, v in enumerate(n.inputs):
            if v is not None and v.id in subst:
                n.set_input(i, subst[v.id])
        g.insert_before(node, n)
        for sg in n.subgraphs():  # a moved node's bodies now hang off g
            sg.parent = g
    results = [subst.get(v.id, v) for v in branch.outputs]
    branch.nodes = []
    public = {v.id for v in g.outputs}
    for out, res in zip(node.outputs, results):
        if out.id in public:  # keep the graph output's name: an Identity produces it
            ident = Node("Identity", [res], [Value(out.name, out.type)], version=node.version)
            g.insert_before(node, ident)
            moved.append(ident)
            out.replace_all_uses_with(ident.outputs[0])
        else:
            out.replace_all_uses_with(res)
    g.remove(node)
    return moved
