"""Common-subexpression elimination: IR before, expected IR after."""

import numpy as np

from onnxc.ir import Attr, DType, Graph, Model, Node, TensorType, Value, sym
from onnxc.ir.checker import check_model
from onnxc.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from onnxc.passes.eliminate_dead_code import eliminate_dead_code
from onnxc.passes.infer_shapes import infer_shapes

from .irutil import const, make, node


def _ops(m) -> list[str]:
    return [n.op_type for n in m.graph.nodes]


def test_identical_nodes_merge_and_readers_follow():
    # before: a = Relu(x); b = Relu(x); c = Add(a, b); d = Add(b, a)   after: a = Relu(x); c = Add(a, a)
    m, v = make({"x": (2, 3)})
    (a,) = node(m, "Relu", [v["x"]])
    (b,) = node(m, "Relu", [v["x"]])
    (c,) = node(m, "Add", [a, b])
    (d,) = node(m, "Add", [a, b])
    (e,) = node(m, "Mul", [c, d])
    m.graph.outputs = [e]
    assert eliminate_common_subexpressions(m).changed
    assert _ops(m) == ["Relu", "Add", "Mul"]
    add, mul = m.graph.nodes[1], m.graph.nodes[2]
    assert add.inputs == [a, a] and mul.inputs == [c, c]
    assert not b.uses() and not d.uses()
    check_model(m)
    assert not eliminate_common_subexpressions(m).changed  # idempotent


def test_attributes_inputs_order_and_version_distinguish_nodes():
    m, v = make({"x": (2, 3), "y": (2, 3)})
    outs = [node(m, "LeakyRelu", [v["x"]], alpha=0.1)[0], node(m, "LeakyRelu", [v["x"]], alpha=0.2)[0],
            node(m, "LeakyRelu", [v["x"]], alpha=0.1)[0], node(m, "Sub", [v["x"], v["y"]])[0],
            node(m, "Sub", [v["y"], v["x"]])[0], node(m, "Relu", [v["x"]])[0], node(m, "Relu", [v["x"]])[0]]
    m.graph.nodes[-1].version = 13  # same op, other opset version: not merged
    m.graph.outputs = [node(m, "Concat", outs, axis=0)[0]]
    eliminate_common_subexpressions(m)
    cat = m.graph.nodes[-1]
    assert _ops(m) == ["LeakyRelu", "LeakyRelu", "Sub", "Sub", "Relu", "Relu", "Concat"]
    assert cat.inputs[2] is outs[0]
    assert len({x.id for x in cat.inputs}) == 6
    check_model(m)


def test_equal_small_constants_merge_by_dtype_shape_and_bytes():
    m, v = make({"x": (3,)})
    c1 = const(m, np.array([1, 2, 3], np.float32))
    c2 = const(m, np.array([1, 2, 3], np.float32))
    c3 = const(m, np.array([1, 2, 3], np.int64))      # other dtype
    c4 = const(m, np.array([[1, 2, 3]], np.float32))  # other shape
    c5 = const(m, np.array([0.0, -0.0, 1.0], np.float32))
    c6 = const(m, np.array([-0.0, 0.0, 1.0], np.float32))  # equal numerically, other bytes
    big1, big2 = const(m, np.zeros(4096, np.float32)), const(m, np.zeros(4096, np.float32))
    ys = [node(m, "Add", [v["x"], c])[0] for c in (c1, c2, c5, c6)]
    ys += [node(m, "Cast", [c3], to=1)[0], node(m, "Add", [v["x"], c4])[0],
           node(m, "ReduceSum", [big1])[0], node(m, "ReduceSum", [big2])[0]]
    m.graph.outputs = ys
    eliminate_common_subexpressions(m)
    assert set(m.graph.initializers) == {c1.name, c3.name, c4.name, c5.name, c6.name, big1.name, big2.name}
    # both Adds of x with [1, 2, 3] read the first constant (they stay: both are graph outputs)
    adds = [n for n in m.graph.nodes if n.op_type == "Add"]
    assert [a.inputs[1] for a in adds] == [c1, c1, c5, c6, c4]
    check_model(m)


def test_constants_merge_then_their_readers_merge():
    """Exporters repeat the same Constant per layer: after merging, the ops that read it merge too."""
    m, v = make({"x": (2, 4)})
    y1 = node(m, "Mul", [v["x"], const(m, np.float32(0.5))])[0]
    y2 = node(m, "Mul", [v["x"], const(m, np.float32(0.5))])[0]
    m.graph.outputs = [node(m, "Add", [y1, y2])[0]]
    eliminate_common_subexpressions(m)
    assert _ops(m) == ["Mul", "Add"] and len(m.graph.initializers) == 1
    assert m.graph.nodes[1].inputs == [y1, y1]


