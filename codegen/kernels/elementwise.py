"""Elementwise ops: one table row per op, a C expression over the input elements.

Expressions use ``{0}``, ``{1}``... for input elements and ``{name}`` for attributes (rendered as C
literals of the computation type). ``<tgmath.h>`` makes ``exp``/``sqrt``/... pick the float or double
version from the argument type, so one row serves both.
"""

from __future__ import annotations

import math

from onnxc.ir import DType

from .base import KernelCtx, kernel
from .loops import broadcast_loop

# op -> (expression, attribute defaults)
UNARY: dict[str, tuple[str, dict]] = {
    "Relu": ("({0} > 0 ? {0} : 0)", {}),
    "Neg": ("(-{0})", {}),
    "Abs": ("({0} < 0 ? -{0} : {0})", {}),
    "Exp": ("exp({0})", {}),
    "Log": ("log({0})", {}),
    "Sqrt": ("sqrt({0})", {}),
    "Reciprocal": ("(1 / {0})", {}),
    "Sigmoid": ("(1 / (1 + exp(-{0})))", {}),
    "Tanh": ("tanh({0})", {}),
    "LeakyRelu": ("({0} < 0 ? {alpha} * {0} : {0})", {"alpha": 0.01}),
    "Floor": ("floor({0})", {}),
    "Ceil": ("ceil({0})", {}),
}

BINARY: dict[str, str] = {
    "Add": "({0} + {1})",
    "Sub": "({0} - {1})",
    "Mul": "({0} * {1})",
    "Div": "({0} / {1})",
}

COMPARE: dict[str, str] = {
    "Equal": "({0} == {1})",
    "Less": "({0} < {1})",
    "Greater": "({0} > {1})",
    "LessOrEqual": "({0} <= {1})",
    "GreaterOrEqual": "({0} >= {1})",
}


def literal(x: float, dtype: DType) -> str:
    """A C literal of ``x`` in the computation type of ``dtype``."""
    if dtype == DType.DOUBLE:
        return repr(float(x)) if math.isfinite(x) else ("INFINITY" if x > 0 else "-INFINITY" if x < 0 else "NAN")
    if dtype.is_float:
        if math.isnan(x):
            return "NAN"
        if math.isinf(x):
            return "INFINITY" if x > 0 else "-INFINITY"
        return f"{float(x)!r}f"
    return str(int(x))


TGMATH = "#include <tgmath.h>"


def _expr(ctx: KernelCtx, template: str, defaults: dict) -> str:
    dt = ctx.ins[0].dtype
    attrs = {k: literal(ctx.attr(k, v), dt) for k, v in defaults.items()}
    return template.format(*[f"{{{i}}}" for i in range(len(ctx.ins))], **attrs)


@kernel(*UNARY)
def unary(ctx: KernelCtx) -> str:
    ctx.helper("tgmath", TGMATH)
    template, defaults = UNARY[ctx.node.op_type]
    return broadcast_loop(ctx.outs[0], [ctx.ins[0]], _expr(ctx, template, defaults))


@kernel(*BINARY, *COMPARE)
def binary(ctx: KernelCtx) -> str:
    op = ctx.node.op_type
    template = BINARY.get(op) or COMPARE[op]
    return broadcast_loop(ctx.outs[0], ctx.ins[:2], template)
