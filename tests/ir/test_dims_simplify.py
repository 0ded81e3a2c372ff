"""Simplification rules of symbolic dims (ir/dims.py): floor/ceil offsets and common factors, mod
offsets, min/max flattening and dominance, interval bounds, and the readable ``ceil(x / k)`` rendering.
Every rule is checked against plain integer arithmetic over a grid of values."""

from __future__ import annotations

import itertools

from onnxc.ir.dims import bounds, ceildiv, dmax, dmin, evaluate, floordiv, mod, nonneg, sym

H, W, N = sym("H"), sym("W"), sym("N")
GRID = [{"H": h, "W": w, "N": n} for h, w, n in itertools.product(range(0, 19), range(0, 7), (0, 1, 3))]


def same_values(d, fn) -> bool:
    return all(evaluate(d, env) == fn(env["H"], env["W"], env["N"]) for env in GRID)


def test_floor_offset_moves_into_zero_to_divisor():
    """floor((H - 1) / 8) + 1 (a strided conv's output) is ceil(H / 8); the constant of a numerator
    is kept in [0, k) and the rest moves out of the floor."""
    d = floordiv(H - 1, 8) + 1
    assert d == ceildiv(H, 8) and str(d) == "ceil(H / 8)"
    assert str(floordiv(H - 1, 8)) == "(ceil(H / 8) - 1)"
    assert floordiv(H + 17, 8) == floordiv(H + 1, 8) + 2
    assert same_values(floordiv(H - 1, 8), lambda h, w, n: (h - 1) // 8)
    assert same_values(floordiv(3 * H - 20, 7), lambda h, w, n: (3 * h - 20) // 7)


def test_floor_divides_out_common_factors_and_chains_flatten():
    assert floordiv(2 * H + 2, 4) == floordiv(H + 1, 2) == ceildiv(H, 2)
    assert floordiv(6 * H * W + 4, 10) == floordiv(3 * H * W + 2, 5)
    # two stride-2 convolutions: one division by 4, not a floor of a floor
    two = floordiv(floordiv(H - 1, 2), 2) + 1
    assert str(two) == "ceil(H / 4)"
    assert same_values(two, lambda h, w, n: ((h - 1) // 2) // 2 + 1)


def test_ceil_renders_as_ceil_and_keeps_c_semantics():
    d = ceildiv(H - 3, 2)
    assert str(d) == "(floor(H / 2) - 1)"  # floor((H - 2) / 2): not of the ceil form
    assert str(ceildiv(H * W, 16)) == "ceil(H*W / 16)"
    assert ceildiv(H, 1) == H and ceildiv(4 * H, 2) == 2 * H and ceildiv(4 * H + 2, 6) == ceildiv(2 * H + 1, 3)
    assert same_values(ceildiv(H - 3, 2), lambda h, w, n: -((3 - h) // 2))
    assert same_values(ceildiv(5 * H + W, 3), lambda h, w, n: -(-(5 * h + w) // 3))


def test_mod_offset_and_exact_division():
    assert mod(H + 9, 8) == mod(H + 1, 8)
    assert mod(H - 1, 8) == mod(H + 7, 8)
    assert mod(8 * H + 16, 8) == 0
    assert same_values(mod(H - 1, 4), lambda h, w, n: (h - 1) % 4)


def test_bounds_and_nonneg():
    assert bounds(H) == (0, float("inf"))
    assert bounds(floordiv(H - 1, 8)) == (-1, float("inf"))
    assert bounds(mod(H, 5)) == (0, 4)
    assert nonneg(2 * floordiv(H - 1, 8) + 2)  # 2*ceil(H / 8)
    assert nonneg(5 * floordiv(H - 1, 8) * floordiv(W - 1, 8) + 5 * floordiv(H - 1, 8)
                  + 5 * floordiv(W - 1, 8) + 5)
    assert not nonneg(H - W) and not nonneg(floordiv(H, 2) - 1)
    lo, hi = bounds(dmin(H, 3) - 5)
    assert (lo, hi) == (-5, -2)


def test_min_max_fold_constants_flatten_and_drop_dominated():
    assert dmax(0, 2 * floordiv(H - 1, 8) + 2) == 2 * ceildiv(H, 8)  # a clamp of a dim is the dim
    assert dmin(dmin(H, 5), 3) == dmin(H, 3)
    assert dmax(dmax(H, 5), 3) == dmax(H, 5)
    assert dmin(dmin(H, 5), dmin(W, 3)) == dmin(dmin(H, 3), W)
    assert dmin(H, H + ceildiv(W, 8)) == H and dmax(H, H + ceildiv(W, 8)) == H + ceildiv(W, 8)
    assert dmax(H, W) == dmax(W, H) and str(dmax(H, W)) in ("max(H, W)", "max(W, H)")
    assert str(dmin(dmin(H, 5), 3)) == "min(3, H)"
    assert same_values(dmin(dmin(H, 5), dmin(W, 3)), lambda h, w, n: min(h, 5, w, 3))
    assert same_values(dmax(H - 7, dmax(W, 2)), lambda h, w, n: max(h - 7, w, 2))


def test_reshape_quotients_stay_constant():
    """A Reshape's -1 divides the element count by the other dims (the issue's 8210 case)."""
    f = floordiv(H - 1, 8)
    assert floordiv(8210 * f + 8210, f + 1) == 8210
    assert floordiv(8210 * N * ceildiv(H, 8) * ceildiv(W, 8), N * ceildiv(W, 8)) == 8210 * ceildiv(H, 8)
