"""Fold the activation after a matrix-vector product into the product (codegen/kernels/gemv.py).

A Gemm or MatMul whose A has a small static row count M (batch-1 fully connected layers) and whose B
is a constant float32 matrix runs as a GEMV that streams B once (runtime_c/onnxc_gemv.h). When its
only reader is an activation, this pass removes the activation node and asks the product to apply it
to each finished panel of columns instead, with the epilogue attributes of codegen/kernels/epilogue.py
(``onnxc_activation``, ``onnxc_activation_params``), so the output is written once:

- ``Gemm/MatMul -> Relu | Tanh | Sigmoid | HardSwish`` -> product with ``onnxc_activation=<op>``;
- ``-> LeakyRelu(alpha)``, ``-> HardSigmoid(alpha, beta)`` -> the same with their parameters;
- ``-> Clip`` with constant (or absent) bounds -> ``Clip`` with ``[min, max]``.

Only the GEMV case (:func:`gemv_dims`) is touched; general GEMM epilogues belong to the GEMM's own
fusion. The activation must read the product's output alone, compute in float32 and be in the same
graph; the product must not already carry an epilogue. The activation's output value (its name, its
place among the graph outputs) is kept, now produced by the product.
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType
from onnxc.ir.graph import Attr

from .base import PassResult

ACT_ATTR = "onnxc_activation"          # the names codegen/kernels/epilogue.py reads
PARAMS_ATTR = "onnxc_activation_params"
RESIDUAL_ATTR = "onnxc_residual"
GEMV_MMAX = 8  # largest row count of the GEMV path (ONNXC_GV_MMAX in runtime_c/onnxc_gemv.h)


def _static_shape(v) -> tuple[int, ...] | None:
    t = None if v is None else v.type
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def gemv_dims(node: Node) -> tuple[int, int, int] | None:
    """(M, K, N) when ``node`` (Gemm or MatMul) runs on the GEMV path, else None: float32 output, B a
    2-D float32 constant, A's rows (all leading axes of a MatMul's A) static and at most GEMV_MMAX; a
    transposed A only when it is a single row. The kernel (codegen/kernels/gemv.py) uses the same test."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Gemm", "MatMul") or not node.outputs:
        return None
    a, b = node.input(0), node.input(1)
    out = node.outputs[0].type
    if not isinstance(out, TensorType) or out.dtype != DType.FLOAT or a is None or b is None:
        return None
    if b.const is None or b.dtype != DType.FLOAT:
        return None
    bs, as_ = _static_shape(b), _static_shape(a)
    if bs is None or len(bs) != 2 or as_ is None or not as_:
        return None
    if node.op_type == "Gemm":
        if len(as_) != 2:
            return None
        ta, tb = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
        m, k = (as_[1], as_[0]) if ta else as_
        if ta and m != 1:
            return None
        n = bs[0] if tb else bs[1]
    else:
        m, k, n = math.prod(as_[:-1]), as_[-1], bs[1]
    if not 1 <= m <= GEMV_MMAX or n < 1:
        return None
    return m, k, n


def _scalar(v) -> float | None:
    if v is None:
        return None
    if v.const is None or np.size(v.const) != 1:
        raise ValueError("bound computed at run time")
    return float(np.asarray(v.const).reshape(-1)[0])


def activation(node: Node) -> tuple[str, list[float]] | None:
    """The epilogue (name, parameters) that computes ``node``, or None when it cannot be one."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    x = node.input(0)
    if x is None or x.dtype != DType.FLOAT:
        return None
    op = node.op_type
    if op in ("Relu", "Tanh", "Sigmoid", "HardSwish"):
        return op, []
    if op == "LeakyRelu":
        return op, [float(node.attr("alpha", 0.01))]
    if op == "HardSigmoid":
        return op, [float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))]
    if op == "Clip":
        if node.version < 11:
            lo, hi = node.attr("min", None), node.attr("max", None)
        else:
            try:
                lo, hi = _scalar(node.input(1)), _scalar(node.input(2))
            except ValueError:
                return None
        return op, [-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi)]
    return None


def fuse_graph(g: Graph) -> bool:
    changed = False
    public = {v.id for v in g.outputs}
    for node in list(g.nodes):
        if node.graph is not g or gemv_dims(node) is None or node.attr(ACT_ATTR, None) \
                or node.attr(RESIDUAL_ATTR, 0):
            continue
        t = node.outputs[0]
        uses = t.uses()
        if len(uses) != 1 or t.id in public:
            continue
        act, idx = uses[0]
        if idx != 0 or act.graph is not g:
            continue
        spec = activation(act)
        if spec is None or act.outputs[0].dtype != DType.FLOAT:
            continue
        name, params = spec
        y = act.outputs[0]
        g.remove(act)
        node.outputs[0] = y
        y.producer = node
        node.attrs[ACT_ATTR] = Attr(ACT_ATTR, "STRING", name)
        if params:
            node.attrs[PARAMS_ATTR] = Attr(PARAMS_ATTR, "FLOATS", params)
        changed = True
    return changed


def fuse_gemv_epilogue(model: Model) -> PassResult:
    return PassResult(model, fuse_graph(model.graph))
