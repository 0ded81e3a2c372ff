"""C text of compile-time values, in one place: dims, products of dims, element literals, includes.

Kernels and the run-function emitter render every dim, size and constant through these functions, so
the rules live once: a dim is an int64 C expression over the dimension variables (``ir.dims.to_c``,
overflow-checked with ``c_expr_checked``); a product of dims folds its constants; a literal is exact and
well typed over the whole range of its element type (floats round-trip, including -0.0, inf and NaN;
INT64_MIN and uint64 values >= 2**63 get the macro or suffix C needs; float16/bfloat16 are their
storage bit patterns); a negative literal is parenthesized so it can follow any operator. ``as_symbol``
tells whether a dim is exactly one dimension variable (the one a run function binds from an input).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import numpy as np

from onnxc.ir import Dim, DType
from onnxc.ir.dims import as_dim, as_symbol, to_c, to_c_checked
from onnxc.passes.shapes.cast import float_to_bfloat16

from .templating import c_string

__all__ = ["c_expr", "c_expr_checked", "c_product", "c_literal", "as_symbol", "include_line"]

SymC = Callable[[str], str]  # dimension variable name -> its C lvalue (``D[k]``)

_LVALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])?")
_HEADER = re.compile(r"<[A-Za-z0-9_./]+\.h>|[A-Za-z0-9_./]+\.h")
INT32_MAX = 2**31 - 1


def c_expr(d: Dim, sym_c: SymC) -> str:
    """C int64 expression computing ``d``; ``sym_c`` maps a dimension variable to its C lvalue."""
    return to_c(d, sym_c)


def c_expr_checked(d: Dim, sym_c: SymC, flag: str = "&ovf_") -> str:
    """``c_expr`` with overflow-checked products and sums: on overflow ``*flag`` is set (runtime_c/onnxc.h)."""
    return to_c_checked(d, sym_c, flag)


def c_product(dims: Iterable[Dim | str], sym_c: SymC | None = None) -> str:
    """C expression of the product of ``dims``: Dims multiply as expressions (rendered with ``sym_c``),
    C expression strings as factors; constants fold, a zero factor gives "0", no factor "1"."""
    const, dim_part, rest = 1, 1, []
    for d in dims:
        if isinstance(d, str):
            if d.isdigit():
                const *= int(d)
            else:
                rest.append(d if _LVALUE.fullmatch(d) else f"({d})")
        else:
            dim_part = dim_part * as_dim(d)
    if isinstance(dim_part, int):
        const, dim_part = const * dim_part, 1
    if const == 0:
        return "0"
    if dim_part != 1:
        if sym_c is None:
            raise TypeError(f"c_product: symbolic dim {dim_part} needs sym_c to be rendered")
        rendered = to_c(dim_part, sym_c)
        rest.insert(0, rendered if _LVALUE.fullmatch(rendered) or rendered.startswith("(") else f"({rendered})")
    factors = ([_int(const, DType.INT64)] if const != 1 or not rest else []) + rest
    return " * ".join(factors)


def c_literal(value, dtype: DType) -> str:
    """Exact C literal of one element ``value`` of element type ``dtype`` (its storage type's value:
    bit patterns for float16/bfloat16; a C string for STRING)."""
    if dtype == DType.STRING:
        return _string(value)
    if dtype == DType.BOOL:
        return "1" if value else "0"
    if dtype == DType.FLOAT16:
        return f"(uint16_t){int(np.array(float(value), np.float16).view(np.uint16))}"
    if dtype == DType.BFLOAT16:
        return f"(uint16_t){int(float_to_bfloat16(np.array(float(value), np.float32)))}"
    if dtype in (DType.FLOAT, DType.DOUBLE):
        return _float(float(value), dtype == DType.FLOAT)
    if dtype.is_int:
        return _int(int(value), dtype)
    raise NotImplementedError(f"C literals of {dtype.short} values are not supported")


def _float(v: float, single: bool) -> str:
    if single:
        with np.errstate(over="ignore"):  # beyond float range: inf, as the C conversion gives
            v = float(np.float32(v))
    if math.isnan(v):
        return "NAN" if single else "(double)NAN"
    if math.isinf(v):
        s = "INFINITY" if single else "(double)INFINITY"
        return s if v > 0 else f"(-{s})"
    s = repr(v) + ("f" if single else "")
    return f"({s})" if s.startswith("-") else s


def _int(v: int, dtype: DType) -> str:
    if not -(2**63) <= v < 2**64:
        raise ValueError(f"integer {v} does not fit in 64 bits")
    if v == -(2**63):
        return "INT64_MIN"
    if v >= 2**63 or (v > INT32_MAX and not dtype.is_signed):
        return f"UINT64_C({v})"
    s = f"INT64_C({v})" if abs(v) > INT32_MAX else str(v)
    return f"({s})" if v < 0 else s


def _string(s: str | bytes) -> str:
    s = s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)
    if "\0" in s:
        raise NotImplementedError(f"string {s!r} holds a NUL character; C strings end at NUL")
    return c_string(s)


def include_line(header: str) -> str:
    """``#include`` line of a runtime header by file name ("onnxc_vmath.h") or a system header in angle
    brackets ("<regex.h>")."""
    if not _HEADER.fullmatch(header):
        raise ValueError(f"include: {header!r} is neither a header file name nor <system.h>")
    return f"#include {header}" if header.startswith("<") else f'#include "{header}"'
