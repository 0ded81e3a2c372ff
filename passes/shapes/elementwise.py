"""Shape and fold rules of elementwise ops: same-shape unary ops and broadcasting n-ary ops."""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import broadcast_dims, same, shape_of, tensor_type
from .registry import fold_rule, shape_rule

UNARY_SAME = ["Relu", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Sigmoid", "Tanh", "LeakyRelu",
              "Floor", "Ceil"]
BINARY_SAME = ["Add", "Sub", "Mul", "Div"]
COMPARE = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


@shape_rule(*UNARY_SAME)
def _unary(node: Node) -> list:
    return [same(node)]


@shape_rule(*BINARY_SAME)
def _binary(node: Node) -> list:
    t = tensor_type(node, 0)
    return [TensorType(t.dtype, broadcast_dims(node, [shape_of(node, 0), shape_of(node, 1)]))]


@shape_rule(*COMPARE)
def _compare(node: Node) -> list:
    return [TensorType(DType.BOOL, broadcast_dims(node, [shape_of(node, 0), shape_of(node, 1)]))]


_NP_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
              "Greater": np.greater, "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


@fold_rule(*_NP_BINARY, "Div")
def _fold_binary(node: Node, xs: list) -> list:
    a, b = xs[0], xs[1]
    if node.op_type == "Div":
        if a.dtype.kind in "iu":
            if np.any(b == 0):
                return None
            q = (np.abs(a) // np.abs(b)) * (np.sign(a) * np.sign(b))  # C truncating division
            return [q.astype(a.dtype)]
        return [np.divide(a, b).astype(a.dtype)]
    r = _NP_BINARY[node.op_type](a, b)
    return [r if r.dtype == bool else r.astype(a.dtype)]
