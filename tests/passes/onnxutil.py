"""Build small ONNX models with onnx.helper, load them into the IR and print the IR with its bodies, for
before/expected-IR tests of single passes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxc.frontend import load_model
from onnxc.ir import Graph, Model

F = TensorProto.FLOAT


def vi(name: str, shape=None, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def body(name: str, nodes: list, outputs: list[str], inputs: list | None = None) -> onnx.GraphProto:
    """A subgraph with untyped outputs (an If branch when ``inputs`` is empty)."""
    return helper.make_graph(nodes, name, inputs or [], [vi(o) for o in outputs])


def model(nodes: list, inputs: list, outputs: list, inits: dict | None = None, opset: int = 17) -> onnx.ModelProto:
    """``inputs``/``outputs``: ValueInfoProtos or names (untyped float outputs); ``inits``: name -> array."""
    outs = [vi(o) if isinstance(o, str) else o for o in outputs]
    tensors = [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()]
    g = helper.make_graph(nodes, "g", inputs, outs, tensors)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def load(m: onnx.ModelProto) -> Model:
    return load_model(m)


def dump(g: Graph) -> str:
    """The graph's printed IR followed by every body it holds (depth first), each in its own block."""
    parts = [repr(g)]
    for n in g.nodes:
        for sg in n.subgraphs():
            parts.append(dump(sg))
    return "\n".join(parts)


def ops(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def ort_run(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
