"""Shape rules of the shape-computing ops and the symbolic values of shape tensors.

PyTorch exports compute shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``).
Every small int tensor of such a chain carries ``Value.sym_value``: its elements as Dims. The rules
here (Shape, Size, Constant, ConstantOfShape, Range) start or consume such values; movement.py
propagates them through Gather/Slice/Concat/Squeeze/Unsqueeze/Reshape/Identity.

An op that reads a shape tensor (Reshape's shape, Expand's shape, Slice's starts, ...) calls
:func:`shape_input`. When the tensor is not a constant but its symbolic value is known, the input is
rewired to an ``onnxc::SymValue`` node that writes those Dims directly (from the bound dimension
variables), so the Shape/Gather/Concat chain that computed it becomes dead code. A fully static value
is rewired to a constant. A shape tensor whose values are only known at run time makes the output
shape data-dependent: :func:`shape_input` with ``dynamic=True`` then returns :data:`RUNTIME` and the
rule gives the output new run-time dimension variables (``common.runtime_dim``) that the node's C
shape function computes; the rank must still follow from static shapes (:func:`static_length`).
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import Attr, Dim, DType, Node, TensorType, UnsupportedOpError, Value, dtype_from_numpy
from onnxc.ir.dims import as_dim, ceildiv, dmax, free_symbols, nonneg
from onnxc.ir.limits import MAX_RANK

from .cast import cast_array, half_to_float
from .common import fail, runtime_dim, shape_of, sym_ints, tensor_type
from .registry import fold_rule, shape_rule

MAX_SYM = 64  # longest int tensor whose elements are tracked as Dims
SYM_DOMAIN = "onnxc"  # domain of the internal SymValue op
BIG = 2**31 - 1  # slice bounds at or beyond this mean "to the end" (INT32_MAX / INT64_MAX in exports)


# -- symbolic values ------------------------------------------------------------------------------

def set_sym(out: Value, values, dtype: DType = DType.INT64) -> None:
    """Record the elements of ``out`` (a small int tensor) as Dims."""
    if values is None or len(values) > MAX_SYM or not (dtype.is_int):
        out.sym_value = None
        return
    out.sym_value = tuple(as_dim(v) for v in values)


def is_nonneg(d: Dim) -> bool:
    """True when ``d`` is provably >= 0 (dimension variables are >= 0; ir/dims.py ``bounds``)."""
    return nonneg(d)


def clamp0(d: Dim) -> Dim:
    """max(d, 0), simplified when ``d`` is provably non-negative."""
    return d if is_nonneg(d) else dmax(d, 0)


class _Runtime:
    """Sentinel: the values of a shape-like input exist only at run time."""

    def __repr__(self) -> str:
        return "RUNTIME"


RUNTIME = _Runtime()


def shape_input(node: Node, i: int, what: str, dynamic: bool = False):
    """Elements of the shape tensor at input ``i`` as Dims (None when the input is absent).

    Rewires the input to a constant or an ``onnxc::SymValue`` node when it is computed by other
    nodes, so those become dead. When the values are data-dependent: :data:`RUNTIME` if ``dynamic``
    (the caller's op has a shape function), else UnsupportedOpError.
    """
    v = node.input(i)
    if v is None:
        return None
    vals = sym_ints(v)
    if vals is None and dynamic:
        return RUNTIME
    if vals is None:
        raise UnsupportedOpError(
            f"{node.describe()}: {what} (input {i}, {v.name!r}) must be computable at compile time; its "
            "values depend on run-time data (data-dependent output shapes are not supported yet)",
            [(node.domain or "ai.onnx", node.op_type, node.version)])
    if v.const is None:
        _materialize(node, i, v, vals)
    return vals


def static_length(node: Node, i: int, what: str, limit: int = 2 * MAX_RANK) -> int:
    """Element count of the 1-D (or scalar) input ``i`` when its shape is static: the output rank of ops
    whose shape input is read at run time. UnsupportedOpError when even that is unknown; ShapeError
    when it is above ``limit`` (by default the 2 values per axis of a tensor of the maximum rank that
    pads take): rules loop over these values, so a declared length of 2^31 must stop here."""
    t = tensor_type(node, i)
    if t.shape is None or len(t.shape) > 1 or not all(isinstance(d, int) for d in t.shape):
        raise UnsupportedOpError(
            f"{node.describe()}: {what} (input {i}, {node.inputs[i].name!r}) is known only at run time and "
            f"its length ({'unknown rank' if t.shape is None else list(t.shape)}) is not static, so the "
            "output rank is data-dependent", [(node.domain or "ai.onnx", node.op_type, node.version)])
    n = int(t.shape[0]) if t.shape else 1
    if n > limit:
        raise fail(node, f"{what} (input {i}, {node.inputs[i].name!r}) holds {n} values, more than the {limit} "
                         f"a tensor of onnxc's maximum rank {MAX_RANK} can use")
    return n


def runtime_shape(node: Node, out_index: int, rank: int) -> tuple:
    """Output ``out_index`` with ``rank`` dims that are all computed at run time."""
    if rank > MAX_RANK:
        raise fail(node, f"output {out_index} would have rank {rank}, above onnxc's maximum rank {MAX_RANK}")
    return tuple(runtime_dim(node, out_index, a) for a in range(rank))


def _materialize(node: Node, i: int, v: Value, vals: list[Dim]) -> None:
    g = node.graph
    if g is None or (v.producer is not None and v.producer.op_type == "SymValue"):
        return
    t = v.type if isinstance(v.type, TensorType) and v.type.is_static else TensorType(DType.INT64, (len(vals),))
    if all(isinstance(x, int) for x in vals):
        c = g.constant(np.array(vals, dtype=t.dtype.np).reshape(t.shape), g.fresh_name(v.name + "_const"))
        node.set_input(i, c)
        return
    out = Value(g.fresh_name(v.name + "_sym"), t)
    out.sym_value = tuple(vals)
    g.insert_before(node, Node("SymValue", _dim_sources(g, vals), [out],
                               {"dims": Attr("dims", "DIMS", tuple(vals))}, domain=SYM_DOMAIN, name=out.name))
    node.set_input(i, out)


def _dim_sources(g, vals: list[Dim]) -> list[Value]:
    """One output of each node whose run-time dims (``node.defines_dims``) ``vals`` use. The SymValue node
    takes them as (unread) inputs: they keep those nodes alive and ordered before it, although the Shape
    chain that linked them becomes dead."""
    names: set[str] = set()
    for d in vals:
        names |= free_symbols(d)
    return [n.outputs[0] for n in g.nodes if names.intersection(n.defines_dims)] if names else []


def scalar_input(node: Node, i: int, what: str) -> Dim | None:
    """A scalar (or 1-element) shape-like input as a Dim, through :func:`shape_input`."""
    vals = shape_input(node, i, what)
    if vals is None:
        return None
    if len(vals) != 1:
        raise fail(node, f"{what} must have one element, got {len(vals)}")
    return vals[0]


# -- SymValue (internal) --------------------------------------------------------------------------

@shape_rule("SymValue", domain=SYM_DOMAIN)
def _sym_value(node: Node) -> list:
    dims = tuple(node.attr("dims"))
    out = node.outputs[0]
    t = out.type if isinstance(out.type, TensorType) else TensorType(DType.INT64, (len(dims),))
    out.sym_value = dims
    return [t]


@fold_rule("SymValue", domain=SYM_DOMAIN)
def _fold_sym_value(node: Node, xs: list) -> list | None:
    dims = node.attr("dims")
    if not all(isinstance(d, int) for d in dims):
        return None
    t = node.outputs[0].type
    return [np.array(dims, dtype=t.dtype.np).reshape(t.shape)]


# -- Shape, Size ----------------------------------------------------------------------------------

def shape_range(node: Node, rank: int) -> tuple[int, int]:
    """[start, end) of Shape-15's slice of the input dims, clamped like the spec says."""
    start = node.attr("start", 0) if node.version >= 15 else 0
    end = node.attr("end", rank) if node.version >= 15 else rank
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return start, max(start, end)


@shape_rule("Shape")
def _shape(node: Node) -> list:
    dims = shape_of(node, 0)
    a, b = shape_range(node, len(dims))
    set_sym(node.outputs[0], dims[a:b])
    return [TensorType(DType.INT64, (b - a,))]


@fold_rule("Shape")
def _fold_shape(node: Node, xs: list) -> list:
    a, b = shape_range(node, xs[0].ndim)
    return [np.array(xs[0].shape[a:b], dtype=np.int64)]


@shape_rule("Size")
def _size(node: Node) -> list:
    set_sym(node.outputs[0], [tensor_type(node, 0).numel()])
    return [TensorType(DType.INT64, ())]


@fold_rule("Size")
def _fold_size(node: Node, xs: list) -> list:
    return [np.array(xs[0].size, dtype=np.int64)]


# -- Constant -------------------------------------------------------------------------------------

_CONST_ATTRS = ("value", "sparse_value", "value_float", "value_floats", "value_int", "value_ints",
                "value_string", "value_strings")


def constant_value(node: Node) -> np.ndarray:
    """The tensor a Constant node holds, whichever ``value*`` attribute carries it."""
    present = [a for a in _CONST_ATTRS if node.has_attr(a)]
    if len(present) != 1:
        raise fail(node, f"exactly one of {list(_CONST_ATTRS)} must be set, got {present}")
    name = present[0]
    v = node.attr(name)
    if name in ("value", "sparse_value"):
        return np.asarray(v)
    if name == "value_float":
        return np.array(v, dtype=np.float32)
    if name == "value_floats":
        return np.array(v, dtype=np.float32).reshape(-1)
    if name == "value_int":
        return np.array(v, dtype=np.int64)
    if name == "value_ints":
        return np.array(v, dtype=np.int64).reshape(-1)
    if name == "value_string":
        return np.array(v, dtype=object)
    return np.array(list(v), dtype=object).reshape(-1)


@shape_rule("Constant")
def _constant(node: Node) -> list:
    arr = constant_value(node)
    dt = dtype_from_numpy(arr.dtype)
    if dt.is_int and arr.ndim <= 1:
        set_sym(node.outputs[0], [int(x) for x in arr.reshape(-1)], dt)
    return [TensorType(dt, arr.shape)]


@fold_rule("Constant")
def _fold_constant(node: Node, xs: list) -> list:
    return [constant_value(node)]


# -- ConstantOfShape ------------------------------------------------------------------------------

def fill_value(node: Node) -> np.ndarray:
    """ConstantOfShape's one-element ``value`` (float32 zero by default)."""
    v = node.attr("value")
    if v is None:
        return np.zeros(1, dtype=np.float32)
    v = np.asarray(v)
    if v.size != 1:
        raise fail(node, f"attribute 'value' must hold one element, got shape {list(v.shape)}")
    return v.reshape(1)


@shape_rule("ConstantOfShape")
def _constant_of_shape(node: Node) -> list:
    dims = shape_input(node, 0, "the shape", dynamic=True)
    if dims is None:
        raise fail(node, "input 0 (shape) is required")
    if dims is RUNTIME:
        dims = runtime_shape(node, 0, static_length(node, 0, "the shape"))
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise fail(node, f"shape {dims} has a negative dimension")
    v = fill_value(node)
    dt = dtype_from_numpy(v.dtype)
    if len(dims) == 1 and isinstance(dims[0], int) and dt.is_int:
        set_sym(node.outputs[0], [int(v[0])] * dims[0], dt)
    return [TensorType(dt, tuple(dims))]


@fold_rule("ConstantOfShape")
def _fold_constant_of_shape(node: Node, xs: list) -> list:
    v = fill_value(node)
    return [np.full(tuple(int(d) for d in xs[0].reshape(-1)), v[0], dtype=v.dtype)]


# -- Range ----------------------------------------------------------------------------------------

HALF_RANGE = (DType.FLOAT16, DType.BFLOAT16)  # Range-27 computes these in its stash_type


def range_stash(node: Node) -> DType:
    """The type a float16/bfloat16 Range computes in: ``stash_type`` (float by default, or double)."""
    stash = int(node.attr("stash_type", int(DType.FLOAT)))
    if stash not in (int(DType.FLOAT), int(DType.DOUBLE)):
        raise fail(node, f"stash_type must be 1 (float) or 11 (double), got {stash}")
    return DType(stash)


def _range_values(node: Node, xs: list) -> list:
    """start, limit, delta as numpy scalars (half types widened to float32 exactly)."""
    dt = node.inputs[0].type.dtype
    return [half_to_float(np.asarray(x), dt).reshape(-1)[0] for x in xs]


def range_length(node: Node) -> Dim:
    """Element count of Range: max(ceil((limit - start) / delta), 0), symbolic for int inputs, a run-time
    dimension variable when the inputs are known only at run time."""
    ins = [node.input(i) for i in range(3)]
    if any(v is None for v in ins):
        raise fail(node, "start, limit and delta are required")
    is_float = ins[0].type.dtype.is_float
    if all(v.const is not None for v in ins):
        start, limit, delta = _range_values(node, [v.const for v in ins])
        if delta == 0:
            raise fail(node, "delta must not be zero")
        if is_float:
            return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
        return max(-((int(start) - int(limit)) // int(delta)), 0)
    names = ("start", "limit", "delta")
    if is_float:
        return _float_range_length(node, ins)
    if any(v.const is None and sym_ints(v) is None for v in ins):
        return runtime_dim(node, 0, 0)
    start, limit, delta = (scalar_input(node, i, n) for i, n in enumerate(names))
    if not isinstance(delta, int):
        return runtime_dim(node, 0, 0)
    if delta == 0:
        raise fail(node, "delta must not be zero")
    n = ceildiv(as_dim(limit) - start, delta)
    return max(n, 0) if isinstance(n, int) else clamp0(n)


def _float_range_length(node: Node, ins: list[Value]) -> Dim:
    """A float Range over a cast dim (``arange(w, dtype=float)`` of an export: start and delta integral
    constants, limit a dim cast to float) has the exact count ceil((limit - start) / delta) of the
    dims; the kernel checks it at run time (a float limit rounds above 2^24). Else a run-time dim."""
    start, delta = (v.const for v in (ins[0], ins[2]))
    limit = ins[1].sym_value if ins[1].const is None else None
    if start is None or delta is None or limit is None or len(limit) != 1:
        return runtime_dim(node, 0, 0)
    start, delta = _range_values(node, [start, delta])
    if not (float(start).is_integer() and float(delta).is_integer()) or delta == 0:
        return runtime_dim(node, 0, 0)
    return clamp0(ceildiv(limit[0] - int(start), int(delta)))


@shape_rule("Range")
def _range(node: Node) -> list:
    t = tensor_type(node, 0)
    for i in (1, 2):
        if tensor_type(node, i).dtype != t.dtype:
            raise fail(node, f"start, limit and delta must share one type, got {t.dtype.short} and "
                             f"{tensor_type(node, i).dtype.short}")
    if t.dtype in HALF_RANGE:
        range_stash(node)  # validated up front
    n = range_length(node)
    if t.dtype.is_int and isinstance(n, int) and n <= MAX_SYM:
        start, delta = sym_ints(node.input(0)), sym_ints(node.input(2))
        if start is not None and delta is not None:
            set_sym(node.outputs[0], [start[0] + k * delta[0] for k in range(n)], t.dtype)
    return [TensorType(t.dtype, (n,))]


@fold_rule("Range")
def _fold_range(node: Node, xs: list) -> list:
    start, _limit, delta = _range_values(node, xs)
    n = range_length(node)
    k = np.arange(n, dtype=np.int64)
    dt = node.inputs[0].type.dtype
    if dt in HALF_RANGE:  # like the kernel: start + k * delta in the stash type, rounded to dt
        st = range_stash(node).np
        with np.errstate(all="ignore"):
            values = st.type(start) + k.astype(st) * st.type(delta)
        return [cast_array(values, dt) if dt == DType.BFLOAT16 else values.astype(np.float16)]
    if xs[0].dtype.kind == "f":  # like the kernel and the reference (numpy arange): in double
        return [(float(start) + k.astype(np.float64) * float(delta)).astype(xs[0].dtype)]
    return [(start + k.astype(start.dtype) * delta).astype(xs[0].dtype)]


__all__ = ["MAX_SYM", "SYM_DOMAIN", "BIG", "RUNTIME", "set_sym", "is_nonneg", "clamp0", "shape_input", "scalar_input",
           "static_length", "runtime_shape",
           "shape_range", "constant_value", "fill_value", "range_length"]
