"""Build small IR graphs directly for pass tests."""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType, Value


def make(inputs: dict[str, tuple], opset: int = 21) -> tuple[Model, dict[str, Value]]:
    g = Graph()
    vals = {n: g.add_input(Value(n, TensorType(DType.FLOAT, s))) for n, s in inputs.items()}
    return Model(g, {"": opset}), vals


def node(m: Model, op: str, ins: list, n_out: int = 1, **attrs) -> list[Value]:
    from onnxc.ir import Attr

    g = m.graph
    outs = [Value(g.fresh_name(op.lower())) for _ in range(n_out)]
    kinds = {float: "FLOAT", int: "INT", str: "STRING", list: "INTS"}
    a = {k: Attr(k, kinds[type(v)], v) for k, v in attrs.items()}
    g.append(Node(op, ins, outs, a, version=m.opset_imports[""]))
    return outs


def const(m: Model, arr) -> Value:
    return m.graph.constant(np.asarray(arr))
