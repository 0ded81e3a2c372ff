"""Make subgraph bodies closed: outer values a body reads become explicit inputs of its node.

ONNX bodies (If branches, Loop and Scan bodies) read values of enclosing graphs by name. onnxc
compiles every body as its own program, so this pass rewrites each reference into a formal input:
the owning node gets the outer value as an extra input after its ONNX inputs (the attribute
``onnxc_n_inputs`` records how many inputs are ONNX's), and every body of the node gets one new
formal input per captured value, in the same order, after its ONNX formal inputs (bodies that do
not read a capture simply ignore it). Outer constants are copied into the body as initializers
instead, so folding inside the body still sees them. Nodes are processed innermost first, so a
value read two levels down is threaded through every level in between.
"""

from __future__ import annotations

from onnxc.ir import Attr, Graph, Model, Node, Value

from .base import PassResult

N_INPUTS = "onnxc_n_inputs"


def onnx_inputs(node: Node) -> list[Value | None]:
    """The node's ONNX inputs (without the captures this pass appended)."""
    n = node.attr(N_INPUTS)
    return list(node.inputs if n is None else node.inputs[:n])


def captures(node: Node) -> list[Value]:
    """Outer values the node's bodies read, in the order of the bodies' extra formal inputs."""
    n = node.attr(N_INPUTS)
    return [] if n is None else [v for v in node.inputs[n:] if v is not None]


def _defined(g: Graph) -> set[int]:
    ids = {v.id for v in g.inputs} | {v.id for v in g.initializers.values()}
    for n in g.nodes:
        ids |= {o.id for o in n.outputs}
    return ids


def _free_reads(g: Graph) -> list[Value]:
    """Values read by ``g``'s own nodes (after lifting, nested bodies read nothing outside) or
    returned as outputs, that ``g`` does not define; in first-use order."""
    defined = _defined(g)
    seen: dict[int, Value] = {}
    for n in g.nodes:
        for v in n.inputs:
            if v is not None and v.id not in defined:
                seen.setdefault(v.id, v)
    for v in g.outputs:
        if v.id not in defined:
            seen.setdefault(v.id, v)
    return list(seen.values())


def _rebind(g: Graph, old: Value, new: Value) -> None:
    for n in g.nodes:
        for i, v in enumerate(n.inputs):
            if v is old:
                n.set_input(i, new)
    g.outputs = [new if v is old else v for v in g.outputs]


def lift_node(node: Node) -> bool:
    """Lift the captures of one node whose bodies are already closed."""
    bodies = list(node.subgraphs())
    if not bodies:
        return False
    free: dict[int, Value] = {}
    for body in bodies:
        for v in _free_reads(body):
            free.setdefault(v.id, v)
    lifted = [v for v in free.values() if v.const is None]
    for body in bodies:
        for v in free.values():
            if v.const is not None:
                c = Value(body.fresh_name(v.name), v.type, const=v.const)
                c.sym_value = v.sym_value
                body.add_initializer(c)
                _rebind(body, v, c)
        for v in lifted:
            formal = body.add_input(Value(body.fresh_name(v.name), v.type))
            _rebind(body, v, formal)
    if not free:
        return False  # closed bodies: the node stays as it is (no N_INPUTS: every input is an ONNX one)
    if node.attr(N_INPUTS) is None:
        node.attrs[N_INPUTS] = Attr(N_INPUTS, "INT", len(node.inputs))
    for v in lifted:
        node.add_input(v)
    return True


def lift_graph(g: Graph) -> bool:
    changed = False
    for n in g.nodes:
        for body in n.subgraphs():
            changed |= lift_graph(body)
        changed |= lift_node(n)
    return changed


def lift_captures(model: Model) -> PassResult:
    return PassResult(model, lift_graph(model.graph))
