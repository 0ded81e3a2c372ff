"""Bodies of control-flow ops (If branches, Loop/Scan/SequenceMap bodies) through the same pipeline.

Codegen compiles each body as a run function of its own (codegen/lower.py ``subprogram``), taking
its formals as tensor descriptors. Before that, each body is optimized here by the pass manager of
the main graph, so the IR checker (``check_ir`` / ONNXC_CHECK_IR) and ``dump_ir`` cover it too, its
steps named "in <node>.<attribute>". Bodies nested in bodies follow, after the body that holds them.

Before its passes, a body is made callable (``prepare_body``):
- compound dims of its formal inputs (``2*N``) become symbols of their own, which a run function can
  bind from the descriptors (the caller's checks keep them consistent);
- a string tensor leaving the body is refused: the caller would copy pointers out of a per-call pool.
"""

from __future__ import annotations

from collections.abc import Callable

from onnxc.ir import DType, Graph, Model, Node, TensorType, UnsupportedOpError
from onnxc.ir.dims import as_symbol, sym

Optimize = Callable[[Model, str], Model]  # (body model, where) -> optimized model


def optimize_bodies(model: Model, optimize: Optimize, where: str = "") -> None:
    """Optimize every body held by the nodes of ``model``'s graph, in graph order, then their bodies."""
    for node in list(model.graph.nodes):
        for key, attr in node.attrs.items():
            if attr.kind == "GRAPH":
                attr.value = _optimize_body(model, node, key, attr.value, optimize, where)
            elif attr.kind == "GRAPHS":
                attr.value = [_optimize_body(model, node, f"{key}[{i}]", b, optimize, where)
                              for i, b in enumerate(attr.value)]


def _optimize_body(model: Model, node: Node, key: str, body: Graph, optimize: Optimize, where: str) -> Graph:
    inner = f"{where + ' / ' if where else ''}{node.describe()}.{key}"
    prepare_body(body)
    sub = optimize(Model(body, dict(model.opset_imports), dict(model.functions)), inner)
    optimize_bodies(sub, optimize, inner)
    return sub.graph


def prepare_body(body: Graph) -> None:
    """Make ``body`` compilable as a run function of its own (see the top)."""
    for v in body.outputs:
        if isinstance(v.type, TensorType) and v.type.dtype == DType.STRING:
            raise UnsupportedOpError(f"body output {v.name!r} is a string tensor; strings leaving If/Loop/Scan "
                                     "bodies are not supported yet", [("ai.onnx", "string body outputs", 0)])
    for v in body.inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            continue
        dims = tuple(d if isinstance(d, int) or as_symbol(d) is not None else sym(f"{v.name}[{ax}]")
                     for ax, d in enumerate(t.shape))
        if dims != t.shape:
            v.type = TensorType(t.dtype, dims)
