"""Float Softmax/LogSoftmax rows (codegen/kernels/softmax.py over runtime_c/onnxc_attention.h): masked
rows whose exponentials underflow, -inf entries, empty tensors, symbolic dims, odd row lengths."""

from __future__ import annotations

import numpy as np
import pytest

from .util import check_node


def _masked(rng: np.random.Generator, shape: tuple, fill: float) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32) * 3
    x[..., shape[-1] - shape[-1] // 4:] = fill  # a padded tail, as an additive attention mask leaves it
    return x


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("fill", [-10000.0, -90.0, -100.0, -np.inf])
@pytest.mark.parametrize("n", [1, 15, 16, 33, 128])
def test_masked_rows(op: str, fill: float, n: int) -> None:
    x = _masked(np.random.default_rng(n), (3, 5, n), fill)
    if n == 1 and np.isinf(fill):
        x[:] = 0.5  # a row of only -inf is NaN in the reference as in onnxc; keep this case finite
    check_node(op, {"x": x}, axis=-1, expected=[_stable(op, x, -1)])


def _stable(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    """The reference in float64; LogSoftmax as (x - max) - log(sum): onnx.reference takes the log of the
    softmax, which is -inf where the probability underflows."""
    d = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    e = np.exp(d)
    out = e / e.sum(axis=axis, keepdims=True) if op == "Softmax" else d - np.log(e.sum(axis=axis, keepdims=True))
    return out.astype(np.float32)


def test_softmax_underflow_is_flushed_not_subnormal() -> None:
    """Probabilities below FLT_MIN come out 0 (within any tolerance of the reference's subnormals)."""
    x = np.zeros((2, 64), np.float32)
    x[:, 1] = -95.0  # exp(-95) / 64 is subnormal
    got = check_node("Softmax", {"x": x}, axis=1, atol=1e-37)["y0"]
    assert np.all(got[:, 1] == 0) and np.all(np.isfinite(got))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_symbolic_rows_and_empty(op: str) -> None:
    rng = np.random.default_rng(0)
    x = _masked(rng, (4, 7, 40), -10000.0)
    check_node(op, {"x": x}, axis=-1, input_shapes={"x": ["N", 7, "L"]}, expected=[_stable(op, x, -1)])
    check_node(op, {"x": np.zeros((0, 3, 5), np.float32)}, axis=-1)
    check_node(op, {"x": np.zeros((2, 3, 0), np.float32)}, axis=-1)


@pytest.mark.parametrize("opset", [11, 13])
def test_negative_axis_and_old_opset(opset: int) -> None:
    x = _masked(np.random.default_rng(1), (2, 3, 4, 20), -10000.0)
    check_node("Softmax", {"x": x}, opset=opset, axis=-1)
    # opset < 13 normalizes the trailing axes from ``axis`` on, flattened together
    flat = x.reshape(6, 80) if opset < 13 else x
    want = _stable("LogSoftmax", flat, -1 if opset < 13 else -2).reshape(x.shape)
    check_node("LogSoftmax", {"x": x}, opset=opset, axis=-2, expected=[want])
