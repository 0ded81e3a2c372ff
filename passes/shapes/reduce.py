"""Shape and fold rules of the reduction family.

Reduce* (ten ops), ArgMax/ArgMin, CumSum/CumProd, TopK, LpNormalization, MeanVarianceNormalization.
:func:`reduce_axes` is the single place that resolves which axes a Reduce* node reduces (attribute in
old opsets, optional input since ReduceSum-13 / others-18, empty = all axes unless
``noop_with_empty_axes``); the C kernels call it too, so shapes, folds and kernels agree.

Fold rules are numpy versions of the kernels' semantics, including the identities of empty
reductions (0 for sums, 1 for products, the dtype's lowest/highest value or -inf/+inf for Max/Min,
-inf for LogSum/LogSumExp) and integer arithmetic that wraps in the element width.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType
from onnxc.ir.types import EMULATED_FLOATS

from .common import const_ints, fail, norm_axis, runtime_dim, shape_of, sym_ints, tensor_type
from .registry import fold_rule, shape_rule
from .shape_ops import RUNTIME, scalar_input, shape_input, static_length

REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def axes_from_input(node: Node) -> bool:
    """True when this node's opset takes ``axes`` as input 1 (ReduceSum >= 13, other Reduce* >= 18)."""
    return node.version >= (13 if node.op_type == "ReduceSum" else 18)


def reduce_axes(node: Node, rank: int):
    """The sorted, non-negative axes a Reduce* node reduces; ``()`` means reduce nothing (a no-op).

    RUNTIME when the axes input is known only at run time (and not empty): the shape function and a
    generic kernel read it then."""
    if axes_from_input(node):
        vals = shape_input(node, 1, "axes", dynamic=True)
        if vals is RUNTIME:
            if static_length(node, 1, "axes"):
                return RUNTIME
            vals = []
        if vals is not None and not all(isinstance(a, int) for a in vals):
            raise fail(node, f"axes must be constant integers, got {vals}")
        raw = vals or []
        if not raw and node.attr("noop_with_empty_axes", 0):
            return ()
    else:
        raw = [int(a) for a in node.attr("axes", None) or []]
    if not raw:
        return tuple(range(rank))
    axes = [norm_axis(node, int(a), rank, "axes entry") for a in raw]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axes {raw} name the same axis twice")
    return tuple(sorted(axes))


def foldable(node: Node) -> bool:
    """Fold only element types numpy computes natively (not emulated floats stored as bit patterns)."""
    t = node.inputs[0].type
    return isinstance(t, TensorType) and t.dtype not in EMULATED_FLOATS and t.dtype != DType.STRING


def reduced_shape(shape: tuple, axes: tuple[int, ...], keepdims: bool) -> tuple:
    """``shape`` with ``axes`` set to 1 (keepdims) or removed."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _float_only(node: Node, dtype: DType) -> None:
    if node.op_type in ("ReduceLogSum", "ReduceLogSumExp") and node.version >= 28 and not dtype.is_float:
        raise fail(node, f"{node.op_type}-{node.version} takes float tensors only, got {dtype.short}")


@shape_rule(*REDUCE_OPS)
def _reduce(node: Node) -> list:
    t = tensor_type(node, 0)
    shape = shape_of(node, 0)
    _float_only(node, t.dtype)
    axes = reduce_axes(node, len(shape))
    keep = bool(node.attr("keepdims", 1))
    if axes is RUNTIME:  # which axes are reduced is known at run time; the rank is not in doubt
        k = static_length(node, 1, "axes")
        if k > len(shape):
            raise fail(node, f"{k} axes to reduce but the input has rank {len(shape)}")
        if keep:
            return [TensorType(t.dtype, tuple(1 if d == 1 else runtime_dim(node, 0, a) for a, d in enumerate(shape)))]
        return [TensorType(t.dtype, tuple(runtime_dim(node, 0, a) for a in range(len(shape) - k)))]
    return [TensorType(t.dtype, reduced_shape(shape, axes, keep))]


# -- numpy semantics of Reduce* ---------------------------------------------------------------------

def reduce_identity(op: str, dtype: np.dtype):
    """The value of ``op`` over an empty set of elements, as stored in ``dtype``."""
    if op in ("ReduceMax", "ReduceMin"):
        big = op == "ReduceMin"
        if dtype == np.bool_:
            return big
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return info.max if big else info.min
        return np.inf if big else -np.inf
    if op == "ReduceProd":
        return 1
    if op in ("ReduceLogSum", "ReduceLogSumExp"):
        return -np.inf
    return 0


def np_reduce(op: str, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Reduce* in numpy with the kernels' semantics (integer sums wrap in the element width)."""
    dt = x.dtype
    kw = {"axis": axes, "keepdims": keepdims}
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    with np.errstate(all="ignore"):
        if op in ("ReduceMax", "ReduceMin"):
            fn = np.max if op == "ReduceMax" else np.min
            return fn(x, initial=reduce_identity(op, dt), **kw).astype(dt)
        if op == "ReduceProd":
            return np.prod(x, dtype=dt, **kw)
        if op == "ReduceLogSumExp":
            return _np_logsumexp(x, axes, keepdims)
        src = {"ReduceL1": np.abs(x), "ReduceL2": x * x, "ReduceSumSquare": x * x}.get(op, x)
        s = np.sum(src, dtype=dt, **kw)
        if op == "ReduceMean":
            if dt.kind in "iu":
                s = np.zeros_like(s) if count == 0 else _trunc_div(s, count)
            else:
                s = s / dt.type(count) if count else np.full_like(s, np.nan)
        elif op == "ReduceL2":
            s = np.sqrt(s.astype(np.float64) if dt.kind in "iu" else s)
        elif op == "ReduceLogSum":
            s = np.log(s.astype(np.float64) if dt.kind in "iu" else s)
        return np.asarray(s).astype(dt)


