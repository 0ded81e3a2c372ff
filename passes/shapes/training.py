"""Shape rules of the optimizer ops of ai.onnx.preview.training: Adagrad, Adam and Momentum.

Each takes the learning rate R and the update count T (scalars), then ``k`` groups of ``n`` tensors
(X..., G..., and the optimizer's state: H for Adagrad, V for Momentum, V and H for Adam) and
returns ``m`` groups of ``n`` updated tensors, each shaped and typed like its X. The optimizer
formulas are elementwise; onnxc requires each G/V/H to have its X's shape (no broadcasting).
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType, Node, TensorType, UnsupportedOpError

from .common import fail, shape_of, tensor_type
from .registry import shape_rule

TRAINING_DOMAIN = "ai.onnx.preview.training"
FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})


@dataclass(frozen=True)
class Layout:
    """How an optimizer's variadic inputs and outputs are grouped."""

    in_groups: int   # X, G and the state tensors
    out_groups: int  # X_new and the new state tensors


LAYOUTS = {"Adagrad": Layout(3, 2), "Momentum": Layout(3, 2), "Adam": Layout(4, 3)}


def tensor_count(node: Node) -> int:
    """``n``, the number of optimized tensors; errors name the node when the counts do not fit."""
    lay = LAYOUTS[node.op_type]
    rest = len(node.inputs) - 2
    if rest <= 0 or rest % lay.in_groups:
        raise fail(node, f"expects R, T and {lay.in_groups} groups of n tensors, got {len(node.inputs)} inputs")
    n = rest // lay.in_groups
    if len(node.outputs) != lay.out_groups * n:
        raise fail(node, f"optimizes {n} tensor(s), so it has {lay.out_groups * n} outputs, got {len(node.outputs)}")
    return n


@shape_rule("Adagrad", "Adam", "Momentum", domain=TRAINING_DOMAIN)
def _optimizer(node: Node) -> list:
    n = tensor_count(node)
    lay = LAYOUTS[node.op_type]
    for i, what in ((0, "R"), (1, "T")):
        s = shape_of(node, i)
        if any(d != 1 for d in s):
            raise fail(node, f"{what} must be a scalar, got shape {list(s)}")
    if tensor_type(node, 0).dtype not in FLOATS:
        raise fail(node, f"R must be float or double, got {tensor_type(node, 0).dtype.short}")
    if tensor_type(node, 1).dtype != DType.INT64:
        raise fail(node, f"T must be int64, got {tensor_type(node, 1).dtype.short}")
    if node.op_type == "Momentum" and momentum_mode(node) not in ("standard", "nesterov"):
        raise fail(node, f"mode must be 'standard' or 'nesterov', got {momentum_mode(node)!r}")
    types = []
    for j in range(n):
        x = tensor_type(node, 2 + j)
        if x.dtype not in FLOATS:
            raise fail(node, f"X[{j}] must be float or double, got {x.dtype.short}")
        for g in range(1, lay.in_groups):
            i = 2 + g * n + j
            t = tensor_type(node, i)
            if t.dtype != x.dtype:
                raise fail(node, f"input {i} is {t.dtype.short}, its X[{j}] is {x.dtype.short}")
            if shape_of(node, i) != shape_of(node, 2 + j):
                raise UnsupportedOpError(
                    f"{node.describe()}: input {i} of shape {list(shape_of(node, i))} would broadcast to X[{j}] "
                    f"of shape {list(x.shape)} (only equal shapes are supported)",
                    [(TRAINING_DOMAIN, node.op_type, node.version)])
        types.append(TensorType(x.dtype, x.shape))
    return [types[k % n] for k in range(lay.out_groups * n)]


def momentum_mode(node: Node) -> str:
    """Momentum's ``mode`` attribute ('standard' or 'nesterov' when valid)."""
    m = node.attr("mode", "")
    return m.decode() if isinstance(m, bytes) else str(m)
