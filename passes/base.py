"""The pass contract: a pass takes a model and returns it with a flag saying whether it changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onnxc.ir import Graph, Model


@dataclass
class PassResult:
    model: Model
    changed: bool


def in_subgraphs(g: Graph, fn: Callable[[Graph], bool]) -> bool:
    """Run a graph rewrite ``fn`` on every graph held by ``g``'s nodes (If/Loop/Scan bodies; ``fn`` recurses
    further itself); True when any of them changed."""
    changed = False
    for node in list(g.nodes):
        for sg in node.subgraphs():
            changed |= fn(sg)
    return changed
