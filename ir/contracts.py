"""Run-time shape contracts: relations between dims that shape inference assumed but could not prove.

Shape rules meet symbolic dims whose relation only the call's inputs decide: Concat's other axes of
``[N, 2, H]`` and ``[N, 3, W]`` must agree (``H == W``), MatMul's inner dims must match, numpy
broadcasting of ``N`` against ``M`` needs one of them to be 1 or both equal. A rule states such a
relation as a :class:`Contract` on its graph (``Graph.contracts``) and goes on as if it holds; the run
function checks every contract once per call, as early as its dims are known (in the bind step when
they come from the inputs alone), and fails with a message that names the node, the operands and
both sizes. Kernels may therefore rely on the relations their node's rule recorded.

A broadcast of two different symbols defines a new dimension variable, named after the broadcast
(``broadcast(M, N)``), whose run-time value is the numpy result: equal dims, or the one that is not 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dims import Dim, free_symbols, is_static


@dataclass(frozen=True)
class Contract:
    """``kind`` "equal": every dim of ``dims`` has the same value. "broadcast": the dims broadcast
    together (each is 1 or the common value); with ``defines``, that dimension variable receives the
    result. "broadcast_to": each dim after the first is 1 or the first (unidirectional broadcast). ``labels[i]`` says where ``dims[i]`` comes from ("input 1 axis 2"); ``where`` is the node's
    description and ``rule`` a short statement of what the op requires."""

    kind: str
    dims: tuple[Dim, ...]
    labels: tuple[str, ...]
    where: str
    rule: str = ""
    defines: str | None = None

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for d in self.dims:
            out |= free_symbols(d)
        return out

    def static_holds(self) -> bool | None:
        """True/False when every dim is static; None when the answer needs run-time values."""
        if not all(is_static(d) for d in self.dims):
            return None
        vals = [int(d) for d in self.dims]
        if self.kind == "equal":
            return len(set(vals)) <= 1
        if self.kind == "broadcast_to":
            return all(v in (1, vals[0]) for v in vals[1:])
        return len({v for v in vals if v != 1}) <= 1

    def describe(self) -> str:
        rel = {"equal": " == ", "broadcast": " broadcasts with "}.get(self.kind, " fits into ")
        text = rel.join(f"{lab} ({d})" for lab, d in zip(self.labels, self.dims))
        return f"{self.where}: {text}" + (f" -> {self.defines}" if self.defines else "")


def broadcast_name(dims: list[Dim]) -> str:
    """The dimension variable of the numpy broadcast of ``dims`` (order-free, so two nodes that
    broadcast the same dims share it)."""
    return "broadcast(" + ", ".join(sorted({str(d) for d in dims})) + ")"
