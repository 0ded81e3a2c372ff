"""Expansion of standard ONNX function ops (no native kernel) into primitive ops, in place.

Runs inside shape inference (``infer_graph``): when a node has no shape rule but an expansion, the
node is replaced by the nodes its builder emits (see ``passes/expansions``), and inference continues
with those. Expansions may depend on input ranks and element types, which are known at that point.
"""

from __future__ import annotations

from onnxc.ir import Node, ShapeError, UnsupportedOpError

from .expansions import Builder, expansion_for
from .shapes.common import RULE_ERRORS, rule_failure


def has_expansion(node: Node) -> bool:
    return expansion_for(node) is not None


def expand_node(node: Node) -> list[Node] | None:
    """Replace ``node`` by its expansion and return the new nodes in order; None when it has none."""
    e = expansion_for(node)
    if e is None:
        return None
    b = Builder(node)
    try:
        e.build(b)
    except (ShapeError, UnsupportedOpError):
        raise
    except RULE_ERRORS as ex:
        raise rule_failure(node, "expansion", ex) from ex
    return b.finish()
