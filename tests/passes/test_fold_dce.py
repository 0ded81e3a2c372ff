"""Constant folding and dead-code elimination: IR before, expected IR after."""

import numpy as np

from onnxc.ir.checker import check_model
from onnxc.passes.eliminate_dead_code import eliminate_dead_code
from onnxc.passes.infer_shapes import infer_shapes

from .irutil import const, make, node


def test_all_constant_subgraph_folds_and_dead_nodes_go():
    m, v = make({"x": (2, 3)})
    c = const(m, np.ones((3,), np.float32))
    (c2,) = node(m, "Add", [c, c])          # constant: folds
    (y,) = node(m, "Mul", [v["x"], c2])
    node(m, "Relu", [v["x"]])               # dead
    m.graph.outputs = [y]
    infer_shapes(m)
    assert [n.op_type for n in m.graph.nodes] == ["Mul", "Relu"]
    assert np.array_equal(c2.const, np.full((3,), 2, np.float32))
    assert eliminate_dead_code(m).changed
    assert [n.op_type for n in m.graph.nodes] == ["Mul"]
    assert list(m.graph.initializers) == [c2.name]   # the unused input constant is gone too
    check_model(m, typed=True)
    assert str(y.type) == "f32[2, 3]" or y.type.shape == (2, 3)


def test_integer_div_folds_with_truncation():
    m, v = make({"x": (1,)})
    a = const(m, np.array([-7, 7], np.int64))
    b = const(m, np.array([2, -2], np.int64))
    (q,) = node(m, "Div", [a, b])
    m.graph.outputs = [q]
    infer_shapes(m)
    assert q.const.tolist() == [-3, -3]
