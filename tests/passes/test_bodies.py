"""passes/bodies.py: control-flow bodies made callable (prepare_body) and optimized in order, nested ones
after the body that holds them (optimize_bodies)."""

from __future__ import annotations

import pytest

from onnxc.ir import DType, Graph, Model, Node, TensorType, UnsupportedOpError, Value
from onnxc.ir.dims import sym
from onnxc.passes.bodies import optimize_bodies, prepare_body

N = sym("N")


def _body(name: str, in_type: TensorType, out_type: TensorType | None = None, inner: Graph | None = None) -> Graph:
    g = Graph(name)
    x = g.add_input(Value(f"{name}_x", in_type))
    attrs = {}
    if inner is not None:
        from onnxc.ir import Attr

        attrs = {"then_branch": Attr("then_branch", "GRAPH", inner), "else_branch": Attr("else_branch", "GRAPH", inner)}
    node = Node("Identity", [x], [Value(f"{name}_y", out_type or in_type)], attrs=attrs)
    g.append(node)
    g.outputs = [node.outputs[0]]
    return g


def test_compound_formal_dims_become_symbols_of_their_own():
    b = _body("b", TensorType(DType.FLOAT, (2 * N, N, 3)))
    prepare_body(b)
    assert b.inputs[0].type == TensorType(DType.FLOAT, (sym("b_x[0]"), N, 3))


def test_string_outputs_are_refused():
    b = _body("s", TensorType(DType.STRING, (N,)))
    with pytest.raises(UnsupportedOpError, match="body output 's_y' is a string tensor"):
        prepare_body(b)


def test_nested_bodies_follow_the_body_that_holds_them():
    inner = _body("inner", TensorType(DType.FLOAT, (2 * N,)))
    outer = _body("outer", TensorType(DType.FLOAT, (N,)), inner=inner)
    main = _body("main", TensorType(DType.FLOAT, (N,)), inner=outer)
    seen = []

    def optimize(m: Model, where: str) -> Model:
        seen.append((m.graph.name, where.count(" / ")))
        return m

    optimize_bodies(Model(main, {"": 17}, {}), optimize)
    # each attribute of a node is one body (then and else share one graph here): outer twice, each
    # followed by its own inner body, one level deeper
    assert seen == [("outer", 0), ("inner", 1), ("inner", 1), ("outer", 0), ("inner", 1), ("inner", 1)]
    assert inner.inputs[0].type.shape == (sym("inner_x[0]"),)
