"""Shape rules of Conv and ConvTranspose (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad)."""

from __future__ import annotations

from onnxc.ir import Node, TensorType, UnsupportedOpError
from onnxc.ir.dims import as_dim, is_static

from .common import fail, require_equal, shape_of, tensor_type
from .registry import shape_rule
from .spatial import Window, transpose_window, window


def kernel_shape(node: Node, w: tuple) -> tuple[int, ...]:
    """Kernel spatial size from the kernel_shape attribute or the weight shape (must be static)."""
    ks = node.attr("kernel_shape")
    if ks is not None:
        ks = tuple(int(k) for k in ks)
        if len(ks) != len(w) - 2:
            raise fail(node, f"kernel_shape {list(ks)} does not match weight rank {len(w)}")
        for k, d in zip(ks, w[2:]):
            if is_static(d) and d != k:
                raise fail(node, f"kernel_shape {list(ks)} does not match weight shape {list(w)}")
        return ks
    if not all(is_static(d) for d in w[2:]):
        raise UnsupportedOpError(f"{node.describe()}: weight spatial dims {list(w[2:])} must be static",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    return tuple(int(d) for d in w[2:])


def _check_common(node: Node) -> tuple[tuple, tuple, int]:
    x, w = shape_of(node, 0), shape_of(node, 1)
    tx, tw = tensor_type(node, 0), tensor_type(node, 1)
    if tx.dtype != tw.dtype:
        raise fail(node, f"X and W element types differ: {tx.dtype.short} vs {tw.dtype.short}")
    if len(x) < 3 or len(w) != len(x):
        raise fail(node, f"X (shape {list(x)}) and W (shape {list(w)}) must have the same rank >= 3")
    group = int(node.attr("group", 1))
    if group <= 0:
        raise fail(node, f"group must be positive, got {group}")
    return x, w, group


def conv_window(node: Node) -> Window:
    x, w, _ = _check_common(node)
    return window(node, tuple(x[2:]), kernel_shape(node, w))


def conv_transpose_window(node: Node) -> Window:
    x, w, _ = _check_common(node)
    return transpose_window(node, tuple(x[2:]), kernel_shape(node, w))


@shape_rule("Conv")
def _conv(node: Node) -> list:
    x, w, group = _check_common(node)
    c, m, cg = x[1], w[0], w[1]
    require_equal(node, [(c, "input 0 axis 1 (X's channels)"), (as_dim(cg) * group, f"W's channels x group {group}")],
                  "convolution channels")
    if is_static(m) and m % group:
        raise fail(node, f"output channels {m} are not divisible by group {group}")
    b = node.input(2)
    if b is not None:
        bs = shape_of(node, 2)
        if len(bs) != 1:
            raise fail(node, f"bias must have shape [{m}], got {list(bs)}")
        require_equal(node, [(bs[0], "input 2 axis 0 (the bias)"), (m, "input 1 axis 0 (W's output channels)")],
                      "one bias per output channel")
    win = conv_window(node)
    return [TensorType(tensor_type(node, 0).dtype, (x[0], m, *win.out))]


@shape_rule("ConvTranspose")
def _conv_transpose(node: Node) -> list:
    x, w, group = _check_common(node)
    c = x[1]
    require_equal(node, [(c, "input 0 axis 1 (X's channels)"), (w[0], "input 1 axis 0 (W's input channels)")],
                  "convolution channels")
    if is_static(c) and c % group:
        raise fail(node, f"input channels {c} are not divisible by group {group}")
    m = w[1] * group
    b = node.input(2)
    if b is not None:
        bs = shape_of(node, 2)
        if len(bs) != 1:
            raise fail(node, f"bias must have shape [{m}], got {list(bs)}")
        require_equal(node, [(bs[0], "input 2 axis 0 (the bias)"), (m, "the output channels")],
                      "one bias per output channel")
    win = conv_transpose_window(node)
    return [TensorType(tensor_type(node, 0).dtype, (x[0], m, *win.out))]
