"""Builder: emits the primitive nodes that replace one function-op node, in place.

An expansion reads the node (inputs, their types, attributes, ``version``) through the builder and
emits nodes with ``b.op("Add", x, y)``; ``out=`` writes one of the node's own output Values, so
consumers and graph outputs stay connected. New nodes are inserted where the node was, get fresh
value names, and take the opset version ``max(node.version, FLOOR_OPSET)`` — the emitted forms (axes
as inputs of Reduce*/Squeeze/Unsqueeze, Split sizes as an input) are valid from that opset on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnxc.ir import Attr, Dim, DType, Node, ShapeError, TensorType, UnsupportedOpError, Value
from onnxc.passes.shapes.cast import float_to_bfloat16

FLOOR_OPSET = 18
FLOATS = (DType.FLOAT, DType.DOUBLE)
ALL_FLOATS = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16)  # with the emulated half types


def make_attr(name: str, value) -> Attr:
    """An IR attribute from a Python value (int, float, str, numpy array, or a list of ints/floats)."""
    if isinstance(value, (bool, int, np.integer)):
        return Attr(name, "INT", int(value))
    if isinstance(value, (float, np.floating)):
        return Attr(name, "FLOAT", float(value))
    if isinstance(value, str):
        return Attr(name, "STRING", value)
    if isinstance(value, np.ndarray):
        return Attr(name, "TENSOR", value)
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, (int, np.integer)) for x in value):
            return Attr(name, "INTS", [int(x) for x in value])
        return Attr(name, "FLOATS", [float(x) for x in value])
    raise TypeError(f"attribute {name!r}: cannot encode {type(value).__name__}")


class Builder:
    """Reads one node and emits its replacement; :meth:`finish` removes the node."""

    def __init__(self, node: Node):
        if node.graph is None:
            raise ValueError(f"{node.describe()} is not in a graph")
        self.node = node
        self.graph = node.graph
        self.version = max(node.version or 0, FLOOR_OPSET)
        self.base = node.name or node.op_type
        self.nodes: list[Node] = []

    # -- reading the node -----------------------------------------------------------------
    def input(self, i: int) -> Value | None:
        return self.node.input(i)

    def attr(self, name: str, default=None):
        return self.node.attr(name, default)

    def type(self, i: int) -> TensorType:
        v = self.node.input(i)
        if v is None:
            raise self.fail(f"input {i} is required")
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            raise self.unsupported(f"input {i} ({v.name!r}) must be a tensor of known rank, got {v.type}")
        return v.type

    def dtype(self, i: int) -> DType:
        return self.type(i).dtype

    def shape(self, i: int) -> tuple:
        return self.type(i).shape

    def rank(self, i: int) -> int:
        return len(self.shape(i))

    def output(self, i: int) -> Value | None:
        """Output ``i`` of the node, or None when the node has fewer outputs."""
        return self.node.outputs[i] if i < len(self.node.outputs) else None

    def used(self, i: int) -> bool:
        """Whether output ``i`` exists and is read (by a node, a subgraph or as a graph output)."""
        v = self.output(i)
        if v is None:
            return False
        return bool(v.uses()) or any(o is v for o in self.graph.outputs)

    def fail(self, msg: str) -> ShapeError:
        return ShapeError(f"{self.node.describe()}: {msg}")

    def unsupported(self, msg: str) -> UnsupportedOpError:
        n = self.node
        return UnsupportedOpError(f"{n.describe()}: {msg}", [(n.domain or "ai.onnx", n.op_type, n.version)])

    def require_types(self, inputs: Sequence[int], allowed: Sequence[DType] = FLOATS) -> None:
        """Present inputs must have one of the ``allowed`` element types (others: not supported yet)."""
        for i in inputs:
            if self.input(i) is None:
                continue
            dt = self.dtype(i)
            if dt not in allowed:
                raise self.unsupported(f"input {i}: {dt.short} tensors are not supported yet "
                                       f"(supported: {', '.join(d.short for d in allowed)})")

    # -- emitting ---------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: Value | None, out: Value | Sequence[Value] | None = None,
           n_out: int = 1, tag: str | None = None, domain: str = "", version: int | None = None, **attrs):
        """Emit ``op_type(inputs)``; returns its output Value (a list when ``n_out`` > 1).

        ``out`` gives the Values to write (outputs of the expanded node); ``tag`` names new values.
        None attribute values are left out. ``domain``/``version`` place the node in another operator
        set (e.g. ai.onnx.ml TreeEnsemble version 5); by default it is ai.onnx at the builder's version.
        """
        if out is None:
            stem = f"{self.base}_{tag or op_type}"
            outs = [Value(self.graph.fresh_name(stem)) for _ in range(n_out)]
        else:
            outs = [out] if isinstance(out, Value) else list(out)
        ins = list(inputs)
        while ins and ins[-1] is None:  # trailing absent optional inputs are left out
            ins.pop()
        node = Node(op_type, ins, outs, {k: make_attr(k, v) for k, v in attrs.items() if v is not None},
                    name=f"{self.base}/{tag or op_type}", domain=domain,
                    version=self.version if version is None else version)
        self.graph.insert_before(self.node, node)
        self.nodes.append(node)
        return outs[0] if len(outs) == 1 else outs

    def const(self, array, tag: str = "const") -> Value:
        """A new initializer holding ``array``."""
        return self.graph.constant(np.asarray(array), name=self.graph.fresh_name(f"{self.base}_{tag}"))

    def scalar(self, value, dtype: DType) -> Value:
        """A 0-d constant of ``dtype`` (bfloat16: the value rounded, stored as its bit pattern)."""
        if dtype == DType.BFLOAT16:
            bits = float_to_bfloat16(np.array(value, np.float32)).reshape(())
            name = self.graph.fresh_name(f"{self.base}_const")
            return self.graph.add_initializer(Value(name, TensorType(dtype, ()), const=bits))
        return self.const(np.array(value, dtype=dtype.np))

    def ints(self, values: Sequence[int]) -> Value:
        """A 1-D int64 constant (axes, shapes, starts...)."""
        return self.const(np.array(list(values), dtype=np.int64), tag="ints")

    def dim(self, v: Value, axis: int) -> Value:
        """Dim ``axis`` of ``v`` as a 0-d int64 value: a constant when static, else Shape -> Squeeze
        (which carries the symbolic value, so Range/Reshape downstream stay static-in-symbols)."""
        d: Dim = v.type.shape[axis]
        if isinstance(d, int):
            return self.scalar(d, DType.INT64)
        rank = len(v.type.shape)
        a = axis % rank
        s = self.op("Shape", v, start=a, end=a + 1, tag="dim")
        return self.op("Squeeze", s, self.ints([0]), tag="dim")

    # shorthands for the common primitives, in their opset >= 18 forms
    def reduce(self, op_type: str, x: Value, axes: Sequence[int] | None, keepdims: int = 1,
               out: Value | None = None) -> Value:
        """``op_type`` over ``axes`` (None: every axis)."""
        ax = None if axes is None else self.ints(axes)
        return self.op(op_type, x, ax, keepdims=keepdims, out=out)

    def unsqueeze(self, x: Value, axes: Sequence[int]) -> Value:
        return self.op("Unsqueeze", x, self.ints(axes))

    def squeeze(self, x: Value, axes: Sequence[int]) -> Value:
        return self.op("Squeeze", x, self.ints(axes))

    def reshape(self, x: Value, shape: Sequence[int] | Value, out: Value | None = None) -> Value:
        """Reshape with ONNX semantics (0 copies the input dim, -1 takes the rest)."""
        s = shape if isinstance(shape, Value) else self.ints(shape)
        return self.op("Reshape", x, s, out=out)

    def transpose(self, x: Value, perm: Sequence[int], out: Value | None = None) -> Value:
        return self.op("Transpose", x, perm=list(perm), out=out)

    def cast(self, x: Value, to: DType, out: Value | None = None) -> Value:
        return self.op("Cast", x, to=int(to), out=out)

    def slice(self, x: Value, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
              steps: Sequence[int] | None = None) -> Value:
        return self.op("Slice", x, self.ints(starts), self.ints(ends), self.ints(axes),
                       None if steps is None else self.ints(steps))

    def identity(self, x: Value, out: Value) -> Value:
        return self.op("Identity", x, out=out)

    # -- completion -------------------------------------------------------------------------
    def finish(self) -> list[Node]:
        """Remove the expanded node; every output it had must now be written (unused ones may not be)."""
        n = self.node
        for i, o in enumerate(n.outputs):
            if o.producer is n:
                if self.used(i):
                    raise ShapeError(f"{n.describe()}: the expansion does not compute output {i} ({o.name!r})")
                o.producer = None
        self.graph.remove(n)
        return self.nodes
