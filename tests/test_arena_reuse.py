"""The intermediates' arena kept from one run to the next (runtime_c/onnxc_arena.h): runs whose run-time
sizes grow and shrink, runs from several Python threads at once, and a static plan, all give the
reference's values (a reused arena holds the last run's bytes: nothing may read them as zeros)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from onnx import TensorProto, helper

import onnxc


def _model(shape):
    """x -> Relu -> Mul by 3 -> Add x -> Sigmoid -> ReduceSum over the last axis: three intermediates that
    live in the arena, none of them fully overwritten by a pattern a stale arena could fake."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "three"], ["m"]),
             helper.make_node("Add", ["m", "x"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("ReduceSum", ["s", "axes"], ["y"], keepdims=0)]
    inits = [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [-1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _want(x):
    a = np.maximum(x, 0) * 3 + x
    return (1 / (1 + np.exp(-a))).sum(-1)


def test_sizes_that_grow_and_shrink():
    cm = onnxc.compile(_model(["N", 300]), threads=1)
    rng = np.random.default_rng(0)
    for n in (2, 4000, 3, 9000, 1, 4000, 5):  # arenas of 2.4 KB to 10.8 MB (huge-page blocks), then small again
        x = rng.standard_normal((n, 300)).astype(np.float32)
        np.testing.assert_allclose(cm.run({"x": x})["y"], _want(x), rtol=1e-5)


def test_static_plan_many_runs():
    cm = onnxc.compile(_model([3000, 400]), threads=2)
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = rng.standard_normal((3000, 400)).astype(np.float32)
        np.testing.assert_allclose(cm.run({"x": x})["y"], _want(x), rtol=1e-5)


def test_runs_from_several_threads():
    cm = onnxc.compile(_model(["N", 257]), threads=1)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((int(n), 257)).astype(np.float32) for n in rng.integers(1, 5000, 48)]

    def one(x):
        return cm.run({"x": x})["y"]

    with ThreadPoolExecutor(4) as ex:
        for x, got in zip(xs, ex.map(one, xs)):
            np.testing.assert_allclose(got, _want(x), rtol=1e-5)
