"""A long run can be interrupted: Ctrl-C (SIGINT) during a call from Python's main thread cancels the
native run at its next step or loop iteration and raises KeyboardInterrupt; the model stays usable.
C programs cancel a context's run from another thread with ``<name>_cancel`` (status 6).

The runs are a Loop of 10^15 iterations (hours of work); each check runs in a child process with a
timeout, so a regression fails instead of hanging the test run."""

from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from test_aot import build_for_valgrind, run_c_check

import onnxc
from onnxc.codegen import sigint

TIMEOUT = 120  # seconds a child may take in all (it needs a few)
HUGE = 10**15


def counting_loop(scan_output: bool = False):
    """v = v0 + M, one Loop iteration at a time (M: the trip count input); with ``scan_output`` the
    Loop also stacks v of each iteration (memory the run owns when it is cancelled)."""
    one = h.make_tensor("one", T.FLOAT, [], [1.0])
    outs = [h.make_tensor_value_info("v_out", T.FLOAT, [4])]
    nodes = [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Add", ["v", "one"], ["v_out"])]
    if scan_output:
        nodes.append(h.make_node("Identity", ["v"], ["s_out"]))
        outs.append(h.make_tensor_value_info("s_out", T.FLOAT, [4]))
    body = h.make_graph(nodes, "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                         h.make_tensor_value_info("v", T.FLOAT, [4])],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), *outs], [one])
    loop_outs = ["v", "s"] if scan_output else ["v"]
    g = h.make_graph([h.make_node("Loop", ["M", "", "v0"], loop_outs, body=body)], "g",
                     [h.make_tensor_value_info("M", T.INT64, []), h.make_tensor_value_info("v0", T.FLOAT, [4])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in loop_outs])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


CHILD = textwrap.dedent("""
    import signal, sys
    import numpy as np
    import onnx
    import onnxc

    form, path = sys.argv[1], sys.argv[2]
    model = onnxc.load(path) if form == "aot" else onnxc.compile(onnx.load(path))
    v0 = np.zeros(4, np.float32)

    def call(m):
        if form in ("call", "aot"):
            return model(np.array(m, np.int64), v0)
        if form == "run":
            return model.run({"M": np.array(m, np.int64), "v0": v0})["v"]
        return model.run({"M": np.int64(m), "v0": v0})["v"]  # a numpy scalar: the general path

    assert np.array_equal(call(3), np.full(4, 3, np.float32))
    try:  # a SIGINT while no run is going on does not cancel the next run
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass
    assert np.array_equal(call(4), np.full(4, 4, np.float32))
    print("ready", flush=True)
    try:
        call(HUGE)
    except KeyboardInterrupt as e:
        print("interrupted:", e, flush=True)
    else:
        sys.exit("the huge loop returned")
    assert np.array_equal(call(5), np.full(4, 5, np.float32))
    print("usable", flush=True)
""").replace("HUGE", str(HUGE))


def interrupt_child(args: list[str], wait: float = 1.0) -> str:
    """Start ``python -c CHILD args``, send it SIGINT ``wait`` seconds after it prints "ready" and
    return its output; fails when it does not exit 0 within TIMEOUT."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        first = ""
        while not first and time.monotonic() < deadline and p.poll() is None:
            if select.select([p.stdout], [], [], 1.0)[0]:
                first = p.stdout.readline()
        assert first == "ready\n", f"the child did not get ready: {first!r} {p.poll()} {p.stderr.read()}"
        time.sleep(wait)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"the child did not stop after SIGINT: {out} {err}")
    assert p.returncode == 0, out + err
    return out


@pytest.mark.parametrize("form", ["call", "run", "general", "aot"])
def test_sigint_cancels_a_huge_loop_and_the_model_stays_usable(form, tmp_path):
    path = tmp_path / "loop.onnx"
    import onnx

    onnx.save(counting_loop(), path)
    if form == "aot":
        path = onnxc.build(str(path), tmp_path / "art", name="lp")
    lines = interrupt_child([form, str(path)]).splitlines()
    assert len(lines) == 2 and lines[0].startswith("interrupted:") and lines[1] == "usable", lines


def cancel_message(model: onnxc.CompiledModel, make_inputs, size: int, monkeypatch) -> str:
    """The message of the KeyboardInterrupt of a run of ``model`` on ``make_inputs(size)`` cancelled
    50 ms after it started (the counter moved by a thread, as the SIGINT hook does); the size grows
    until the run takes longer than that. The run goes through the general path, from this thread."""
    counter = sigint._ffi.new("unsigned int[1]")
    monkeypatch.setattr(sigint, "cancel_ptr", lambda: counter)
    for _ in range(6):
        arrays = make_inputs(size)
        timer = threading.Timer(0.05, lambda: counter.__setitem__(0, counter[0] + 1))
        timer.start()
        try:
            model._native.run(arrays)
        except KeyboardInterrupt as e:
            return str(e)
        finally:
            timer.join()
        size *= 4
    pytest.fail("the runs were never cancelled")


def scan_model():
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]), h.make_node("Identity", ["s2"], ["y"])], "body",
                        [h.make_tensor_value_info("s", T.FLOAT, []), h.make_tensor_value_info("x", T.FLOAT, [])],
                        [h.make_tensor_value_info("s2", T.FLOAT, []), h.make_tensor_value_info("y", T.FLOAT, [])])
    g = h.make_graph([h.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1, name="scan")],
                     "g", [h.make_tensor_value_info("s0", T.FLOAT, []), h.make_tensor_value_info("xs", T.FLOAT, ["T"])],
                     [h.make_tensor_value_info("s", T.FLOAT, []), h.make_tensor_value_info("ys", T.FLOAT, ["T"])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_a_scan_stops_at_an_iteration_and_stays_usable(monkeypatch):
    m = onnxc.compile(scan_model())
    msg = cancel_message(m, lambda n: [np.zeros((), np.float32), np.ones(n, np.float32)], 1 << 20, monkeypatch)
    assert re.fullmatch(r"run cancelled in Scan 'scan' \(outputs 's', 'ys'\) at iteration \d+", msg), msg
    s, ys = m(np.zeros((), np.float32), np.arange(4, dtype=np.float32))
    assert s == 6 and ys.tolist() == [0, 1, 3, 6]


def test_a_chain_of_steps_stops_between_two_steps(monkeypatch):
    """MatMul after MatMul: the run function polls before each step."""
    w = h.make_tensor("w", T.FLOAT, [256, 256], np.eye(256, dtype=np.float32).ravel())
    nodes = [h.make_node("MatMul", [f"x{i}", "w"], [f"x{i + 1}"], name=f"mm{i}") for i in range(48)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x0", T.FLOAT, ["N", 256])],
                     [h.make_tensor_value_info("x48", T.FLOAT, ["N", 256])], [w])
    m = onnxc.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), threads=1)
    msg = cancel_message(m, lambda n: [np.ones((n, 256), np.float32)], 256, monkeypatch)
    assert re.fullmatch(r"run cancelled before MatMul 'mm\d+' \(outputs 'x\d+'\)", msg), msg
    x = np.random.default_rng(0).random((3, 256), dtype=np.float32)
    np.testing.assert_array_equal(m(x), x)


CANCEL_CHECK = r"""
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "lc.h"

static lc_ctx *ctx;
static int64_t trips;
static float v0[4];
static onnxc_tensor in[2], out[2];
static int status;

static int done;

static void *run(void *arg) {
    (void)arg;
    status = lc_run(ctx, in, out);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void) {
    alarm(600); /* a run that never stops fails the test instead of hanging it */
    char err[256];
    if (lc_create(&ctx, NULL, 2, err, sizeof err)) { printf("create: %s\n", err); return 1; }
    in[0].data = &trips; in[0].rank = 0; in[0].dtype = 7;
    in[1].data = v0; in[1].rank = 1; in[1].dims[0] = 4; in[1].dtype = 1;
    trips = HUGE;
    pthread_t t;
    pthread_create(&t, NULL, run, NULL);
    struct timespec d = {0, 200000000};
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) { /* (a cancel before the run started does not count) */
        nanosleep(&d, NULL);
        lc_cancel(ctx);
    }
    pthread_join(t, NULL);
    printf("status %d: %s\n", status, lc_last_error(ctx));
    trips = 3;
    if (lc_run(ctx, in, out)) { printf("run: %s\n", lc_last_error(ctx)); return 1; }
    const float *v = (const float *)out[0].data, *s = (const float *)out[1].data;
    printf("v %g %g, s dims %lld %lld, s %g %g %g\n", v[0], v[3], (long long)out[1].dims[0],
           (long long)out[1].dims[1], s[0], s[4], s[8]);
    lc_free(out[0].data);
    lc_free(out[1].data);
    lc_cancel(NULL);
    lc_destroy(ctx);
    return 0;
}
""".replace("HUGE", f"{HUGE}LL")


def test_c_api_cancels_a_run_from_another_thread_without_leaks(tmp_path):
    """lc_cancel from the main thread stops lc_run in a worker thread with status 6 and its message,
    frees what the run held, a Loop's stacked scan output included (valgrind, when installed: no
    leak); the context then runs normally."""
    import onnx

    onnx.save(counting_loop(scan_output=True), tmp_path / "lc.onnx")
    out = build_for_valgrind(tmp_path / "lc.onnx", tmp_path / "lc", "lc")
    header = (out / "lc.h").read_text()
    assert "lc_cancel(lc_ctx *ctx)" in header and "6: cancelled" in header
    lines = run_c_check(CANCEL_CHECK, out, "lc", tmp_path)
    assert lines[0].startswith("status 6: run cancelled"), lines
    assert lines[1] == "v 3 3, s dims 3 4, s 0 1 2", lines
