"""Type and shape inference with dimension variables, folding constants as it goes.

Walks nodes in order, asks each op's shape rule for the output types (symbolic Dims), and folds
nodes whose inputs are all constant so later rules (Reshape, Expand, Slice...) see constant or
symbolic shape values. A node with no shape rule but an expansion (a standard function op, see
expand_function_ops) is replaced in place by its expansion, whose nodes are inferred next. Values of
run-time rank (an If whose branches differ in rank, a Squeeze without axes over a symbolic dim) are made
static by moving the code that reads them into the If's branches (sink_into_if.py). Declared
shapes in the model are only hints; inferred shapes win, but a declared static dim fills in an
inferred unknown. A declared element type must be the inferred one (onnxruntime refuses the model
too): the declared type of a graph output is what callers are promised.

Every output type is checked against ir/limits.py: rank at most MAX_RANK, and the static dims of a
tensor at most MAX_TENSOR_BYTES (exact Python ints: a size that would wrap in 64 bits is refused
here, before codegen computes buffer sizes from it).
"""

from __future__ import annotations

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


def infer_graph(g: Graph, fold: bool = True) -> None:
    g.reset_contracts()  # the rules state them again (ir/contracts.py)
    pending = list(reversed(g.nodes))  # a stack: expanded function ops push their new nodes
    while pending:
        node = pending.pop()
        taken = inline_constant_if(node)
        if taken is None:
            taken = squeeze_as_if(node)
        if taken is not None:
            pending.extend(reversed(taken))
            continue
        rule = rule_for(node)
        if rule is None:
            expanded = expand_node(node)
            if expanded is not None:
                pending.extend(reversed(expanded))
                continue
            raise UnsupportedOpError(f"no shape rule for {node.describe()} (opset {node.version})",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
        node.defines_dims = []  # the rule records the run-time dims it still needs (common.runtime_dim)
        try:
            types = rule.infer(node)
        except RankVaries:
            if sink_into_branches(node, pending):
                continue
            raise
        except ShapeError:
            raise
        except RULE_ERRORS as e:
            raise rule_failure(node, "shape inference", e) from e
        for o, t in zip(node.outputs, types):
            declared = g.value_info.get(o.name)
            o.type = _merge_hint(t, declared)
            _check_type(node, o.name, o.type, declared)
        if fold:
            try_fold(node)


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
    infer_graph(model.graph)
    return PassResult(model, True)
