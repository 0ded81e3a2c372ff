"""Einsum (12, 28): equation parsing shared with the kernel, the shape rule and the fold rule.

An equation ``term1,term2,...->output`` names every operand axis with a letter (a-z, A-Z) or covers a
run of axes with one ellipsis ``...``. Semantics follow numpy (the reference):

* a letter repeated inside one term takes the diagonal of those axes (``ii->i``); a letter absent from
  the output is summed over;
* implicit output (no ``->``): the ellipsis axes first, then the letters that occur exactly once in
  the equation, in ASCII order (upper case before lower case);
* ellipsis axes broadcast right-aligned across operands (numpy-style, also when the operands' ellipses
  cover different numbers of axes); an explicit output must then contain ``...``;
* a letter's axes must agree in size across operands, except that a size of 1 broadcasts.

After parsing, ellipsis axes are ordinary labels named ``"...k"`` (k counted from the left of the
broadcast ellipsis), so the kernel sees only labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType
from onnxc.ir.dims import dmax
from onnxc.ir.types import EMULATED_FLOATS

from .common import fail, shape_of, tensor_type
from .registry import fold_rule, shape_rule

EINSUM_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16, DType.INT8, DType.INT16,
                          DType.INT32, DType.INT64, DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})


@dataclass(frozen=True)
class EinsumSpec:
    """A parsed equation: one label per axis of each operand and of the output, and every label's size."""

    terms: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    dims: dict[str, Dim]

    @property
    def summed(self) -> tuple[str, ...]:
        """Labels summed over, in order of first appearance."""
        seen: list[str] = []
        for t in self.terms:
            for lab in t:
                if lab not in self.output and lab not in seen:
                    seen.append(lab)
        return tuple(seen)


def _split_term(node: Node, term: str, where: str) -> tuple[list[str], list[str] | None]:
    """(letters before the ellipsis, letters after it) — the second is None without an ellipsis."""
    if term.count("...") > 1:
        raise fail(node, f"equation: {where} {term!r} has more than one ellipsis")
    head, dots, tail = term.partition("...")
    parts = [head, tail] if dots else [head]
    for p in parts:
        bad = [c for c in p if not (c.isascii() and c.isalpha())]
        if bad:
            raise fail(node, f"equation: {where} {term!r} has invalid character {bad[0]!r} (letters, '...' only)")
    return (list(head), list(tail)) if dots else (list(head), None)


def _label_dim(node: Node, eq: str, lab: str, sizes: list[Dim]) -> Dim:
    """The broadcast size of a label's axes: each is that size or 1 (checked at run time when symbolic).
    Distinct symbolic sizes broadcast to their maximum (one of them may be 1 at run time)."""
    static = {d for d in sizes if isinstance(d, int) and d != 1}
    if len(static) > 1:
        raise fail(node, f"equation {eq!r}: the axes labelled {lab!r} have sizes {sizes} that do not agree")
    if static:
        return static.pop()
    out: Dim = 1
    for d in dict.fromkeys(d for d in sizes if not isinstance(d, int)):
        out = d if out == 1 else dmax(out, d)
    return out


def parse_einsum(node: Node, shapes: list[tuple]) -> EinsumSpec:
    """Parse ``node``'s equation for operands of ``shapes``; ShapeError (naming the node) when invalid."""
    eq = node.attr("equation")
    if not isinstance(eq, str) or not eq.replace(" ", ""):
        raise fail(node, "the equation attribute is required")
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if "->" in rhs:
        raise fail(node, f"equation {eq!r} has more than one '->'")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise fail(node, f"equation {eq!r} has {len(terms)} input terms for {len(shapes)} inputs")
    # ellipsis ranks, then labels per operand axis
    parsed, ell_ranks = [], []
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        head, tail = _split_term(node, term, f"input term {i}")
        letters = len(head) + len(tail or [])
        ell = len(shape) - letters
        if (tail is None and ell != 0) or ell < 0:
            raise fail(node, f"equation term {term!r} does not match input {i} of rank {len(shape)}")
        parsed.append((head, tail))
        ell_ranks.append(ell)
    n_ell = max(ell_ranks, default=0)
    ell_labels = tuple(f"...{k}" for k in range(n_ell))
    label_terms = []
    for (head, tail), ell in zip(parsed, ell_ranks):
        label_terms.append(tuple(head + list(ell_labels[n_ell - ell:]) + (tail or [])))
    # sizes: every axis of a label broadcasts with the others (numpy also broadcasts size-1 letters)
    occurrences: dict[str, list[Dim]] = {}
    for t, shape in zip(label_terms, shapes):
        for lab, d in zip(t, shape):
            occurrences.setdefault(lab, []).append(d)
    dims = {lab: _label_dim(node, eq, lab, ds) for lab, ds in occurrences.items()}
    for lab in ell_labels:  # operands whose ellipsis covers fewer axes broadcast over the missing ones
        dims.setdefault(lab, 1)
    if arrow:
        head, tail = _split_term(node, rhs, "the output")
        if tail is None and n_ell:
            raise fail(node, f"equation {eq!r}: the inputs have ellipsis axes, so the output needs '...'")
        out = head + list(ell_labels if tail is not None else ()) + (tail or [])
        for lab in head + (tail or []):
            if lab not in occurrences:
                raise fail(node, f"equation {eq!r}: output label {lab!r} does not occur in the inputs")
        letters = head + (tail or [])
        if len(set(letters)) != len(letters):
            raise fail(node, f"equation {eq!r}: the output repeats a label")
    else:
        counts: dict[str, int] = {}
        for t in label_terms:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        singles = sorted(lab for lab, c in counts.items() if c == 1 and not lab.startswith("..."))
        out = list(ell_labels) + singles
    return EinsumSpec(tuple(label_terms), tuple(out), dims)


def einsum_spec(node: Node) -> EinsumSpec:
    """The parsed equation of ``node`` for its current input shapes."""
    return parse_einsum(node, [shape_of(node, i) for i in range(len(node.inputs))])


@shape_rule("Einsum")
def _einsum(node: Node) -> list:
    if not node.inputs:
        raise fail(node, "Einsum needs at least one input")
    dt = tensor_type(node, 0).dtype
    for i in range(1, len(node.inputs)):
        if tensor_type(node, i).dtype != dt:
            raise fail(node, f"all inputs must have one element type, got {dt.short} and "
                             f"{tensor_type(node, i).dtype.short} (input {i})")
    spec = einsum_spec(node)
    return [TensorType(dt, tuple(spec.dims[lab] for lab in spec.output))]


@fold_rule("Einsum")
def _fold_einsum(node: Node, xs: list) -> list | None:
    t = node.inputs[0].type
    if not isinstance(t, TensorType) or t.dtype in EMULATED_FLOATS or t.dtype not in EINSUM_TYPES:
        return None
    spec = einsum_spec(node)
    names: dict[str, int] = {}
    operands = []
    for x, term in zip(xs, spec.terms):
        operands += [np.asarray(x), [names.setdefault(lab, len(names)) for lab in term]]
    out = np.einsum(*operands, [names[lab] for lab in spec.output])
    return [np.asarray(out).astype(t.dtype.np)]


__all__ = ["EINSUM_TYPES", "EinsumSpec", "einsum_spec", "parse_einsum"]
