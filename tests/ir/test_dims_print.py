"""Dims printed for people (``repr``, tensor types) and for C (``to_c``, ``to_c_checked``), plus the
algebra's edges: free variables, unbound variables, non-dims, division by zero."""

from __future__ import annotations

import pytest

from onnxc.ir import (
    DType,
    TensorType,
    as_dim,
    ceildiv,
    dmax,
    dmin,
    evaluate,
    floordiv,
    free_symbols,
    mod,
    sym,
    to_c,
)
from onnxc.ir.dims import to_c_checked

N, H = sym("N"), sym("H")
CASES = [  # (dim, text, C, overflow-checked C)
    (2 * N * H - 3, "(2*H*N - 3)", "(2*d_H*d_N - 3)",
     "onnxc_ck_add(&ovf_, onnxc_ck_mul(&ovf_, 2, onnxc_ck_mul(&ovf_, d_H, d_N)), -3)"),
    (1 - N, "(-N + 1)", "(-d_N + 1)", "onnxc_ck_add(&ovf_, onnxc_ck_mul(&ovf_, -1, d_N), 1)"),
    (N * N, "N*N", "d_N*d_N", "onnxc_ck_mul(&ovf_, d_N, d_N)"),
    (floordiv(N, 3), "floor(N / 3)", "onnxc_floordiv(d_N, 3)", "onnxc_floordiv(d_N, 3)"),
    (ceildiv(N, 4), "ceil(N / 4)", "onnxc_floordiv((d_N + 3), 4)",
     "onnxc_floordiv(onnxc_ck_add(&ovf_, d_N, 3), 4)"),
    (mod(N, 5), "mod(N, 5)", "onnxc_mod(d_N, 5)", "onnxc_mod(d_N, 5)"),
    (dmin(H, N), "min(H, N)", "onnxc_min(d_H, d_N)", "onnxc_min(d_H, d_N)"),
    (dmax(N, 3), "max(3, N)", "onnxc_max(3, d_N)", "onnxc_max(3, d_N)"),
    (7, "7", "7", "7"),
    (2**40, "1099511627776", "INT64_C(1099511627776)", "INT64_C(1099511627776)"),
]


@pytest.mark.parametrize("d, text, c, checked", CASES, ids=[c[1] for c in CASES])
def test_text_and_c_forms(d, text, c, checked):
    assert repr(as_dim(d)) == text
    assert to_c(d, lambda s: f"d_{s}") == c
    assert to_c_checked(d, lambda s: f"d_{s}") == checked


def test_printing_is_canonical():
    assert repr(H * N + 1) == repr(1 + N * H) and repr(dmin(N, H)) == repr(dmin(H, N))
    assert repr(floordiv(2 * N + 2, 4)) == "ceil(N / 2)" == repr(ceildiv(N, 2))


def test_tensor_types_print_numel_and_symbols():
    t = TensorType(DType.FLOAT, (N, 3, floordiv(H, 2)))
    assert str(t) == "float[N, 3, floor(H / 2)]" and t.rank == 3 and not t.is_static
    assert t.numel() == 3 * N * floordiv(H, 2) and t.symbols() == {"N", "H"}
    assert str(TensorType(DType.INT64, None)) == "int64[?]" and TensorType(DType.INT64, None).rank is None
    s = TensorType(DType.BOOL, (2, 3))
    assert s.is_static and s.numel() == 6 and str(s) == "bool[2, 3]"


def test_free_symbols_reach_inside_functions():
    assert free_symbols(floordiv(N * H, sym("K")) + 1) == {"N", "H", "K"}
    assert free_symbols(5) == set()


def test_evaluate_names_an_unbound_variable():
    with pytest.raises(KeyError, match="dimension variable 'H' is not bound"):
        evaluate(N + H, {"N": 1})
    assert evaluate(dmax(N, H) - dmin(N, H), {"N": 2, "H": 9}) == 7


def test_non_dims_and_integer_division_by_zero_are_refused():
    with pytest.raises(TypeError, match="not a dimension: 'x'"):
        as_dim("x")
    with pytest.raises(TypeError, match="not a dimension"):
        TensorType(DType.FLOAT, (2.5,))
    with pytest.raises(ZeroDivisionError, match="dimension division by zero"):
        floordiv(4, 0)
    assert as_dim(True) == 1


def test_symbolic_division_by_zero_is_refused():
    with pytest.raises(ZeroDivisionError):
        floordiv(N, 0)
    with pytest.raises(ZeroDivisionError):
        mod(N, 0)
