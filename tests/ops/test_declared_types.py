"""Element types declared with ``types=`` (codegen/kernels/base.py) by the kernels that declared them
last, on the types their own tests do not run: whole-element copies of float8/float4/int4/int2
(ReverseSequence, TensorScatter), Col2Im's sums in bfloat16 and wide integers, DeformConv in
bfloat16, Bernoulli/Multinomial on half probabilities, Equal's numeric and string types in one
kernel; and the standard reason for a type a kernel does not declare.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import onnxc
from onnxc.ir import UnsupportedOpError

from .util import check_node, node_model, random_array, reference

rng = np.random.default_rng(31)

BYTE_TYPES = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu,
              ml_dtypes.float4_e2m1fn, ml_dtypes.int4, ml_dtypes.uint2]


def _small(shape: tuple, dt) -> np.ndarray:
    """Values every listed type holds exactly (powers of two and small integers)."""
    v = rng.integers(0, 2, shape)
    if np.dtype(dt) in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint2)):
        return v.astype(dt)
    return (2.0 ** rng.integers(-1, 2, shape)).astype(np.float32).astype(dt)


def _run(op: str, inputs: dict, opset: int = 21, **attrs) -> np.ndarray:
    return onnxc.compile(node_model(op, inputs, opset=opset, **attrs)).run(inputs)["y0"]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a


@pytest.mark.parametrize("dt", BYTE_TYPES)
def test_reverse_sequence_copies_low_precision_elements(dt) -> None:
    x, lens = _small((4, 3, 2), dt), np.array([1, 4, 2], np.int64)
    want = x.copy()
    for b, n in enumerate(lens):
        want[:n, b] = x[:n, b][::-1]
    got = _run("ReverseSequence", {"x": x, "l": lens}, batch_axis=1, time_axis=0)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dt", BYTE_TYPES)
def test_tensor_scatter_copies_low_precision_elements(dt) -> None:
    past, upd, w = _small((2, 5, 3), dt), _small((2, 2, 3), dt), np.array([4, 1], np.int64)
    want = past.copy()
    for b in range(2):
        for s in range(2):
            want[b, (w[b] + s) % 5] = upd[b, s]
    got = _run("TensorScatter", {"p": past, "u": upd, "w": w}, opset=24, axis=1, mode="circular")
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dt, tol", [(ml_dtypes.bfloat16, 5e-2), (np.uint16, 0), (np.int64, 0)])
def test_col2im_overlapping_sums(dt, tol) -> None:
    """2x2 blocks with stride 1 overlap: each pixel sums up to four columns in the element type."""
    x = random_array(rng, (2, 8, 9), dt)
    check_node("Col2Im", {"x": x, "im": np.array([4, 4], np.int64), "bs": np.array([2, 2], np.int64)}, opset=18,
               const_inputs=("im", "bs"), rtol=tol, atol=tol)


def test_deform_conv_bfloat16() -> None:
    bf = ml_dtypes.bfloat16
    ins = {"x": random_array(rng, (1, 2, 4, 4), bf), "w": random_array(rng, (2, 2, 2, 2), bf),
           "off": (random_array(rng, (1, 8, 3, 3), np.float32) * 0.5).astype(bf), "b": random_array(rng, (2,), bf)}
    want = reference(node_model("DeformConv", ins, opset=19), ins)[0]
    got = _run("DeformConv", ins, opset=19)
    assert got.dtype == want.dtype == bf
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=3e-2, atol=6e-2)


@pytest.mark.parametrize("p_dt", [ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("out", [None, 9, 3, 10])  # the input's type, bool, int8, float16
def test_bernoulli_half_probabilities_seeded(p_dt, out) -> None:
    p = rng.random((4, 6)).astype(np.float32).astype(p_dt)
    check_node("Bernoulli", {"p": p}, opset=22, seed=4.0, dtype=out, rtol=0, atol=0)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_multinomial_half_log_probabilities(dt) -> None:
    probs = np.array([[0.2, 0.3, 0.5], [0.0, 0.75, 0.25]])
    x = np.log(np.where(probs > 0, probs, 1e-30)).astype(np.float32).astype(dt)
    y = _run("Multinomial", {"x": x}, opset=22, sample_size=40000)
    freq = np.stack([np.bincount(r, minlength=3) / r.size for r in y])
    np.testing.assert_allclose(freq, probs, atol=0.015)


@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16, np.int8, np.uint64, bool, object])
def test_equal_numeric_and_string_in_one_kernel(dt) -> None:
    if dt is object:
        a = np.array([["a", "bé"], ["", "c"]], dtype=object)
        b = np.array(["a", "c"], dtype=object)
    else:
        a, b = random_array(rng, (2, 2), dt), random_array(rng, (2,), dt)
        b[0] = a[1, 0]
    check_node("Equal", {"a": a, "b": b}, opset=19)


@pytest.mark.parametrize("op, inputs, attrs, name", [
    ("MatMul", {"a": np.ones((2, 3), np.int8), "b": np.ones((3, 2), np.int8)}, {}, "i8"),
    ("Einsum", {"a": np.ones((2, 3), bool)}, {"equation": "ij->j"}, "bool"),
    ("Det", {"x": np.ones((2, 2), np.int32)}, {}, "i32"),
    ("TensorScatter", {"p": np.array([["a"]], object), "u": np.array([["b"]], object)}, {"opset": 24}, "string"),
    ("MaxUnpool", {"x": np.ones((1, 1, 2, 2), np.int64), "i": np.zeros((1, 1, 2, 2), np.int64)},
     {"kernel_shape": [2, 2]}, "i64"),
])
def test_undeclared_type_has_the_standard_reason(op, inputs, attrs, name) -> None:
    attrs = dict(attrs)
    opset = attrs.pop("opset", 21)
    with pytest.raises(UnsupportedOpError, match=f"element type {name} is not supported \\(supported: ") as e:
        onnxc.compile(node_model(op, inputs, opset=opset, **attrs))
    assert op in str(e.value)
