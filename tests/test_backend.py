"""onnxc.backend: the onnx.backend.base.Backend adapter, directly and through the ONNX harness."""

from __future__ import annotations

import io
import unittest
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
import onnxc.backend as backend


def add_model(with_init: bool = False) -> onnx.ModelProto:
    """sum = x + y (y an initializer that is also listed as a graph input when ``with_init``)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    out = [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["N", 3]),
           helper.make_tensor_value_info("0", TensorProto.FLOAT, ["N", 3])]
    nodes = [helper.make_node("Add", ["x", "y"], ["sum"]), helper.make_node("Relu", ["sum"], ["0"])]
    inits = [numpy_helper.from_array(np.array([[1, -2, 3]], np.float32), "y")] if with_init else []
    g = helper.make_graph(nodes, "add", [x, y], out, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_supports_device() -> None:
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    assert not backend.supports_device("TPU:0")


def test_prepare_run_positional_dict_and_names() -> None:
    rep = backend.prepare(add_model())
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    y = np.ones((1, 3), np.float32)
    out = rep.run([x, y])
    assert len(out) == 2
    np.testing.assert_array_equal(out[0], x + y)
    np.testing.assert_array_equal(out["sum"], x + y)
    np.testing.assert_array_equal(out["0"], np.maximum(x + y, 0))  # not an identifier: renamed field
    np.testing.assert_array_equal(rep.run({"x": x, "y": y})[1], np.maximum(x + y, 0))
    assert isinstance(rep.compiled, onnxc.CompiledModel)


def test_initializer_inputs_are_not_fed() -> None:
    x = np.zeros((4, 3), np.float32)
    out = backend.run_model(add_model(with_init=True), [x])
    np.testing.assert_array_equal(out[0], np.broadcast_to(np.array([[1, -2, 3]], np.float32), (4, 3)))
    np.testing.assert_array_equal(backend.prepare(add_model(with_init=True)).run(x)[1],
                                  np.array([[1, 0, 3]] * 4, np.float32))


def test_prepare_from_bytes_and_options() -> None:
    rep = backend.prepare(add_model().SerializeToString(), "CPU", threads=1)
    assert rep.run([np.ones((1, 3), np.float32), np.ones((1, 3), np.float32)])[0].tolist() == [[2, 2, 2]]
    with pytest.raises(TypeError, match="unknown prepare"):
        backend.prepare(add_model(), bogus=1)
    with pytest.raises(ValueError, match="CPU only"):
        backend.prepare(add_model(), "CUDA")


def test_run_errors_are_onnxc_errors() -> None:
    rep = backend.prepare(add_model())
    with pytest.raises(onnxc.InputError):
        rep.run([np.ones((2, 3), np.float32)] * 3)
    with pytest.raises(onnxc.InputError):
        rep.run([np.ones((2, 3), np.int64), np.ones((1, 3), np.float32)])


def test_run_node() -> None:
    node = helper.make_node("LeakyRelu", ["a"], ["b"], alpha=0.5)
    a = np.array([-2.0, 0.0, 4.0], np.float32)
    (b,) = backend.run_node(node, [a])
    np.testing.assert_array_equal(b, [-1.0, 0.0, 4.0])
    node = helper.make_node("Less", ["p", "q"], ["r"])
    (r,) = backend.run_node(node, {"p": np.array([1, 5], np.int64), "q": np.array([3], np.int64)},
                            opset_version=13)
    assert r.dtype == np.bool_ and r.tolist() == [True, False]


def test_unsupported_op_raises() -> None:
    node = helper.make_node("Hardmax", ["a"], ["b"], domain="com.example")
    with pytest.raises(onnxc.UnsupportedOpError, match="Hardmax"):
        backend.run_node(node, [np.zeros(3, np.float32)])


HARNESS_CASES = ["test_add", "test_add_bcast", "test_relu", "test_abs", "test_sigmoid", "test_exp",
                 "test_operator_add_broadcast", "test_single_relu_model"]


def test_onnx_backend_harness() -> None:
    """Run a few node and model cases through onnx.backend.test.BackendTest with this adapter."""
    from onnx.backend.test import BackendTest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case modules' own numpy warnings
        bt = BackendTest(backend, __name__)
    for name in HARNESS_CASES:
        bt.include(rf"^{name}_cpu$")
    result = unittest.TextTestRunner(verbosity=0, stream=io.StringIO()).run(bt.test_suite)
    problems = [(str(t), tb.splitlines()[-1]) for t, tb in result.failures + result.errors]
    assert not problems, problems
    assert result.testsRun - len(result.skipped) == len(HARNESS_CASES)
