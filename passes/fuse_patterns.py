"""Recognize activation formulas written op by op inside a fused elementwise tree (passes/shapes/fused.py).

Exporters spell activations out with primitive ops; once fuse_elementwise has collected them into one
tree, these rewrites name them so the kernel evaluates the formula once:

- GELU, erf form: ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (any order and association of the products,
  ``/ sqrt(2)`` or ``* (1 / sqrt(2))``, ``/ 2`` or ``* 0.5``) -> ``Gelu(x)``;
- GELU, tanh form: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` with ``x^3`` as
  ``Pow(x, 3)``, ``x * x * x`` or ``x * Pow(x, 2)`` -> ``Gelu(x, approximate="tanh")``;
- SiLU / Swish: ``x * Sigmoid(x)`` -> ``Swish(x)``, ``x * Sigmoid(alpha * x)`` -> ``Swish(x, alpha)``;
- HardSwish: ``x * HardSigmoid(x, 1/6, 1/2)`` and ``x * Clip(x + 3, 0, 6) / 6`` -> ``HardSwish(x)``;
- Mish: ``x * Tanh(Softplus(x))`` -> ``Mish(x)``.

passes/name_activations.py applies the same matchers to the graph, before epilogue fusion.

Constants match within a relative 1e-5 (float32 roundings of the exact values). A rewrite changes
results only by the roundings of the intermediate steps it removes.
"""

from __future__ import annotations

import math

from .shapes.fused import Expr, Lit, Op, op

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _close(a: float, b: float, rel: float = 1e-5) -> bool:
    return math.isfinite(a) and abs(a - b) <= rel * abs(b)


def _lit(e: Expr) -> float | None:
    """The value of a float literal leaf."""
    if isinstance(e, Lit) and isinstance(e.value, float) and not isinstance(e.value, bool):
        return e.value
    return None


def factors(e: Expr) -> tuple[float, list[Expr]]:
    """``e`` as coefficient * product of factors: Mul flattened, division by a literal a factor 1/c."""
    if isinstance(e, Op) and e.op == "Mul" and len(e.args) == 2:
        ca, fa = factors(e.args[0])
        cb, fb = factors(e.args[1])
        return ca * cb, fa + fb
    if isinstance(e, Op) and e.op == "Div" and len(e.args) == 2:
        c = _lit(e.args[1])
        if c is not None and c != 0:
            ca, fa = factors(e.args[0])
            return ca / c, fa
    v = _lit(e)
    if v is not None:
        return v, []
    return 1.0, [e]


def _one_plus(e: Expr, fn: str) -> Expr | None:
    """The argument y of ``1 + fn(y)`` (either order), else None."""
    if not (isinstance(e, Op) and e.op == "Add" and len(e.args) == 2):
        return None
    for a, b in (e.args, e.args[::-1]):
        if _lit(a) == 1.0 and isinstance(b, Op) and b.op == fn and len(b.args) == 1:
            return b.args[0]
    return None


def _scaled(e: Expr, x: Expr) -> float | None:
    """c when ``e`` is ``c * x`` (a product of literals and exactly the factor x), else None."""
    c, fs = factors(e)
    return c if fs == [x] else None


def _is_cube(fs: list[Expr], x: Expr) -> bool:
    """Whether the factors multiply to x^3."""
    power = 0
    for f in fs:
        if f == x:
            power += 1
        elif isinstance(f, Op) and f.op == "Pow" and f.args[0] == x and _lit(f.args[1]) in (2.0, 3.0):
            power += int(_lit(f.args[1]))
        else:
            return False
    return power == 3


def _gelu(c: float, fs: list[Expr]) -> Expr | None:
    if len(fs) != 2 or not _close(c, 0.5):
        return None
    for x, other in (fs, fs[::-1]):
        y = _one_plus(other, "Erf")
        if y is not None and _close(_scaled(y, x) or 0.0, 1 / SQRT2):
            return op("Gelu", x)
        y = _one_plus(other, "Tanh")
        if y is not None and _tanh_inner(y, x):
            return op("Gelu", x, approximate="tanh")
    return None


def _tanh_inner(y: Expr, x: Expr) -> bool:
    """Whether y is sqrt(2/pi) * (x + 0.044715 * x^3)."""
    c, fs = factors(y)
    if len(fs) != 1 or not _close(c, SQRT_2_OVER_PI):
        return False
    s = fs[0]
    if not (isinstance(s, Op) and s.op == "Add" and len(s.args) == 2):
        return False
    for a, m in (s.args, s.args[::-1]):
        if a != x:
            continue
        k, cube = factors(m)
        if _close(k, 0.044715) and _is_cube(cube, x):
            return True
    return False


def _swish(c: float, fs: list[Expr]) -> Expr | None:
    if len(fs) != 2 or c != 1.0:
        return None
    for x, other in (fs, fs[::-1]):
        if isinstance(other, Op) and other.op == "Sigmoid":
            alpha = _scaled(other.args[0], x)
            if alpha is not None:
                return op("Swish", x) if alpha == 1.0 else op("Swish", x, alpha=alpha)
    return None


def _hardswish(c: float, fs: list[Expr]) -> Expr | None:
    if len(fs) != 2:
        return None
    for x, other in (fs, fs[::-1]):
        if not isinstance(other, Op):
            continue
        if other.op == "HardSigmoid" and c == 1.0 and other.args[0] == x and \
                _close(other.attr("alpha", 0.2), 1 / 6) and other.attr("beta", 0.5) == 0.5:
            return op("HardSwish", x)
        if other.op == "Clip" and _close(c, 1 / 6) and other.attr("min") == 0.0 and other.attr("max") == 6.0:
            inner = other.args[0]
            if isinstance(inner, Op) and inner.op == "Add" and len(inner.args) == 2 and \
                    any(a == x and _lit(b) == 3.0 for a, b in (inner.args, inner.args[::-1])):
                return op("HardSwish", x)
    return None


def _mish(c: float, fs: list[Expr]) -> Expr | None:
    if len(fs) != 2 or c != 1.0:
        return None
    for x, other in (fs, fs[::-1]):
        if isinstance(other, Op) and other.op == "Tanh":
            sp = other.args[0]
            if isinstance(sp, Op) and sp.op == "Softplus" and sp.args[0] == x:
                return op("Mish", x)
    return None


def recognize(e: Expr) -> Expr:
    """``e`` with the activation formulas above replaced by their ops, innermost first."""
    if not isinstance(e, Op):
        return e
    e = Op(e.op, tuple(recognize(a) for a in e.args), e.attrs)
    if e.op not in ("Mul", "Div"):
        return e
    c, fs = factors(e)
    for match in (_gelu, _swish, _hardswish, _mish):
        r = match(c, fs)
        if r is not None:
            return r
    return e

