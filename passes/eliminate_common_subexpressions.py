"""Common-subexpression elimination: compute each distinct value once.

Rewrites (per graph, and inside each subgraph body separately):

- two small constants (initializers) with the same dtype, shape and bytes become one;
- two nodes with the same domain, op, opset version, overload, attributes, inputs and output types
  become one: the readers of the later node's outputs read the earlier node's outputs.

Exporters repeat work (one ``Shape -> Gather -> Unsqueeze`` chain per Reshape, the same scalar
``Constant`` in every layer); merging it shrinks the weights blob and the kernels. Not merged: nodes
with subgraphs (If/Loop/Scan), random ops (each call draws new numbers), nodes defining run-time
(data-dependent) dims, values that are graph outputs or graph inputs (their names are public), and
nodes that are already dead (DCE drops them; a dead shape computation is reported as folded there).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from onnxc.ir import Graph, Model, Node, TensorType, Value

from .base import PassResult
from .eliminate_dead_code import _outer_reads

MAX_CONST_BYTES = 1 << 12  # constants up to this size are compared by content

RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                        "Bernoulli", "Multinomial"})


class _Unhashable(Exception):
    pass


def _freeze(x: Any) -> Any:
    """A hashable key equal for equal attribute values (floats compare by bit pattern, so NaN == NaN)."""
    if isinstance(x, bool) or x is None or isinstance(x, (int, str, bytes)):
        return (type(x).__name__, x)
    if isinstance(x, float):
        return ("f", struct.pack("<d", x))
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("o", x.shape, tuple(_freeze(e) for e in x.reshape(-1).tolist()))
        return ("a", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return _freeze(np.asarray(x))
    if isinstance(x, (list, tuple)):
        flat = _freeze_flat(x) if len(x) > 64 else None
        return flat if flat is not None else ("l", tuple(_freeze(e) for e in x))
    if isinstance(x, dict):
        return ("d", tuple(sorted((k, _freeze(v)) for k, v in x.items())))
    try:
        hash(x)
    except TypeError:
        raise _Unhashable from None
    return ("h", type(x).__name__, x)  # e.g. symbolic Dims of onnxc::SymValue


def _freeze_flat(x: list | tuple) -> tuple | None:
    """The key of a long list of ints only, floats only or strings only (attributes of millions of entries:
    tree ensembles) in one numpy step; None for other lists. Equal lists get equal keys, lists of
    different kinds different ones (as element by element)."""
    kinds = set(map(type, x))
    if kinds == {int}:
        try:
            return ("li", np.array(x, dtype=np.int64).tobytes())
        except OverflowError:
            return None
    if kinds == {float}:
        return ("lf", np.array(x, dtype=np.float64).tobytes())
    if kinds == {str}:
        return ("ls", tuple(x))
    return None


def _base_key(node: Node) -> tuple | None:
    """``node_key`` but the attributes (cheap to compute: nodes merge only when these agree)."""
    if node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx"):
        return None
    if any(True for _ in node.subgraphs()) or getattr(node, "defines_dims", None):
        return None  # subgraphs; or run-time dims: each node defines its own variables
    ins = tuple(-1 if v is None else v.id for v in node.inputs)
    # output types too: an internal op such as onnxc::SymValue takes its type from its output value
    outs = tuple(repr(o.type) for o in node.outputs)
    return (node.domain, node.op_type, node.version, node.overload, ins, outs)


def _attrs_key(node: Node) -> tuple | None:
    try:
        return tuple(sorted((a.name, a.kind, _freeze(a.value)) for a in node.attrs.values()))
    except _Unhashable:
        return None


def node_key(node: Node) -> tuple | None:
    """What makes two nodes compute the same values; None when the node must not be merged."""
    base = _base_key(node)
    attrs = None if base is None else _attrs_key(node)
    return None if attrs is None else (*base, attrs)


def _same(group: list[list], n: Node) -> Node | None:
    """The node of ``group`` (entries [attribute key or None: not computed yet, node]) that ``n`` repeats,
    else None (``n`` joins the group). Attributes are compared only between nodes that agree on everything
    else: a node alone with its inputs (a forest's millions of attribute entries) is never hashed."""
    if not group:
        group.append([None, n])
        return None
    key = _attrs_key(n)
    if key is None:
        return None
    for entry in group:
        if entry[0] is None:
            k = _attrs_key(entry[1])
            entry[0] = ("unhashable", id(entry[1])) if k is None else k
        if entry[0] == key:
            return entry[1]
    group.append([key, n])
    return None


def const_key(v: Value) -> tuple | None:
    arr = v.const
    if not isinstance(arr, np.ndarray) or arr.dtype == object or arr.nbytes > MAX_CONST_BYTES:
        return None
    if not isinstance(v.type, TensorType):
        return None
    return (v.type.dtype, arr.dtype.str, arr.shape, arr.tobytes())


def _live(g: Graph) -> set[int]:
    """Ids of the nodes of ``g`` whose outputs something reads (the same liveness DCE computes)."""
    live_vals: set[int] = {v.id for v in g.outputs}
    live: set[int] = set()
    for n in reversed(g.nodes):
        if any(o.id in live_vals for o in n.outputs):
            live.add(n.id)
            live_vals |= {v.id for v in n.inputs if v is not None}
            for sg in n.subgraphs():
                live_vals |= _outer_reads(sg)
    return live


def _public(g: Graph) -> set[int]:
    """Values whose identity is visible outside: inputs and outputs of this graph."""
    return {v.id for v in g.inputs} | {v.id for v in g.outputs}


def _rewire(old: Value, new: Value, g: Graph, nested: bool) -> None:
    """Readers of ``old`` read ``new``, including subgraph bodies that return ``old`` directly."""
    old.replace_all_uses_with(new)
    if nested:
        for n in g.walk():
            for sg in n.subgraphs():
                sg.outputs = [new if o is old else o for o in sg.outputs]


def _has_subgraphs(g: Graph) -> bool:
    return any(True for n in g.nodes for _ in n.subgraphs())


def _merge_constants(g: Graph, nested: bool) -> bool:
    seen: dict[tuple, Value] = {}
    public = _public(g)
    changed = False
    for name, v in list(g.initializers.items()):
        if v.id in public:
            continue
        key = const_key(v)
        if key is None:
            continue
        first = seen.setdefault(key, v)
        if first is v:
            continue
        _rewire(v, first, g, nested)
        del g.initializers[name]
        changed = True
    return changed


def cse_graph(g: Graph) -> bool:
    """Merge duplicate constants and nodes of ``g`` and of its subgraphs; True when anything changed."""
    nested = _has_subgraphs(g)
    changed = _merge_constants(g, nested)
    live = _live(g)
    public = _public(g)
    seen: dict[tuple, list[list]] = {}  # _base_key -> the nodes with it (_same)
    for n in list(g.nodes):
        for sg in n.subgraphs():
            changed |= cse_graph(sg)
        if n.id not in live:
            continue
        key = _base_key(n)
        if key is None:
            continue
        first = _same(seen.setdefault(key, []), n)
        if first is None or any(o.id in public for o in n.outputs):
            continue
        for old, new in zip(n.outputs, first.outputs):
            _rewire(old, new, g, nested)
        g.remove(n)
        changed = True
    return changed


def eliminate_common_subexpressions(model: Model) -> PassResult:
    return PassResult(model, cse_graph(model.graph))
