"""Numpy twins of the elementwise C kernels, used to constant-fold nodes at compile time.

Each function computes exactly what the generated C computes (runtime_c/onnxc_elementwise.h):
integer division and modulo by zero give 0, ``INT_MIN / -1`` wraps, integer overflow wraps, shifts
by the bit width or more give 0 (or the sign fill), float -> integer conversion saturates with
NaN -> 0. Floating-point results may differ from C in the last bit (libm versus numpy).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxc.ir import Node


def _signed(a: np.ndarray) -> bool:
    return a.dtype.kind == "i"


def _same(fn: Callable) -> Callable:
    """Wrap a numpy function so the result keeps the dtype of the first input."""
    return lambda node, *xs: np.asarray(fn(*xs)).astype(xs[0].dtype)


def from_double(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Saturating float -> integer conversion, truncating toward zero, NaN -> 0 (the C helper)."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    x = np.asarray(x, dtype=np.float64)
    t = np.trunc(np.where(np.isnan(x), 0.0, x))
    lo, hi = float(info.min), float(info.max) + 1.0  # hi is 2**bits or 2**(bits-1): exact
    out = np.where((t > lo) & (t < hi), t, 0.0).astype(dtype)
    out = np.where(t <= lo, info.min, out)
    return np.where(t >= hi, info.max, out).astype(dtype)


def int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C truncating division; x / 0 -> 0, MIN / -1 wraps."""
    bad = (b == 0) | ((b == -1) if _signed(b) else False)
    bs = np.where(bad, 1, b).astype(b.dtype)
    q = np.floor_divide(a, bs)
    if _signed(a):
        r = np.remainder(a, bs)
        q = q + ((r != 0) & ((a < 0) ^ (bs < 0))).astype(q.dtype)
        q = np.where(b == -1, np.negative(a), q)
    return np.where(b == 0, 0, q).astype(a.dtype)


def int_mod(a: np.ndarray, b: np.ndarray, c_style: bool) -> np.ndarray:
    bad = (b == 0) | ((b == -1) if _signed(b) else False)
    bs = np.where(bad, 1, b).astype(b.dtype)
    r = np.fmod(a, bs) if c_style else np.mod(a, bs)
    return np.where(bad, 0, r).astype(a.dtype)


def _mod(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    c_style = bool(node.attr("fmod", 0))
    if a.dtype.kind == "f":
        return (np.fmod(a, b) if c_style else np.mod(a, b)).astype(a.dtype)
    return int_mod(a, b, c_style)


def _shift(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    a, b = np.broadcast_arrays(a, b)
    out_of_range = (b < 0) | (b >= bits)
    bs = np.where(out_of_range, 0, b).astype(np.uint64)
    u = a.astype(np.uint64) if a.dtype.kind == "u" else a.astype(np.int64).view(np.uint64)
    if node.attr("direction") == "LEFT":
        r = np.left_shift(u, bs).astype(a.dtype)
        return np.where(out_of_range, 0, r).astype(a.dtype)
    r = np.right_shift(a.astype(np.int64) if _signed(a) else u, bs.astype(np.int64) if _signed(a) else bs)
    fill = np.where(a < 0, -1, 0) if _signed(a) else 0
    return np.where(out_of_range, fill, r).astype(a.dtype)


def ipow(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Integer power with wrapping overflow; a negative exponent gives the truncated 1 / a^-e."""
    a, e = np.broadcast_arrays(a.astype(np.int64), e)
    if e.dtype == np.uint64:
        e = np.where(e > np.iinfo(np.int64).max, np.iinfo(np.int64).max - 1 + (e & 1), e)
    e = e.astype(np.int64)
    r = np.ones(a.shape, np.uint64)
    b = a.view(np.uint64).copy()
    n = np.where(e < 0, 0, e).astype(np.uint64)
    while np.any(n):
        r = np.where(n & 1, r * b, r)
        b = b * b
        n = n >> np.uint64(1)
    r = r.view(np.int64)
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(e & 1, -1, 1), 0))
    return np.where(e < 0, neg, r)


def _pow(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        if a.dtype == b.dtype:
            return np.power(a, b)
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    if b.dtype.kind == "f":
        return from_double(np.power(a.astype(np.float64), b.astype(np.float64)), a.dtype)
    return ipow(a, b).astype(a.dtype)


def _where_nan(fn: Callable) -> Callable:
    """numpy.maximum/minimum on floats (NaN propagates) or ints, folded over all inputs."""
    def run(node: Node, *xs: np.ndarray) -> np.ndarray:
        r = xs[0]
        for x in xs[1:]:
            r = fn(r, x)
        return np.asarray(r).astype(xs[0].dtype)
    return run


def _wrap(fn: Callable) -> Callable:
    """Integer arithmetic with two's complement wrap-around; floats as numpy computes them."""
    def run(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind in "iu":
            u = np.dtype(f"u{a.dtype.itemsize}")
            return np.asarray(fn(a.astype(u), b.astype(u))).astype(u).view(a.dtype)
        return np.asarray(fn(a, b)).astype(a.dtype)
    return run


def _shrink(node: Node, x: np.ndarray) -> np.ndarray:
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    xf = x if x.dtype.kind == "f" else x.astype(np.float64)
    r = np.where(xf < -lambd, xf + bias, np.where(xf > lambd, xf - bias, 0))
    return r.astype(x.dtype) if x.dtype.kind == "f" else from_double(r, x.dtype)


def _clip(node: Node, x: np.ndarray, lo=None, hi=None) -> np.ndarray:
    if node.version < 11:
        lo, hi = node.attr("min"), node.attr("max")
    r = x
    if lo is not None:
        lo = np.asarray(lo).astype(x.dtype).reshape(())
        r = np.where(r < lo, lo, r)
    if hi is not None:
        hi = np.asarray(hi).astype(x.dtype).reshape(())
        r = np.where(r > hi, hi, r)
    return np.asarray(r, dtype=x.dtype)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def _gelu(node: Node, x: np.ndarray) -> np.ndarray:
    if node.attr("approximate", "none") == "tanh":
        return (0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))).astype(x.dtype)
    from math import erf
    return (0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2.0)))).astype(x.dtype)


