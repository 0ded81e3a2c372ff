"""Registry of per-op type/shape rules and constant-folding rules.

A shape rule reads ``node.inputs[i].type`` (and ``.const`` / ``.sym_value`` when known) plus the
node's attributes and ``node.version``, and returns one type per output. It may also set
``out.sym_value`` (the element values of a small int64 shape tensor, as Dims) so that shape
computations fold into static-in-symbols shapes.

A fold rule computes the outputs of a node whose inputs are all constant, with numpy, using the same
semantics as the C kernel. Ops without a fold rule are left to run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onnxc.ir import Node


@dataclass
class OpRule:
    ops: tuple[str, ...]
    domain: str
    infer: Callable[[Node], list]
    versions: tuple[int, int] = (1, 10**9)


SHAPE_RULES: dict[tuple[str, str], OpRule] = {}
FOLD_RULES: dict[tuple[str, str], Callable[[Node, list], list[np.ndarray]]] = {}


def shape_rule(*ops: str, domain: str = "", versions: tuple[int, int] = (1, 10**9)):
    """Register the type/shape rule of ``ops`` in ``domain`` for opset ``versions`` (inclusive)."""

    def deco(fn):
        r = OpRule(ops, domain, fn, versions)
        for op in ops:
            SHAPE_RULES[(domain, op)] = r
        return fn

    return deco


def fold_rule(*ops: str, domain: str = ""):
    """Register a numpy implementation used to fold ``ops`` when all inputs are constant."""

    def deco(fn):
        for op in ops:
            FOLD_RULES[(domain, op)] = fn
        return fn

    return deco


def rule_for(node: Node) -> OpRule | None:
    r = SHAPE_RULES.get((node.domain, node.op_type))
    if r is None:
        return None
    lo, hi = r.versions
    if node.version and not lo <= node.version <= hi:
        return None
    return r


def fold_for(node: Node):
    return FOLD_RULES.get((node.domain, node.op_type))
