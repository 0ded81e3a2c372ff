"""A model that ran with several threads keeps working in a fork-started child (Python's default
multiprocessing start method on Linux), with its threads: the JIT module and a loaded AOT artifact.

Before runtime_c/onnxc_process.c, the child's first parallel region waited forever for OpenMP
workers that only exist in the parent. Each child runs under a timeout, so a regression fails
instead of hanging the test run."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxc
from onnxc.codegen.compiler import default_cc

TIMEOUT = 60  # seconds a child may take (it needs one or two, a compile included)


def big_elementwise(op: str = "Add"):
    """Tanh(x) <op> x over [N, 1024]: large enough that the kernel runs in an OpenMP parallel region."""
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
    np.testing.assert_allclose(model(x), want, rtol=1e-6)  # the parent's OpenMP workers exist now
    got, tasks = run_in_fork_child(model, x)
    np.testing.assert_array_equal(got, model(x))
    if os.path.isdir("/proc/self/task"):
        assert tasks == 2, f"the child ran with {tasks} thread(s): its OpenMP pool was not made again"
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
    """The pool the parent's model made is released at the fork by that model's library, so a library the
    child loads (another model) starts OpenMP afresh."""
    parent = onnxc.compile(big_elementwise(), threads=2)
    x = np.random.default_rng(1).random((512, 1024), dtype=np.float32)
    parent(x)
    got, tasks = run_in_fork_child(lambda: onnxc.compile(big_elementwise("Mul"), threads=2), x)
    np.testing.assert_allclose(got, np.tanh(x) * x, rtol=1e-6)
    if os.path.isdir("/proc/self/task"):
        assert tasks == 2, f"the child ran with {tasks} thread(s)"


FALLBACK_CHILD = textwrap.dedent("""
    import multiprocessing as mp, os, sys
    import numpy as np
    import onnxc
    sys.path.insert(0, sys.argv[1])
    from test_fork import big_elementwise, run_in_fork_child

    model = onnxc.compile(big_elementwise(), threads=2)
    x = np.ones((512, 1024), np.float32)
    want = model(x)
    got, tasks = run_in_fork_child(model, x)
    assert np.array_equal(got, want)
    print(tasks)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux")
def test_when_the_pool_cannot_be_released_the_child_runs_on_one_thread(tmp_path):
    """An OpenMP runtime whose omp_pause_resource_all fails (preloaded here: a stand-in for runtimes
    without it, or a fork from inside a parallel region): the child's forking thread runs its calls
    on one thread, which never touches the parent's pool, instead of hanging."""
    shim = tmp_path / "nopause.so"
    src = tmp_path / "nopause.c"
    src.write_text("int omp_pause_resource_all(int kind) { (void)kind; return -1; }\n")
    r = subprocess.run([default_cc(), "-shared", "-fPIC", "-o", str(shim), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    r = subprocess.run([sys.executable, "-c", FALLBACK_CHILD, os.path.dirname(__file__)], env=env,
                       capture_output=True, text=True, timeout=2 * TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["1"], r.stdout
