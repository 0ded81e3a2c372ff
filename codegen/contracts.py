"""C checks of the run-time shape contracts (ir/contracts.py) and where the run function places them.

A contract is checked once per call, as soon as its dims are known: in the bind step when they depend
on the inputs' dims only (``hoist``), else right after the step that defines the last of them
(``Placer``). A failed check returns ONNXC_ERR_INPUT with a message naming the node, every operand's
place and size, and what the op requires. A broadcast contract that defines a dimension variable
stores the broadcast extent in D[].
"""

from __future__ import annotations

from collections.abc import Callable

from onnxc.ir import ShapeError
from onnxc.ir.contracts import Contract

from .templating import c_string


def check_c(c: Contract, dim_c: Callable, sym_c: Callable[[str], str], on_fail: str) -> str:
    """C statements checking ``c``; ``on_fail`` is a format with ``{call}`` (the onnxc_fail call):
    "return {call};" in the bind step, "{{ st = {call}; goto done; }}" in the run function."""
    vals = [f"(long long)({dim_c(d)})" for d in c.dims]
    sizes = ", ".join(f"{lab} is %lld" for lab in c.labels)
    rule = f" ({c.rule})" if c.rule else ""
    if c.kind == "equal":
        text = f"%s: dims that must be equal differ: {sizes}{rule}"
        call = f"onnxc_fail(rt, ONNXC_ERR_INPUT, {c_string(text)}, {c_string(c.where)}, {', '.join(vals)})"
        first = dim_c(c.dims[0])
        cond = " || ".join(f"({dim_c(d)}) != ({first})" for d in c.dims[1:])
        return f"if ({cond}) " + on_fail.format(call=call)
    if c.kind == "broadcast_to":
        text = f"%s: cannot broadcast {sizes} (each after the first must be 1 or the first){rule}"
        call = f"onnxc_fail(rt, ONNXC_ERR_INPUT, {c_string(text)}, {c_string(c.where)}, {', '.join(vals)})"
        first = dim_c(c.dims[0])
        cond = " || ".join(f"(({dim_c(d)}) != 1 && ({dim_c(d)}) != ({first}))" for d in c.dims[1:])
        return f"if ({cond}) " + on_fail.format(call=call)
    text = f"%s: cannot broadcast {sizes} (each must be 1 or the same size){rule}"
    call = f"onnxc_fail(rt, ONNXC_ERR_INPUT, {c_string(text)}, {c_string(c.where)}, {', '.join(vals)})"
    n = len(c.dims)
    dst = sym_c(c.defines) if c.defines else "r_"
    return (f"{{ const int64_t d_[{n}] = {{{', '.join(dim_c(d) for d in c.dims)}}}; int64_t r_;\n"
            f"  if (onnxc_broadcast_extent({n}, d_, &r_)) " + on_fail.format(call=call) + "\n"
            f"  {dst} = r_; (void)r_; }}")


class Placer:
    """The contracts of one graph, handed out as their dims become known (``known``: the dimension
    variables defined so far, in order; contract-defined variables are appended as they are placed)."""

    def __init__(self, contracts: list[Contract]):
        self.pending: list[Contract] = []
        for c in contracts:
            ok = c.static_holds()
            if ok is False:
                raise ShapeError(f"{c.describe()}: the relation fails for the static dims")
            if ok is None or c.defines:
                self.pending.append(c)

    def ready(self, known: list[str]) -> list[Contract]:
        """Contracts whose dims are all known now, in a valid order (a contract that uses a variable
        another one defines comes after it); their defined variables are appended to ``known``."""
        out: list[Contract] = []
        progress = True
        while progress:
            progress = False
            have = set(known)
            for c in list(self.pending):
                if c.symbols() <= have:
                    self.pending.remove(c)
                    out.append(c)
                    if c.defines and c.defines not in have:
                        known.append(c.defines)
                        have.add(c.defines)
                    progress = True
        return out
