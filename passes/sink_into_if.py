"""Values whose rank is only known at run time, made static by moving the code that reads them into an If.

onnxc compiles every tensor with a static rank. Two ONNX forms break that: an If whose branches return
values of different ranks (a voice-activity model picks its sample-rate branch from an input; one branch
gives [batch, 128], the other [batch, 128, k]), and a Squeeze without axes over a symbolic dim that may
be 1 at run time (AffineGrid's function body). Shape inference handles both here:

- ``sink_into_branches``: the nodes downstream of the If (everything that reads its outputs, directly or
  not) are copied into both branches and removed from the enclosing graph, so inside each branch every
  rank is static again. The If then returns the graph outputs those nodes computed, and moves after the
  remaining nodes of the graph (the moved code may read values they compute). The cost is code size:
  the tail of the graph is compiled once per branch. Graph outputs themselves must agree in rank.
- ``squeeze_as_if``: a Squeeze without axes whose input has exactly one symbolic dim becomes
  ``If(dim == 1, Squeeze(axes = the static 1s and that dim), Squeeze(axes = the static 1s))``, which the
  first mechanism then handles.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Attr, Graph, Node, TensorType, Value

from .lift_captures import lift_node
from .shapes.control_flow import SUNK


def downstream(node: Node) -> list[Node]:
    """Nodes of ``node``'s graph that read its outputs, directly or through each other, in graph order."""
    g = node.graph
    reached = {o.id for o in node.outputs}
    out = []
    for n in g.nodes[g.nodes.index(node) + 1:]:
        if any(v is not None and v.id in reached for v in n.inputs):
            out.append(n)
            reached |= {o.id for o in n.outputs}
    return out


def sink_into_branches(node: Node, pending: list[Node]) -> bool:
    """Move the nodes downstream of If ``node`` into both of its branches (see the top). ``pending`` is shape
    inference's stack of nodes still to infer: the moved nodes leave it and the If goes to its bottom, to be
    inferred again after the rest of the graph. False when nothing reads the If's outputs but the graph's
    outputs (their rank varies: nothing to do here)."""
    g = node.graph
    tail = downstream(node)
    if not tail:
        return False
    made = {o.id for o in node.outputs} | {o.id for n in tail for o in n.outputs}
    public = list({v.id: v for v in g.outputs if v.id in made}.values())
    for key in ("then_branch", "else_branch"):
        branch: Graph = node.attr(key)
        vmap = {o.id: r for o, r in zip(node.outputs, branch.outputs)}
        for n in tail:
            branch.append(clone_node(n, branch, vmap))
        branch.outputs = [vmap[v.id] for v in public]
    ids = {n.id for n in tail}
    pending[:] = [n for n in pending if n.id not in ids]
    for n in tail:
        g.remove(n)
    node.outputs = []
    for v in public:
        node.add_output(v)
        v.graph = g
    g.nodes.remove(node)
    g.nodes.append(node)
    node.attrs[SUNK] = Attr(SUNK, "INT", 1)
    pending.insert(0, node)
    lift_node(node)  # the moved nodes read outer values: captures of the If
    return True


def clone_node(n: Node, graph: Graph, vmap: dict[int, Value]) -> Node:
    """A copy of ``n`` in ``graph``: inputs through ``vmap`` (others read as they are), fresh outputs added
    to ``vmap``; bodies copied whole."""
    attrs = {}
    for k, a in n.attrs.items():
        if a.kind == "GRAPH":
            attrs[k] = Attr(k, a.kind, clone_graph(a.value, graph), a.ref)
        elif a.kind == "GRAPHS":
            attrs[k] = Attr(k, a.kind, [clone_graph(b, graph) for b in a.value], a.ref)
        else:
            attrs[k] = a
    outs = [_copy_value(o, graph) for o in n.outputs]
    for o, c in zip(n.outputs, outs):
        vmap[o.id] = c
    ins = [None if v is None else vmap.get(v.id, v) for v in n.inputs]
    c = Node(n.op_type, ins, outs, attrs, domain=n.domain, name=n.name, version=n.version, overload=n.overload)
    c.doc = n.doc
    return c


def clone_graph(body: Graph, parent: Graph) -> Graph:
    """A copy of the closed body ``body`` (its own inputs, initializers and nodes) under ``parent``."""
    g = Graph(body.name, parent)
    g.doc = body.doc
    g.value_info = dict(body.value_info)
    vmap: dict[int, Value] = {}
    for v in body.inputs:
        vmap[v.id] = g.add_input(_copy_value(v, g))
    for v in body.initializers.values():
        c = _copy_value(v, g)
        g.initializers[c.name] = c
        vmap[v.id] = c
    for n in body.nodes:
        g.append(clone_node(n, g, vmap))
    g.outputs = [vmap.get(v.id, v) for v in body.outputs]
    return g


def _copy_value(v: Value, graph: Graph) -> Value:
    c = Value(graph.fresh_name(v.name), v.type, const=v.const)
    c.sym_value = v.sym_value
    c.graph = graph
    c.doc = v.doc
    return c


def squeeze_as_if(node: Node) -> list[Node] | None:
    """Replace a Squeeze without axes over exactly one symbolic dim by an If on that dim (see the top);
    the new nodes, or None when ``node`` is not such a Squeeze."""
    if node.op_type != "Squeeze" or node.domain or node.input(1) is not None or node.attr("axes") is not None:
        return None
    t = node.input(0).type
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    free = [a for a, d in enumerate(t.shape) if not isinstance(d, int)]
    if len(free) != 1:
        return None
    ones = [a for a, d in enumerate(t.shape) if d == 1]
    g, x, (a,) = node.graph, node.input(0), free
    version = max(node.version, 13)
    made: list[Node] = []

    def add(op: str, ins: list, **attrs) -> Value:
        out = Value(g.fresh_name(f"{node.name or 'Squeeze'}_{op}"))
        made.append(g.insert_before(node, Node(op, ins, [out], {k: _attr(k, v) for k, v in attrs.items()},
                                              version=version, name=f"{node.name}/{op}")))
        return out

    size = add("Shape", [x], start=a, end=a + 1)
    cond = add("Equal", [size, g.constant(_i64([1]))])
    cond = add("Squeeze", [cond, g.constant(_i64([0]))])
    branches = [_squeeze_branch(g, x, sorted(ones + [a]), version), _squeeze_branch(g, x, ones, version)]
    y = node.outputs[0]
    if_node = Node("If", [cond], [], {"then_branch": Attr("then_branch", "GRAPH", branches[0]),
                                      "else_branch": Attr("else_branch", "GRAPH", branches[1]),
                                      SUNK: Attr(SUNK, "INT", 1)},
                   name=node.name, version=max(node.version, 11))
    g.insert_before(node, if_node)
    g.remove(node)
    y.producer = None
    if_node.add_output(y)
    lift_node(if_node)
    return made + [if_node]


def _squeeze_branch(g: Graph, x: Value, axes: list[int], version: int) -> Graph:
    b = Graph("squeeze", g)
    out = Value(b.fresh_name("squeezed"))
    n = Node("Squeeze", [x, b.constant(_i64(axes))] if axes else [x], [out], version=version)
    b.append(n)
    b.outputs = [out]
    return b


def _i64(vals: list[int]) -> np.ndarray:
    return np.array(vals, dtype=np.int64)


def _attr(k: str, v) -> Attr:
    return Attr(k, "INT", int(v))
