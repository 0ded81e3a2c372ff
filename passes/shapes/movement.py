"""Shape and fold rules of data-movement ops that keep every element: views, Transpose, Concat, Split,
Expand, Tile, DepthToSpace/SpaceToDepth, Identity and inference-mode Dropout.

Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) also carry the symbolic value of small int
tensors through (``sym_value``), as does Concat, so shape computations stay static-in-symbols.
Fold rules take output shapes from the types the shape rule just computed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxc.ir import Dim, DType, Node, ShapeError, TensorType, UnsupportedOpError
from onnxc.ir.dims import as_dim, ceildiv, floordiv

from .common import (
    broadcast_dims,
    fail,
    norm_axis,
    require_equal,
    runtime_dim,
    shape_of,
    sym_ints,
    tensor_type,
)
from .registry import fold_rule, shape_rule
from .shape_ops import MAX_SYM, RUNTIME, runtime_shape, set_sym, shape_input, static_length


def _numel(dims) -> Dim:
    n: Dim = 1
    for d in dims:
        n = as_dim(d) * n if not (isinstance(n, int) and isinstance(d, int)) else n * d
    return n


def _out_shape(node: Node, i: int = 0) -> tuple:
    return tuple(int(d) for d in node.outputs[i].type.shape)


def _pass_sym(node: Node) -> None:
    """Views keep the elements: the output has the symbolic value of input 0."""
    v = node.input(0)
    node.outputs[0].sym_value = v.sym_value if v is not None else None


def _unsupported(node: Node, why: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{node.describe()}: {why}", [(node.domain or "ai.onnx", node.op_type, node.version)])


# -- Reshape --------------------------------------------------------------------------------------

def reshape_dims(node: Node, in_shape: tuple, target: list, allowzero: bool) -> tuple:
    """Output dims of Reshape: 0 copies the input dim (unless allowzero), -1 takes the rest."""
    out: list = []
    infer = -1
    for k, s in enumerate(target):
        if isinstance(s, int) and s == -1:
            if infer >= 0:
                raise fail(node, f"shape {list(target)} has more than one -1")
            infer = k
            out.append(1)
        elif isinstance(s, int) and s == 0 and not allowzero:
            if k >= len(in_shape):
                raise fail(node, f"shape {list(target)} copies dim {k} (0) but the input has rank {len(in_shape)}")
            out.append(in_shape[k])
        elif isinstance(s, int) and s < 0:
            raise fail(node, f"shape {list(target)} has invalid dim {s}")
        else:
            out.append(s)
    total = _numel(in_shape)
    if infer >= 0:
        if allowzero and any(isinstance(s, int) and s == 0 for s in target):
            raise fail(node, f"shape {list(target)} has both 0 and -1 with allowzero=1")
        known = _numel(out)
        if isinstance(known, int) and known == 0:
            out[infer] = 0
        else:
            if isinstance(known, int) and isinstance(total, int) and total % known:
                raise fail(node, f"cannot reshape {list(in_shape)} ({total} elements) to {list(target)}")
            out[infer] = floordiv(total, known)
            require_equal(node, [(total, "the input's element count"),
                                 (as_dim(known) * out[infer], "a multiple of the target shape's known dims")],
                          f"Reshape to {list(target)}")
    else:
        n = _numel(out)
        if isinstance(n, int) and isinstance(total, int) and n != total:
            raise fail(node, f"cannot reshape {list(in_shape)} ({total} elements) to {list(target)} ({n})")
        require_equal(node, [(total, "the input's element count"), (n, "the target shape's element count")],
                      f"Reshape to {list(target)}")
    return tuple(out)


@shape_rule("Reshape")
def _reshape(node: Node) -> list:
    t = tensor_type(node, 0)
    if node.version < 5:
        target = node.attr("shape")
        if target is None:
            raise fail(node, "attribute 'shape' is required")
    allowzero = bool(node.attr("allowzero", 0)) if node.version >= 14 else False
    _pass_sym(node)
    if node.version >= 5:
        vals = sym_ints(node.input(1))
        if vals is not None and node.input(1).const is None:
            out = reshape_dims(node, shape_of(node, 0), vals, allowzero)
            if _rewire_const(node, 1, _reshape_const_target(node, out, allowzero),
                             lambda c: reshape_dims(node, shape_of(node, 0), c, allowzero) == out):
                return [TensorType(t.dtype, out)]
        target = shape_input(node, 1, "the target shape", dynamic=True)
        if target is None:
            raise fail(node, "input 1 (shape) is required")
        if target is RUNTIME:  # every output dim is computed by the shape function
            return [TensorType(t.dtype, runtime_shape(node, 0, static_length(node, 1, "the target shape")))]
    return [TensorType(t.dtype, reshape_dims(node, shape_of(node, 0), list(target), allowzero))]


def _reshape_const_target(node: Node, out: tuple, allowzero: bool) -> list[int] | None:
    """A constant shape Reshape maps to the same symbolic ``out``: 0 copies an input dim, -1 takes one
    remaining symbolic dim. None when ``out`` needs more than that (two new symbolic dims)."""
    in_shape = shape_of(node, 0)
    cand: list[int] = []
    free = False
    for k, d in enumerate(out):
        if isinstance(d, int) and (d != 0 or allowzero):
            cand.append(d)
        elif not allowzero and k < len(in_shape) and in_shape[k] == d:
            cand.append(0)
        elif not free:
            free = True
            cand.append(-1)
        else:
            return None
    return cand


def _rewire_const(node: Node, i: int, cand: list[int] | None, same: Callable[[list[int]], bool]) -> bool:
    """Replace shape input ``i`` (known only symbolically) by the constant ``cand`` when ``same(cand)``
    confirms it gives the node the same output shape: views then need no run-time shape tensor, and
    the Shape -> Gather -> Concat chain that computed it becomes dead."""
    g, v = node.graph, node.input(i)
    if cand is None or g is None:
        return False
    try:
        if not same(cand):
            return False
    except ShapeError:
        return False
    node.set_input(i, g.constant(np.array(cand, dtype=np.int64), g.fresh_name(v.name + "_const")))
    return True


@fold_rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _fold_view(node: Node, xs: list) -> list:
    return [xs[0].reshape(_out_shape(node))]


# -- Flatten, Squeeze, Unsqueeze ------------------------------------------------------------------

@shape_rule("Flatten")
def _flatten(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    r = len(dims)
    axis = node.attr("axis", 1)
    if not (-r <= axis <= r) or (node.version < 11 and axis < 0):
        raise fail(node, f"axis {axis} is out of range for rank {r}")
    if axis < 0:
        axis += r
    _pass_sym(node)
    return [TensorType(t.dtype, (_numel(dims[:axis]), _numel(dims[axis:])))]


def _axes(node: Node, what: str) -> list[int] | None:
    """The ``axes`` of Squeeze/Unsqueeze: attribute before opset 13, input 1 from 13 on."""
    if node.version < 13:
        return node.attr("axes")
    vals = shape_input(node, 1, what, dynamic=True)
    if vals is None or vals is RUNTIME:
        return vals
    if not all(isinstance(a, int) for a in vals):
        raise _unsupported(node, f"{what} must be constant, got {vals}")
    return [int(a) for a in vals]


@shape_rule("Squeeze")
def _squeeze(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    axes = _axes(node, "axes")
    if axes is RUNTIME:  # which axes go is known at run time: the shape function computes every dim
        k = static_length(node, 1, "axes")
        if k > len(dims):
            raise fail(node, f"{k} axes to squeeze but the input has rank {len(dims)}")
        _pass_sym(node)
        return [TensorType(t.dtype, runtime_shape(node, 0, len(dims) - k))]
    if axes is None:
        if not all(isinstance(d, int) for d in dims):
            raise _unsupported(node, f"without axes, the output rank depends on which of the symbolic dims "
                                     f"{list(dims)} are 1 at run time")
        keep = [d for d in dims if d != 1]
    else:
        norm = {norm_axis(node, a, len(dims), "axes") for a in axes}
        if len(norm) != len(axes):
            raise fail(node, f"axes {axes} repeat an axis")
        for a in norm:
            if isinstance(dims[a], int) and dims[a] != 1:
                raise fail(node, f"cannot squeeze axis {a} of size {dims[a]} (input shape {list(dims)})")
            require_equal(node, [(dims[a], f"input 0 axis {a}"), (1, "1")], "Squeeze removes axes of size 1")
        keep = [d for k, d in enumerate(dims) if k not in norm]
    _pass_sym(node)
    return [TensorType(t.dtype, tuple(keep))]


@shape_rule("Unsqueeze")
def _unsqueeze(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    axes = _axes(node, "axes")
    if axes is None:
        raise fail(node, "axes are required")
    if axes is RUNTIME:
        _pass_sym(node)
        return [TensorType(t.dtype, runtime_shape(node, 0, len(dims) + static_length(node, 1, "axes")))]
    r = len(dims) + len(axes)
    norm = {norm_axis(node, a, r, "axes") for a in axes}
    if len(norm) != len(axes):
        raise fail(node, f"axes {axes} repeat an axis")
    it = iter(dims)
    _pass_sym(node)
    return [TensorType(t.dtype, tuple(1 if k in norm else next(it) for k in range(r)))]


# -- Identity, Dropout ----------------------------------------------------------------------------

@shape_rule("Identity")
def _identity(node: Node) -> list:
    v = node.input(0)
    if v is None:
        raise fail(node, "input 0 is required")
    _pass_sym(node)
    return [v.type]


@fold_rule("Identity")
def _fold_identity(node: Node, xs: list) -> list:
    return [xs[0]]


def dropout_training(node: Node) -> bool | None:
    """Whether Dropout-12+ runs in training mode: False/True when constant, None when known at run time."""
    if node.version < 12:
        return False
    tm = node.input(2)
    if tm is None:
        return False
    if tm.const is None:
        return None
    return bool(np.asarray(tm.const).reshape(-1)[0])


def dropout_ratio_is_zero(node: Node) -> bool:
    r = node.input(1) if node.version >= 12 else None
    if node.version < 12:
        return node.attr("ratio", 0.5) == 0
    return r is not None and r.const is not None and float(np.asarray(r.const).reshape(-1)[0]) == 0.0


@shape_rule("Dropout")
def _dropout(node: Node) -> list:
    t = tensor_type(node, 0)  # training mode: codegen/kernels/random.py (dropout_training)
    types = [TensorType(t.dtype, t.shape)]
    if len(node.outputs) > 1:
        types.append(TensorType(DType.BOOL if node.version >= 10 else t.dtype, t.shape))
    return types


@fold_rule("Dropout")
def _fold_dropout(node: Node, xs: list) -> list | None:
    if dropout_training(node) is not False and not dropout_ratio_is_zero(node):
        return None  # random masks: drawn at run time
    outs = [xs[0]]
    if len(node.outputs) > 1:
        outs.append(np.ones(xs[0].shape, dtype=node.outputs[1].type.dtype.np))
    return outs


# -- Transpose ------------------------------------------------------------------------------------

def transpose_perm(node: Node, rank: int) -> list[int]:
    perm = node.attr("perm")
    if perm is None:
        return list(range(rank))[::-1]
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise fail(node, f"perm {perm} is not a permutation of the {rank} axes")
    return perm


@shape_rule("Transpose")
def _transpose(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    return [TensorType(t.dtype, tuple(dims[p] for p in transpose_perm(node, len(dims))))]


@fold_rule("Transpose")
def _fold_transpose(node: Node, xs: list) -> list:
    return [np.ascontiguousarray(np.transpose(xs[0], transpose_perm(node, xs[0].ndim)))]


# -- Concat, Split --------------------------------------------------------------------------------

def concat_axis(node: Node, rank: int) -> int:
    axis = node.attr("axis", 1 if node.version < 4 else None)
    if axis is None:
        raise fail(node, "attribute 'axis' is required")
    return norm_axis(node, axis, rank)


@shape_rule("Concat")
def _concat(node: Node) -> list:
    if not node.inputs:
        raise fail(node, "needs at least one input")
    t0 = tensor_type(node, 0)
    shapes = [shape_of(node, i) for i in range(len(node.inputs))]
    r = len(shapes[0])
    axis = concat_axis(node, r)
    out = list(shapes[0])
    total: Dim = 0
    for i, s in enumerate(shapes):
        if len(s) != r:
            raise fail(node, f"input {i} has rank {len(s)}, input 0 has rank {r}")
        if tensor_type(node, i).dtype != t0.dtype:
            raise fail(node, f"input {i} has type {tensor_type(node, i).dtype.short}, expected {t0.dtype.short}")
        total = as_dim(s[axis]) + total
    for a in range(r):
        if a != axis:
            out[a] = require_equal(node, [(s[a], f"input {i} axis {a}") for i, s in enumerate(shapes)],
                                   f"Concat along axis {axis} needs the other axes equal")
    out[axis] = total
    if r == 1 and t0.dtype.is_int:
        parts = [sym_ints(v) for v in node.inputs]
        if all(p is not None for p in parts) and sum(len(p) for p in parts) <= MAX_SYM:
            set_sym(node.outputs[0], [x for p in parts for x in p], t0.dtype)
    return [TensorType(t0.dtype, tuple(out))]


@fold_rule("Concat")
def _fold_concat(node: Node, xs: list) -> list:
    return [np.concatenate(xs, axis=concat_axis(node, xs[0].ndim))]


def split_sizes(node: Node, dim: Dim, axis: int = 0) -> list[Dim]:
    """Sizes of Split's outputs along ``axis`` (of ``dim`` elements), from the split attribute/input or
    an even split; run-time dims when the split input is known only at run time."""
    n = len(node.outputs)
    split = None
    if node.version < 13 and node.has_attr("split"):
        split = [int(s) for s in node.attr("split")]
    elif (node.version >= 13 or node.version == 1) and node.input(1) is not None:
        split = shape_input(node, 1, "split", dynamic=True)
    if split is RUNTIME:  # sizes known at run time: each output's axis dim is computed by the shape function
        m = static_length(node, 1, "split", limit=max(n, 1))
        if m != n:
            raise fail(node, f"split has {m} entries for {n} outputs")
        return [runtime_dim(node, k, axis) for k in range(n)]
    if split is not None:
        if len(split) != n:
            raise fail(node, f"split {split} has {len(split)} entries for {n} outputs")
        total = sum(split, start=0)
        if isinstance(total, int) and isinstance(dim, int) and total != dim:
            raise fail(node, f"split {split} sums to {total}, but the axis has {dim} elements")
        require_equal(node, [(dim, f"input 0 axis {axis}"), (total, f"the sum of split {split}")], "Split")
        return [as_dim(s) for s in split]
    if node.version >= 18:
        k = node.attr("num_outputs")
        if k is None:
            raise fail(node, "either input 'split' or attribute 'num_outputs' is required")
        if k != n:
            raise fail(node, f"num_outputs={k} but the node has {n} outputs")
    if isinstance(dim, int) and node.version < 18 and dim % n:
        raise fail(node, f"axis of {dim} elements cannot be split evenly into {n} outputs")
    chunk = ceildiv(dim, n)
    return [chunk] * (n - 1) + [as_dim(dim) - chunk * (n - 1)]


@shape_rule("Split")
def _split(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    axis = norm_axis(node, node.attr("axis", 0), len(dims))
    sizes = split_sizes(node, dims[axis], axis)
    for s in sizes:
        if isinstance(s, int) and s < 0:
            raise fail(node, f"split sizes {sizes} must not be negative")
    vals = sym_ints(node.input(0)) if len(dims) == 1 else None
    types, pos = [], 0
    for k, s in enumerate(sizes):
        if vals is not None and isinstance(s, int):
            set_sym(node.outputs[k], vals[pos:pos + s], t.dtype)
            pos += s
        else:
            vals = None
        types.append(TensorType(t.dtype, dims[:axis] + (s,) + dims[axis + 1:]))
    return types


@fold_rule("Split")
def _fold_split(node: Node, xs: list) -> list:
    axis = node.attr("axis", 0)
    sizes = [o.type.shape[axis] for o in node.outputs]
    return [np.ascontiguousarray(a) for a in np.split(xs[0], np.cumsum(sizes)[:-1], axis=axis)]


# -- Expand, Tile ---------------------------------------------------------------------------------

@shape_rule("Expand")
def _expand(node: Node) -> list:
    t = tensor_type(node, 0)
    vals = sym_ints(node.input(1))
    if vals is not None and node.input(1).const is None:
        in_shape = shape_of(node, 0)
        out = broadcast_dims(node, [in_shape, tuple(vals)])
        if _rewire_const(node, 1, _expand_const_target(in_shape, out),
                         lambda c: broadcast_dims(node, [in_shape, tuple(c)]) == out):
            return [TensorType(t.dtype, out)]
    shape = shape_input(node, 1, "the target shape", dynamic=True)
    if shape is None:
        raise fail(node, "input 1 (shape) is required")
    if shape is RUNTIME:
        return [TensorType(t.dtype, _expand_runtime(node, shape_of(node, 0), static_length(node, 1, "the shape")))]
    for d in shape:
        if isinstance(d, int) and d < 0:
            raise fail(node, f"shape {shape} has a negative dimension")
    return [TensorType(t.dtype, broadcast_dims(node, [shape_of(node, 0), tuple(shape)]))]


def _expand_runtime(node: Node, in_shape: tuple, k: int) -> tuple:
    """Expand to a shape of ``k`` entries read at run time: an axis the shape does not reach keeps the
    input dim, so does an axis whose input dim is static and not 1 (the shape function checks the
    entry is 1 or equal); every other axis is computed at run time."""
    r = max(len(in_shape), k)
    out: list[Dim] = []
    for a in range(r):
        i = a - (r - len(in_shape))
        d = in_shape[i] if i >= 0 else 1
        out.append(d if a < r - k or (isinstance(d, int) and d != 1) else runtime_dim(node, 0, a))
    return tuple(out)


def _expand_const_target(in_shape: tuple, out: tuple) -> list[int] | None:
    """A constant shape Expand broadcasts ``in_shape`` with to ``out``: 1 where the input already has
    the output dim, the dim itself where it is static; None when a new symbolic dim is needed."""
    cand = []
    lead = len(out) - len(in_shape)
    for k, d in enumerate(out):
        if k >= lead and in_shape[k - lead] == d:
            cand.append(1)
        elif isinstance(d, int):
            cand.append(d)
        else:
            return None
    return cand


@fold_rule("Expand")
def _fold_expand(node: Node, xs: list) -> list:
    return [np.ascontiguousarray(np.broadcast_to(xs[0], _out_shape(node)))]


def tile_repeats(node: Node, rank: int) -> list[Dim]:
    """Repeats per axis; Tile-1 repeats one axis ``tiles`` times."""
    if node.version < 6:
        tiles = shape_input(node, 1, "tiles")
        axis = shape_input(node, 2, "axis")
        if tiles is None or axis is None or not isinstance(axis[0], int):
            raise fail(node, "inputs 'tiles' and 'axis' are required (axis constant)")
        reps: list[Dim] = [1] * rank
        reps[norm_axis(node, axis[0], rank)] = tiles[0]
        return reps
    reps = shape_input(node, 1, "repeats", dynamic=True)
    if reps is RUNTIME:
        if static_length(node, 1, "repeats") != rank:
            raise fail(node, f"repeats must have one entry per input axis ({rank})")
        return reps
    if reps is None or len(reps) != rank:
        raise fail(node, f"repeats must have one entry per input axis ({rank}), got {reps}")
    for r in reps:
        if isinstance(r, int) and r < 0:
            raise fail(node, f"repeats {reps} must not be negative")
    return reps


@shape_rule("Tile")
def _tile(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    reps = tile_repeats(node, len(dims))
    if reps is RUNTIME:
        return [TensorType(t.dtype, tuple(0 if d == 0 else runtime_dim(node, 0, a) for a, d in enumerate(dims)))]
    return [TensorType(t.dtype, tuple(as_dim(d) * r for d, r in zip(dims, reps)))]


@fold_rule("Tile")
def _fold_tile(node: Node, xs: list) -> list:
    x = xs[0]
    reps = [o // d if d else 1 for o, d in zip(_out_shape(node), x.shape)]
    return [np.tile(x, reps) if x.ndim else x.copy()]


# -- DepthToSpace, SpaceToDepth -------------------------------------------------------------------

def space_depth_perm(node: Node) -> tuple[list[str], list[int]]:
    """The 6-D view and permutation both ops are (names of the view's dims, perm), per the spec."""
    bs_mode = (node.attr("mode", "DCR") if node.version >= 11 else "DCR")
    if node.op_type == "DepthToSpace":
        if bs_mode == "DCR":
            return ["n", "b", "b", "c", "h", "w"], [0, 3, 4, 1, 5, 2]
        if bs_mode == "CRD":
            return ["n", "c", "b", "b", "h", "w"], [0, 1, 4, 2, 5, 3]
        raise fail(node, f"mode must be DCR or CRD, got {bs_mode!r}")
    if node.version >= 28 and node.attr("mode", "DCR") == "CRD":
        return ["n", "c", "h", "b", "w", "b"], [0, 1, 3, 5, 2, 4]
    return ["n", "c", "h", "b", "w", "b"], [0, 3, 5, 1, 2, 4]


def space_depth_view(node: Node, dims: tuple) -> list[Dim]:
    """Dims of the 6-D view of the input."""
    bs = node.attr("blocksize")
    n, c, h, w = dims
    names, _ = space_depth_perm(node)
    if node.op_type == "DepthToSpace":
        vals = {"n": n, "b": bs, "c": floordiv(c, bs * bs), "h": h, "w": w}
    else:
        vals = {"n": n, "b": bs, "c": c, "h": floordiv(h, bs), "w": floordiv(w, bs)}
    return [vals[k] for k in names]


@shape_rule("DepthToSpace", "SpaceToDepth")
def _space_depth(node: Node) -> list:
    t = tensor_type(node, 0)
    dims = shape_of(node, 0)
    bs = node.attr("blocksize")
    if len(dims) != 4:
        raise fail(node, f"input must be 4-D, got shape {list(dims)}")
    if not isinstance(bs, int) or bs < 1:
        raise fail(node, f"blocksize must be a positive int, got {bs}")
    n, c, h, w = dims
    if node.op_type == "DepthToSpace":
        if isinstance(c, int) and c % (bs * bs):
            raise fail(node, f"channels {c} are not divisible by blocksize^2 = {bs * bs}")
        out = (n, floordiv(c, bs * bs), as_dim(h) * bs, as_dim(w) * bs)
    else:
        for name, d in (("height", h), ("width", w)):
            if isinstance(d, int) and d % bs:
                raise fail(node, f"{name} {d} is not divisible by blocksize {bs}")
        out = (n, as_dim(c) * (bs * bs), floordiv(h, bs), floordiv(w, bs))
    return [TensorType(t.dtype, out)]


@fold_rule("DepthToSpace", "SpaceToDepth")
def _fold_space_depth(node: Node, xs: list) -> list:
    _, perm = space_depth_perm(node)
    view = [int(d) for d in space_depth_view(node, xs[0].shape)]
    return [np.ascontiguousarray(np.transpose(xs[0].reshape(view), perm)).reshape(_out_shape(node))]
