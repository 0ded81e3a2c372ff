"""Run-time options of a compiled model (issue #19): ``run(feeds, out={...})`` writes outputs into the
caller's arrays (in place where the library sizes an output from the input shapes, else copied after the
run), and ``CompiledModel.threads`` changes the thread count without a recompile. Kernels laid out at
compile time for one count (parallel loops, depthwise-pointwise bands, GEMM) are checked against
onnxruntime at other counts."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.fastpath import FastPath
from onnxc.ir import InputError

RNG = np.random.default_rng(19)
C, M, H, W = 16, 24, 40, 64
OUTS = ["conv", "act", "mm", "am", "nz"]


def _model():
    """x [N, 16, 40, 64] -> conv: depthwise 3x3 + Relu + pointwise 1x1 (a DepthwisePointwise pair);
    act: x * Sigmoid(x) + 1 (an elementwise chain, parallel when large); mm: MatMul by a [64, 48] weight;
    am: ArgMax over channels (int64); nz: NonZero(x > 2.5), whose shape is known only after the run."""
    inits = [numpy_helper.from_array((RNG.standard_normal((C, 1, 3, 3)) * 0.3).astype(np.float32), "wd"),
             numpy_helper.from_array((RNG.standard_normal((M, C, 1, 1)) * 0.2).astype(np.float32), "wp"),
             numpy_helper.from_array(RNG.standard_normal(M).astype(np.float32), "bp"),
             numpy_helper.from_array((RNG.standard_normal((W, 48)) * 0.1).astype(np.float32), "wm"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(2.5, np.float32), "cut")]
    nodes = [helper.make_node("Conv", ["x", "wd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=C),
             helper.make_node("Relu", ["d"], ["da"]),
             helper.make_node("Conv", ["da", "wp", "bp"], ["conv"], kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["xs"]),
             helper.make_node("Add", ["xs", "one"], ["act"]),
             helper.make_node("MatMul", ["x", "wm"], ["mm"]),
             helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
             helper.make_node("Greater", ["x", "cut"], ["g"]), helper.make_node("NonZero", ["g"], ["nz"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, H, W])
    outs = [helper.make_tensor_value_info(n, TensorProto.INT64 if n in ("am", "nz") else TensorProto.FLOAT, None)
            for n in OUTS]
    return helper.make_model(helper.make_graph(nodes, "g", [x], outs, inits), opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def setup():
    m = _model()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, sess, onnxc.compile(m, threads=2)


def _x(n: int) -> np.ndarray:
    return RNG.standard_normal((n, C, H, W)).astype(np.float32)


def _check(got: dict, want: list) -> None:
    for name, w in zip(OUTS, want):
        if w.dtype == np.int64:
            np.testing.assert_array_equal(got[name], w, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4, err_msg=name)


def test_thread_count_changes_without_a_recompile(setup):
    m, sess, cm = setup
    src = cm.c_source
    assert "depthwise-pointwise" in src and "onnxc_pf_" in src  # bands and parallel loops laid out for 2 threads
    feeds = [{"x": _x(7)}, {"x": _x(1)}, {"x": _x(3)}]  # 7x16x40x64: above the parallel threshold
    want = [sess.run(None, f) for f in feeds]
    assert cm.threads == 2
    try:
        for t in (1, 3, 5, 2):
            cm.threads = t
            assert cm.threads == t and cm._native.threads == t
            for f, w in zip(feeds, want):
                _check(cm.run(f), w)  # the generated dict path
                _check(dict(zip(OUTS, cm(f["x"]))), w)  # the positional path
                _check(cm.run(f, out={"conv": np.empty_like(w[0])}), w)  # run_into with the caller's buffer
    finally:
        cm.threads = 2


def test_threads_reach_every_threads_call_state(setup):
    """A thread that ran before the change runs with the new count: its per-thread argument struct was
    updated in place; a pickled model keeps the count."""
    _, sess, cm = setup
    f = {"x": _x(1)}
    ran = []

    def worker(go: threading.Event, done: threading.Event):
        ran.append(cm.run(f))
        go.wait()
        ran.append(cm.run(f))
        done.set()

    go, done = threading.Event(), threading.Event()
    th = threading.Thread(target=worker, args=(go, done))
    th.start()
    try:
        while not ran:
            th.join(0.01)
        cm.threads = 3
        assert cm._fast._args_made and all(a.threads == 3 for a in cm._fast._args_made)
        go.set()
        th.join()
        _check(ran[1], sess.run(None, f))
        assert pickle.loads(pickle.dumps(cm)).threads == 3
    finally:
        go.set()
        cm.threads = 2


def test_serial_build_runs_on_more_threads(setup):
    m, sess, _ = setup
    cm = onnxc.compile(m, threads=1)
    assert "onnxc_pf_" not in cm.c_source  # laid out for one thread: no parallel loops
    f = {"x": _x(7)}
    for t in (3, 1):
        cm.threads = t
        _check(cm.run(f), sess.run(None, f))


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_threads_validated(setup, bad):
    with pytest.raises(InputError, match=r"threads: expected an integer >= 1, got"):
        setup[2].threads = bad
    assert setup[2].threads == 2


def test_out_in_place(setup, monkeypatch):
    """Outputs sized from the input shapes go straight into the caller's arrays (FastPath.call_into); the
    NonZero output, known only after the run, is copied; the returned dict holds the caller's arrays."""
    _, sess, cm = setup
    f = {"x": _x(2)}
    want = dict(zip(OUTS, sess.run(None, f)))
    seen = []
    orig = FastPath.call_into

    def spy(self, arrays, given, check):
        seen.append(sorted(given))
        return orig(self, arrays, given, check)

    monkeypatch.setattr(FastPath, "call_into", spy)
    out = {n: np.full_like(want[n], -7) for n in ("conv", "mm", "am", "nz")}
    got = cm.run(f, out=out)
    assert seen == [[0, 2, 3]]  # conv, mm, am in place; nz copied
    assert set(got) == set(OUTS) and all(got[n] is a for n, a in out.items())
    _check(got, [want[n] for n in OUTS])
    sub = cm.run(f, ["mm", "act"], out={"mm": out["mm"]})
    assert list(sub) == ["mm", "act"] and sub["mm"] is out["mm"]
    np.testing.assert_allclose(sub["act"], want["act"], rtol=1e-5)


