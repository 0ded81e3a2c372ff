"""Random ops (RandomUniform/Normal[Like], Bernoulli, Multinomial, training-mode Dropout).

Seeded nodes must reproduce onnx.reference exactly (onnxc implements its generator, numpy's
RandomState(seed)). Unseeded nodes are checked for shape, type, support and distribution, and for
drawing a fresh seed on every call. Also the conformance harness's value-independent checks.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conformance.cases import check_random_outputs
from onnx import TensorProto, helper

import onnxc

from .util import check_node, node_model, reference

rng = np.random.default_rng(11)


def _gen_model(op: str, dtype: int | None = None, opset: int = 22, **attrs) -> onnx.ModelProto:
    """A model of one input-less generator node (RandomUniform / RandomNormal)."""
    if dtype is not None:
        attrs["dtype"] = dtype
    node = helper.make_node(op, [], ["y"], **attrs)
    g = helper.make_graph([node], "t", [], [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


# -- seeded: exactly onnx.reference -----------------------------------------------------------------

@pytest.mark.parametrize("op, attrs", [
    ("RandomUniform", {}), ("RandomUniform", {"low": -3.5, "high": 7.25}), ("RandomUniform", {"low": 0.1, "high": 0.7}),
    ("RandomNormal", {}), ("RandomNormal", {"mean": 2.0, "scale": 0.3}),
])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16])
@pytest.mark.parametrize("seed", [0.0, 12345.0])
def test_generators_seeded_match_reference(op, attrs, dtype, seed) -> None:
    m = _gen_model(op, dtype, shape=[3, 5, 7], seed=seed, **attrs)
    want = reference(m, {})[0]
    got = onnxc.compile(m).run({})["y"]
    assert got.dtype == want.dtype and got.shape == (3, 5, 7)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, attrs", [("RandomUniformLike", {"low": 1.0, "high": 2.0}),
                                       ("RandomNormalLike", {"scale": 4.0})])
@pytest.mark.parametrize("x_dtype, dtype", [(np.float32, None), (np.float64, None), (np.int64, TensorProto.FLOAT),
                                            (np.float32, TensorProto.DOUBLE)])
def test_like_seeded_match_reference(op, attrs, x_dtype, dtype) -> None:
    x = np.zeros((4, 6), dtype=x_dtype)
    extra = {} if dtype is None else {"dtype": dtype}
    # a symbolic batch dim: the Like ops take the run-time shape
    check_node(op, {"x": x}, opset=22, input_shapes={"x": ["N", 6]}, rtol=0, atol=0, seed=3.0, **attrs, **extra)


def test_like_empty_input() -> None:
    got = check_node("RandomUniformLike", {"x": np.zeros((0, 3), np.float32)}, opset=22, seed=1.0)
    assert got["y0"].shape == (0, 3)


@pytest.mark.parametrize("p_dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("dtype", [None, TensorProto.INT32, TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.UINT8])
def test_bernoulli_seeded_match_reference(p_dtype, dtype) -> None:
    p = rng.random((7, 9)).astype(p_dtype)
    p[0, :] = 0
    p[1, :] = 1
    p[2, :] = 0.5
    extra = {} if dtype is None else {"dtype": dtype}
    check_node("Bernoulli", {"p": p}, opset=22, rtol=0, atol=0, seed=42.0, **extra)


def test_bernoulli_large_seeded_match_reference() -> None:
    """Thousands of draws: the binomial inversion must restart exactly where numpy does."""
    check_node("Bernoulli", {"p": rng.random(20000)}, opset=22, rtol=0, atol=0, seed=7.0)


def test_bernoulli_invalid_probability() -> None:
    m = node_model("Bernoulli", {"p": np.array([0.5, 1.5], np.float32)}, opset=22, seed=0.0)
    with pytest.raises(Exception, match="outside \\[0, 1\\]"):
        onnxc.compile(m).run({"p": np.array([0.5, 1.5], np.float32)})


# -- unseeded: value-independent checks -------------------------------------------------------------

def test_unseeded_uniform_distribution_and_fresh_seeds() -> None:
    m = _gen_model("RandomUniform", TensorProto.DOUBLE, shape=[200000], low=2.0, high=5.0)
    c = onnxc.compile(m)
    a, b = c.run({})["y"], c.run({})["y"]
    assert a.dtype == np.float64 and a.shape == (200000,)
    assert a.min() >= 2.0 and a.max() < 5.0
    assert abs(a.mean() - 3.5) < 0.02 and abs(a.var() - 0.75) < 0.02
    assert not np.array_equal(a, b), "two calls of an unseeded node drew the same values"


def test_unseeded_normal_distribution() -> None:
    m = _gen_model("RandomNormal", TensorProto.FLOAT, shape=[400, 500], mean=-1.0, scale=2.0)
    a = onnxc.compile(m).run({})["y"]
    assert a.dtype == np.float32 and a.shape == (400, 500) and np.all(np.isfinite(a))
    assert abs(a.mean() + 1.0) < 0.02 and abs(a.std() - 2.0) < 0.02


def test_unseeded_bernoulli_frequency() -> None:
    p = np.repeat(np.array([0.0, 0.1, 0.5, 0.9, 1.0]), 40000).reshape(5, 40000)
    m = node_model("Bernoulli", {"p": p}, opset=22)
    y = onnxc.compile(m).run({"p": p})["y0"]
    assert set(np.unique(y)) <= {0.0, 1.0}
    np.testing.assert_allclose(y.mean(axis=1), [0.0, 0.1, 0.5, 0.9, 1.0], atol=0.01)


@pytest.mark.parametrize("dtype", [TensorProto.INT32, TensorProto.INT64])
def test_multinomial_frequencies(dtype) -> None:
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
    x = np.log(np.where(probs > 0, probs, 1e-300)).astype(np.float32)
    x[1, 1] = -np.inf  # impossible outcome
    m = node_model("Multinomial", {"x": x}, opset=22, input_shapes={"x": ["B", 3]}, sample_size=50000, dtype=dtype)
    y = onnxc.compile(m).run({"x": x})["y0"]
    assert y.dtype == (np.int32 if dtype == TensorProto.INT32 else np.int64) and y.shape == (2, 50000)
    assert y.min() >= 0 and y.max() <= 2 and not np.any(y[1] == 1)
    freq = np.stack([np.bincount(r, minlength=3) / r.size for r in y])
    np.testing.assert_allclose(freq, probs, atol=0.01)


def test_multinomial_seeded_is_reproducible() -> None:
    x = np.log(rng.random((3, 10))).astype(np.float64)
    m = node_model("Multinomial", {"x": x}, opset=22, sample_size=20, seed=5.0)
    a = onnxc.compile(m).run({"x": x})["y0"]
    b = onnxc.compile(m).run({"x": x})["y0"]
    np.testing.assert_array_equal(a, b)


def test_multinomial_invalid_row() -> None:
    x = np.array([[-np.inf, -np.inf]], np.float32)
    m = node_model("Multinomial", {"x": x}, opset=22)
    with pytest.raises(Exception, match="no outcome of finite positive probability"):
        onnxc.compile(m).run({"x": x})


# -- Dropout in training mode -------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.75])
@pytest.mark.parametrize("seed", [0, 99])
def test_dropout_training_seeded_matches_reference(dt, ratio, seed) -> None:
    x = rng.standard_normal((5, 6, 7)).astype(dt)
    check_node("Dropout", {"x": x, "r": np.array(ratio, dt), "t": np.array(True)}, n_outputs=2, opset=22,
               input_shapes={"x": ["N", 6, 7]}, rtol=0, atol=0, seed=seed)


def test_dropout_training_mode_false_at_run_time() -> None:
    x = rng.standard_normal((3, 4)).astype(np.float32)
    check_node("Dropout", {"x": x, "r": np.array(0.5, np.float32), "t": np.array(False)}, n_outputs=2, opset=13,
               rtol=0, atol=0)


def test_dropout_training_unseeded_statistics() -> None:
    x = np.ones(100000, np.float32)
    m = node_model("Dropout", {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)}, 2, opset=22)
    got = onnxc.compile(m).run({"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)})
    y, mask = got["y0"], got["y1"]
    assert mask.dtype == np.bool_ and abs(mask.mean() - 0.75) < 0.01
    np.testing.assert_array_equal(y, np.where(mask, np.float32(1 / 0.75), 0))


def test_dropout_training_float16() -> None:
    x = rng.standard_normal((4, 8)).astype(np.float16)
    feeds = {"x": x, "r": np.array(0.5, np.float32), "t": np.array(True)}
    m = node_model("Dropout", feeds, 2, opset=22, seed=1)
    got = onnxc.compile(m).run(feeds)
    want_mask = np.random.RandomState(1).uniform(0, 1, x.shape) >= 0.5
    np.testing.assert_array_equal(got["y1"], want_mask)
    np.testing.assert_array_equal(got["y0"], np.where(want_mask, x * np.float16(2), np.float16(0)))


def test_dropout_invalid_ratio() -> None:
    feeds = {"x": np.ones(4, np.float32), "r": np.array(1.0, np.float32), "t": np.array(True)}
    m = node_model("Dropout", feeds, opset=22)
    with pytest.raises(Exception, match="ratio"):
        onnxc.compile(m).run(feeds)


# -- the conformance harness's value-independent checks ------------------------------------------

def _bernoulli_model() -> onnx.ModelProto:
    return node_model("Bernoulli", {"p": np.zeros(4, np.float32)}, opset=22)


def test_harness_random_checks_accept_valid_draws() -> None:
    m = _bernoulli_model()
    check_random_outputs({"y0": np.array([0, 1, 1, 0], np.float32)}, [np.array([1, 0, 0, 1], np.float32)], m, {})


@pytest.mark.parametrize("got, message", [
    (np.array([0, 1, 1, 0], np.float64), "expected float32"),
    (np.array([0, 1, 1], np.float32), "expected float32\\[4\\]"),
    (np.array([0, 2, 1, 0], np.float32), "outside the support"),
    (np.array([0, 0.5, 1, 0], np.float32), "non-integral"),
    (np.array([0, np.nan, 1, 0], np.float32), "NaN"),
])
def test_harness_random_checks_reject(got, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_random_outputs({"y0": got}, [np.array([1, 0, 0, 1], np.float32)], _bernoulli_model(), {})


def test_harness_random_checks_derived_outputs() -> None:
    """An output computed from random values must stay within the expected values' range."""
    p = np.zeros(3, np.float32)
    m = node_model("Bernoulli", {"p": p}, opset=22)
    extra = helper.make_node("Neg", ["y0"], ["z"])
    m.graph.node.append(extra)
    m.graph.output[0].name = "z"
    with pytest.raises(AssertionError, match="outside the support"):
        check_random_outputs({"z": np.array([0, 3, 0], np.float32)}, [np.array([0, -1, 0], np.float32)], m, {})
