"""Fold inference-mode BatchNormalization into the Conv, ConvTranspose, Gemm or MatMul before it.

BatchNormalization computes ``y = (x - mean) * a + bias`` per channel with ``a = scale / sqrt(var +
epsilon)``. When x is the output of a linear op with constant weights, the same result comes from
the op itself with scaled weights, so the BN node and one pass over the tensor disappear:

- Conv: ``W'[m] = W[m] * a[m]``, ``B' = (B - mean) * a + bias`` (B = 0 when absent);
- ConvTranspose: the output channel of weight ``W[c, j]`` in group g is ``g * M/group + j``, so W is
  scaled along axis 1 within each group; the bias as for Conv;
- Gemm (output [M, N], BN channels = N): column n of op(B) scaled by ``a[n]``; ``C' = (beta C - mean)
  * a + bias`` with beta = 1 afterwards (C = 0 when absent);
- MatMul with a 2-D input and 2-D constant weight (output [M, N]): weight columns scaled, the shift
  becomes an Add of a [N] constant after it.

Conditions: BN in inference mode (opset < 7: is_test = 1; opset >= 14: training_mode = 0) with only
its first output used; all four statistics constant and 1-D of the channel count; epsilon as given;
float or double tensors of one type; the producer's output read only by the BN (not a graph output),
its weights (and bias / C) constant, and no attributes beyond its ONNX ones (an epilogue requested by
another pass would apply after the product: folding must not reorder it). The new weights are computed
in float64 and rounded once to the tensor's type; the old constants stay for other readers (dead code
elimination drops them otherwise). Anything else stays as it was.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType, Value

from .base import PassResult

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})
ONNX_ATTRS = {
    "Conv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "ConvTranspose": {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape",
                      "pads", "strides"},
    "Gemm": {"alpha", "beta", "transA", "transB", "broadcast"},
    "MatMul": set(),
}


def _const(v: Value | None) -> np.ndarray | None:
    return v.const if v is not None and isinstance(v.const, np.ndarray) else None


def bn_coefficients(bn: Node, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(a, shift) in float64 with ``bn(x) = x * a + shift`` per channel, when BN folds; else None."""
    if bn.domain not in ("", "ai.onnx") or len(bn.inputs) < 5:
        return None
    if bn.version < 7 and not bn.attr("is_test", 0):
        return None
    if bn.version >= 14 and bn.attr("training_mode", 0):
        return None
    g = bn.graph
    if any(o.uses() or o in g.outputs for o in bn.outputs[1:]):
        return None
    x = bn.inputs[0]
    stats = [_const(bn.input(i)) for i in range(1, 5)]
    if x.dtype not in FLOATS or any(s is None or s.shape != (channels,) for s in stats):
        return None
    if any(bn.input(i).dtype != x.dtype for i in range(1, 5)):
        return None
    scale, bias, mean, var = (s.astype(np.float64) for s in stats)
    eps = float(bn.attr("epsilon", 1e-5))
    with np.errstate(all="ignore"):
        a = scale / np.sqrt(var + eps)
        shift = bias - mean * a
    return a, shift


def _sole_reader(v: Value, node: Node) -> bool:
    g = v.graph
    return g is not None and v not in g.outputs and [u for u, _ in v.uses()] == [node]


def _channels(p: Node) -> int | None:
    """The number of output channels (BN's axis 1) of a foldable producer, else None."""
    if p.domain not in ("", "ai.onnx") or p.op_type not in ONNX_ATTRS or len(p.outputs) != 1:
        return None
    if set(p.attrs) - ONNX_ATTRS[p.op_type]:
        return None
    w = _const(p.input(1))
    out = p.outputs[0].type
    if w is None or not isinstance(out, TensorType) or out.shape is None or len(out.shape) < 2:
        return None
    if p.op_type == "Conv":
        return w.shape[0] if w.ndim >= 3 else None
    if p.op_type == "ConvTranspose":
        return w.shape[1] * int(p.attr("group", 1)) if w.ndim >= 3 else None
    if p.op_type == "Gemm":
        if w.ndim != 2 or p.attr("broadcast", None) is not None:
            return None
        return w.shape[0] if p.attr("transB", 0) else w.shape[1]
    a = p.input(0)  # MatMul
    if w.ndim != 2 or a.shape is None or len(a.shape) != 2 or p.version < 7:
        return None
    return w.shape[1]


