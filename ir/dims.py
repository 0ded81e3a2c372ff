"""Symbolic dimensions.

A dimension (`Dim`) is either a Python ``int`` or an :class:`Expr`: a polynomial with integer
coefficients over *atoms*. An atom is a dimension variable (:class:`Sym`) or an opaque function
application (floor division, modulo, min, max) that could not be simplified. Expressions are kept
in a canonical form so that equal expressions compare (and hash) equal, and any expression that
turns out constant collapses back to a plain ``int``. Nested floor divisions by positive constants
flatten (``floor((floor(x / b) + r) / c) == floor((x + r*b) / (b*c))`` for a constant r, while the
constants stay below FLATTEN_MAX), so a chain of strided convolutions or pools gives one division,
not one level per layer. A floor division by a constant keeps its numerator's constant in [0, k) and
divides out common factors (``floor((x - 1) / 8) + 1`` is ``floor((x + 7) / 8)``, shown ``ceil(x / 8)``);
min/max flatten, fold constants and drop an argument that interval bounds (:func:`bounds`, variables
are >= 0) show is never the result, so ``max(0, 2*ceil(x / 8))`` is ``2*ceil(x / 8)``.

Sort keys and hashes are computed once, when an expression is built, so building and comparing
nested expressions does not recurse through them. Function applications nest at most MAX_DEPTH deep
(a deeper one is a :class:`DimTooDeep` error: the functions that evaluate and render expressions
recurse once per level).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from math import gcd
from typing import Union

Dim = Union[int, "Expr"]

__all__ = ["Dim", "Expr", "Sym", "Fn", "sym", "floordiv", "ceildiv", "mod", "dmin", "dmax",
           "is_static", "evaluate", "to_c", "to_c_checked", "free_symbols", "as_dim", "DimTooDeep", "MAX_DEPTH",
           "bounds", "nonneg", "as_symbol"]

MAX_DEPTH = 64  # deepest nesting of function applications (floor division, mod, min, max) in a Dim


class DimTooDeep(ValueError):
    """A dimension expression would nest function applications deeper than MAX_DEPTH."""


class Sym:
    """A dimension variable, identified by name."""

    __slots__ = ("name",)
    depth = 0

    def __init__(self, name: str):
        self.name = name

    def key(self) -> tuple:
        return (0, self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("sym", self.name))

    def __repr__(self) -> str:
        return self.name


class Fn:
    """An opaque application: kind in {'floordiv', 'mod', 'min', 'max'}."""

    __slots__ = ("kind", "args", "_hash", "_key", "depth")

    def __init__(self, kind: str, args: tuple):
        self.kind = kind
        self.args = args
        self._hash = hash((kind, args))
        self._key = (1, kind, tuple(_key(a) for a in args))
        self.depth = 1 + max(_depth(a) for a in args)
        if self.depth > MAX_DEPTH:
            raise DimTooDeep(f"a dimension expression nests floor divisions, mod, min or max {self.depth} deep, "
                             f"more than the limit of {MAX_DEPTH}")

    def key(self) -> tuple:
        return self._key

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Fn) and other._hash == self._hash and other.kind == self.kind
                                 and other.args == self.args)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        a = ", ".join(str(x) for x in self.args)
        if self.kind == "floordiv":
            return f"floor({self.args[0]} / {self.args[1]})"
        if self.kind == "mod":
            return f"({self.args[0]} mod {self.args[1]})"
        return f"{self.kind}({a})"


def _key(d: Dim) -> tuple:
    if isinstance(d, int):
        return (0, d)
    return (1, d.key())


def _depth(d: Dim) -> int:
    return 0 if isinstance(d, int) else d.depth


Atom = Sym | Fn
Monomial = tuple  # tuple[(Atom, power), ...] sorted by atom key


class Expr:
    """Canonical polynomial: mapping monomial -> nonzero integer coefficient."""

    __slots__ = ("terms", "_hash", "_key", "depth")

    def __init__(self, terms: dict):
        # terms: {monomial: coeff}; monomial () is the constant term
        keyed = sorted(((_mono_key(m), m, c) for m, c in terms.items() if c != 0), key=lambda kmc: kmc[0])
        self.terms = tuple((m, c) for _, m, c in keyed)
        self._hash = hash(self.terms)
        self._key = tuple((k, c) for k, _, c in keyed)
        self.depth = max((a.depth for m, _ in self.terms for a, _ in m), default=0)

    # -- construction helpers -------------------------------------------------------------
    @staticmethod
    def make(terms: dict) -> Dim:
        terms = {m: c for m, c in terms.items() if c != 0}
        if not terms:
            return 0
        if list(terms) == [()]:
            return terms[()]
        return Expr(terms)

    def key(self) -> tuple:
        return self._key

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Expr) and other._hash == self._hash and other.terms == self.terms)

    def __hash__(self) -> int:
        return self._hash

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other: Dim) -> Dim:
        return add(self, mul(other, -1))

    def __rsub__(self, other: Dim) -> Dim:
        return add(other, mul(self, -1))

    def __mul__(self, other: Dim) -> Dim:
        return mul(self, other)

    __rmul__ = __mul__

    def __neg__(self) -> Dim:
        return mul(self, -1)

    def __floordiv__(self, other: Dim) -> Dim:
        return floordiv(self, other)

    def __rfloordiv__(self, other: Dim) -> Dim:
        return floordiv(other, self)

    def __mod__(self, other: Dim) -> Dim:
        return mod(self, other)

    def __rmod__(self, other: Dim) -> Dim:
        return mod(other, self)

    def __repr__(self) -> str:
        return render(self, str)

    def coeff_gcd(self) -> int:
        g = 0
        for _, c in self.terms:
            g = gcd(g, abs(c))
        return g

    def constant(self) -> int:
        for m, c in self.terms:
            if m == ():
                return c
        return 0


def _mono_key(m: Monomial) -> tuple:
    return (len(m), tuple((a.key(), p) for a, p in m))


def _as_terms(d: Dim) -> dict:
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, Expr):
        return dict(d.terms)
    if isinstance(d, (Sym, Fn)):
        return {((d, 1),): 1}
    raise TypeError(f"not a dimension: {d!r}")


def as_dim(d) -> Dim:
    """Normalize an int-like, Sym or Expr into a Dim."""
    if isinstance(d, bool):
        return int(d)
    if isinstance(d, int):
        return d
    if isinstance(d, (Sym, Fn)):
        return Expr.make(_as_terms(d))
    if isinstance(d, Expr):
        return d
    try:
        import numpy as np

        if isinstance(d, np.integer):
            return int(d)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not a dimension: {d!r}")


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    t = _as_terms(as_dim(a))
    for m, c in _as_terms(as_dim(b)).items():
        t[m] = t.get(m, 0) + c
    return Expr.make(t)


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    powers: dict = {}
    for a, p in m1 + m2:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0].key()))


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    ta, tb = _as_terms(as_dim(a)), _as_terms(as_dim(b))
    out: dict = {}
    for m1, c1 in ta.items():
        for m2, c2 in tb.items():
            m = _mono_mul(m1, m2)
            out[m] = out.get(m, 0) + c1 * c2
    return Expr.make(out)


def sym(name: str) -> Dim:
    """The dimension variable called ``name``."""
    return Expr.make({((Sym(name), 1),): 1})


def floordiv(a: Dim, b: Dim) -> Dim:
    a, b = as_dim(a), as_dim(b)
    if b == 0:
        raise ZeroDivisionError("dimension division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if b == 1:
        return a
    if isinstance(b, int) and b > 0 and isinstance(a, Expr) and a.coeff_gcd() % b == 0:
        return Expr.make({m: c // b for m, c in a.terms})
    if isinstance(b, Expr) and a == b:
        return 1
    if isinstance(b, Expr) and isinstance(a, Expr):
        # a == k * b exactly for integer k?
        q = _exact_quotient(a, b)
        if q is not None:
            return q
    if isinstance(b, int) and b > 0 and isinstance(a, Expr):
        g = gcd(a.coeff_gcd(), b)
        if g > 1:  # floor((2*x + 2) / 4) == floor((x + 1) / 2)
            return floordiv(Expr.make({m: c // g for m, c in a.terms}), b // g)
        q = a.constant() // b
        if q:  # floor((x - 1) / 8) == floor((x + 7) / 8) - 1: the constant of the numerator in [0, b)
            return add(floordiv(add(a, -q * b), b), q)
        inner = _inner_floordiv(a)
        # floor((floor(y / d) + r) / b) == floor((y + r*d) / (d*b)) for an integer r; only while the
        # new constants stay small, so the C code computing the dim cannot overflow where it did not
        if inner is not None and inner[1] * b <= FLATTEN_MAX and abs(inner[2] * inner[1]) <= FLATTEN_MAX:
            y, d, r = inner
            return floordiv(add(y, r * d), d * b)
    return Expr.make({((Fn("floordiv", (a, b)), 1),): 1})


FLATTEN_MAX = 1 << 20  # largest divisor and offset a flattened floor division may get


def _inner_floordiv(a: Expr) -> tuple[Dim, int, int] | None:
    """(y, d, r) when ``a`` is floor(y / d) + r: a floor division by a positive constant d (coefficient
    and power 1) plus a constant r."""
    if len(a.terms) > 2:
        return None
    found, r = None, 0
    for m, c in a.terms:
        if m == ():
            r = c
        elif len(m) == 1 and c == 1 and m[0][1] == 1 and isinstance(m[0][0], Fn) and m[0][0].kind == "floordiv" \
                and isinstance(m[0][0].args[1], int) and m[0][0].args[1] > 0:
            found = m[0][0]
        else:
            return None
    return None if found is None else (found.args[0], found.args[1], r)


def _exact_quotient(a: Expr, b: Expr) -> Dim | None:
    """a / b when it is exact: b a single monomial dividing every term of a, or a a monomial multiple
    of a polynomial b (``(192*n*w + 192*n) / (n*w + n)`` is 192)."""
    if len(b.terms) != 1:
        mb, cb = b.terms[0]
        for ma, ca in a.terms:
            pa = dict(ma)
            if ca % cb or any(pa.get(atom, 0) < p for atom, p in mb):
                continue
            for atom, p in mb:
                pa[atom] -= p
            q = Expr.make({tuple(sorted(((x, p) for x, p in pa.items() if p), key=lambda ap: ap[0].key())): ca // cb})
            if mul(q, b) == a:
                return q
        return None
    (mb, cb), = b.terms
    out: dict = {}
    for ma, ca in a.terms:
        if ca % cb:
            return None
        pa = dict(ma)
        for atom, p in mb:
            if pa.get(atom, 0) < p:
                return None
            pa[atom] -= p
        m = tuple(sorted(((x, p) for x, p in pa.items() if p), key=lambda ap: ap[0].key()))
        out[m] = out.get(m, 0) + ca // cb
    return Expr.make(out)


def ceildiv(a: Dim, b: Dim) -> Dim:
    if isinstance(b, int) and b > 0:  # ceil(a / b) == floor((a + b - 1) / b), rendered ceil(a / b)
        g = gcd(as_dim(a).coeff_gcd(), b) if isinstance(as_dim(a), Expr) else 1
        return floordiv(add(floordiv(a, g), b // g - 1), b // g)
    return mul(floordiv(mul(a, -1), b), -1)


def mod(a: Dim, b: Dim) -> Dim:
    a, b = as_dim(a), as_dim(b)
    if b == 0:
        raise ZeroDivisionError("dimension modulo by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if b == 1:
        return 0
    if isinstance(b, int) and b > 0 and isinstance(a, Expr) and a.coeff_gcd() % b == 0:
        return 0
    if isinstance(a, Expr) and isinstance(b, Expr) and _exact_quotient(a, b) is not None:
        return 0
    if isinstance(b, int) and b > 0 and isinstance(a, Expr) and not 0 <= a.constant() < b:
        return mod(add(a, -(a.constant() // b) * b), b)  # (x + 9) mod 8 == (x + 1) mod 8
    return Expr.make({((Fn("mod", (a, b)), 1),): 1})


def _minmax(kind: str, a: Dim, b: Dim) -> Dim:
    """min/max of two dims: nested applications of the same kind flatten, an argument that another one
    provably bounds (the difference has a sign over all values of the variables, see :func:`bounds`)
    drops out, so constants fold and ``max(0, x)`` is ``x`` when x >= 0."""
    a, b = as_dim(a), as_dim(b)
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b) if kind == "min" else max(a, b)
    keep: list[Dim] = []
    for x in _minmax_args(kind, a) + _minmax_args(kind, b):
        if any(_wins(kind, k, x) for k in keep):
            continue
        keep = [k for k in keep if not _wins(kind, x, k)] + [x]
    keep.sort(key=_key)
    out = keep[0]
    for x in keep[1:]:
        out = Expr.make({((Fn(kind, tuple(sorted((out, x), key=_key))), 1),): 1})
    return out


def _minmax_args(kind: str, d: Dim) -> list[Dim]:
    """The arguments of ``d`` when it is itself a ``kind`` application, else [d]."""
    if isinstance(d, Expr) and len(d.terms) == 1:
        (m, c), = d.terms
        if c == 1 and len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Fn) and m[0][0].kind == kind:
            return [x for arg in m[0][0].args for x in _minmax_args(kind, arg)]
    return [d]


def _wins(kind: str, a: Dim, b: Dim) -> bool:
    """Whether ``a`` is always the result of kind(a, b): a <= b for min, a >= b for max."""
    lo, hi = bounds(add(a, mul(b, -1)))
    return hi <= 0 if kind == "min" else lo >= 0


INF = float("inf")


def bounds(d: Dim) -> tuple:
    """(lo, hi) with lo <= d <= hi for every value >= 0 of the dimension variables (ints, or -inf/inf
    when unbounded): interval arithmetic over the atoms, floor((x + 7) / 8) >= 0 since x + 7 >= 7."""
    if isinstance(d, int):
        return d, d
    lo, hi = 0, 0
    for m, c in d.terms:
        t = (c, c)
        for atom, p in m:
            for _ in range(p):
                t = _iv_mul(t, _atom_bounds(atom))
        lo, hi = lo + t[0], hi + t[1]
    return lo, hi


def _iv_mul(a: tuple, b: tuple) -> tuple:
    ps = [0 if x == 0 or y == 0 else x * y for x in a for y in b]  # 0 * inf is 0 here: a factor is 0
    return min(ps), max(ps)


def _atom_bounds(atom: Atom) -> tuple:
    if isinstance(atom, Sym):
        return 0, INF
    if atom.kind in ("floordiv", "mod") and not (isinstance(atom.args[1], int) and atom.args[1] > 0):
        return -INF, INF
    k = atom.args[1]
    lo, hi = bounds(atom.args[0])
    if atom.kind == "mod":
        return 0, k - 1
    if atom.kind == "floordiv":
        return (lo if lo == -INF else lo // k), (hi if hi == INF else hi // k)
    lo2, hi2 = bounds(atom.args[1])
    f = min if atom.kind == "min" else max
    return f(lo, lo2), f(hi, hi2)


def nonneg(d: Dim) -> bool:
    """True when ``d`` is provably >= 0 for every value >= 0 of its dimension variables."""
    return bounds(d)[0] >= 0


def dmin(a: Dim, b: Dim) -> Dim:
    return _minmax("min", a, b)


def dmax(a: Dim, b: Dim) -> Dim:
    return _minmax("max", a, b)


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def as_symbol(d: Dim) -> str | None:
    """The variable's name when ``d`` is exactly one dimension variable (``N``, not ``2*N`` or ``N + 1``)."""
    if isinstance(d, Expr) and len(d.terms) == 1:
        (mono, coeff), = d.terms
        if coeff == 1 and len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], Sym):
            return mono[0][0].name
    return None