def test_graph_outputs_inputs_random_ops_and_dead_nodes_are_kept():
    m, v = make({"x": (2, 3)})
    (a,) = node(m, "Relu", [v["x"]])
    (b,) = node(m, "Relu", [v["x"]])                 # a graph output: its name is public
    (r1,) = node(m, "RandomUniformLike", [v["x"]])
    (r2,) = node(m, "RandomUniformLike", [v["x"]])   # random: each draws its own numbers
    node(m, "Neg", [v["x"]])
    node(m, "Neg", [v["x"]])                         # dead: left to DCE
    (s,) = node(m, "Add", [r1, r2])
    m.graph.outputs = [a, b, s]
    assert not eliminate_common_subexpressions(m).changed
    assert _ops(m) == ["Relu", "Relu", "RandomUniformLike", "RandomUniformLike", "Neg", "Neg", "Add"]


def test_nodes_with_subgraphs_are_not_merged_but_their_bodies_are():
    m, v = make({"x": (2,)})
    g = m.graph
    cond = g.constant(np.array(True))

    def body() -> Graph:
        sg = Graph("branch", parent=g)
        t1, t2, o = Value(sg.fresh_name("t")), Value(sg.fresh_name("t")), Value(sg.fresh_name("o"))
        sg.append(Node("Neg", [v["x"]], [t1], version=21))
        sg.append(Node("Neg", [v["x"]], [t2], version=21))
        sg.append(Node("Add", [t1, t2], [o], version=21))
        sg.outputs = [o]
        return sg

    outs = []
    for _ in range(2):
        o = Value(g.fresh_name("if"))
        g.append(Node("If", [cond], [o], {"then_branch": Attr("then_branch", "GRAPH", body()),
                                          "else_branch": Attr("else_branch", "GRAPH", body())}, version=21))
        outs.append(o)
    g.outputs = [node(m, "Add", outs)[0]]
    assert eliminate_common_subexpressions(m).changed
    assert _ops(m) == ["If", "If", "Add"]
    for n in g.nodes[:2]:
        for sg in n.subgraphs():
            assert [x.op_type for x in sg.nodes] == ["Neg", "Add"]
    check_model(m)


def test_symbolic_shape_values_merge_after_shape_inference():
    """Two Reshapes whose shapes come from separate Shape -> Gather -> Concat chains: after inference
    and CSE, one SymValue serves one Reshape, and DCE removes both chains."""
    g = Graph()
    x = g.add_input(Value("x", TensorType(DType.FLOAT, (sym("B"), sym("S"), 8))))
    m = Model(g, {"": 17})
    ys = []
    for _ in range(2):
        (s,) = node(m, "Shape", [x])
        (b,) = node(m, "Gather", [s, const(m, np.int64(0))], axis=0)
        (b1,) = node(m, "Unsqueeze", [b, const(m, np.array([0], np.int64))])
        (shp,) = node(m, "Concat", [const(m, np.array([-1], np.int64)), b1, const(m, np.array([4], np.int64))],
                      axis=0)
        ys.append(node(m, "Reshape", [x, shp])[0])
    g.outputs = [node(m, "Add", ys)[0]]
    infer_shapes(m)
    eliminate_common_subexpressions(m)
    eliminate_dead_code(m)
    assert _ops(m) == ["SymValue", "Reshape", "Add"]  # the second Reshape merged into the first, too
    r = g.nodes[1]
    assert g.nodes[2].inputs == [r.outputs[0], r.outputs[0]]
    assert r.outputs[0].type.shape == (2 * sym("S"), sym("B"), 4)
    check_model(m, typed=True)


def test_sym_values_with_equal_dims_but_other_types_stay_apart():
    """onnxc::SymValue takes its type from its output: a scalar and a 1-element vector of the same dim
    are different values."""
    g = Graph()
    x = g.add_input(Value("x", TensorType(DType.FLOAT, (sym("S"),))))
    m = Model(g, {"": 21})
    outs = []
    for shape in [(), (1,), (1,)]:
        o = Value(g.fresh_name("s"), TensorType(DType.INT64, shape))
        g.append(Node("SymValue", [], [o], {"dims": Attr("dims", "DIMS", (sym("S"),))}, domain="onnxc"))
        outs.append(node(m, "Range", [const(m, np.int64(0)), o, const(m, np.int64(1))])[0]
                    if shape == () else node(m, "Expand", [x, o])[0])
    g.outputs = [node(m, "Concat", [node(m, "Cast", [outs[0]], to=1)[0], *outs[1:]], axis=0)[0]]
    assert eliminate_common_subexpressions(m).changed
    assert [n.op_type for n in g.nodes] == ["SymValue", "Range", "SymValue", "Expand", "Cast", "Concat"]
    check_model(m)
