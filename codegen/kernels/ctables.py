"""Static C tables for kernels whose parameters are attribute data: string lists, lookup keys,
tree nodes. A table is a ``static const`` array registered once per translation unit under a name
derived from its contents, so equal tables are shared.

Elements are written by ``cexpr.c_literal``: exact floats, well-typed 64-bit integers, strings through
``c_string`` (every non-ASCII or special byte escaped).
"""

from __future__ import annotations

import hashlib

from onnxc.ir import DType

from ..cexpr import c_literal
from .base import KernelCtx


def table(ctx: KernelCtx, ctype: str, literals: list[str]) -> str:
    """Name of a ``static const ctype name[]`` holding the C ``literals`` (at least one element)."""
    rows = ",\n".join("    " + ", ".join(literals[k:k + 12]) for k in range(0, len(literals), 12)) or "    0"
    digest = hashlib.sha1(f"{ctype}|{rows}".encode()).hexdigest()[:16]
    name = f"onnxc_tab_{digest}"
    ctx.helper(name, f"static const {ctype} {name}[{max(1, len(literals))}] = {{\n{rows}\n}};")
    return name


def typed_table(ctx: KernelCtx, dt: DType, values) -> str:
    """A table of element type ``dt`` holding ``values``."""
    return table(ctx, dt.c, [c_literal(v, dt) for v in values])


def int_table(ctx: KernelCtx, values, ctype: str = "int64_t") -> str:
    return table(ctx, ctype, [c_literal(v, DType.INT64) for v in values])


def double_table(ctx: KernelCtx, values) -> str:
    return table(ctx, "double", [c_literal(v, DType.DOUBLE) for v in values])
