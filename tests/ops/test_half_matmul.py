"""float16 / bfloat16 MatMul, Gemm and Softmax: bit-exact against the reference's arithmetic.

numpy multiplies float16 matrices with a float32 accumulator summed in k order and rounded once
(ml_dtypes' bfloat16 ``np.dot`` too; its batched ``np.matmul`` runs float32 BLAS, so batched
bfloat16 is checked against the same float32-in-order emulation and against the reference within
one unit in the last place). Softmax on half types rounds after each step like the reference.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc

BF16 = np.dtype(ml_dtypes.bfloat16)
HALVES = [np.dtype(np.float16), BF16]


def _model(op: str, inputs: dict, shapes: dict | None = None, opset: int = 21, **attrs):
    names = list(inputs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                        (shapes or {}).get(n, list(a.shape))) for n, a in inputs.items()]
    g = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "t", vi,
                          [helper.make_tensor_value_info("y", 0, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, inputs: dict, threads: int | None = None) -> tuple[np.ndarray, onnxc.CompiledModel]:
    compiled = onnxc.compile(model, threads=threads)
    got = compiled.run({k: v.view(np.uint16) if v.dtype == BF16 else v for k, v in inputs.items()})["y"]
    return np.asarray(got), compiled


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def _emulate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's half product: float32 products summed in k order from 0, rounded once."""
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    acc = np.zeros(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1]), np.float32)
    for k in range(a2.shape[-1]):
        acc = acc + a2[..., :, k:k + 1].astype(np.float32) * b2[..., k:k + 1, :].astype(np.float32)
    out = acc.astype(a.dtype)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def _rand(rng, shape, dt) -> np.ndarray:
    return (rng.standard_normal(shape) * 2).astype(np.float32).astype(dt)


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 3)), ((13, 600), (600, 37)), ((9,), (9, 4)), ((3, 9), (9,)),
                                   ((4, 0), (0, 6)), ((0, 3), (3, 2)), ((2, 3, 5, 40), (40, 6)),
                                   ((2, 1, 5, 33), (3, 33, 7))])
def test_matmul_bit_exact(dt, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + sb[-1])
    a, b = _rand(rng, sa, dt), _rand(rng, sb, dt)
    got, compiled = _run(_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    assert "onnxc_hgemm_" in compiled.c_source  # the half kernel ran, not a float32 round trip
    want = _emulate(a, b)
    assert got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(want))
    ref = np.asarray(ReferenceEvaluator(_model("MatMul", {"a": a, "b": b})).run(None, {"a": a, "b": b})[0])
    if dt == np.float16 or (a.ndim <= 2 and b.ndim <= 2):  # numpy's own arithmetic: identical bits
        assert np.array_equal(_bits(got), _bits(ref))
    else:  # batched bfloat16: the reference runs float32 BLAS (another summation order)
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("dt", HALVES)
def test_matmul_symbolic_and_threads(dt):
    """Run-time sizes, a K spanning several blocks and edge tiles, and two threads give the same bits."""
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (2, 70, 300), dt), _rand(rng, (300, 45), dt)
    model = _model("MatMul", {"a": a, "b": b}, shapes={"a": ["B", "M", 300], "b": [300, "N"]})
    want = _emulate(a, b)
    for threads in (1, 2):
        got, _ = _run(model, {"a": a, "b": b}, threads=threads)
        assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dt", HALVES)
def test_matmul_special_values(dt):
    a = np.array([[np.inf, 1.0], [np.nan, 2.0], [65000.0, 65000.0]], np.float32).astype(dt)
    b = np.array([[1.0, 0.0], [2.0, 1.0]], np.float32).astype(dt)
    got, _ = _run(_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    with np.errstate(all="ignore"):
        want = _emulate(a, b)
    g, w = got.astype(np.float32), want.astype(np.float32)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    assert np.array_equal(g[~np.isnan(g)], w[~np.isnan(w)])


@pytest.mark.parametrize("dt", HALVES)
def test_matmul_constant_operands(dt):
    """Constant half operands are not folded by numpy on bit patterns: the kernel computes them."""
    rng = np.random.default_rng(4)
    a, b = _rand(rng, (4, 6), dt), _rand(rng, (6, 3), dt)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "t", [],
                          [helper.make_tensor_value_info("y", 0, None)],
                          initializer=[helper.make_tensor("a", helper.np_dtype_to_tensor_dtype(dt), a.shape,
                                                          _bits(a).tobytes(), raw=True),
                                       helper.make_tensor("b", helper.np_dtype_to_tensor_dtype(dt), b.shape,
                                                          _bits(b).tobytes(), raw=True)])
    got = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])).run({})["y"]
    assert np.array_equal(_bits(got), _bits(_emulate(a, b)))


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("ta,tb,alpha,beta,cshape", [(0, 0, 1.0, 1.0, (6,)), (1, 0, 0.1, 0.3, (4, 1)),
                                                     (0, 1, 2.5, 0.0, (4, 6)), (1, 1, 1.0, 1.0, None),
                                                     (0, 0, -1.5, 2.0, ())])
def test_gemm_bit_exact(dt, ta, tb, alpha, beta, cshape):
    rng = np.random.default_rng(abs(int(alpha * 10)) + ta + 2 * tb)
    a = _rand(rng, (9, 4) if ta else (4, 9), dt)
    b = _rand(rng, (6, 9) if tb else (9, 6), dt)
    inputs = {"a": a, "b": b}
    if cshape is not None:
        inputs["c"] = _rand(rng, cshape, dt)
    model = _model("Gemm", inputs, transA=ta, transB=tb, alpha=alpha, beta=beta)
    got, _ = _run(model, inputs)
    want = np.asarray(ReferenceEvaluator(model).run(None, inputs)[0])
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("shape,axis", [((5, 6), -1), ((3, 300), 1), ((2, 130), -1), ((3, 7, 5), 1),
                                        ((2, 4, 3), 0), ((4, 0), -1)])
def test_softmax_bit_exact(dt, shape, axis):
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32).astype(dt)
    model = _model("Softmax", {"x": x}, axis=axis)
    got, _ = _run(model, {"x": x})
    want = np.asarray(ReferenceEvaluator(model).run(None, {"x": x})[0])
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dt", HALVES)
def test_softmax_runtime_inner_of_one(dt):
    """A symbolic trailing size that is 1 at run time is a contiguous axis (summed like numpy's rows)."""
    x = (np.random.default_rng(9).standard_normal((3, 200, 1)) * 3).astype(np.float32).astype(dt)
    model = _model("Softmax", {"x": x}, shapes={"x": [3, 200, "T"]}, axis=1)
    got, _ = _run(model, {"x": x})
    want = np.asarray(ReferenceEvaluator(_model("Softmax", {"x": x}, axis=1)).run(None, {"x": x})[0])
    assert np.array_equal(_bits(got), _bits(want))


def test_softmax_nan_and_inf_rows():
    x = np.array([[1.0, np.nan, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0]], np.float16)
    got, _ = _run(_model("Softmax", {"x": x}), {"x": x})
    with np.errstate(all="ignore"):
        want = np.asarray(ReferenceEvaluator(_model("Softmax", {"x": x})).run(None, {"x": x})[0])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
