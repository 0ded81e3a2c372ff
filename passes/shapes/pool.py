"""Shape rules of the pooling ops: MaxPool (with Indices), AveragePool, LpPool and the global pools."""

from __future__ import annotations

from onnxc.ir import DType, Node, TensorType

from .common import fail, shape_of, tensor_type
from .registry import shape_rule
from .spatial import Window, window


def pool_window(node: Node) -> Window:
    """Window geometry of a (non-global) pooling node."""
    x = shape_of(node, 0)
    if len(x) < 3:
        raise fail(node, f"input must have rank >= 3 (N, C, spatial...), got shape {list(x)}")
    ks = node.attr("kernel_shape")
    if ks is None:
        raise fail(node, "attribute kernel_shape is required")
    ks = tuple(int(k) for k in ks)
    if len(ks) != len(x) - 2:
        raise fail(node, f"kernel_shape {list(ks)} does not match input rank {len(x)}")
    return window(node, tuple(x[2:]), ks, ceil_mode=bool(node.attr("ceil_mode", 0)))


@shape_rule("MaxPool", "AveragePool", "LpPool")
def _pool(node: Node) -> list:
    t = tensor_type(node, 0)
    x = shape_of(node, 0)
    win = pool_window(node)
    shape = (x[0], x[1], *win.out)
    outs = [TensorType(t.dtype, shape)]
    if node.op_type == "MaxPool" and len(node.outputs) > 1:
        outs.append(TensorType(DType.INT64, shape))
    return outs


@shape_rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(node: Node) -> list:
    t = tensor_type(node, 0)
    x = shape_of(node, 0)
    if len(x) < 2:
        raise fail(node, f"input must have rank >= 2, got shape {list(x)}")
    return [TensorType(t.dtype, (x[0], x[1], *([1] * (len(x) - 2))))]
