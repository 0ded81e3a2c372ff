"""Shape rules of normalizations (BatchNormalization, InstanceNormalization, LayerNormalization, LRN) and
of the softmax family (Softmax, LogSoftmax, Hardmax), plus numpy fold rules of the latter."""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import fail, norm_axis, require_broadcast_to, require_equal, same, shape_of, tensor_type
from .registry import fold_rule, shape_rule


@shape_rule("BatchNormalization")
def _batchnorm(node: Node) -> list:
    x = shape_of(node, 0)
    if len(x) < 2:
        raise fail(node, f"X must have rank >= 2, got shape {list(x)}")
    for i in range(1, 5):
        s = shape_of(node, i)
        if len(s) == 1:  # (before version 7, spatial=0 takes [C, D1, ...])
            require_equal(node, [(x[1], "input 0 axis 1 (channels)"), (s[0], f"input {i} axis 0")],
                          "one scale, bias, mean and variance per channel")
    stat = TensorType(tensor_type(node, 3).dtype, (x[1],))
    return [same(node)] + [stat] * (len(node.outputs) - 1)


@shape_rule("InstanceNormalization")
def _instancenorm(node: Node) -> list:
    x = shape_of(node, 0)
    if len(x) < 3:
        raise fail(node, f"input must have rank >= 3 (N, C, spatial...), got shape {list(x)}")
    for i in (1, 2):
        s = shape_of(node, i)
        if len(s) != 1:
            raise fail(node, f"input {i} must be 1-D of size C, got shape {list(s)}")
        require_equal(node, [(x[1], "input 0 axis 1 (channels)"), (s[0], f"input {i} axis 0")],
                      "one scale and bias per channel")
    return [same(node)]


def stash_dtype(node: Node) -> DType:
    st = int(node.attr("stash_type", 1))
    if st not in (int(DType.FLOAT), int(DType.DOUBLE)):
        raise fail(node, f"stash_type {st} is not supported (float or double)")
    return DType(st)


@shape_rule("LayerNormalization")
def _layernorm(node: Node) -> list:
    x = shape_of(node, 0)
    axis = norm_axis(node, int(node.attr("axis", -1)), len(x))
    require_broadcast_to(node, tuple(x[axis:]), [(shape_of(node, i), f"input {i}") for i in (1, 2)
                                                 if node.input(i) is not None], "scale and bias over the normalized axes")
    stat_shape = tuple(x[:axis]) + (1,) * (len(x) - axis)
    st = TensorType(stash_dtype(node), stat_shape)
    return [same(node), st, st][:len(node.outputs)]


@shape_rule("LRN")
def _lrn(node: Node) -> list:
    x = shape_of(node, 0)
    if len(x) < 3:
        raise fail(node, f"input must have rank >= 3 (N, C, ...), got shape {list(x)}")
    size = node.attr("size")
    if size is None or int(size) <= 0:
        raise fail(node, "attribute size (a positive int) is required")
    return [same(node)]


SOFTMAX_OPS = ("Softmax", "LogSoftmax", "Hardmax")


def softmax_axis(node: Node, rank: int) -> int:
    """The normalized axis: the one reduced (>= 13) or where the input is coerced to 2-D (< 13)."""
    default = -1 if node.version >= 13 else 1
    if rank == 0:
        raise fail(node, "input must have rank >= 1")
    return norm_axis(node, int(node.attr("axis", default)), rank)


@shape_rule(*SOFTMAX_OPS)
def _softmax(node: Node) -> list:
    softmax_axis(node, len(shape_of(node, 0)))
    return [same(node)]


@fold_rule(*SOFTMAX_OPS)
def _fold_softmax(node: Node, xs: list) -> list:
    x = xs[0]
    axis = softmax_axis(node, x.ndim)
    shape = x.shape
    if node.version < 13:  # coerce to 2-D and reduce the trailing axes together
        x = x.reshape(int(np.prod(shape[:axis], dtype=np.int64)), -1)
        axis = 1
    if node.op_type == "Hardmax":
        idx = np.argmax(x, axis=axis)
        y = np.zeros_like(x)
        np.put_along_axis(y, np.expand_dims(idx, axis), 1, axis=axis)
    else:
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - m)
        s = np.sum(e, axis=axis, keepdims=True)
        y = (x - m) - np.log(s) if node.op_type == "LogSoftmax" else e / s
    return [y.astype(xs[0].dtype).reshape(shape)]
