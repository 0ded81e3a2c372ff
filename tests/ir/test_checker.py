"""ir/checker.py: a clean graph passes, and each broken rule is reported with the value and node it is about.

The broken graphs are made by hand the way a buggy pass would leave them: an input written without
its use link, a node removed while its output is still read, an output whose producer points elsewhere,
a value read before the node that makes it, a body reading an outer value defined after its node.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxc.frontend import load_model
from onnxc.ir import Attr, DType, Graph, Model, Node, TensorType, Value
from onnxc.ir.checker import IRCheckError, check_graph, check_model
from onnxc.passes.infer_shapes import infer_shapes

F = DType.FLOAT


def _chain() -> tuple[Graph, Value, Node, Node]:
    """x -> Relu -> r -> Neg -> y (output), typed."""
    g = Graph()
    x = g.add_input(Value("x", TensorType(F, (2, 3))))
    r, y = Value("r", TensorType(F, (2, 3))), Value("y", TensorType(F, (2, 3)))
    relu = g.append(Node("Relu", [x], [r]))
    neg = g.append(Node("Neg", [r], [y]))
    g.outputs = [y]
    return g, x, relu, neg


def test_clean_graphs_pass():
    g, *_ = _chain()
    check_graph(g, typed=True)
    import onnx
    from onnx import TensorProto, helper

    then = helper.make_graph([helper.make_node("Abs", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    els = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = load_model(helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]))
    check_model(m)
    infer_shapes(m)
    check_model(m, typed=True)


def test_input_written_without_its_use_link():
    g, x, relu, neg = _chain()
    neg.inputs[0] = x  # a pass bypassing set_input
    with pytest.raises(IRCheckError, match=r"Neg .*input 0 'x' lacks its use link"):
        check_graph(g)


def test_value_read_after_its_producer_was_removed():
    g, x, relu, neg = _chain()
    g.nodes.remove(relu)  # the producer is gone, Neg still reads r
    with pytest.raises(IRCheckError, match=r"Neg .*reads 'r' \(input 0\) before it is defined"):
        check_graph(g)


def test_output_naming_another_producer():
    g, x, relu, neg = _chain()
    relu.outputs[0].producer = neg
    with pytest.raises(IRCheckError, match=r"output 'r' of Relu .*names another producer"):
        check_graph(g)


def test_value_used_before_it_is_produced():
    g, x, relu, neg = _chain()
    g.nodes.reverse()
    with pytest.raises(IRCheckError, match=r"Neg .*reads 'r' \(input 0\) before it is defined"):
        check_graph(g)


def test_body_reading_an_outer_value_defined_after_its_node():
    g, x, relu, neg = _chain()
    body = Graph("then", parent=g)
    t = Value("t")
    body.append(Node("Abs", [neg.outputs[0]], [t]))  # y is made after the If
    body.outputs = [t]
    cond = g.constant(np.array(True))
    g.insert_before(neg, Node("If", [cond], [Value("z")], {"then_branch": Attr("then_branch", "GRAPH", body)}))
    with pytest.raises(IRCheckError, match=r"Abs .*reads 'y' \(input 0\) before it is defined"):
        check_graph(g)


def test_value_defined_twice_and_node_linked_elsewhere():
    g, x, relu, neg = _chain()
    g.append(Node("Abs", [x], []))
    g.nodes[-1].outputs.append(relu.outputs[0])  # two nodes claim r
    with pytest.raises(IRCheckError, match=r"output 'r' of Abs .*names another producer"):
        check_graph(g)
    g2, *_ = _chain()
    g2.nodes[0].graph = Graph("other")
    with pytest.raises(IRCheckError, match=r"Relu .*listed in graph 'main' but linked elsewhere"):
        check_graph(g2)
    g3, x3, *_ = _chain()
    g3.inputs.append(x3)
    with pytest.raises(IRCheckError, match=r"value 'x' \(graph input\) defined twice"):
        check_graph(g3)


def test_undefined_graph_output_and_initializer_without_value():
    g, x, relu, neg = _chain()
    g.outputs.append(Value("ghost"))
    with pytest.raises(IRCheckError, match=r"graph output 'ghost' of graph 'main' is not defined"):
        check_graph(g)
    g2, *_ = _chain()
    g2.add_initializer(Value("w", TensorType(F, (3,))))
    with pytest.raises(IRCheckError, match=r"initializer 'w' has no constant value"):
        check_graph(g2)


def test_typed_check_wants_types_and_non_negative_dims():
    g, x, relu, neg = _chain()
    relu.outputs[0].type = None
    check_graph(g)  # untyped mode: before shape inference a missing type is fine
    with pytest.raises(IRCheckError, match=r"output 'r' of Relu .*has no type"):
        check_graph(g, typed=True)
    relu.outputs[0].type = TensorType(F, (2, -3))
    with pytest.raises(IRCheckError, match=r"'r' has negative dim -3"):
        check_model(Model(g), typed=True)


def test_initializer_type_mismatch():
    g, *_ = _chain()
    g.add_initializer(Value("w", TensorType(F, (3,)), const=np.zeros((4,), np.int64)))
    with pytest.raises(IRCheckError, match=r"'w'"):
        check_graph(g, typed=True)


def test_stale_use_link_of_a_dropped_node():
    g, x, relu, neg = _chain()
    g.nodes.remove(neg)  # not g.remove(): r keeps the use (neg, 0)
    g.outputs = [relu.outputs[0]]
    with pytest.raises(IRCheckError, match=r"'r'"):
        check_graph(g)
