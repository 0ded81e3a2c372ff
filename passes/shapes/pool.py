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


def _check_p(node: Node) -> None:
    """LpPool's p: the kernels raise to 1/p."""
    if node.op_type in ("LpPool", "GlobalLpPool") and not float(node.attr("p", 2)) > 0:
        raise fail(node, f"attribute p must be positive, got {node.attr('p')!r}")


@shape_rule("MaxPool", "AveragePool", "LpPool")
def _pool(node: Node) -> list:
    t = tensor_type(node, 0)
    x = shape_of(node, 0)
    _check_p(node)
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
    _check_p(node)
    if len(x) < 2:
        raise fail(node, f"input must have rank >= 2, got shape {list(x)}")
    return [TensorType(t.dtype, (x[0], x[1], *([1] * (len(x) - 2))))]
