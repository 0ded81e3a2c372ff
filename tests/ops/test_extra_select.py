"""NonZero, Compress and Unique on element types the conformance suite does not use: float16 and
bfloat16 (bit patterns: -0.0 is zero, negative values sort below positive ones), strings, bool, with
symbolic input dims and empty results. Checked against onnx.reference, or numpy where the reference
lacks the type.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from .util import check_node

BF16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(11)


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["f16", "bf16"])
def test_nonzero_half_negative_zero_is_zero(dt) -> None:
    x = np.array([[0.0, -0.0, 1.5], [-2.0, np.nan, -0.0]], np.float32).astype(dt)
    want = np.array(np.nonzero(x.astype(np.float32)), np.int64)
    check_node("NonZero", {"x": x}, input_shapes={"x": ["N", 3]}, expected=[want])


@pytest.mark.parametrize("dt", [np.float16, bool, np.uint8])
def test_nonzero_all_zero_gives_an_empty_result(dt) -> None:
    x = np.zeros((2, 0, 3) if dt is np.uint8 else (4, 3), dt)
    if dt is np.float16:
        x[:] = -0.0
    check_node("NonZero", {"x": x}, expected=[np.zeros((x.ndim, 0), np.int64)])


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_half_orders_by_value(dt, sorted_) -> None:
    v = np.array([0.5, -1.25, 3.0, -1.25, -0.0, 0.5, 2.0, -7.5, 0.0], np.float32).astype(dt)
    f = v.astype(np.float32)
    uniq, first, inverse, counts = np.unique(f, return_index=True, return_inverse=True, return_counts=True)
    if not sorted_:  # groups in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        uniq, first, counts, inverse = uniq[order], first[order], counts[order], rank[inverse]
    want = [uniq.astype(dt), first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)]
    check_node("Unique", {"x": v}, n_outputs=4, input_shapes={"x": ["N"]}, expected=want, sorted=sorted_)


def test_unique_half_rows_with_negative_axis() -> None:
    x = np.array([[1.0, -2.0], [0.5, 0.5], [1.0, -2.0], [-3.0, 4.0]], np.float16)
    check_node("Unique", {"x": x}, n_outputs=4, axis=-2)


@pytest.mark.parametrize("dt", [object, bool, np.int8])
def test_compress_symbolic_rows_other_types(dt) -> None:
    if dt is object:
        x = np.array([["a", "bb"], ["", "c"], ["dd", "e"]], dtype=object)
    else:
        x = (rng.random((3, 2)) > 0.5) if dt is bool else rng.integers(-9, 9, (3, 2)).astype(dt)
    c = np.array([True, False, True])
    check_node("Compress", {"x": x, "c": c}, axis=-2, input_shapes={"x": ["N", 2]})
    check_node("Compress", {"x": x, "c": np.array([False, True])})  # flattened, shorter condition
