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
from onnxc.ir.dims import to_c_checked

from .templating import c_string


def check_c(c: Contract, sym_c: Callable[[str], str], on_fail: str) -> str:
    """C statements checking ``c``; ``on_fail`` is a format with ``{call}`` (the onnxc_fail call):
    "return {call};" in the bind step, "{{ st = {call}; goto done; }}" in the run function. The dims
    are computed with overflow-checked arithmetic: an overflow fails too, never wraps into a pass."""
    n = len(c.dims)
    sizes = ", ".join(f"{lab} is %lld" for lab in c.labels)
    rule = f" ({c.rule})" if c.rule else ""
    what = {"equal": f"dims that must be equal differ: {sizes}{rule}",
            "broadcast": f"cannot broadcast {sizes} (each must be 1 or the same size){rule}",
            "broadcast_to": f"cannot broadcast {sizes} (each after the first must be 1 or the first){rule}"}[c.kind]
    vals = ", ".join(f"(long long)d_[{i}]" for i in range(n))
    call = f"onnxc_fail(rt, ONNXC_ERR_INPUT, {c_string('%s: ' + what)}, {c_string(c.where)}, {vals})"
    ovf = (f"onnxc_fail(rt, ONNXC_ERR_INPUT, {c_string('%s: the dims of ' + ', '.join(c.labels) + ' overflow')}, "
           f"{c_string(c.where)})")
    if c.kind == "equal":
        cond = " || ".join(f"d_[{i}] != d_[0]" for i in range(1, n))
    elif c.kind == "broadcast_to":
        cond = " || ".join(f"(d_[{i}] != 1 && d_[{i}] != d_[0])" for i in range(1, n))
    else:
        cond = f"onnxc_broadcast_extent({n}, d_, &r_)"
    lines = [f"{{ int o_ = 0; int64_t r_ = 0; const int64_t d_[{n}] = "
             f"{{{', '.join(to_c_checked(d, sym_c, '&o_') for d in c.dims)}}};",
             "  (void)r_; if (o_) " + on_fail.format(call=ovf),
             f"  if ({cond}) " + on_fail.format(call=call)]
    if c.defines:
        lines.append(f"  {sym_c(c.defines)} = r_;")
    return "\n".join(lines) + " }"


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
