"""Symbolic dims: canonical forms compare equal, evaluation, C rendering."""

from onnxc.ir import ceildiv, dmax, dmin, evaluate, floordiv, mod, sym, to_c


def test_canonical_equality():
    n, h = sym("N"), sym("H")
    assert n * 2 + 3 == 3 + 2 * n
    assert (n * h) - (h * n) == 0
    assert floordiv(6 * n + 3, 3) == 2 * n + 1
    assert floordiv(n * h, n) == h
    assert mod(4 * n, 2) == 0
    assert dmin(n, n + 1) == n and dmax(n, n + 1) == n + 1
    assert hash(n * h + 1) == hash(h * n + 1)


def test_evaluate_and_floor_semantics():
    n = sym("N")
    e = floordiv(n - 7, 2)
    assert evaluate(e, {"N": 0}) == -4  # floor, not truncation
    assert evaluate(ceildiv(n, 4), {"N": 9}) == 3
    assert evaluate(mod(n, 5), {"N": -3}) == 2


def test_to_c_uses_helpers():
    n = sym("N")
    c = to_c(floordiv(n, 3) + 1, lambda s: "D[0]")
    assert "onnxc_floordiv(D[0], 3)" in c


def test_exact_quotient_by_a_polynomial():
    """Reshape's -1 divides the element count by the known dims: a monomial multiple of a polynomial
    simplifies (an OCR export's (192*n*f + 192*n) / (n*f + n) is 192), anything else stays opaque."""
    n, w = sym("n"), sym("w")
    f = floordiv(w - 1, 2)
    assert floordiv(192 * n * f + 192 * n, n * f + n) == 192
    assert floordiv(6 * n * w + 6 * n, 2 * w + 2) == 3 * n
    q = floordiv(n * w + 1, w + 1)
    assert evaluate(q, {"n": 3, "w": 4}) == 13 // 5


def test_nested_floor_divisions_flatten_and_stay_exact():
    """A chain of stride-2 pools gives one division per 20 levels of halving, with the same values."""
    from onnxc.ir.dims import FLATTEN_MAX

    h = sym("H")
    for pad, k in ((1, 3), (0, 3), (0, 2)):
        d = h
        for _ in range(300):
            d = floordiv(d + 2 * pad - k, 2) + 1
        assert d.depth <= 300 // 20 + 1
        for value in (0, 1, 2, 3, 5, 1000, 2**21 + 7):
            x = value
            for _ in range(300):
                x = (x + 2 * pad - k) // 2 + 1
            assert evaluate(d, {"H": value}) == x
        assert str(FLATTEN_MAX) in str(d)  # the divisors stop growing at FLATTEN_MAX


def test_too_deep_expressions_are_refused():
    import pytest

    from onnxc.ir.dims import MAX_DEPTH, DimTooDeep

    d = sym("H")
    with pytest.raises(DimTooDeep, match=rf"{MAX_DEPTH + 1} deep, more than the limit of {MAX_DEPTH}"):
        for _ in range(MAX_DEPTH + 1):
            d = floordiv(3 * d + 1, 2)  # a coefficient of 3: does not flatten
    assert d.depth == MAX_DEPTH and evaluate(d, {"H": 5}) > 0
