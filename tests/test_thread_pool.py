"""The runtime's own thread pool (runtime_c/onnxc_pool.h) and the kernels that run on it.

- from C (tests/pool_check.c): every chunk index runs once, at most one participant per slot, nested
  and concurrent calls, a fork child, workers started on demand, crowding detected when the workers
  cannot get a core (then generated OpenMP loops run on one thread: onnxc_omp_threads); per-thread
  scratch (onnxc_alloc_apart, onnxc_slot_len) a line pair apart (ONNXC_LINE_PAIR);
- from models: GEMM stripes (both directions, shared packing), the generic (double) GEMM, convolution
  paths (rows, im2col, Winograd/implicit) give the same floats at 1, 2 and 3 threads, also while another
  process spins on a core (chunks then run on whichever thread is free), and agree with a reference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir
from onnxc.codegen.runtime_lib import sources_for

CHECK_C = Path(__file__).with_name("pool_check.c")


@pytest.fixture(scope="module")
def pool_check(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("pool") / "pool_check"
    srcs = [str(CHECK_C), *map(str, sources_for(CHECK_C.read_text()))]
    assert any(s.endswith("onnxc_pool.c") for s in srcs)
    subprocess.run([default_cc(), "-std=gnu11", "-O2", "-pthread", "-I", str(runtime_dir()), *srcs, "-o", str(exe),
                    "-lm"], check=True, capture_output=True, text=True)
    return exe


@pytest.mark.parametrize("mode", ["cover", "nested", "concurrent", "fork", "workers", "crowded", "apart"])
def test_pool_from_c(pool_check, mode):
    r = subprocess.run([str(pool_check), mode], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


@pytest.fixture
def busy():
    """Another process spinning on a core while the test runs."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield p
    p.kill()
    p.wait()


def _model(nodes, inputs, inits=()):
    g = helper.make_graph(nodes, "t", inputs, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _matmul(m, k, n, dt=np.float32, sym=False, const_b=False):
    rng = np.random.default_rng(m * 1000 + n)
    a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    ins = [helper.make_tensor_value_info("a", t, ["M", k] if sym else [m, k])]
    inits = []
    if const_b:
        inits.append(onnx.numpy_helper.from_array(b, "b"))
    else:
        ins.append(helper.make_tensor_value_info("b", t, [k, n]))
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], ins, inits)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    return model, feeds, (a.astype(np.float64) @ b.astype(np.float64))


def _conv(c, m, hw, k, **attrs):
    rng = np.random.default_rng(c * 100 + m)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, hw, hw])]
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(bias, "bias")]
    conv = helper.make_node("Conv", ["x", "w", "bias"], ["c"], **attrs)
    model = _model([conv, helper.make_node("Relu", ["c"], ["y"])], ins, inits)
    return model, {"x": x}, ReferenceEvaluator(model).run(None, {"x": x})[0]


CASES = {
    "stripes along N, shared A": lambda: _matmul(67, 200, 300, sym=True),
    "stripes along M, shared B": lambda: _matmul(301, 64, 40),
    "packed weights": lambda: _matmul(97, 256, 130, const_b=True),
    "double GEMM": lambda: _matmul(150, 130, 170, dt=np.float64),
    "conv 3x3": lambda: _conv(32, 64, 29, 3, pads=[1, 1, 1, 1]),
    "conv 3x3 Winograd": lambda: _conv(64, 80, 30, 3, pads=[1, 1, 1, 1]),
    "conv 3x3 few channels": lambda: _conv(8, 24, 41, 3, pads=[1, 1, 1, 1]),
    "conv stride 2": lambda: _conv(16, 40, 37, 3, pads=[1, 1, 1, 1], strides=[2, 2]),
    "conv 5x5 stride 3": lambda: _conv(12, 20, 50, 5, strides=[3, 3]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_same_floats_at_every_thread_count_on_a_busy_machine(case, busy, monkeypatch):
    model, feeds, want = CASES[case]()
    if "Winograd" in case:  # one Conv cannot afford the 4x filter within the weight budget: lift it
        monkeypatch.setenv("ONNXC_WEIGHT_GROWTH", "inf")
        assert "onnxc_wino_conv(" in onnxc.compile(model, threads=2).c_source
    got = {t: onnxc.compile(model, threads=t).run(feeds)["y"] for t in (1, 2, 3)}
    tol = 1e-10 if want.dtype == np.float64 and got[1].dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got[1], want, rtol=tol, atol=tol)
    for _ in range(5):  # chunks land on different threads from run to run
        for t in (2, 3):
            np.testing.assert_array_equal(onnxc.compile(model, threads=t).run(feeds)["y"], got[1])
