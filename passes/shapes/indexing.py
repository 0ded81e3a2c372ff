"""Shape and fold rules of ops that select, place or generate elements by index: Slice, Pad, Gather,
GatherElements, GatherND, ScatterND, ScatterElements (and the old Scatter), OneHot, Trilu, EyeLike.

Slice and Pad bounds may be symbolic (from shape tensors); :func:`slice_params` and
:func:`pad_params` compute them once, as Dims, for the shape rule and the C kernel alike. Bounds known
only at run time become run-time variables (``runtime_sym``: starts, steps, pads) and run-time output
dims, computed by the ops' shape functions. Slice
follows numpy's clamping (what the ONNX reference evaluator does). Gather on a small int tensor with a
known symbolic value (a shape) yields the selected Dims, so ``Shape -> Gather`` chains stay symbolic.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType, UnsupportedOpError
from onnxc.ir.dims import as_dim, ceildiv, dmax, dmin

from .common import fail, norm_axis, require_equal, runtime_dim, runtime_sym, shape_of, sym_ints, tensor_type
from .registry import fold_rule, shape_rule
from .shape_ops import (
    BIG,
    MAX_SYM,
    RUNTIME,
    clamp0,
    is_nonneg,
    scalar_input,
    set_sym,
    shape_input,
    static_length,
)


def _unsupported(node: Node, why: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{node.describe()}: {why}", [(node.domain or "ai.onnx", node.op_type, node.version)])


def _le(a: Dim, b: Dim) -> bool:
    return is_nonneg(as_dim(b) - a)


def _min(a: Dim, b: Dim) -> Dim:
    return a if _le(a, b) else b if _le(b, a) else dmin(a, b)


def _max(a: Dim, b: Dim) -> Dim:
    return b if _le(a, b) else a if _le(b, a) else dmax(a, b)


def _static_ints(node: Node, vals, what: str) -> list[int] | None:
    if vals is None:
        return None
    if not all(isinstance(v, int) for v in vals):
        raise _unsupported(node, f"{what} must be compile-time constants, got {list(vals)}")
    return [int(v) for v in vals]


# -- Slice ----------------------------------------------------------------------------------------

def _slice_bound(node: Node, v: Dim, d: Dim, step: int) -> Dim:
    """Python/numpy clamping of one slice bound against an axis of size ``d``."""
    if not isinstance(v, int):
        if not is_nonneg(v):
            # e.g. ends = S - 1 or K - Q: the sign is known at run time only. Exactly what the kernel
            # does: add d when negative (max(min(v, 0), -1) is -1 then, else 0), then clamp.
            v = as_dim(v) - as_dim(d) * dmax(dmin(v, 0), -1)
            return dmin(dmax(v, 0 if step > 0 else -1), d if step > 0 else as_dim(d) - 1)
        return _min(v, d) if step > 0 else _min(v, as_dim(d) - 1)
    if v >= BIG:
        return d if step > 0 else as_dim(d) - 1
    if v <= -BIG:
        return 0 if step > 0 else -1
    if v >= 0:
        return _min(v, d) if step > 0 else _min(v, as_dim(d) - 1)
    return _max(as_dim(d) + v, 0 if step > 0 else -1)


def slice_params(node: Node, dims: tuple) -> list[tuple[Dim, int, Dim]]:
    """Per input axis: (first index, step, element count) of the slice, as Dims."""
    r = len(dims)
    if node.version < 10:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes"), None
        if starts is None or ends is None:
            raise fail(node, "attributes 'starts' and 'ends' are required")
    else:
        raw = [shape_input(node, i, what, dynamic=True) for i, what in enumerate(SLICE_INPUTS) if i]
        if any(v is RUNTIME for v in raw):
            return _slice_runtime(node, dims)
        starts, ends = raw[0], raw[1]
        axes = _static_ints(node, raw[2], "axes")
        steps = _static_ints(node, raw[3], "steps")
        if starts is None or ends is None:
            raise fail(node, "inputs 'starts' and 'ends' are required")
    n = len(starts)
    axes = list(range(n)) if not axes else axes
    steps = [1] * n if not steps else steps
    if not (len(ends) == len(axes) == len(steps) == n):
        raise fail(node, f"starts, ends, axes and steps differ in length ({n}, {len(ends)}, {len(axes)}, "
                         f"{len(steps)})")
    out: list[tuple[Dim, int, Dim]] = [(0, 1, d) for d in dims]
    seen = set()
    for s, e, a, k in zip(starts, ends, axes, steps):
        a = norm_axis(node, a, r, "axes")
        if a in seen:
            raise fail(node, f"axes {axes} repeat axis {a}")
        seen.add(a)
        if k == 0:
            raise fail(node, "steps must not be 0")
        d = dims[a]
        s, e = _slice_bound(node, s, d, k), _slice_bound(node, e, d, k)
        size = ceildiv(as_dim(e) - s, k) if k > 0 else ceildiv(as_dim(s) - e, -k)
        out[a] = (s, k, max(size, 0) if isinstance(size, int) else clamp0(size))
    return out


SLICE_INPUTS = ("data", "starts", "ends", "axes", "steps")


def _slice_runtime(node: Node, dims: tuple) -> list[tuple[Dim, Dim, Dim]]:
    """Slice params when starts/ends/axes/steps are read at run time: each sliced axis (every axis when
    the axes are run-time too) gets a run-time first index, step and count."""
    if node.input(1) is None or node.input(2) is None:
        raise fail(node, "inputs 'starts' and 'ends' are required")
    n = static_length(node, 1, "starts")
    for i in range(2, 5):
        if node.input(i) is not None and static_length(node, i, SLICE_INPUTS[i]) != n:
            raise fail(node, f"starts and {SLICE_INPUTS[i]} differ in length")
    r = len(dims)
    axes = shape_input(node, 3, "axes", dynamic=True)
    if axes is RUNTIME:
        sliced = list(range(r))
    else:
        axes = _static_ints(node, axes, "axes")
        sliced = [norm_axis(node, a, r, "axes") for a in axes] if axes else list(range(n))
        if len(set(sliced)) != len(sliced) or len(sliced) != n:
            raise fail(node, f"axes {axes} repeat an axis or do not match starts ({n})")
    steps = shape_input(node, 4, "steps", dynamic=True)
    static_steps = None if steps is RUNTIME or axes is RUNTIME else _static_ints(node, steps, "steps")
    out: list[tuple[Dim, Dim, Dim]] = [(0, 1, d) for d in dims]
    for j, a in enumerate(sliced):
        step: Dim = static_steps[j] if static_steps else 1 if steps is None else runtime_sym(node, f"step{a}")
        if step == 0:
            raise fail(node, "steps must not be 0")
        out[a] = (runtime_sym(node, f"start{a}"), step, runtime_dim(node, 0, a))
    return out


@shape_rule("Slice")
def _slice(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    params = slice_params(node, dims)
    vals = sym_ints(node.input(0))
    if len(dims) == 1 and vals is not None:
        s, k, n = params[0]
        if isinstance(s, int) and isinstance(n, int):
            set_sym(node.outputs[0], [vals[s + i * k] for i in range(n)], t.dtype)
    return [TensorType(t.dtype, tuple(p[2] for p in params))]


@fold_rule("Slice")
def _fold_slice(node: Node, xs: list) -> list:
    params = slice_params(node, xs[0].shape)
    idx = tuple(slice(0, 0) if n == 0 else slice(s, s + k * n if s + k * n >= 0 else None, k)
                for s, k, n in params)
    return [np.ascontiguousarray(xs[0][idx])]


# -- Pad ------------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad_params(node: Node, dims: tuple) -> list[tuple[Dim, Dim | None]]:
    """(pad before, pad after) per input axis, as Dims (negative pads crop).

    With pads or axes known only at run time, a padded axis gets (a run-time variable, None): the
    shape function computes the pad before and the output dim (``runtime_dim``)."""
    r = len(dims)
    if node.version < 11:
        pads = node.attr("paddings" if node.version < 2 else "pads")
        if pads is None:
            raise fail(node, "attribute 'pads' is required")
        axes = None
    else:
        pads = shape_input(node, 1, "pads", dynamic=True)
        if pads is None:
            raise fail(node, "input 'pads' is required")
        axes = shape_input(node, 3, "axes", dynamic=True) if node.version >= 18 else None
        if pads is RUNTIME or axes is RUNTIME:
            return _pad_runtime(node, r, axes)
        axes = _static_ints(node, axes, "axes")
    axes = list(range(r)) if axes is None else [norm_axis(node, a, r, "axes") for a in axes]
    if len(pads) != 2 * len(axes):
        raise fail(node, f"pads {list(pads)} must have 2 entries per padded axis ({len(axes)} axes)")
    out: list[tuple[Dim, Dim]] = [(0, 0)] * r
    for i, a in enumerate(axes):
        out[a] = (as_dim(pads[i]), as_dim(pads[len(axes) + i]))
    return out


def _pad_runtime(node: Node, r: int, axes) -> list[tuple[Dim, Dim | None]]:
    k = static_length(node, 1, "pads")
    if axes is RUNTIME:
        padded = list(range(r))
        if k != 2 * static_length(node, 3, "axes"):
            raise fail(node, "pads must have 2 entries per padded axis")
    else:
        axes = _static_ints(node, axes, "axes")
        padded = list(range(r)) if axes is None else [norm_axis(node, a, r, "axes") for a in axes]
        if k != 2 * len(padded) or len(set(padded)) != len(padded):
            raise fail(node, f"pads ({k} entries) must have 2 entries per padded axis {padded}")
    out: list[tuple[Dim, Dim | None]] = [(0, 0)] * r
    for a in padded:
        out[a] = (runtime_sym(node, f"pad{a}"), None)
    return out


def pad_mode(node: Node) -> str:
    mode = node.attr("mode", "constant")
    if mode not in PAD_MODES or (mode == "wrap" and node.version < 19):
        raise fail(node, f"mode {mode!r} is not valid for opset {node.version}")
    return mode


@shape_rule("Pad")
def _pad(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    pad_mode(node)
    out = []
    for a, (d, (b, e)) in enumerate(zip(dims, pad_params(node, dims))):
        if e is None:
            out.append(runtime_dim(node, 0, a))
            continue
        n = as_dim(d) + b + e
        if isinstance(n, int) and n < 0:
            raise fail(node, f"pads crop axis of size {d} below zero")
        out.append(n)
    return [TensorType(t.dtype, tuple(out))]


def pad_constant(node: Node, xs: list | None = None):
    """The constant-mode fill value: attribute before opset 11, optional input 2 after."""
    if node.version < 11:
        return node.attr("value", 0.0)
    v = node.input(2)
    if v is None:
        return 0
    return None if v.const is None else np.asarray(v.const).reshape(-1)[0]


def pad_index(i: np.ndarray, d: int, mode: str) -> np.ndarray:
    """Source index along one axis for output positions ``i`` shifted by the pad (-1: constant fill)."""
    if mode == "constant":
        return np.where((i >= 0) & (i < d), i, -1)
    if mode == "edge":
        return np.clip(i, 0, d - 1)
    if mode == "wrap":
        return np.mod(i, d)
    if d == 1:
        return np.zeros_like(i)
    p = 2 * (d - 1)
    m = np.mod(i, p)
    return np.where(m >= d, p - m, m)


@fold_rule("Pad")
def _fold_pad(node: Node, xs: list) -> list | None:
    x, mode = xs[0], pad_mode(node)
    cv = pad_constant(node)
    y = x
    for a, (b, e) in enumerate(pad_params(node, x.shape)):
        d = x.shape[a]
        n = d + b + e
        if d == 0 and n > 0 and mode != "constant":
            return None
        src = pad_index(np.arange(n) - b, d, mode)
        y = np.take(y, np.maximum(src, 0), axis=a) if d else np.zeros(y.shape[:a] + (n,) + y.shape[a + 1:], y.dtype)
        if mode == "constant" and (src < 0).any():
            sel = [slice(None)] * y.ndim
            sel[a] = src < 0
            y[tuple(sel)] = cv
    return [y.astype(x.dtype)]


# -- Gather family --------------------------------------------------------------------------------

@shape_rule("Gather")
def _gather(node: Node) -> list:
    t = tensor_type(node, 0)
    dims, idims = shape_of(node, 0), shape_of(node, 1)
    if tensor_type(node, 1).dtype not in (DType.INT32, DType.INT64):
        raise fail(node, f"indices must be int32 or int64, got {tensor_type(node, 1).dtype.short}")
    axis = norm_axis(node, node.attr("axis", 0), len(dims))
    vals, idx = sym_ints(node.input(0)), node.input(1).const
    if len(dims) == 1 and vals is not None and idx is not None and idx.size <= MAX_SYM:
        n = len(vals)
        picked = []
        for i in np.asarray(idx).reshape(-1):
            i = int(i)
            if not -n <= i < n:
                raise fail(node, f"index {i} is out of range for axis of size {n}")
            picked.append(vals[i])
        set_sym(node.outputs[0], picked, t.dtype)
    return [TensorType(t.dtype, dims[:axis] + tuple(idims) + dims[axis + 1:])]


def _checked_indices(idx: np.ndarray, n: int) -> np.ndarray | None:
    idx = np.asarray(idx).astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        return None  # left to run time, which reports the bad index
    return np.where(idx < 0, idx + n, idx)


@fold_rule("Gather")
def _fold_gather(node: Node, xs: list) -> list | None:
    x = xs[0]
    axis = node.attr("axis", 0) % x.ndim
    idx = _checked_indices(xs[1], x.shape[axis])
    return None if idx is None else [np.take(x, idx, axis=axis)]


@shape_rule("GatherElements")
def _gather_elements(node: Node) -> list:
    t = tensor_type(node, 0)
    dims, idims = shape_of(node, 0), shape_of(node, 1)
    if len(dims) != len(idims):
        raise fail(node, f"data rank {len(dims)} and indices rank {len(idims)} differ")
    norm_axis(node, node.attr("axis", 0), len(dims))
    return [TensorType(t.dtype, tuple(idims))]


@fold_rule("GatherElements")
def _fold_gather_elements(node: Node, xs: list) -> list | None:
    x = xs[0]
    axis = node.attr("axis", 0) % x.ndim
    idx = _checked_indices(xs[1], x.shape[axis])
    if idx is None:
        return None
    sub = tuple(slice(0, n) for n in idx.shape)
    sub = sub[:axis] + (slice(None),) + sub[axis + 1:]
    return [np.take_along_axis(x[sub], idx, axis=axis)]


def gathernd_shape(node: Node, dims: tuple, idims: tuple) -> tuple[int, int, tuple]:
    """(batch_dims, index depth k, output shape) of GatherND."""
    b = node.attr("batch_dims", 0) if node.version >= 12 else 0
    if not idims:
        raise fail(node, "indices must have rank >= 1")
    k = idims[-1]
    if not isinstance(k, int):
        raise _unsupported(node, f"the last indices dim must be static, got {k}")
    if not 0 <= b < min(len(dims), len(idims)) or b + k > len(dims):
        raise fail(node, f"batch_dims={b} and index depth {k} do not fit data rank {len(dims)} and indices "
                         f"rank {len(idims)}")
    return b, k, tuple(idims[:-1]) + tuple(dims[b + k:])


@shape_rule("GatherND")
def _gather_nd(node: Node) -> list:
    t = tensor_type(node, 0)
    _, _, out = gathernd_shape(node, shape_of(node, 0), shape_of(node, 1))
    return [TensorType(t.dtype, out)]


@fold_rule("GatherND")
def _fold_gather_nd(node: Node, xs: list) -> list | None:
    x, ind = xs
    b, k, out = gathernd_shape(node, x.shape, ind.shape)
    nb = int(np.prod(x.shape[:b], dtype=np.int64))
    xb = x.reshape((nb,) + x.shape[b:])
    ib = ind.reshape(nb, -1, k).astype(np.int64)
    res = []
    for bi in range(nb):
        for t in ib[bi]:
            pos = []
            for j, i in enumerate(t):
                d = x.shape[b + j]
                if not -d <= i < d:
                    return None
                pos.append(i + d if i < 0 else i)
            res.append(xb[bi][tuple(pos)])
    return [np.array(res, dtype=x.dtype).reshape(tuple(int(d) for d in out))]


# -- Scatter family -------------------------------------------------------------------------------

REDUCTIONS = ("none", "add", "mul", "max", "min")


def scatter_reduction(node: Node) -> str:
    red = node.attr("reduction", "none") if node.version >= 16 and node.op_type != "Scatter" else "none"
    if red not in REDUCTIONS or (red in ("max", "min") and node.version < 18):
        raise fail(node, f"reduction {red!r} is not valid for opset {node.version}")
    return red


@shape_rule("ScatterND", "ScatterElements", "Scatter")
def _scatter(node: Node) -> list:
    t = tensor_type(node, 0)
    dims, idims, udims = shape_of(node, 0), shape_of(node, 1), shape_of(node, 2)
    scatter_reduction(node)
    if tensor_type(node, 2).dtype != t.dtype:
        raise fail(node, "updates must have the data's element type")
    if node.op_type == "ScatterND":
        k = idims[-1] if idims else None
        if not isinstance(k, int) or k > len(dims):
            raise fail(node, f"the last indices dim must be a static int <= data rank, got {k}")
        want = tuple(idims[:-1]) + tuple(dims[k:])
        if len(udims) != len(want):
            raise fail(node, f"updates shape {list(udims)} must be {list(want)}")
        for a, (u, w) in enumerate(zip(udims, want)):
            require_equal(node, [(u, f"input 2 axis {a} (updates)"), (w, "indices.shape[:-1] + data.shape[k:]")])
    else:
        if not len(dims) == len(idims) == len(udims):
            raise fail(node, "data, indices and updates must have the same rank")
        for a, (i, u) in enumerate(zip(idims, udims)):
            require_equal(node, [(i, f"input 1 axis {a} (indices)"), (u, f"input 2 axis {a} (updates)")],
                          "one update per index")
        norm_axis(node, node.attr("axis", 0), len(dims))
    return [TensorType(t.dtype, tuple(dims))]


_NP_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _apply(out: np.ndarray, pos, upd, red: str) -> None:
    out[pos] = upd if red == "none" else _NP_REDUCE[red](out[pos], upd)


@fold_rule("ScatterND", "ScatterElements", "Scatter")
def _fold_scatter(node: Node, xs: list) -> list | None:
    x, ind, upd = xs
    red = scatter_reduction(node)
    out = x.copy()
    ind = ind.astype(np.int64)
    if node.op_type == "ScatterND":
        k = ind.shape[-1]
        flat_i = ind.reshape(-1, k)
        flat_u = upd.reshape((flat_i.shape[0],) + x.shape[k:])
        for t, u in zip(flat_i, flat_u):
            if any(not -x.shape[j] <= t[j] < x.shape[j] for j in range(k)):
                return None
            _apply(out, tuple(int(i) % x.shape[j] for j, i in enumerate(t)), u, red)
        return [out]
    axis = node.attr("axis", 0) % x.ndim
    n = x.shape[axis]
    for pos in np.ndindex(*ind.shape):
        i = int(ind[pos])
        if not -n <= i < n:
            return None
        target = pos[:axis] + (i + n if i < 0 else i,) + pos[axis + 1:]
        _apply(out, target, upd[pos], red)
    return [out]


# -- OneHot, Trilu, EyeLike -----------------------------------------------------------------------

def onehot_depth(node: Node):
    """Depth of OneHot as a Dim, or RUNTIME when it is read at run time (a float depth is truncated)."""
    v = node.input(1)
    if v is None:
        raise fail(node, "input 'depth' is required")
    if v.const is not None and np.asarray(v.const).dtype.kind == "f":
        return int(np.asarray(v.const).reshape(-1)[0])
    if sym_ints(v) is None:
        if static_length(node, 1, "depth") != 1:
            raise fail(node, "depth must have exactly one element")
        return RUNTIME
    return scalar_input(node, 1, "depth")


@shape_rule("OneHot")
def _onehot(node: Node) -> list:
    dims = shape_of(node, 0)
    vt = tensor_type(node, 2)
    depth = onehot_depth(node)
    if isinstance(depth, int) and depth < 1:
        raise fail(node, f"depth must be positive, got {depth}")
    axis = node.attr("axis", -1)
    r = len(dims) + 1
    if not -r <= axis < r:
        raise fail(node, f"axis {axis} is out of range for output rank {r}")
    axis = axis + r if axis < 0 else axis
    if depth is RUNTIME:
        depth = runtime_dim(node, 0, axis)
    return [TensorType(vt.dtype, tuple(dims[:axis]) + (depth,) + tuple(dims[axis:]))]


@fold_rule("OneHot")
def _fold_onehot(node: Node, xs: list) -> list:
    ind, _, values = xs
    depth = int(node.outputs[0].type.shape[node.attr("axis", -1) % (ind.ndim + 1)])
    axis = node.attr("axis", -1) % (ind.ndim + 1)
    v = np.where(ind < 0, ind + depth, ind)
    v = np.expand_dims(v, axis)
    shape = [1] * (ind.ndim + 1)
    shape[axis] = depth
    hit = np.arange(depth).reshape(shape) == v
    off, on = values.reshape(-1)[:2]
    return [np.where(hit, on, off).astype(values.dtype)]


@shape_rule("Trilu")
def _trilu(node: Node) -> list:
    t = tensor_type(node, 0)
    if len(shape_of(node, 0)) < 2:
        raise fail(node, "input must have rank >= 2")
    return [TensorType(t.dtype, t.shape)]


@fold_rule("Trilu")
def _fold_trilu(node: Node, xs: list) -> list:
    x = xs[0]
    k = int(xs[1].reshape(-1)[0]) if len(xs) > 1 and xs[1] is not None else 0
    return [np.triu(x, k) if node.attr("upper", 1) else np.tril(x, k)]


def eyelike_dtype(node: Node) -> DType:
    dt = node.attr("dtype")
    return DType(dt) if dt is not None else tensor_type(node, 0).dtype


@shape_rule("EyeLike")
def _eyelike(node: Node) -> list:
    dims = shape_of(node, 0)
    if len(dims) != 2:
        raise fail(node, f"input must be 2-D, got shape {list(dims)}")
    return [TensorType(eyelike_dtype(node), tuple(dims))]


@fold_rule("EyeLike")
def _fold_eyelike(node: Node, xs: list) -> list:
    n, m = xs[0].shape
    return [np.eye(n, m, k=node.attr("k", 0), dtype=eyelike_dtype(node).np)]