def free_symbols(d: Dim) -> set[str]:
    out: set[str] = set()

    def visit(x: Dim) -> None:
        if isinstance(x, Expr):
            for m, _ in x.terms:
                for atom, _p in m:
                    if isinstance(atom, Sym):
                        out.add(atom.name)
                    else:
                        for arg in atom.args:
                            visit(arg)

    visit(as_dim(d))
    return out


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    """Value of ``d`` with every dimension variable bound in ``env``."""
    if isinstance(d, int):
        return d

    def atom_val(atom: Atom) -> int:
        if isinstance(atom, Sym):
            try:
                return int(env[atom.name])
            except KeyError:
                raise KeyError(f"dimension variable {atom.name!r} is not bound") from None
        args = [evaluate(x, env) for x in atom.args]
        if atom.kind == "floordiv":
            return args[0] // args[1]
        if atom.kind == "mod":
            return args[0] % args[1]
        if atom.kind == "min":
            return min(args)
        return max(args)

    total = 0
    for m, c in d.terms:
        v = c
        for atom, p in m:
            v *= atom_val(atom) ** p
        total += v
    return total


def render(d: Dim, sym_name: Callable[[str], str], c_syntax: bool = False) -> str:
    """Render a Dim as text; with ``c_syntax`` as a C int64 expression."""
    if isinstance(d, int):
        return f"INT64_C({d})" if c_syntax and abs(d) > 2**31 - 1 else str(d)

    def atom_s(atom: Atom) -> str:
        if isinstance(atom, Sym):
            return sym_name(atom.name)
        args = [render(x, sym_name, c_syntax) for x in atom.args]
        if c_syntax:
            fn = {"floordiv": "onnxc_floordiv", "mod": "onnxc_mod", "min": "onnxc_min", "max": "onnxc_max"}
            return f"{fn[atom.kind]}({args[0]}, {args[1]})"
        k = atom.args[1]
        if atom.kind == "floordiv" and isinstance(k, int) and k > 1 and isinstance(atom.args[0], Expr) \
                and atom.args[0].constant() == k - 1:  # how ceildiv builds it
            return f"ceil({render(add(atom.args[0], 1 - k), sym_name)} / {k})"
        if atom.kind == "floordiv":
            return f"floor({args[0]} / {args[1]})"
        if atom.kind == "mod":
            return f"mod({args[0]}, {args[1]})"
        return f"{atom.kind}({args[0]}, {args[1]})"

    parts = []
    for m, c in reversed(d.terms):  # highest degree first
        factors = []
        for atom, p in m:
            factors.extend([atom_s(atom)] * p)
        if not factors:
            parts.append((c, str(abs(c))))
            continue
        body = "*".join(factors)
        parts.append((c, body if abs(c) == 1 else f"{abs(c)}*{body}"))
    out = ""
    for i, (c, s) in enumerate(parts):
        if i == 0:
            out = ("-" if c < 0 else "") + s
        else:
            out += (" - " if c < 0 else " + ") + s
    return f"({out})" if len(parts) > 1 else out