def _trunc_div(s: np.ndarray, n: int) -> np.ndarray:
    """Integer division rounding toward zero (C semantics)."""
    return (np.sign(s) * (np.abs(s) // n)).astype(s.dtype)


def _np_logsumexp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    work = x.astype(np.float64) if x.dtype.kind in "iu" else x
    finite = np.where(np.isinf(work), -np.inf, work)
    m = np.max(finite, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(work.dtype)
    s = np.sum(np.exp(work - m), axis=axes, keepdims=True, dtype=work.dtype)
    r = np.log(s) + m
    if not keepdims:
        r = np.squeeze(r, axis=axes)
    return np.asarray(r).astype(x.dtype)


@fold_rule(*REDUCE_OPS)
def _fold_reduce(node: Node, xs: list) -> list | None:
    x = xs[0]
    if not foldable(node):
        return None
    axes = reduce_axes(node, x.ndim)
    return [np_reduce(node.op_type, x, axes, bool(node.attr("keepdims", 1)))]


# -- ArgMax / ArgMin --------------------------------------------------------------------------------

@shape_rule("ArgMax", "ArgMin")
def _arg(node: Node) -> list:
    shape = shape_of(node, 0)
    axis = norm_axis(node, int(node.attr("axis", 0)), len(shape))
    if len(shape) == 0:
        raise fail(node, "input must have rank >= 1")
    return [TensorType(DType.INT64, reduced_shape(shape, (axis,), bool(node.attr("keepdims", 1))))]


@fold_rule("ArgMax", "ArgMin")
def _fold_arg(node: Node, xs: list) -> list | None:
    if not foldable(node):
        return None
    x = xs[0]
    axis = norm_axis(node, int(node.attr("axis", 0)), x.ndim)
    if x.shape[axis] == 0:
        return None
    fn = np.argmax if node.op_type == "ArgMax" else np.argmin
    if node.attr("select_last_index", 0):
        r = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
    else:
        r = fn(x, axis=axis)
    if node.attr("keepdims", 1):
        r = np.expand_dims(r, axis)
    return [np.asarray(r, dtype=np.int64)]


# -- CumSum / CumProd -------------------------------------------------------------------------------

@shape_rule("CumSum", "CumProd")
def _cum(node: Node) -> list:
    t = tensor_type(node, 0)
    if not shape_of(node, 0):
        raise fail(node, "input must have rank >= 1")
    at = tensor_type(node, 1)
    if at.dtype not in (DType.INT32, DType.INT64):
        raise fail(node, f"axis must be int32 or int64, got {at.dtype.short}")
    axis = const_ints(node, 1)
    if axis is not None:
        if len(axis) != 1:
            raise fail(node, f"axis must hold one value, got {axis}")
        norm_axis(node, axis[0], len(t.shape))
    return [TensorType(t.dtype, t.shape)]


def np_cum(op: str, x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """CumSum/CumProd in numpy, accumulating in the element type."""
    fn = np.cumsum if op == "CumSum" else np.cumprod
    y = np.flip(x, axis) if reverse else x
    r = fn(y, axis=axis, dtype=x.dtype)
    if exclusive and x.shape[axis] > 0:
        ident = np.full_like(np.take(r, [0], axis=axis), 0 if op == "CumSum" else 1)
        r = np.concatenate([ident, np.take(r, np.arange(r.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(r, axis) if reverse else r


@fold_rule("CumSum", "CumProd")
def _fold_cum(node: Node, xs: list) -> list | None:
    if not foldable(node):
        return None
    x = xs[0]
    axis = norm_axis(node, int(np.asarray(xs[1]).reshape(-1)[0]), x.ndim)
    with np.errstate(all="ignore"):
        return [np_cum(node.op_type, x, axis, bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0)))]


# -- TopK -------------------------------------------------------------------------------------------

def topk_k(node: Node, axis: int) -> Dim:
    """k of a TopK node: the attribute (opset 1), the constant / symbolic value of input 1, or a run-time
    dim (the output's ``axis``) computed by the shape function when k is known only at run time."""
    if node.version < 10:
        k = node.attr("k")
        if k is None:
            raise fail(node, "attribute k is required")
        return int(k)
    if node.input(1) is not None and sym_ints(node.input(1)) is None:
        if static_length(node, 1, "k") != 1:
            raise fail(node, "k must have exactly one element")
        return runtime_dim(node, 0, axis)
    return scalar_input(node, 1, "k")


@shape_rule("TopK")
def _topk(node: Node) -> list:
    shape = shape_of(node, 0)
    if not shape:
        raise fail(node, "input must have rank >= 1")
    axis = norm_axis(node, int(node.attr("axis", -1)), len(shape))
    k = topk_k(node, axis)
    if isinstance(k, int):
        if k < 0:
            raise fail(node, f"k must be >= 0, got {k}")
        if isinstance(shape[axis], int) and k > shape[axis]:
            raise fail(node, f"k = {k} exceeds the size {shape[axis]} of axis {axis}")
    out = tuple(k if i == axis else d for i, d in enumerate(shape))
    t = tensor_type(node, 0)
    return [TensorType(t.dtype, out), TensorType(DType.INT64, out)]


def np_topk(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Top-k along ``axis``, sorted, ties broken by the lower index."""
    if largest:  # descending and stable: sort the reversed axis ascending, then reverse back
        order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = x.shape[axis] - 1 - np.flip(order, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


@fold_rule("TopK")
def _fold_topk(node: Node, xs: list) -> list | None:
    if not foldable(node):
        return None
    x = xs[0]
    k = int(node.attr("k")) if node.version < 10 else int(np.asarray(xs[1]).reshape(-1)[0])
    axis = norm_axis(node, int(node.attr("axis", -1)), x.ndim)
    return list(np_topk(x, k, axis, bool(node.attr("largest", 1))))


# -- LpNormalization / MeanVarianceNormalization ----------------------------------------------------

@shape_rule("LpNormalization")
def _lpnorm(node: Node) -> list:
    t = tensor_type(node, 0)
    norm_axis(node, int(node.attr("axis", -1)), len(shape_of(node, 0)))
    if int(node.attr("p", 2)) not in (1, 2):
        raise fail(node, f"p must be 1 or 2, got {node.attr('p')}")
    return [TensorType(t.dtype, t.shape)]


@fold_rule("LpNormalization")
def _fold_lpnorm(node: Node, xs: list) -> list | None:
    if not foldable(node):
        return None
    x = xs[0]
    axis = norm_axis(node, int(node.attr("axis", -1)), x.ndim)
    p = int(node.attr("p", 2))
    n = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    with np.errstate(all="ignore"):
        return [np.where(n == 0, 0, x / n).astype(x.dtype)]


MVN_EPSILON = 1e-9


def mvn_axes(node: Node, rank: int) -> tuple[int, ...]:
    axes = [norm_axis(node, int(a), rank, "axes entry") for a in node.attr("axes", (0, 2, 3))]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axes {list(node.attr('axes'))} name the same axis twice")
    return tuple(sorted(axes))


@shape_rule("MeanVarianceNormalization")
def _mvn(node: Node) -> list:
    t = tensor_type(node, 0)
    mvn_axes(node, len(shape_of(node, 0)))
    return [TensorType(t.dtype, t.shape)]


@fold_rule("MeanVarianceNormalization")
def _fold_mvn(node: Node, xs: list) -> list | None:
    if not foldable(node):
        return None
    x = xs[0]
    axes = mvn_axes(node, x.ndim)
    m = np.mean(x, axis=axes, keepdims=True)
    d = x - m
    v = np.mean(d * d, axis=axes, keepdims=True)
    return [(d / (np.sqrt(v) + x.dtype.type(MVN_EPSILON))).astype(x.dtype)]


