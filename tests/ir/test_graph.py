"""ir/graph.py: building and editing graphs keeps producer and use links right.

Covers adding and removing nodes, ``set_input``/``replace_all_uses_with`` (graph outputs included),
``uses()`` as a snapshot while the graph changes under it, ``walk`` and ``all_values`` into subgraphs,
fresh names that stay unique across nested graphs, and the printed form of a graph.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Attr, DType, Graph, Node, TensorType, Value, sym
from onnxc.ir.checker import check_graph

F = DType.FLOAT


def _graph() -> tuple[Graph, Value, Node, Node]:
    """x -> Relu -> r -> Neg -> y (output)."""
    g = Graph()
    x = g.add_input(Value("x", TensorType(F, (2, sym("N")))))
    r, y = Value("r"), Value("y")
    relu = g.append(Node("Relu", [x], [r]))
    neg = g.append(Node("Neg", [r], [y]))
    g.outputs = [y]
    return g, x, relu, neg


def test_append_sets_producer_uses_and_graph():
    g, x, relu, neg = _graph()
    r = relu.outputs[0]
    assert r.producer is relu and relu.graph is g and r.graph is g
    assert x.uses() == [(relu, 0)] and r.uses() == [(neg, 0)]
    assert x.producer is None and x.graph is g
    check_graph(g)


def test_same_value_read_twice_has_two_uses():
    g, x, _, _ = _graph()
    mul = g.append(Node("Mul", [x, x], [Value("m")]))
    assert [u for u in x.uses() if u[0] is mul] == [(mul, 0), (mul, 1)]
    mul.set_input(1, None)  # an omitted optional input keeps no link
    assert [u for u in x.uses() if u[0] is mul] == [(mul, 0)]
    assert mul.input(1) is None and mul.input(5) is None


def test_remove_detaches_inputs():
    g, x, relu, neg = _graph()
    g.remove(neg)
    assert neg not in g.nodes and neg.inputs == []
    assert relu.outputs[0].uses() == []
    assert x.uses() == [(relu, 0)]


def test_set_input_moves_the_use_link():
    g, x, relu, neg = _graph()
    c = g.constant(np.ones((2, 1), np.float32))
    neg.set_input(0, c)
    assert relu.outputs[0].uses() == [] and c.uses() == [(neg, 0)]
    assert c.is_const and c.type == TensorType(F, (2, 1)) and c.name in g.initializers
    check_graph(g)


def test_replace_all_uses_with_rewires_readers_and_graph_outputs():
    g, x, relu, neg = _graph()
    extra = g.append(Node("Abs", [relu.outputs[0]], [Value("a")]))
    g.outputs = [relu.outputs[0], neg.outputs[0]]
    relu.outputs[0].replace_all_uses_with(x)
    assert neg.inputs[0] is x and extra.inputs[0] is x
    assert g.outputs[0] is x and g.outputs[1] is neg.outputs[0]
    assert relu.outputs[0].uses() == []
    assert sorted(n.op_type for n, _ in x.uses()) == ["Abs", "Neg", "Relu"]


def test_uses_is_a_snapshot_while_editing():
    g, x, relu, _ = _graph()
    readers = [g.append(Node("Abs", [x], [Value(f"a{i}")])) for i in range(3)]
    snap = x.uses()
    for node, i in snap:  # rewire every reader while iterating the snapshot
        node.set_input(i, relu.outputs[0])
    assert len(snap) == 4 and x.uses() == []
    assert all((n, 0) in relu.outputs[0].uses() for n in readers)
    snap.clear()  # the snapshot is a copy: clearing it leaves the links alone
    assert len(relu.outputs[0].uses()) == 5


def test_remove_nodes_while_walking():
    g, x, relu, neg = _graph()
    for n in g.walk():  # walk iterates over a copy of the node list
        if n.op_type == "Relu":
            g.remove(n)
            neg.set_input(0, x)
    assert [n.op_type for n in g.nodes] == ["Neg"]
    check_graph(g)


def test_insert_before_keeps_order_and_links():
    g, x, relu, neg = _graph()
    s = Value("s")
    sig = g.insert_before(neg, Node("Sigmoid", [relu.outputs[0]], [s]))
    neg.set_input(0, s)
    assert [n.op_type for n in g.nodes] == ["Relu", "Sigmoid", "Neg"]
    assert s.producer is sig and s.graph is g and sig.graph is g
    check_graph(g)


def _if_graph() -> tuple[Graph, Node, Graph]:
    g, x, relu, neg = _graph()
    body = Graph("then", parent=g)
    t = Value("t")
    body.append(Node("Abs", [relu.outputs[0]], [t]))  # reads an outer value directly
    body.outputs = [t]
    cond = g.constant(np.array(True))
    node = g.insert_before(neg, Node("If", [cond], [Value("z")],
                                     {"then_branch": Attr("then_branch", "GRAPH", body)}))
    return g, node, body


def test_subgraph_values_walk_and_outer_uses():
    g, node, body = _if_graph()
    assert list(node.subgraphs()) == [body]
    assert [n.op_type for n in g.walk()] == ["Relu", "If", "Abs", "Neg"]
    names = [v.name for v in g.all_values()]
    assert "t" in names and "z" in names and names.count("r") == 1
    relu_out = g.nodes[0].outputs[0]
    assert {n.op_type for n, _ in relu_out.uses()} == {"Neg", "Abs"}  # the body's read is a use
    assert body.nodes[0].inputs[0].graph is g  # the capture still belongs to the outer graph
    check_graph(g)


def test_fresh_name_is_unique_across_subgraphs():
    g, node, body = _if_graph()
    taken = {v.name for v in g.all_values()}
    a, b = body.fresh_name("t"), g.fresh_name("t")
    assert a not in taken and b not in taken and a != b
    assert Value(a).name == a and body._root() is g


def test_printed_graph():
    g, x, relu, neg = _graph()
    c = g.constant(np.zeros((2,), np.int64), name="k")
    g.append(Node("Reshape", [neg.outputs[0], c], [Value("w", TensorType(F, (sym("N"), 2)))],
                  {"allowzero": Attr("allowzero", "INT", 0)}))
    assert repr(g) == "\n".join([
        "graph main(",
        "    %x: float[2, N],",
        ") {",
        "  init %k: int64[2]",
        "  %r = Relu(%x)",
        "  %y = Neg(%r)",
        "  %w = Reshape(%y, %k) {allowzero=0}",
        "  return %y",
        "}",
    ])
    assert repr(g.nodes[-1].outputs[0]) == "%w: float[N, 2]"
    assert "Reshape" in g.nodes[-1].describe() and "'w'" in g.nodes[-1].describe()