def to_c(d: Dim, sym_name: Callable[[str], str]) -> str:
    """C expression computing ``d``; ``sym_name`` maps a variable to its C lvalue."""
    return render(d, sym_name, c_syntax=True)


def to_c_checked(d: Dim, sym_name: Callable[[str], str], flag: str = "&ovf_") -> str:
    """C expression computing ``d`` with overflow-checked products and sums (runtime_c/onnxc.h
    ``onnxc_ck_mul``/``onnxc_ck_add``): on overflow the ``int *`` ``flag`` is set and the value is 0.
    For sizes computed from run-time dims; a constant or a lone variable is rendered as ``to_c``."""
    if isinstance(d, int):
        return render(d, sym_name, c_syntax=True)

    def atom_s(atom: Atom) -> str:
        if isinstance(atom, Sym):
            return sym_name(atom.name)
        fn = {"floordiv": "onnxc_floordiv", "mod": "onnxc_mod", "min": "onnxc_min", "max": "onnxc_max"}[atom.kind]
        return f"{fn}({to_c_checked(atom.args[0], sym_name, flag)}, {to_c_checked(atom.args[1], sym_name, flag)})"

    terms = []
    for m, c in reversed(d.terms):  # highest degree first, as ``render``
        expr = None
        for atom, p in m:
            for _ in range(p):
                a = atom_s(atom)
                expr = a if expr is None else f"onnxc_ck_mul({flag}, {expr}, {a})"
        lit = render(c, sym_name, c_syntax=True)
        if expr is None:
            expr = lit
        elif c != 1:
            expr = f"onnxc_ck_mul({flag}, {lit}, {expr})"
        terms.append(expr)
    out = terms[0]
    for t in terms[1:]:
        out = f"onnxc_ck_add({flag}, {out}, {t})"
    return out
