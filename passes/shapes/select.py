"""Shape and fold rules of ops whose output size is the count of selected elements: NonZero,
Compress, Unique and NonMaxSuppression.

The count is known only at run time, so it is a run-time dimension variable
(``common.runtime_dim``) that the op's C shape function computes from the input data before the
kernel runs. Ranks are static. NonZero and Compress fold when their inputs are constant.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import fail, norm_axis, runtime_dim, shape_of, tensor_type
from .registry import fold_rule, shape_rule

# -- NonZero --------------------------------------------------------------------------------------


@shape_rule("NonZero")
def _nonzero(node: Node) -> list:
    r = len(shape_of(node, 0))
    return [TensorType(DType.INT64, (r, runtime_dim(node, 0, 1)))]


@fold_rule("NonZero")
def _fold_nonzero(node: Node, xs: list) -> list:
    x = xs[0]
    if x.ndim == 0:  # like the reference: one coordinate row per axis, none for a scalar
        return [np.zeros((0, int(x != 0)), dtype=np.int64)]
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


# -- Compress -------------------------------------------------------------------------------------

def compress_axis(node: Node, rank: int) -> int | None:
    """The normalized axis of Compress, or None to select from the flattened input."""
    axis = node.attr("axis")
    return None if axis is None else norm_axis(node, int(axis), rank)


@shape_rule("Compress")
def _compress(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    if len(shape_of(node, 1)) != 1:
        raise fail(node, f"condition must be 1-D, got shape {list(shape_of(node, 1))}")
    if tensor_type(node, 1).dtype != DType.BOOL:
        raise fail(node, f"condition must be bool, got {tensor_type(node, 1).dtype.short}")
    axis = compress_axis(node, len(dims))
    n = tensor_type(node, 0).numel() if axis is None else dims[axis]
    count = _constant_count(node, n)
    if count is None:
        count = runtime_dim(node, 0, 0 if axis is None else axis)
    if axis is None:
        return [TensorType(t.dtype, (count,))]
    return [TensorType(t.dtype, dims[:axis] + (count,) + dims[axis + 1:])]


def _constant_count(node: Node, n) -> int | None:
    """The selected count when the condition is a constant and the selected length is static."""
    cond = node.inputs[1].const
    if cond is None or not isinstance(n, int):
        return None
    cond = np.asarray(cond).reshape(-1)
    if cond[n:].any():
        raise fail(node, f"condition selects index {int(np.flatnonzero(cond)[-1])}, but there are only {n} elements")
    return int(np.count_nonzero(cond[:n]))


@fold_rule("Compress")
def _fold_compress(node: Node, xs: list) -> list | None:
    x, cond = xs
    axis = compress_axis(node, x.ndim)
    n = x.size if axis is None else x.shape[axis]
    if np.asarray(cond).reshape(-1)[n:].any():
        return None  # a selected index out of range: the kernel reports it at run time
    return [np.ascontiguousarray(np.compress(np.asarray(cond).reshape(-1)[:n], x, axis=axis))]


# -- Unique ---------------------------------------------------------------------------------------

def unique_axis(node: Node, rank: int) -> int | None:
    axis = node.attr("axis")
    return None if axis is None else norm_axis(node, int(axis), rank)


@shape_rule("Unique")
def _unique(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    if len(node.outputs) > 4:
        raise fail(node, f"has {len(node.outputs)} outputs, at most 4")
    axis = unique_axis(node, len(dims))
    u = runtime_dim(node, 0, 0 if axis is None else axis)
    if axis is None:
        n = 1
        for d in dims:
            n = d * n
        y = (u,)
    else:
        if not dims:
            raise fail(node, "axis needs an input of rank >= 1")
        n = dims[axis]
        y = dims[:axis] + (u,) + dims[axis + 1:]
    types = [TensorType(t.dtype, y), TensorType(DType.INT64, (u,)), TensorType(DType.INT64, (n,)),
             TensorType(DType.INT64, (u,))]
    return types[:len(node.outputs)]


# -- NonMaxSuppression ----------------------------------------------------------------------------

@shape_rule("NonMaxSuppression")
def _nms(node: Node) -> list:
    b, s = shape_of(node, 0), shape_of(node, 1)
    if len(b) != 3 or len(s) != 3:
        raise fail(node, f"boxes and scores must be 3-D, got shapes {list(b)} and {list(s)}")
    if isinstance(b[2], int) and b[2] != 4:
        raise fail(node, f"boxes must have 4 coordinates per box, got {b[2]}")
    if node.attr("center_point_box", 0) not in (0, 1):
        raise fail(node, f"center_point_box must be 0 or 1, got {node.attr('center_point_box')}")
    return [TensorType(DType.INT64, (runtime_dim(node, 0, 0), 3))]
