"""Type and shape inference with dimension variables, folding constants as it goes.

Walks nodes in order, asks each op's shape rule for the output types (symbolic Dims), and folds
nodes whose inputs are all constant so later rules (Reshape, Expand, Slice...) see constant or
symbolic shape values. A node with no shape rule but an expansion (a standard function op, see
expand_function_ops) is replaced in place by its expansion, whose nodes are inferred next. Declared
types in the model are only hints; inferred types win, but a declared static dim fills in an
inferred unknown.
"""

from __future__ import annotations

from onnxc.ir import Graph, Model, ShapeError, TensorType, UnsupportedOpError

from .base import PassResult
from .expand_function_ops import expand_node
from .fold_constants import try_fold
from .inline_if import inline_constant_if
from .shapes.registry import rule_for


def infer_graph(g: Graph, fold: bool = True) -> None:
    g.reset_contracts()  # the rules state them again (ir/contracts.py)
    pending = list(reversed(g.nodes))  # a stack: expanded function ops push their new nodes
    while pending:
        node = pending.pop()
        taken = inline_constant_if(node)
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
        except ShapeError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as e:
            raise ShapeError(f"{node.describe()}: shape inference failed: {e}") from e
        for o, t in zip(node.outputs, types):
            o.type = _merge_hint(t, g.value_info.get(o.name))
        if fold:
            try_fold(node)


def _merge_hint(t, hint):
    if not (isinstance(t, TensorType) and isinstance(hint, TensorType)) or t.shape is not None:
        return t
    return TensorType(t.dtype, hint.shape) if hint.dtype == t.dtype else t


def infer_shapes(model: Model) -> PassResult:
    infer_graph(model.graph)
    return PassResult(model, True)