def test_out_and_plain_runs_share_the_threads_descriptors(setup):
    """run(out=...) and plain runs, interleaved at different batch sizes on one thread, use the same
    per-thread descriptors: each run sees its own shapes and buffers."""
    _, sess, cm = setup
    for n in (3, 1, 2, 1):
        f = {"x": _x(n)}
        want = sess.run(None, f)
        _check(cm.run(f), want)
        out = {"conv": np.empty_like(want[0]), "am": np.empty_like(want[3])}
        got = cm.run(f, out=out)
        assert got["conv"] is out["conv"] and got["am"] is out["am"]
        _check(got, want)


def test_out_copied_when_it_overlaps_an_input_or_is_empty(setup):
    _, sess, cm = setup
    x = _x(1)
    want = sess.run(None, {"x": x.copy()})[OUTS.index("act")]
    got = cm.run({"x": x}, out={"act": x})  # in place over its own input: run first, then copied
    assert got["act"] is x
    np.testing.assert_allclose(x, want, rtol=1e-5)
    e = np.empty((0, M, H, W), np.float32)
    assert cm.run({"x": _x(0)}, out={"conv": e})["conv"] is e


@pytest.mark.parametrize("out, match", [
    ({"nope": np.zeros(1)}, r"out: unknown output\(s\) \['nope'\]; the model's outputs are \['conv'"),
    ({"conv": np.zeros((1, M, H, W))}, r"out\['conv'\]: expected dtype float32 \(the output's element type float\), "
                                       r"got float64"),
    ({"am": np.zeros((1, H, W), np.int32)}, r"out\['am'\]: expected dtype int64 .* got int32"),
    ({"conv": np.zeros((2, M, H, W), np.float32)}, r"out\['conv'\]: expected shape \[1, 24, 40, 64\] \(the shape "
                                                   r"this call produces\), got \[2, 24, 40, 64\]"),
    ({"nz": np.zeros((4, 10**6), np.int64)}, r"out\['nz'\]: expected shape \[4, \d+\] .* got \[4, 1000000\]"),
    ({"conv": np.zeros((1, M, W, H), np.float32).transpose(0, 1, 3, 2)},
     r"out\['conv'\]: expected a C-contiguous array, got one with strides"),
    ({"mm": [[0.0]]}, r"out\['mm'\]: expected a numpy array, got list"),
    ("conv", r"out: expected a dict of output name -> numpy array, got str"),
])
def test_out_errors(setup, out, match):
    with pytest.raises(InputError, match=match):
        setup[2].run({"x": _x(1)}, out=out)


def test_out_read_only_or_shared(setup):
    cm = setup[2]
    ro = np.zeros((1, M, H, W), np.float32)
    ro.flags.writeable = False
    with pytest.raises(InputError, match=r"out\['conv'\]: the array is read-only"):
        cm.run({"x": _x(1)}, out={"conv": ro})
    big = np.zeros((1, M, H, W), np.float32)
    with pytest.raises(InputError, match=r"out\['act'\] and out\['conv'\] share memory"):
        cm.run({"x": _x(1)}, out={"conv": big, "act": big[:, :C]})


def test_out_with_a_wrong_static_shape_then_a_right_one():
    """A static input of the wrong shape through run(out=...) is refused with the shape error (the general path),
    and leaves the thread's descriptors as they were for the next runs."""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])
    cm = onnxc.compile(m, threads=1)
    x = RNG.standard_normal((1, 8, 7, 7)).astype(np.float32)
    y = np.empty_like(x)
    assert cm.run({"x": x}, out={"y": y})["y"] is y
    with pytest.raises(InputError, match="7"):
        cm.run({"x": np.zeros((1, 8, 7, 6), np.float32)}, out={"y": y})
    np.testing.assert_array_equal(cm.run({"x": x}, out={"y": y})["y"], np.maximum(x, 0))
    np.testing.assert_array_equal(cm.run({"x": x})["y"], np.maximum(x, 0))
