"""Shape rules of the sequence and optional ops.

A sequence's type records its element type; element dims are only hints (every element carries its
own dims at run time), but the rank matters: tensors taken out of a sequence (SequenceAt,
ConcatFromSequence) need it. Their dims become run-time dims of the node unless the element type
pins them to integers, which the run function then checks.
"""

from __future__ import annotations

from onnxc.ir import DType, Node, OptionalType, SequenceType, TensorType, UnsupportedOpError
from onnxc.ir.dims import sym

from .common import fail, runtime_dim
from .registry import shape_rule

ANY = sym("?")  # an element dim a sequence type does not know


def elem_of(node: Node, i: int) -> TensorType:
    v = node.input(i)
    if v is None or not isinstance(v.type, SequenceType):
        raise fail(node, f"input {i} must be a sequence, got {None if v is None else v.type}")
    e = v.type.elem
    if not isinstance(e, TensorType):
        raise UnsupportedOpError(f"{node.describe()}: sequences of {e} are not supported",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    return e


def hint(t: TensorType) -> TensorType:
    """An element type as a sequence keeps it: integer dims stay, symbolic ones are unknown."""
    if t.shape is None:
        return t
    return TensorType(t.dtype, tuple(d if isinstance(d, int) else ANY for d in t.shape))


def join(node: Node, a: TensorType, b: TensorType) -> TensorType:
    """Element type covering both: the same dtype, dims kept where equal."""
    if a.dtype != b.dtype:
        raise fail(node, f"sequence element types differ: {a.dtype.short} vs {b.dtype.short}")
    if a.shape is None:
        return hint(b)
    if b.shape is None:
        return hint(a)
    if len(a.shape) != len(b.shape):
        return TensorType(a.dtype, None)
    return TensorType(a.dtype, tuple(x if x == y and isinstance(x, int) else ANY for x, y in zip(a.shape, b.shape)))


def taken_out(node: Node, k: int, e: TensorType, extra: int = 0) -> TensorType:
    """Type of output ``k``, a tensor taken out of a sequence with element type ``e``."""
    if e.shape is None:
        raise UnsupportedOpError(f"{node.describe()}: the rank of the sequence's tensors is unknown",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    dims = [d if isinstance(d, int) else runtime_dim(node, k, ax) for ax, d in enumerate(e.shape)]
    return TensorType(e.dtype, tuple(dims))


@shape_rule("SequenceEmpty")
def _empty(node: Node) -> list:
    return [SequenceType(TensorType(DType(node.attr("dtype", int(DType.FLOAT))), None))]


@shape_rule("SequenceConstruct")
def _construct(node: Node) -> list:
    ts = [v.type for v in node.inputs if v is not None]
    if not ts or not all(isinstance(t, TensorType) for t in ts):
        raise fail(node, "inputs must be one or more tensors")
    e = hint(ts[0])
    for t in ts[1:]:
        e = join(node, e, t)
    return [SequenceType(e)]


@shape_rule("SequenceInsert")
def _insert(node: Node) -> list:
    e = elem_of(node, 0)
    t = node.input(1).type if node.input(1) is not None else None
    if not isinstance(t, TensorType):
        raise fail(node, f"input 1 must be a tensor, got {t}")
    return [SequenceType(join(node, e, t) if e.shape is not None else hint(t))]


@shape_rule("SequenceErase")
def _erase(node: Node) -> list:
    return [SequenceType(elem_of(node, 0))]


@shape_rule("SequenceAt")
def _at(node: Node) -> list:
    return [taken_out(node, 0, elem_of(node, 0))]


@shape_rule("SequenceLength")
def _length(node: Node) -> list:
    elem_of(node, 0)
    return [TensorType(DType.INT64, ())]


@shape_rule("SplitToSequence")
def _split_to_sequence(node: Node) -> list:
    t = node.input(0).type
    if not isinstance(t, TensorType) or t.shape is None:
        raise fail(node, "input 0 must be a tensor of known rank")
    r = len(t.shape)
    axis = node.attr("axis", 0)
    if not -r <= axis < r:
        raise fail(node, f"axis {axis} is out of range for rank {r}")
    axis %= r
    split = node.input(1)
    dims = list(t.shape)
    if split is None and not node.attr("keepdims", 1):
        del dims[axis]
    else:
        dims[axis] = ANY
    return [SequenceType(hint(TensorType(t.dtype, tuple(dims))))]


@shape_rule("ConcatFromSequence")
def _concat_from_sequence(node: Node) -> list:
    e = elem_of(node, 0)
    if e.shape is None:
        raise UnsupportedOpError(f"{node.describe()}: the rank of the sequence's tensors is unknown",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    new_axis = node.attr("new_axis", 0)
    r = len(e.shape) + (1 if new_axis else 0)
    axis = node.attr("axis")
    if axis is None:
        raise fail(node, "attribute 'axis' is required")
    if not -r <= axis < r:
        raise fail(node, f"axis {axis} is out of range for rank {r}")
    return [TensorType(e.dtype, tuple(runtime_dim(node, 0, ax) for ax in range(r)))]


@shape_rule("Optional")
def _optional(node: Node) -> list:
    v = node.input(0)
    if v is not None:
        return [OptionalType(v.type)]
    t = node.attr("type")
    if t is None:
        raise fail(node, "without an input, attribute 'type' is required")
    return [OptionalType(t)]


@shape_rule("OptionalHasElement")
def _has_element(node: Node) -> list:
    return [TensorType(DType.BOOL, ())]


@shape_rule("OptionalGetElement")
def _get_element(node: Node) -> list:
    v = node.input(0)
    if v is None:
        raise fail(node, "input 0 is required")
    t = v.type
    if isinstance(t, OptionalType):
        t = t.elem
        if isinstance(t, TensorType):
            return [taken_out(node, 0, t)]
    return [t]