def _isinf(node: Node, x: np.ndarray) -> np.ndarray:
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    return ((x == np.inf) & bool(pos)) | ((x == -np.inf) & bool(neg))


def _a(node: Node, name: str, default: float) -> float:
    return node.attr(name, default)


SELU = {"alpha": 1.6732631921768188, "gamma": 1.0507010221481323}
SELU_V1 = {"alpha": 1.673200011253357, "gamma": 1.0506999492645264}  # opset 1 defaults


def _selu(node: Node, x: np.ndarray) -> np.ndarray:
    d = SELU_V1 if node.version < 6 else SELU
    alpha, gamma = _a(node, "alpha", d["alpha"]), _a(node, "gamma", d["gamma"])
    return (np.where(x > 0, x, alpha * np.expm1(x)) * gamma).astype(x.dtype)


def _erf(node: Node, x: np.ndarray) -> np.ndarray:
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x).astype(x.dtype)


def _bitwise(fn: Callable) -> Callable:
    return lambda node, a, b: fn(a, b).astype(a.dtype)


# op -> numpy implementation (node, *inputs) -> array; shared by every dtype the op allows.
NUMPY: dict[str, Callable] = {
    "Abs": _same(np.abs),
    "Neg": lambda n, x: np.negative(x),
    "Exp": _same(np.exp), "Log": _same(np.log), "Sqrt": _same(np.sqrt), "Reciprocal": _same(np.reciprocal),
    "Floor": _same(np.floor), "Ceil": _same(np.ceil), "Round": _same(np.rint),
    "Sign": _same(np.sign),
    "Sigmoid": _same(lambda x: 1 / (1 + np.exp(-x))),
    "HardSigmoid": lambda n, x: np.clip(_a(n, "alpha", 0.2) * x + _a(n, "beta", 0.5), 0, 1).astype(x.dtype),
    "Tanh": _same(np.tanh),
    "Relu": lambda n, x: np.where(x < 0, 0, x).astype(x.dtype),
    "LeakyRelu": lambda n, x: np.where(x > 0, x, x * _a(n, "alpha", 0.01)).astype(x.dtype),
    "Elu": lambda n, x: np.where(x < 0, _a(n, "alpha", 1.0) * np.expm1(x), x).astype(x.dtype),
    "Selu": _selu,
    "Celu": lambda n, x: np.where(x > 0, x, _a(n, "alpha", 1.0) * np.expm1(x / _a(n, "alpha", 1.0)))
    .astype(x.dtype),
    "ThresholdedRelu": lambda n, x: np.where(x > _a(n, "alpha", 1.0), x, 0).astype(x.dtype),
    "Softplus": _same(_softplus), "Softsign": _same(lambda x: x / (1 + np.abs(x))),
    "HardSwish": _same(lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "Mish": _same(lambda x: x * np.tanh(_softplus(x))),
    "Swish": lambda n, x: (x / (1 + np.exp(-_a(n, "alpha", 1.0) * x))).astype(x.dtype),
    "Gelu": _gelu, "Erf": _erf,
    "Sin": _same(np.sin), "Cos": _same(np.cos), "Tan": _same(np.tan), "Asin": _same(np.arcsin),
    "Acos": _same(np.arccos), "Atan": _same(np.arctan), "Sinh": _same(np.sinh), "Cosh": _same(np.cosh),
    "Asinh": _same(np.arcsinh), "Acosh": _same(np.arccosh), "Atanh": _same(np.arctanh),
    "IsNaN": lambda n, x: np.isnan(x), "IsInf": _isinf,
    "Not": lambda n, x: np.logical_not(x), "BitwiseNot": lambda n, x: np.invert(x),
    "Shrink": _shrink,
    "Add": _wrap(np.add), "Sub": _wrap(np.subtract), "Mul": _wrap(np.multiply),
    "Div": lambda n, a, b: int_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b).astype(a.dtype),
    "Mod": _mod, "Pow": _pow, "BitShift": _shift,
    "BitwiseAnd": _bitwise(np.bitwise_and), "BitwiseOr": _bitwise(np.bitwise_or),
    "BitwiseXor": _bitwise(np.bitwise_xor),
    "And": lambda n, a, b: np.logical_and(a, b), "Or": lambda n, a, b: np.logical_or(a, b),
    "Xor": lambda n, a, b: np.logical_xor(a, b),
    "Equal": lambda n, a, b: np.equal(a, b), "Less": lambda n, a, b: np.less(a, b),
    "Greater": lambda n, a, b: np.greater(a, b), "LessOrEqual": lambda n, a, b: np.less_equal(a, b),
    "GreaterOrEqual": lambda n, a, b: np.greater_equal(a, b),
    "PRelu": lambda n, x, s: np.where(x > 0, x, _wrap(np.multiply)(n, x, s)).astype(x.dtype),
    "Max": _where_nan(np.maximum), "Min": _where_nan(np.minimum),
    "Sum": lambda n, *xs: np.asarray(sum(xs[1:], xs[0])).astype(xs[0].dtype),
    "Mean": lambda n, *xs: (np.asarray(sum(xs[1:], xs[0])) / np.asarray(len(xs), xs[0].dtype)).astype(xs[0].dtype),
    "Where": lambda n, c, x, y: np.where(c, x, y),
    "Clip": _clip,
}
