"""Static C tables for kernels whose parameters are attribute data: string lists, lookup keys,
tree nodes. A table is a ``static const`` array registered once per translation unit under a name
derived from its contents, so equal tables are shared.

Literals are exact: doubles and floats as C99 hex floats, strings through ``c_string`` (every
non-ASCII or special byte escaped).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from onnxc.ir import DType

from ..templating import c_string
from .base import KernelCtx


def table(ctx: KernelCtx, ctype: str, literals: list[str]) -> str:
    """Name of a ``static const ctype name[]`` holding the C ``literals`` (at least one element)."""
    rows = ",\n".join("    " + ", ".join(literals[k:k + 12]) for k in range(0, len(literals), 12)) or "    0"
    digest = hashlib.sha1(f"{ctype}|{rows}".encode()).hexdigest()[:16]
    name = f"onnxc_tab_{digest}"
    ctx.helper(name, f"static const {ctype} {name}[{max(1, len(literals))}] = {{\n{rows}\n}};")
    return name


def str_lit(s: str | bytes) -> str:
    """C literal of a string element; NUL characters cannot be represented (strings end at NUL)."""
    s = s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)
    if "\0" in s:
        raise NotImplementedError(f"string {s!r} holds a NUL character; C strings end at NUL")
    return c_string(s)


def float_lit(v: float, single: bool = False) -> str:
    """Exact C literal of a double (or, with ``single``, a float)."""
    v = float(np.float32(v)) if single else float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return v.hex() + ("f" if single else "")


def int_lit(v: int) -> str:
    v = int(v)
    if v == -(2**63):
        return "INT64_MIN"
    return f"INT64_C({v})" if not -(2**31) < v < 2**31 else str(v)


def literal(v, dt: DType) -> str:
    """C literal of one element of type ``dt`` (string, float, double, int or bool)."""
    if dt == DType.STRING:
        return str_lit(v)
    if dt == DType.BOOL:
        return "1" if v else "0"
    if dt in (DType.FLOAT, DType.DOUBLE):
        return float_lit(v, dt == DType.FLOAT)
    if dt.is_int:
        return int_lit(v)
    raise NotImplementedError(f"{dt.short} values are not supported here")


def typed_table(ctx: KernelCtx, dt: DType, values) -> str:
    """A table of element type ``dt`` holding ``values``."""
    return table(ctx, dt.c, [literal(v, dt) for v in values])


def int_table(ctx: KernelCtx, values, ctype: str = "int64_t") -> str:
    return table(ctx, ctype, [int_lit(v) for v in values])


def double_table(ctx: KernelCtx, values) -> str:
    return table(ctx, "double", [float_lit(v) for v in values])
