"""How much the weights may grow when kernels transform them, and which nodes get to.

Most kernels keep a constant in the model's layout or repack it at the same size (GEMM panels), but
some transforms trade memory for speed: Winograd F(4x4, 3x3) stores 36 floats per filter pair instead
of 9. Unbounded, that made ResNet-50's weights 1.43x and Inception-v2's 1.74x the model's. Here the
whole program's growth is capped at MAX_GROWTH of its constant bytes, and the budget goes to the
nodes that gain the most per extra byte.

A kernel module that grows weights registers a ``candidate(node) -> Candidate | None`` function with
:func:`grows_weights`; the lowerer calls :func:`plan` on its graph before lowering any node, and a
kernel asks ``KernelCtx.may_grow_weights()`` before taking its growing path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from onnxc.ir import CompileError, Graph, Node

MAX_GROWTH = 0.25  # extra bytes allowed, as a fraction of the program's constant bytes (issue #16: <= 1.3x)
ENV = "ONNXC_WEIGHT_GROWTH"  # overrides MAX_GROWTH at compile time ("inf": no cap); keyed in the model cache


def max_growth() -> float:
    """MAX_GROWTH, or the value of the environment variable ENV (a non-negative number or "inf")."""
    raw = os.environ.get(ENV)
    if raw is None or raw.strip() == "":
        return MAX_GROWTH
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise CompileError(f"{ENV}={raw!r}: expected a non-negative number (a fraction of the model's weights) "
                           "or 'inf'")
    return value


@dataclass(frozen=True)
class Candidate:
    node: Node
    extra_bytes: int   # what the transform adds to the weights
    gain: float        # the time it saves, in any unit shared by all candidates (flops saved, say)


_CANDIDATES: list[Callable[[Node], Candidate | None]] = []


def grows_weights(fn: Callable[[Node], Candidate | None]) -> Callable[[Node], Candidate | None]:
    """Register ``fn``: for a node, the growth its kernel would cause and what it would save."""
    _CANDIDATES.append(fn)
    return fn


def constant_bytes(g: Graph) -> int:
    return sum(np.asarray(v.const).nbytes for v in g.initializers.values() if v.const is not None)


def plan(nodes: Iterable[Node], weight_bytes: int, growth: float | None = None) -> set[int]:
    """Ids of the nodes allowed to grow the weights: the best gain per extra byte first, while the
    total stays within ``growth * weight_bytes`` (default: :func:`max_growth`)."""
    growth = max_growth() if growth is None else growth
    cands = [c for n in nodes for fn in _CANDIDATES if (c := fn(n)) is not None]
    cands.sort(key=lambda c: c.gain / max(c.extra_bytes, 1), reverse=True)
    left = growth * weight_bytes
    chosen = set()
    for c in cands:
        if c.extra_bytes <= left:
            left -= c.extra_bytes
            chosen.add(c.node.id)
    return chosen
