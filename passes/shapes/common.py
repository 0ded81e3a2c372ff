"""Shared helpers for shape rules: broadcasting, axis normalization, typed errors, run-time dims."""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, ShapeError, TensorType, Value
from onnxc.ir.dims import as_dim, free_symbols, sym


def fail(node: Node, msg: str) -> ShapeError:
    return ShapeError(f"{node.describe()}: {msg}")


# Python exceptions a shape rule or expansion may raise on inputs or attributes it did not expect
RULE_ERRORS = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, AttributeError)


def rule_failure(node: Node, what: str, e: Exception) -> ShapeError:
    """The error of a shape rule (or expansion) that failed with a Python exception: the node's inputs
    and attributes are not what it expected (the frontend checks the ONNX schemas, so this is rare: an
    op outside them, or a combination the schema allows and the rule does not handle). The message
    shows what the rule was given; the caller chains ``e`` as the cause, so a rule's bug stays visible."""
    ins = ", ".join("absent" if v is None else f"{v.name!r}: {v.type}" for v in node.inputs) or "none"
    attrs = ", ".join(f"{a.name}={a.kind} {_brief(a.value)}" for a in node.attrs.values()) or "none"
    return ShapeError(f"{node.describe()}: {what} failed ({type(e).__name__}: {e}); inputs: {ins}; "
                      f"attributes: {attrs}")


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def tensor_type(node: Node, i: int) -> TensorType:
    """Type of input ``i``; errors name the node when it is absent or not a tensor."""
    v = node.input(i)
    if v is None:
        raise fail(node, f"input {i} is required")
    t = v.type
    if not isinstance(t, TensorType):
        raise fail(node, f"input {i} ({v.name!r}) must be a tensor, got {t}")
    return t


def shape_of(node: Node, i: int) -> tuple:
    t = tensor_type(node, i)
    if t.shape is None:
        raise fail(node, f"rank of input {i} ({node.inputs[i].name!r}) is unknown")
    return t.shape


def broadcast_dims(node: Node, shapes: list[tuple]) -> tuple:
    """Numpy-style multidirectional broadcast of symbolic shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for ax in range(rank):
        dim: Dim = 1
        for s in shapes:
            k = ax - (rank - len(s))
            if k < 0:
                continue
            d = s[k]
            if d == 1:
                continue
            if dim == 1:
                dim = d
            elif d != dim:
                if isinstance(d, int) and isinstance(dim, int):
                    raise fail(node, f"cannot broadcast shapes {[list(x) for x in shapes]} (axis {ax}: "
                                     f"{dim} vs {d})")
                # symbolic mismatch: the runtime guarantees equality or 1; prefer the non-1 static
                if isinstance(dim, int):
                    continue
                dim = d if isinstance(d, int) else dim
        out.append(dim)
    return tuple(out)


def norm_axis(node: Node, axis: int, rank: int, name: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise fail(node, f"{name} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def const_ints(node: Node, i: int) -> list[int] | None:
    """Input ``i`` as a list of Python ints when it is a compile-time constant."""
    v = node.input(i)
    if v is None or v.const is None:
        return None
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def sym_ints(v: Value | None) -> list[Dim] | None:
    """Element values of an int tensor as Dims, from its constant or symbolic value."""
    if v is None:
        return None
    if v.const is not None and np.asarray(v.const).dtype.kind in "iu":
        return [int(x) for x in np.asarray(v.const).reshape(-1)]
    if v.sym_value is not None:
        return [as_dim(x) for x in v.sym_value]
    return None


def same(node: Node, i: int = 0, dtype: DType | None = None) -> TensorType:
    t = tensor_type(node, i)
    return TensorType(dtype or t.dtype, t.shape)


# -- data-dependent dims ------------------------------------------------------------------------------

def runtime_dim(node: Node, out_index: int, axis: int) -> Dim:
    """A new dimension variable for ``axis`` of output ``out_index`` whose value only the input *data*
    determines (NonZero's count, Reshape to a run-time shape, ...).

    The variable is recorded in ``node.defines_dims``; the node's C shape function computes it (>= 0)
    at run time before the kernel runs. The name (``"<output>[<axis>]"``) is deterministic, so asking
    again (re-inference, the kernel's lowering) returns the same variable.
    """
    return _define(node, f"{node.outputs[out_index].name}[{axis}]")


def runtime_sym(node: Node, label: str) -> Dim:
    """An auxiliary run-time integer of ``node`` (a slice start or step, a pad), computed by its shape
    function. It may be negative, so it must only appear in kernels (``ctx.dim``), never in a shape:
    shape reasoning assumes dimension variables are >= 0."""
    return _define(node, f"{node.outputs[0].name}.{label}")


def _define(node: Node, base: str) -> Dim:
    g = node.graph
    while g is not None and g.parent is not None:
        g = g.parent
    taken: set[str] = set()
    for v in g.inputs if g is not None else ():
        for d in getattr(v.type, "shape", None) or ():
            taken |= free_symbols(d)
    name = base
    while name in taken:  # a model's own dim names win; ours get a prime
        name += "'"
    if name not in node.defines_dims:
        node.defines_dims.append(name)
    return sym(name)
