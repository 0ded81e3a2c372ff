"""Merge per-channel Mul/Add after an inference BatchNormalization into it.

Some exported models (Caffe2 Inception v2, DenseNet-121) follow every BatchNormalization with a
``Mul`` and an ``Add`` of per-channel constants and then a Relu. Left alone that is two or three
passes over the tensor and, after a Conv, the Mul/Add stop fold_batchnorm and epilogue fusion.

While a BN's output is read only by a Mul (Add) whose other input is a constant of the BN's type that
broadcasts along the channel axis only (right-aligned shape of all ones except the channel axis, rank
at most the BN's, so the output shape is unchanged), the BN absorbs it: ``bn(x) * c`` is the BN with
scale and bias times ``c``; ``bn(x) + d`` the BN with bias ``+ d`` (computed in float64, rounded once).
The Mul/Add's output becomes the BN's output. Runs before fold_batchnorm, so a Conv then absorbs the
whole affine map and its epilogue the Relu.

Applies only to inference BNs that bn_coefficients accepts (constant 1-D statistics of the static
channel count, float/double, no training outputs read) on inputs of rank >= 2.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Graph, Model, Node, TensorType

from .base import PassResult
from .bn_common import bn_channels, sole_reader
from .fold_batchnorm import bn_coefficients


def _per_channel(c: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``c`` as a [channels] float64 vector when it broadcasts along axis 1 of a rank-``rank``
    tensor only (other dims 1, rank <= rank), else None."""
    if c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(c.astype(np.float64).reshape(-1), (channels,))


def _absorb(g: Graph, bn: Node, channels: int) -> bool:
    """Absorb the Mul/Add that solely reads the BN's output, when it qualifies."""
    y = bn.outputs[0]
    op = sole_reader(y)
    if op is None or op.op_type not in ("Mul", "Add") or op.domain not in ("", "ai.onnx"):
        return False
    if op.attrs or len(op.inputs) != 2 or len(op.outputs) != 1:
        return False  # legacy broadcast/axis attributes
    other = op.inputs[1] if op.inputs[0] is y else op.inputs[0]
    if other is y or not isinstance(other.const, np.ndarray) or other.dtype != y.dtype:
        return False
    out = op.outputs[0]
    if not isinstance(out.type, TensorType) or out.type.shape != y.type.shape:
        return False
    c = _per_channel(other.const, len(y.shape), channels)
    if c is None:
        return False
    dt = bn.inputs[0].dtype.np
    scale, bias = (bn.inputs[i].const.astype(np.float64) for i in (1, 2))
    if op.op_type == "Mul":
        scale, bias = scale * c, bias * c
    else:
        bias = bias + c
    bn.set_input(1, g.constant(scale.astype(dt), g.fresh_name(f"{bn.inputs[1].name}_aff")))
    bn.set_input(2, g.constant(bias.astype(dt), g.fresh_name(f"{bn.inputs[2].name}_aff")))
    g.remove(op)
    y.producer = None
    bn.outputs[0] = out
    out.producer = bn
    return True


def merge_affine_graph(g: Graph) -> bool:
    changed = False
    for bn in list(g.nodes):
        if bn.op_type != "BatchNormalization" or bn.graph is not g:
            continue
        channels = bn_channels(bn)
        if channels is None or bn_coefficients(bn, channels) is None:
            continue
        while _absorb(g, bn, channels):
            changed = True
    return changed


def merge_affine(model: Model) -> PassResult:
    return PassResult(model, merge_affine_graph(model.graph))
