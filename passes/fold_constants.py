"""Constant folding: a node whose inputs are all constant is computed at compile time.

Uses the numpy fold rules registered beside the shape rules (same semantics as the C kernels). A
folded output becomes an initializer of the graph; the node disappears. Results are size-capped so a
small ConstantOfShape does not turn into megabytes of weights: the cap is checked on the inferred
output types *before* the fold rule runs (a ConstantOfShape, Expand, Range or Tile to 2^40 elements
is never allocated), and again on the result for outputs whose shape was not static.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType, dtype_from_numpy
from onnxc.ir.limits import byte_size, element_count

from .base import PassResult
from .shapes.registry import fold_for

MAX_FOLD_BYTES = 1 << 22  # results above this fold only when no larger than their inputs


def _narrow_matmul_weight(node: Node) -> bool:
    """A DequantizeLinear of a 4-bit constant read as a MatMul's B: left whole for fold_weight_dequant,
    which keeps such weights 4-bit (onnxc::MatMulNBits) or else folds them without the cap."""
    if node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx") or not node.inputs:
        return False
    q = node.inputs[0]
    if q is None or q.dtype not in (DType.INT4, DType.UINT4):
        return False
    return any(u.op_type == "MatMul" and u.domain in ("", "ai.onnx") and i == 1 for u, i in node.outputs[0].uses())


def try_fold(node: Node, capped: bool = True) -> bool:
    """Fold ``node`` in place if possible; True when it was folded. ``capped=False`` skips the size cap
    (for outputs that are needed whole anyway: passes/fold_weight_dequant.py)."""
    if node.graph is None or any(sg for sg in node.subgraphs()):
        return False
    if any(not isinstance(o.type, TensorType) for o in node.outputs):
        return False
    if capped and _narrow_matmul_weight(node):
        return False
    ins = node.inputs
    arrays = [None if v is None else v.const for v in ins]
    in_bytes = sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
    if capped and _static_bytes(node) > max(MAX_FOLD_BYTES, in_bytes):
        return False
    results = _static_sym_values(node)
    if results is None:
        fn = fold_for(node)
        if fn is None or any(v is not None and v.const is None for v in ins):
            return False
        results = fn(node, arrays)
    if results is None:
        return False
    out_bytes = sum(np.asarray(r).nbytes for r in results)
    if capped and out_bytes > MAX_FOLD_BYTES and out_bytes > in_bytes:
        return False
    g = node.graph
    outs = list(node.outputs)
    if is_shape_computation(node):
        g.folded.append(node.describe())
    g.remove(node)
    for o, r in zip(outs, results):
        r = np.asarray(r)
        want = o.type.dtype if isinstance(o.type, TensorType) else dtype_from_numpy(r.dtype)
        if r.dtype != want.np:
            r = r.astype(want.np)
        o.const = r
        o.type = TensorType(want, r.shape)
        o.producer = None
        g.add_initializer(o)
    return True


def _static_bytes(node: Node) -> int:
    """Bytes of the outputs whose inferred shapes are static (exact: a huge shape gives a huge number)."""
    return sum(byte_size(o.type.dtype, o.type.shape) for o in node.outputs
               if isinstance(o.type, TensorType) and o.type.is_static)


def is_shape_computation(node: Node) -> bool:
    """A model node computing a shape tensor (every output has a symbolic value), for the record of
    folded shape subgraphs. Constants and onnxc's own nodes do not count."""
    return node.op_type != "Constant" and node.domain != "onnxc" and bool(node.outputs) and \
        all(o.sym_value is not None for o in node.outputs)


def _static_sym_values(node: Node) -> list[np.ndarray] | None:
    """Outputs whose symbolic values (shape tensors) are all plain ints are constants, whatever the inputs
    (e.g. Shape of a statically shaped tensor, Gather of a static dim from a symbolic shape)."""
    outs = []
    for o in node.outputs:
        sv, t = o.sym_value, o.type
        if sv is None or not t.is_static or not all(isinstance(d, int) for d in sv) or \
                len(sv) != element_count(t.shape):
            return None
        outs.append(np.array(sv, dtype=t.dtype.np).reshape(t.shape))
    return outs or None


def fold_graph(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        changed |= try_fold(n)
    return changed


def fold_constants(model: Model) -> PassResult:
    return PassResult(model, fold_graph(model.graph))
