"""Type and shape inference with dimension variables, and the rewrites that must run while it walks.

Walks nodes in order, asks each op's shape rule for the output types (symbolic Dims). Some rewrites
need the types and constants inference has just found for a node's inputs, so they run inside the walk,
each a named step in its own file, counted in ``InferStats`` (and so in the pass's ``changed`` flag):

- ``inline_constant_if`` (inline_if.py): an If on a compile-time constant becomes the branch it takes,
  before the other branch (maybe invalid for these shapes) is inferred;
- ``squeeze_as_if`` (sink_into_if.py): a Squeeze without axes over one symbolic dim becomes an If;
- ``expand_function_ops`` (expand_function_ops.py): a node with no shape rule but an expansion (a
  standard function op) is replaced by its expansion, whose nodes are inferred next;
- ``sink_into_branches`` (sink_into_if.py): code reading a value of run-time rank (an If whose branches
  differ in rank) moves into the If's branches, where every rank is static;
- ``fold_constants`` (fold_constants.py ``try_fold``): a node whose inputs are constant is folded once
  typed, so later rules (Reshape, Expand, Slice...) see constant or symbolic shape values.

Declared shapes in the model are only hints; inferred shapes win, but a declared static dim fills in an
inferred unknown. A declared element type must be the inferred one (onnxruntime refuses the model
too): the declared type of a graph output is what callers are promised.

Every output type is checked against ir/limits.py: rank at most MAX_RANK, and the static dims of a
tensor at most MAX_TENSOR_BYTES (exact Python ints: a size that would wrap in 64 bits is refused
here, before codegen computes buffer sizes from it).
"""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar

from onnxc.ir import Graph, Model, Node, ShapeError, TensorType, UnsupportedOpError
from onnxc.ir.limits import MAX_RANK, too_big

from .base import PassResult
from .expand_function_ops import expand_node
from .fold_constants import try_fold
from .inline_if import inline_constant_if
from .shapes.common import RULE_ERRORS, rule_failure
from .shapes.control_flow import RankVaries
from .shapes.registry import rule_for
from .sink_into_if import sink_into_branches, squeeze_as_if

# Rewrites tried on each node before its shape rule, in order: (name, rewrite -> the new nodes or None).
NODE_REWRITES = [
    ("inline_constant_if", inline_constant_if),
    ("squeeze_as_if", squeeze_as_if),
]

InferStats = Counter  # step name -> times it changed the graph; "types": outputs whose type changed


_running: ContextVar[InferStats | None] = ContextVar("onnxc_infer_stats", default=None)


def infer_graph(g: Graph, fold: bool = True) -> InferStats:
    """Infer (and fold, unless ``fold`` is False) every node of ``g`` in order; what changed. A body
    inferred by its node's shape rule (shapes/control_flow.py) adds its counts to the enclosing walk's."""
    outer = _running.get()
    token = _running.set(Counter())
    try:
        stats = _infer_walk(g, fold)
    finally:
        _running.reset(token)
    if outer is not None:
        outer.update(stats)
    return stats


def _infer_walk(g: Graph, fold: bool) -> InferStats:
    stats = _running.get()
    before = set(g.contracts)
    g.reset_contracts()  # the rules state them again (ir/contracts.py)
    pending = list(reversed(g.nodes))  # a stack: rewritten nodes push their replacements
    while pending:
        node = pending.pop()
        taken = _rewrite(node, stats)
        if taken is not None:
            pending.extend(reversed(taken))
            continue
        try:
            stats["types"] += infer_node(g, node)
        except RankVaries:
            if not sink_into_branches(node, pending):
                raise
            stats["sink_into_branches"] += 1
            continue
        if fold and try_fold(node):
            stats["fold_constants"] += 1
    stats["contracts"] += set(g.contracts) != before
    return stats


def _rewrite(node: Node, stats: InferStats) -> list[Node] | None:
    """The nodes that replaced ``node`` by a rewrite of NODE_REWRITES or its expansion; None if none applied."""
    for name, rewrite in NODE_REWRITES:
        taken = rewrite(node)
        if taken is not None:
            stats[name] += 1
            return taken
    if rule_for(node) is not None:
        return None
    expanded = expand_node(node)
    if expanded is None:
        raise UnsupportedOpError(f"no shape rule for {node.describe()} (opset {node.version})",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    stats["expand_function_ops"] += 1
    return expanded


def infer_node(g: Graph, node: Node) -> int:
    """Set the types of ``node``'s outputs from its shape rule; how many changed. RankVaries passes through."""
    old_dims = node.defines_dims
    node.defines_dims = []  # the rule records the run-time dims it still needs (common.runtime_dim)
    try:
        types = rule_for(node).infer(node)
    except (RankVaries, ShapeError):
        raise
    except RULE_ERRORS as e:
        raise rule_failure(node, "shape inference", e) from e
    changed = int(node.defines_dims != old_dims)
    for o, t in zip(node.outputs, types):
        declared = g.value_info.get(o.name)
        t = _merge_hint(t, declared)
        changed += t != o.type
        o.type = t
        _check_type(node, o.name, o.type, declared)
    return changed


def _check_type(node: Node, name: str, t, declared) -> None:
    """ShapeError when output ``name``'s inferred type ``t`` breaks a limit or its declared element type."""
    if not isinstance(t, TensorType):
        return
    if isinstance(declared, TensorType) and declared.dtype != t.dtype:
        raise ShapeError(f"{node.describe()}: value {name!r} is declared {declared.dtype.short} but the node "
                         f"computes {t.dtype.short}")
    if t.shape is None:
        return
    if len(t.shape) > MAX_RANK:
        raise ShapeError(f"{node.describe()}: output {name!r} has rank {len(t.shape)}, above onnxc's maximum "
                         f"rank {MAX_RANK}")
    why = too_big(t.dtype, [d for d in t.shape if isinstance(d, int)])
    if why is not None:
        raise ShapeError(f"{node.describe()}: output {name!r}: {why}" +
                         ("" if t.is_static else f" (its static dims alone; shape {list(t.shape)})"))


def _merge_hint(t, hint):
    if not (isinstance(t, TensorType) and isinstance(hint, TensorType)) or t.shape is not None:
        return t
    return TensorType(t.dtype, hint.shape) if hint.dtype == t.dtype else t


def infer_shapes(model: Model) -> PassResult:
    """Infer the main graph; changed when a rewrite, a fold, a type or a contract changed it."""
    stats = infer_graph(model.graph)
    return PassResult(model, any(stats.values()))
