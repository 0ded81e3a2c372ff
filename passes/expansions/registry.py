"""Registry of expansions: standard ONNX function ops rewritten into primitive ops onnxc compiles.

Many ONNX ops are specified by a function body (NegativeLogLikelihoodLoss, Attention,
RMSNormalization...). Rather than a kernel each, onnxc expands them in place during shape inference,
when the types of their inputs are known (several bodies depend on input ranks and element types).
An expansion is a Python builder written from the spec: ``@expansion("Op")`` registers a function
``(b: Builder) -> None`` that emits primitive nodes with ``b.op(...)`` and writes every output of the
node. Builders must only emit ops that have a shape rule and a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onnxc.ir import Node

from .builder import Builder


@dataclass(frozen=True)
class Expansion:
    op: str
    domain: str
    build: Callable[[Builder], None]
    versions: tuple[int, int] = (1, 10**9)


EXPANSIONS: dict[tuple[str, str], list[Expansion]] = {}


def expansion(*ops: str, domain: str = "", versions: tuple[int, int] = (1, 10**9)):
    """Register the builder of ``ops`` in ``domain`` for opset ``versions`` (inclusive)."""

    def deco(fn: Callable[[Builder], None]):
        for op in ops:
            EXPANSIONS.setdefault((domain, op), []).append(Expansion(op, domain, fn, versions))
        return fn

    return deco


def expansion_for(node: Node) -> Expansion | None:
    """The expansion that applies to ``node`` (its op, domain and opset version), if any."""
    for e in EXPANSIONS.get((node.domain, node.op_type), ()):
        lo, hi = e.versions
        if not node.version or lo <= node.version <= hi:
            return e
    return None
