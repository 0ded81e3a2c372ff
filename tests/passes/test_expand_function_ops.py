"""passes/expand_function_ops.py: a standard function op without a kernel is replaced in place by the
primitive nodes of its expansion (IR before, expected IR after), ops without an expansion are left
alone, and a builder's refusal names the node. The numbers of each expansion against onnxruntime and
onnx.reference are in test_expansions.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnxc.ir import ShapeError
from onnxc.ir.checker import check_model
from onnxc.passes.expand_function_ops import expand_node, has_expansion
from onnxc.passes.infer_shapes import infer_shapes

from .onnxutil import dump, load, model, ops, vi

n = helper.make_node


def _rms(axis: int = -1):
    return load(model([n("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-5)],
                      [vi("x", ["N", 4]), vi("s", [4])], ["y"], opset=23))


def test_rms_normalization_expands_in_place():
    m = _rms()
    node = m.graph.nodes[0]
    assert has_expansion(node)
    moved = expand_node(node)
    assert [k.op_type for k in moved] == ["Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul"]
    assert dump(m.graph).split(") {\n")[1] == """\
  init %RMSNormalization_ints_0: int64[1]
  init %RMSNormalization_const_0: float[]
  %RMSNormalization_Mul_0 = Mul(%x, %x)
  %RMSNormalization_ReduceMean_0 = ReduceMean(%RMSNormalization_Mul_0, %RMSNormalization_ints_0) {keepdims=1}
  %RMSNormalization_Add_0 = Add(%RMSNormalization_ReduceMean_0, %RMSNormalization_const_0)
  %RMSNormalization_Sqrt_0 = Sqrt(%RMSNormalization_Add_0)
  %RMSNormalization_Div_0 = Div(%x, %RMSNormalization_Sqrt_0)
  %y = Mul(%RMSNormalization_Div_0, %s)
  return %y
}"""
    ini = m.graph.initializers
    assert ini["RMSNormalization_ints_0"].const.tolist() == [1]
    assert ini["RMSNormalization_const_0"].const == np.float32(1e-5)
    assert m.graph.outputs[0].producer is moved[-1] and node not in m.graph.nodes
    check_model(m)


def test_shape_inference_expands_and_types_the_result():
    m = _rms()
    assert infer_shapes(m).changed
    assert ops(m.graph) == ["Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul"]
    assert str(m.graph.outputs[0].type) == "float[N, 4]"


def test_ops_without_expansion_are_left_alone():
    m = load(model([n("Relu", ["x"], ["y"])], [vi("x", [2])], ["y"]))
    before = dump(m.graph)
    assert not has_expansion(m.graph.nodes[0]) and expand_node(m.graph.nodes[0]) is None
    assert dump(m.graph) == before


def test_refusal_names_the_node():
    m = _rms(axis=3)
    with pytest.raises(ShapeError, match=r"RMSNormalization \(outputs 'y'\): axis 3 is out of range for rank 2"):
        expand_node(m.graph.nodes[0])