def _scaled_weight(p: Node, w: np.ndarray, a: np.ndarray) -> np.ndarray:
    w64 = w.astype(np.float64)
    if p.op_type == "Conv":
        return w64 * a.reshape((-1,) + (1,) * (w.ndim - 1))
    if p.op_type == "ConvTranspose":
        g = int(p.attr("group", 1))
        shape = w.shape
        w64 = w64.reshape((g, shape[0] // g) + shape[1:])
        return (w64 * a.reshape((g, 1, shape[1]) + (1,) * (w.ndim - 2))).reshape(shape)
    if p.op_type == "Gemm" and p.attr("transB", 0):
        return w64 * a[:, None]
    return w64 * a[None, :]


def _fold(g: Graph, bn: Node, p: Node, a: np.ndarray, shift: np.ndarray) -> None:
    dt = bn.inputs[0].dtype.np
    w = _const(p.input(1))
    p.set_input(1, g.constant(_scaled_weight(p, w, a).astype(dt), g.fresh_name(f"{p.inputs[1].name}_bn")))
    if p.op_type in ("Conv", "ConvTranspose"):
        b = _const(p.input(2))
        b64 = np.zeros(a.shape) if b is None else b.astype(np.float64)
        new_b = g.constant((b64 * a + shift).astype(dt), g.fresh_name("bn_bias"))
        if len(p.inputs) > 2:
            p.set_input(2, new_b)
        else:
            p.add_input(new_b)
    elif p.op_type == "Gemm":
        c = _const(p.input(2))
        beta = float(p.attr("beta", 1.0))
        c64 = np.zeros(a.shape) if c is None else beta * c.astype(np.float64)
        new_c = g.constant((c64 * a + shift).astype(dt), g.fresh_name("bn_bias"))
        if len(p.inputs) > 2:
            p.set_input(2, new_c)
        else:
            p.add_input(new_c)
        if "beta" in p.attrs:
            del p.attrs["beta"]
    y = bn.outputs[0]
    g.remove(bn)
    if p.op_type == "MatMul":
        mid = Value(g.fresh_name(f"{y.name}_mm"), p.outputs[0].type)
        _retarget(p, mid)
        add = Node("Add", [mid, g.constant(shift.astype(dt), g.fresh_name("bn_bias"))], [y],
                   name=g.fresh_name(f"{bn.name or y.name}_shift"), version=bn.version)
        at = g.nodes.index(p) + 1
        if at < len(g.nodes):
            g.insert_before(g.nodes[at], add)
        else:
            g.append(add)
        return
    _retarget(p, y)


def _retarget(p: Node, v: Value) -> None:
    """Make ``p`` produce ``v`` (the BN's output keeps its name, which may be public) instead of its own."""
    old = p.outputs[0]
    old.producer = None
    v.type = old.type if v.type is None else v.type
    p.outputs[0] = v
    v.producer = p
    v.graph = p.graph


def fold_graph(g: Graph) -> bool:
    changed = False
    for bn in list(g.nodes):
        if bn.op_type != "BatchNormalization" or bn.graph is not g:
            continue
        x = bn.input(0)
        p = None if x is None else x.producer
        if p is None or p.graph is not g or not _sole_reader(x, bn):
            continue
        channels = _channels(p)
        if channels is None:
            continue
        coef = bn_coefficients(bn, channels)
        w, c = p.input(1), p.input(2)
        if coef is None or w.dtype != x.dtype or (c is not None and (_const(c) is None or c.dtype != x.dtype)):
            continue
        _fold(g, bn, p, *coef)
        changed = True
    return changed


def fold_batchnorm(model: Model) -> PassResult:
    return PassResult(model, fold_graph(model.graph))
