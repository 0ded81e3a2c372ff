"""Shared helpers for shape rules: broadcasting, axis normalization, typed errors."""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, ShapeError, TensorType, Value
from onnxc.ir.dims import as_dim


def fail(node: Node, msg: str) -> ShapeError:
    return ShapeError(f"{node.describe()}: {msg}")


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
