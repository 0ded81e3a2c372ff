"""A model that ran with several threads keeps working in a fork-started child (Python's default
multiprocessing start method on Linux), with its threads: the JIT module and a loaded AOT artifact.

A parallel job must not wait for workers that only exist in the parent (the runtime's pool forgets them
in its fork child handler, runtime_c/onnxc_pool.c). Each child runs under a timeout, so a regression
fails instead of hanging the test run."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxc

TIMEOUT = 60  # seconds a child may take (it needs one or two, a compile included)


def big_elementwise(op: str = "Add"):
    """Tanh(x) <op> x over [N, 1024]: large enough that the kernel runs on the runtime's pool."""
    nodes = [h.make_node("Tanh", ["x"], ["t"]), h.make_node(op, ["t", "x"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 1024])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 1024])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def run_in_fork_child(model, x: np.ndarray) -> tuple[np.ndarray, int]:
    """(the child's result of model(x), the child's thread count after the call), from a
    multiprocessing child started with fork; fails when the child hangs or dies. ``model``: a
    CompiledModel, or a function giving one (called in the child)."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child():
        m = model if isinstance(model, onnxc.CompiledModel) else model()
        y = m(x)
        send.send((y, _tasks()))

    p = ctx.Process(target=child)
    p.start()
    try:
        assert recv.poll(TIMEOUT), "the forked child did not answer: it hangs"
        y, tasks = recv.recv()
        p.join(TIMEOUT)
        assert p.exitcode == 0, f"the forked child exited with {p.exitcode}"
    finally:
        if p.is_alive():
            p.kill()
            p.join()
    return y, tasks


def check_fork(model: onnxc.CompiledModel) -> None:
    x = np.random.default_rng(0).random((512, 1024), dtype=np.float32)
    want = np.tanh(x) + x
    np.testing.assert_allclose(model(x), want, rtol=1e-6)  # the parent's pool workers exist now
    got, tasks = run_in_fork_child(model, x)
    np.testing.assert_array_equal(got, model(x))
    if os.path.isdir("/proc/self/task"):
        assert tasks == 2, f"the child ran with {tasks} thread(s): its pool workers were not made again"
    np.testing.assert_array_equal(model(x), got)  # and the parent's pool is made again too


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_jit_model_used_with_two_threads_works_in_a_fork_child():
    check_fork(onnxc.compile(big_elementwise(), threads=2))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_aot_artifact_used_with_two_threads_works_in_a_fork_child(tmp_path):
    onnxc.build(big_elementwise(), tmp_path / "art", name="fk")
    check_fork(onnxc.load(tmp_path / "art", threads=2))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_model_first_loaded_in_the_child_runs_with_its_threads():
    """A library the child loads (another model) makes its own workers."""
    parent = onnxc.compile(big_elementwise(), threads=2)
    x = np.random.default_rng(1).random((512, 1024), dtype=np.float32)
    parent(x)
    got, tasks = run_in_fork_child(lambda: onnxc.compile(big_elementwise("Mul"), threads=2), x)
    np.testing.assert_allclose(got, np.tanh(x) * x, rtol=1e-6)
    if os.path.isdir("/proc/self/task"):
        assert tasks == 2, f"the child ran with {tasks} thread(s)"
