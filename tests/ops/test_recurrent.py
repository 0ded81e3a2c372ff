"""RNN, GRU and LSTM against the numpy reference in rnn_reference.py (which covers the attributes
onnx.reference ignores and is itself checked against onnxruntime here), plus onnx.reference on the
plain variants."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.runtime_lib import sources_for
from onnxc.ir import OnnxcError, ShapeError

from .rnn_reference import GATES, run
from .util import check_node, node_model

rng = np.random.default_rng(11)
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def _inputs(op: str, T: int, N: int, I: int, H: int, nd: int = 1, layout: int = 0, dt=np.float32,
            lens=None, bias=True, h0=False, c0=False, P=False) -> dict:
    G = GATES[op]
    st = (N, nd, H) if layout else (nd, N, H)
    f = lambda *s, scale=1.0: (rng.standard_normal(s) * scale).astype(dt)  # noqa: E731
    ins = {"X": f(*((N, T, I) if layout else (T, N, I))), "W": f(nd, G * H, I, scale=0.5),
           "R": f(nd, G * H, H, scale=0.5), "B": f(nd, 2 * G * H) if bias else None,
           "sequence_lens": None if lens is None else np.array(lens, np.int32),
           "initial_h": f(*st) if h0 else None}
    if op == "LSTM":
        ins["initial_c"] = f(*st) if c0 else None
        ins["P"] = f(nd, 3 * H) if P else None
    while ins[list(ins)[-1]] is None:  # trailing omitted inputs are simply left out
        ins.pop(list(ins)[-1])
    return ins


def _ref_kwargs(attrs: dict) -> dict:
    ren = {"activations": "acts", "activation_alpha": "alphas", "activation_beta": "betas"}
    return {ren.get(k, k): v for k, v in attrs.items()}


def check_rnn(op: str, ins: dict, input_shapes=None, rtol=1e-4, atol=1e-5, opset=22, ort_too=False, threads=1,
              flags=None, **attrs):
    n_out = 3 if op == "LSTM" else 2
    H = ins["R"].shape[-1]
    m = node_model(op, ins, n_out, opset, input_shapes=input_shapes, hidden_size=H, **attrs)
    feeds = {k: v for k, v in ins.items() if v is not None}
    got = onnxc.compile(m, threads=threads, flags=flags).run(feeds)
    args = [ins.get(n) for n in NAMES]
    want = run(op, *args, hidden_size=H, **_ref_kwargs(attrs))
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
    if ort_too:  # the reference's reading of the attributes is onnxruntime's
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        for o in m.graph.output:
            o.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(ins["X"].dtype)
        m.opset_import[0].version = 14
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        for w, o in zip(want, sess.run(None, feeds)):
            np.testing.assert_allclose(o, w, rtol=rtol, atol=atol)
    return got


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_against_onnx_reference(op, direction):
    nd = 2 if direction == "bidirectional" else 1
    ins = _inputs(op, 5, 3, 4, 6, nd, h0=True)
    check_node(op, ins, n_outputs=2, opset=22, rtol=1e-4, atol=1e-5, hidden_size=6, direction=direction)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_and_states(op, direction):
    nd = 2 if direction == "bidirectional" else 1
    ins = _inputs(op, 6, 4, 3, 5, nd, lens=[6, 0, 2, 5], h0=True, c0=True, P=True)
    check_rnn(op, ins, direction=direction, ort_too=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batchwise_layout_with_lens(op, direction):
    nd = 2 if direction == "bidirectional" else 1
    ins = _inputs(op, 5, 3, 4, 7, nd, layout=1, lens=[1, 5, 3], h0=True, c0=True)
    check_rnn(op, ins, direction=direction, layout=1)


@pytest.mark.parametrize("op,acts,alphas,betas", [
    ("RNN", ["Relu"], None, None),
    ("RNN", ["Affine", "ScaledTanh"], [0.5, 0.8], [0.1, 1.3]),
    ("RNN", ["LeakyRelu", "HardSigmoid"], [0.3, 0.4], [0.6]),
    ("GRU", ["HardSigmoid", "Softsign", "Sigmoid", "Elu"], [0.3, 0.4], [0.6]),
    ("GRU", ["Sigmoid", "ThresholdedRelu"], [0.2], None),
    ("LSTM", ["HardSigmoid", "ScaledTanh", "Softplus"], [0.3, 0.4], [0.6, 0.5]),
    ("LSTM", ["Sigmoid", "LeakyRelu", "Elu", "Sigmoid", "Relu", "Softsign"], [0.1], None),
])
def test_activations(op, acts, alphas, betas):
    nd = len(acts) // {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    attrs = {"activations": acts, "direction": "bidirectional" if nd == 2 else "forward"}
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    check_rnn(op, _inputs(op, 4, 2, 3, 5, nd, h0=True), ort_too=True, **attrs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    check_rnn(op, _inputs(op, 5, 2, 3, 4, 2, h0=True), clip=0.6, direction="bidirectional", ort_too=True)


def test_gru_linear_before_reset_and_lstm_input_forget():
    check_rnn("GRU", _inputs("GRU", 5, 3, 4, 6, 2, lens=[5, 2, 4], h0=True), linear_before_reset=1,
              direction="bidirectional", ort_too=True)
    check_rnn("LSTM", _inputs("LSTM", 5, 3, 4, 6, 1, h0=True, c0=True, P=True), input_forget=1, ort_too=True)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_double_and_tall_batch(op):
    """float64, batches that take every register tile and more than one row block of the input
    projection (over 128 rows), hidden sizes that leave padded panel columns, and two threads."""
    check_rnn(op, _inputs(op, 4, 37, 5, 13, 2, dt=np.float64, lens=list(range(5)) * 7 + [1, 4], h0=True),
              rtol=1e-10, atol=1e-12, direction="bidirectional")
    check_rnn(op, _inputs(op, 4, 43, 9, 33, 1, h0=True), linear_before_reset=1 if op == "GRU" else 0)
    big = {"rtol": 1e-3, "atol": 2e-4, "threads": 2}  # float32 sums of 70 to 130 terms
    check_rnn(op, _inputs(op, 6, 45, 70, 130, 2, h0=True), direction="bidirectional", **big)
    check_rnn(op, _inputs(op, 3, 3, 70, 130, 1, h0=True), **big)


# The panel product of runtime_c/onnxc_recurrent.h against a naive loop: every tile shape, padded
# panels, row blocks, one and two threads (split by panels and by rows).
MUL_TEST_C = r"""
#include "onnxc_recurrent.h"
#define CASE(T, S, P, tol) \
static int check_##S(int th, int64_t M, int64_t N, int64_t K) { \
    const int64_t np = (N + P - 1) / P, lda = K + 3, ldc = np * P + 5; \
    T *a = malloc(sizeof(T) * (size_t)(M * lda + 1)), *bp = malloc(sizeof(T) * (size_t)(np * P * K + 1)); \
    T *c = malloc(sizeof(T) * (size_t)(M * ldc + 1)); \
    for (int64_t i = 0; i < M * lda; i++) a[i] = (T)((i * 37 % 23) - 11) / 7; \
    for (int64_t p = 0; p < np; p++) for (int64_t k = 0; k < K; k++) for (int64_t j = 0; j < P; j++) \
        bp[(p * K + k) * P + j] = p * P + j < N ? (T)(((p * P + j) * 53 + k * 7) % 19 - 9) / 5 : 0; \
    for (int64_t i = 0; i < M * ldc; i++) c[i] = NAN; \
    onnxc_rnn_mul_##S(th, M, np, K, a, lda, bp, c, ldc); \
    int bad = 0; \
    for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < np * P; j++) { \
        double want = 0; \
        for (int64_t k = 0; k < K; k++) want += (double)a[i * lda + k] * bp[((j / P) * K + k) * P + j % P]; \
        if (!(fabs(c[i * ldc + j] - want) <= tol * (1 + fabs(want)))) bad = 1; \
    } \
    free(a); free(bp); free(c); \
    if (bad) printf("FAIL " #S " th=%d M=%ld N=%ld K=%ld\n", th, (long)M, (long)N, (long)K); \
    return bad; \
}
CASE(float, s, ONNXC_RNN_P_S, 1e-4)
CASE(double, d, ONNXC_RNN_P_D, 1e-12)
int main(void) {
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 130, 300};
    static const int64_t Ns[] = {1, 31, 32, 33, 96, 130, 600};
    static const int64_t Ks[] = {0, 1, 5, 64, 300};
    int bad = 0;
    for (int th = 1; th <= 2; th++)
        for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
            for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++) {
                    if (Ms[m] * Ns[n] * Ks[k] > 4000000) continue;
                    bad |= check_s(th, Ms[m], Ns[n], Ks[k]) | check_d(th, Ms[m], Ns[n], Ks[k]);
                }
    puts(bad ? "FAILED" : "OK");
    return bad;
}
"""


def test_panel_product_against_naive(tmp_path):
    src = tmp_path / "rnn_mul_test.c"
    src.write_text(MUL_TEST_C)
    exe = tmp_path / "rnn_mul_test"
    cc = default_cc()
    srcs = [str(src), *map(str, sources_for(MUL_TEST_C))]
    cmd = [cc, "-std=gnu11", "-O2", "-march=native", "-I", str(runtime_dir()), *srcs, "-o", str(exe), "-lm"]
    cmd[1:1] = thread_flags(cc)
    subprocess.run(cmd, check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout


def test_constant_weights_are_packed_at_compile_time():
    """The expansion's packing of constant W and R folds away: the compiled model holds one recurrent
    node and no Transpose/Pad kernels."""
    from onnxc.frontend import load_model
    from onnxc.passes.pipeline import optimize

    ins = _inputs("GRU", 3, 2, 5, 7, 2, h0=True)
    m = node_model("GRU", ins, 2, 22, const_inputs=("W", "R", "B"), hidden_size=7, direction="bidirectional")
    ir = optimize(load_model(m.SerializeToString()))
    assert [(n.domain, n.op_type) for n in ir.graph.nodes] == [("onnxc", "GRU")]
    assert ir.graph.nodes[0].inputs[2].const.shape == (2, 2, 7, 32)  # z,r panel then h panel


@pytest.mark.parametrize("op", ["RNN", "LSTM"])
def test_float16(op):
    ins = _inputs(op, 4, 2, 3, 5, 1, dt=np.float16, h0=True)
    check_rnn(op, ins, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("layout", [0, 1])
def test_symbolic_seq_and_batch(layout):
    op = "LSTM"
    x_shape = ["N", "T", 4] if layout else ["T", "N", 4]
    st = ["N", 1, 6] if layout else [1, "N", 6]
    m = node_model(op, _inputs(op, 1, 1, 4, 6, 1, layout=layout, lens=[1], h0=True), 3, 22,
                   input_shapes={"X": x_shape, "sequence_lens": ["N"], "initial_h": st},
                   const_inputs=("W", "R", "B"), hidden_size=6, layout=layout)
    compiled = onnxc.compile(m)
    for T, N in [(5, 3), (2, 7), (0, 2)]:
        ins = _inputs(op, T, N, 4, 6, 1, layout=layout, lens=list(rng.integers(0, T + 1, N)), h0=True)
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
        ins.update(inits)
        got = compiled.run({k: v for k, v in ins.items() if k not in inits})
        want = run(op, *[ins.get(n) for n in NAMES], layout=layout)
        for i, w in enumerate(want):
            np.testing.assert_allclose(got[f"y{i}"], w, rtol=1e-4, atol=1e-5)


def test_absent_outputs_and_old_opset():
    """Only Y_h requested (Y absent), and GRU-3 / LSTM-7 nodes."""
    ins = _inputs("GRU", 4, 2, 3, 5, h0=True)
    node = helper.make_node("GRU", ["X", "W", "R", "B", "", "initial_h"], ["", "Y_h"], hidden_size=5)
    vi = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in ins.items() if v is not None]
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("Y_h", onnx.TensorProto.FLOAT, None)])
    for opset in (3, 7, 14):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        got = onnxc.compile(m).run({k: v for k, v in ins.items() if v is not None})
        np.testing.assert_allclose(got["Y_h"], run("GRU", *[ins.get(n) for n in NAMES])[1], rtol=1e-4, atol=1e-5)
    check_rnn("LSTM", _inputs("LSTM", 3, 2, 3, 4, h0=True), opset=7)


def test_invalid_models_and_data():
    ins = _inputs("RNN", 4, 2, 3, 5, lens=[4, 9])
    with pytest.raises(OnnxcError, match="sequence_lens"):
        check_rnn("RNN", ins)
    with pytest.raises(ShapeError, match="direction"):
        onnxc.compile(node_model("RNN", _inputs("RNN", 2, 1, 3, 5), 2, 22, hidden_size=5, direction="sideways"))
    with pytest.raises(ShapeError, match="activations"):
        onnxc.compile(node_model("GRU", _inputs("GRU", 2, 1, 3, 5), 2, 22, hidden_size=5, activations=["Tanh"]))
    with pytest.raises(ShapeError, match="must have shape"):
        onnxc.compile(node_model("LSTM", _inputs("LSTM", 2, 1, 3, 5), 2, 22, hidden_size=4))


# ---- the time steps on several threads and the vector LSTM gate math (onnxc_lstm_gates_s)

# the threaded time steps at the small sizes of these tests (by default only for large steps)
THREADED_STEPS = ("-O3", "-march=native", "-DONNXC_RNN_STEP_PAR_MIN=0")

@pytest.mark.parametrize("op", ["RNN", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_steps_on_two_threads(op, direction):
    """Hidden sizes that split into whole panels per thread (64, 96: uneven), with sequence lengths
    that end sequences early, initial states, peepholes and every output."""
    nd = 2 if direction == "bidirectional" else 1
    for T, N, I, H in ((7, 1, 10, 64), (5, 3, 6, 96)):
        extra = {"c0": True, "P": True} if op == "LSTM" else {}
        ins = _inputs(op, T, N, I, H, nd, lens=[T, 0, 2][:N], h0=True, **extra)
        got = check_rnn(op, ins, rtol=1e-3, atol=1e-4, threads=2, direction=direction,  # float32, 96-term sums
                        flags=THREADED_STEPS)
        assert np.isfinite(got["y0"]).all()
    # the benchmark shape (batch 1, hidden 128), weights scaled so that 32 steps of an RNN stay out of chaos;
    # the threaded path gives exactly the single-threaded result (same sums in the same order)
    ins = _inputs(op, 32, 1, 64, 128, 1)
    ins["W"] *= 0.2
    ins["R"] *= 0.2
    two = check_rnn(op, ins, threads=2, rtol=1e-4, atol=1e-5, flags=THREADED_STEPS)
    one = check_rnn(op, ins, threads=1, rtol=1e-4, atol=1e-5)
    for k in one:
        np.testing.assert_array_equal(one[k], two[k])


def test_steps_continue_on_one_thread_after_a_slow_barrier():
    """With ONNXC_RNN_SPIN=0 every barrier counts as slow: thread 0 finishes the sequence alone after
    the first step; the results are the same as on one thread."""
    ins = _inputs("LSTM", 6, 2, 5, 64, 1, lens=[6, 3], h0=True, c0=True)
    m = node_model("LSTM", ins, 3, 22, hidden_size=64)
    feeds = {k: v for k, v in ins.items() if v is not None}
    slow = onnxc.compile(m, threads=2, flags=(*THREADED_STEPS, "-DONNXC_RNN_SPIN=0")).run(feeds)
    one = onnxc.compile(m, threads=1).run(feeds)
    for k in one:
        np.testing.assert_array_equal(slow[k], one[k])


@pytest.mark.parametrize("kw", [{}, {"clip": 0.7}, {"input_forget": 1}])
def test_lstm_vector_gates_variants(kw):
    """LSTM with the default activations takes the vector gate math: clip, input_forget, peepholes,
    hidden sizes that are not multiples of 16 (masked tails), and one and two threads."""
    for H, threads in ((20, 1), (128, 2), (33, 1)):
        check_rnn("LSTM", _inputs("LSTM", 4, 2, 5, H, 1, h0=True, c0=True, P=True), threads=threads,
                  flags=THREADED_STEPS, **kw)


def _one_step(X: np.ndarray, w: np.ndarray, b: np.ndarray) -> dict:
    """One LSTM step (initial states zero, R zero) with W = w (4H x I) and B = [b, 0]; constants folded."""
    H = w.shape[0] // 4
    ins = {"X": X, "W": w[None].astype(np.float32), "R": np.zeros((1, 4 * H, H), np.float32),
           "B": np.concatenate([b, np.zeros_like(b)])[None].astype(np.float32)}
    m = node_model("LSTM", ins, 3, 14, const_inputs=("W", "R", "B"), hidden_size=H)
    return onnxc.compile(m).run({"X": X})


def _assert_ulps(got: np.ndarray, want: np.ndarray, n: float) -> None:
    ulp = np.maximum(np.spacing(np.abs(want).astype(np.float32)).astype(np.float64), 1e-45)
    err = np.abs(got.astype(np.float64) - want) / ulp
    assert (err <= n).all(), f"max error {err.max():.2f} ulp"


def test_lstm_gates_accuracy_and_special_values():
    """sigmoid and tanh of the LSTM gate math against float64 over a dense sample of arguments (within
    3 ulp), and NaN / +-inf / saturation: one step with R = 0, c0 = 0, so c = i * tanh(x_c) and
    h = o * tanh(c); the arguments arrive through X (I = 1) with 16 hidden units per batch row."""
    xs = np.concatenate([np.linspace(-30, 30, 4001), np.linspace(-1, 1, 2001), np.linspace(-1e-3, 1e-3, 201),
                         [0.0, -0.0, 1e-30, -1e-30, 88.0, -104.0, 200.0, -200.0]]).astype(np.float32)
    N, H = xs.size, 16
    X = xs.reshape(1, N, 1)
    w, b = np.zeros((4 * H, 1)), np.zeros(4 * H)
    # tanh: i = o = sigmoid(+inf) = 1, x_c = x
    w[3 * H:], b[:2 * H] = 1.0, np.inf
    got = _one_step(X, w, b)
    c, h = got["y2"].reshape(N, H), got["y1"].reshape(N, H)
    _assert_ulps(c, np.tanh(xs.astype(np.float64))[:, None].repeat(H, 1), 3)
    _assert_ulps(h, np.tanh(c.astype(np.float64)), 3)
    # sigmoid: x_i = x, x_c = 20 (tanh = 1 exactly), o = 1: c = sigmoid(x)
    w[:] = 0
    w[:H], b[:] = 1.0, 0.0
    b[H:2 * H], b[3 * H:] = np.inf, 20.0
    c = _one_step(X, w, b)["y2"].reshape(N, H)
    _assert_ulps(c, (1 / (1 + np.exp(-xs.astype(np.float64))))[:, None].repeat(H, 1), 3)
    # NaN propagates, infinities saturate (through the bias, so that no 0 * inf enters the products)
    w, b = np.zeros((12, 1)), np.zeros(12)
    b[:3], b[3:6], b[9:] = [np.nan, np.inf, -np.inf], np.inf, 20.0
    c = _one_step(np.zeros((1, 1, 1), np.float32), w, b)["y2"].reshape(-1)
    assert np.isnan(c[0]) and c[1] == 1.0 and c[2] == 0.0


# the fused batch-1 LSTM step (onnxc_lstm_step_s): on two threads already at these small sizes, or disabled
FUSED_THREADED = ("-O3", "-march=native", "-DONNXC_LSTM_FUSED_PAR_MIN=0")
UNFUSED = ("-O3", "-march=native", "-DONNXC_LSTM_FUSE=0")


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_fused_batch1_step(direction, layout):
    """Batch 1 with H a multiple of 32 takes the fused step (product and gate math in one pass over R),
    on one thread and with the steps split between two: against the reference, with sequence lengths
    that end early or are empty, initial states, peepholes: the same bits on one and two threads, and
    the unfused path's up to the order of the sums (every other step sums R's rows backwards)."""
    nd = 2 if direction == "bidirectional" else 1
    for T, I, H, lens, kw in ((9, 7, 32, [9], {}), (6, 3, 64, [4], {"clip": 0.9}), (5, 16, 96, [0], {}),
                              (3, 5, 64, None, {"input_forget": 1})):
        ins = _inputs("LSTM", T, 1, I, H, nd, layout, lens=lens, h0=True, c0=True, P=True)
        runs = [check_rnn("LSTM", ins, rtol=1e-3, atol=1e-4, threads=t, flags=f, direction=direction,
                          layout=layout, **kw)
                for t, f in ((1, None), (2, FUSED_THREADED), (1, UNFUSED))]
        for k in runs[0]:
            np.testing.assert_array_equal(runs[0][k], runs[1][k])
            np.testing.assert_allclose(runs[0][k], runs[2][k], rtol=1e-5, atol=1e-6)


def test_lstm_fused_step_is_the_path_taken_and_symbolic_seq():
    """The generated C calls the fused step for a float LSTM with the default activations; a symbolic
    sequence length runs on it for several lengths, including 0 steps."""
    H = 64
    ins = _inputs("LSTM", 4, 1, 8, H, 1)
    m = node_model("LSTM", ins, 3, 22, input_shapes={"X": ["T", 1, 8]}, hidden_size=H)
    c = onnxc.compile(m, threads=1)
    assert "onnxc_lstm_step_s(0, H / PW, (int)(s & 1)" in c.c_source and "const int fused = ONNXC_LSTM_FUSE" in c.c_source
    for T in (1, 11):
        x = rng.standard_normal((T, 1, 8)).astype(np.float32)
        want = run("LSTM", x, ins["W"], ins["R"], ins["B"], hidden_size=H)
        got = c.run({"X": x, "W": ins["W"], "R": ins["R"], "B": ins["B"]})
        for i, w in enumerate(want):
            np.testing.assert_allclose(got[f"y{i}"], w, rtol=1e-4, atol=1e-5)


def test_lstm_fused_steps_continue_on_one_thread_after_a_slow_barrier():
    """The fused two-thread steps fall back to thread 0 alone like the unfused ones (every barrier slow
    with ONNXC_RNN_SPIN=0), with the same bits as one thread."""
    ins = _inputs("LSTM", 7, 1, 5, 64, 1, h0=True, c0=True, P=True)
    m = node_model("LSTM", ins, 3, 22, hidden_size=64)
    feeds = {k: v for k, v in ins.items() if v is not None}
    slow = onnxc.compile(m, threads=2, flags=(*FUSED_THREADED, "-DONNXC_RNN_SPIN=0")).run(feeds)
    one = onnxc.compile(m, threads=1).run(feeds)
    for k in one:
        np.testing.assert_array_equal(slow[k], one[k])


@pytest.mark.parametrize("op,H", [("GRU", 40), ("GRU", 96), ("LSTM", 40)])
def test_products_split_between_threads(op, H):
    """The input projection and step products split between two threads (forced at these sizes), by rows
    (few panels) or by panels (GRU, H = 96: nine panels), in dynamically handed-out chunks: the same bits
    as one thread."""
    ins = _inputs(op, 9, 3, 10, H, 1, lens=[9, 4, 0], h0=True)
    two = check_rnn(op, ins, threads=2, rtol=1e-3, atol=1e-4, flags=("-O3", "-march=native", "-DONNXC_RNN_PAR_MIN=0"))
    one = check_rnn(op, ins, threads=1, rtol=1e-3, atol=1e-4)
    for k in one:
        np.testing.assert_array_equal(one[k], two[k])


# ---- the threaded time steps on the runtime's pool (onnxc_rnn_steps)

# Every order in which the roles may start: on the pool, from inside another pool job (the roles then run
# one after the other on the caller: role 0 must take the others' steps and they must return at once), with
# roles that stall (role 0 takes their steps), from several threads at once (one gets the pool, the others
# run alone), and with ONNXC_RNN_SPIN=0 (every wait is long). Each step's every panel must run exactly
# once, after all panels of the step before.
STEPS_TEST_C = r"""
#include "onnxc_recurrent.h"
#include "onnxc_pool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#define S_MAX 64
#define NP_MAX 16
typedef struct {
    int64_t steps, np;
    int stall; /* microseconds a range that does not start at panel 0 sleeps on some steps */
    _Atomic int runs[S_MAX][NP_MAX];
    _Atomic int bad;
} job;
static void step(void *p, int64_t s, int64_t q0, int64_t q1) {
    job *j = (job *)p;
    if (q0 >= q1 || q0 < 0 || q1 > j->np) atomic_store(&j->bad, 1);
    if (s > 0)
        for (int64_t q = 0; q < j->np; q++)
            if (atomic_load(&j->runs[s - 1][q]) != 1) atomic_store(&j->bad, 1);
    if (j->stall && q0 > 0 && s % 7 == 3) {
        struct timespec ts = {0, j->stall * 1000L};
        nanosleep(&ts, NULL);
    }
    for (int64_t q = q0; q < q1; q++) atomic_fetch_add(&j->runs[s][q], 1);
}
static int run(int nt, int64_t steps, int64_t np, int stall) {
    job *j = calloc(1, sizeof(job));
    j->steps = steps, j->np = np, j->stall = stall;
    onnxc_rnn_steps(nt, steps, np, step, j);
    int bad = atomic_load(&j->bad);
    for (int64_t s = 0; s < steps; s++)
        for (int64_t q = 0; q < np; q++) bad |= atomic_load(&j->runs[s][q]) != 1;
    free(j);
    if (bad) printf("FAIL nt=%d steps=%ld np=%ld stall=%d\n", nt, (long)steps, (long)np, stall);
    return bad;
}
static _Atomic int failed;
static void nested(void *p, int64_t i, int slot) {
    (void)p, (void)slot;
    failed |= run(2 + (int)i % 3, 40, 7, 0);
}
static void *other(void *p) {
    (void)p;
    for (int k = 0; k < 20; k++) failed |= run(2, 30, 8, 0);
    return NULL;
}
int main(void) {
    int bad = 0;
    for (int nt = 1; nt <= 5; nt++)
        for (int rep = 0; rep < 30; rep++) bad |= run(nt, 1 + rep % S_MAX, 1 + (rep + nt) % NP_MAX, 0);
    onnxc_parallel(2, 6, nested, NULL); /* roles inside a pool job */
    pthread_t th;
    pthread_create(&th, NULL, other, NULL);
    for (int k = 0; k < 20; k++) bad |= run(2, 30, 8, 0);
    pthread_join(th, NULL);
    bad |= failed;
    /* last: a barrier that goes on alone notes a late thread, and a crowded pool runs the steps on one */
    for (int rep = 0; rep < 5; rep++) bad |= run(2, S_MAX, 8, 300) | run(3, S_MAX, 9, 200);
    puts(bad ? "FAILED" : "OK");
    return bad;
}
"""


@pytest.mark.parametrize("spin", [None, 0])
def test_threaded_steps_protocol(tmp_path, spin):
    src = tmp_path / "rnn_steps_test.c"
    src.write_text(STEPS_TEST_C)
    exe = tmp_path / "rnn_steps_test"
    srcs = [str(src), *map(str, sources_for(STEPS_TEST_C))]
    cmd = [default_cc(), "-std=gnu11", "-O2", "-pthread", "-I", str(runtime_dir()), *srcs, "-o", str(exe), "-lm"]
    if spin is not None:
        cmd.insert(1, f"-DONNXC_RNN_SPIN={spin}")
    subprocess.run(cmd, check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout


@pytest.mark.parametrize("op", ["LSTM", "RNN", "GRU"])
def test_pool_paths_match_one_thread_with_symbolic_dims(op):
    """At threads=2 the steps (LSTM, RNN: onnxc_rnn_steps), the products (onnxc_rnn_mul on the pool) and the two
    directions of a bidirectional node (par_for) run on the runtime's pool, with no OpenMP region: against the
    reference and bit for bit against the one-thread build, with a symbolic sequence length and batch."""
    flags = ("-O3", "-march=native", "-DONNXC_RNN_STEP_PAR_MIN=0", "-DONNXC_RNN_PAR_MIN=0")
    for direction, H in (("forward", 64), ("bidirectional", 96)):
        nd = 2 if direction == "bidirectional" else 1
        ins = _inputs(op, 6, 3, 40, H, nd, lens=[6, 2, 0], h0=True)
        shapes = {"X": ["T", "N", 40], "sequence_lens": ["N"], "initial_h": [nd, "N", H]}
        m = node_model(op, ins, 3 if op == "LSTM" else 2, 22, input_shapes=shapes, hidden_size=H, direction=direction)
        two, one = onnxc.compile(m, threads=2, flags=flags), onnxc.compile(m, threads=1, flags=flags)
        src = two.c_source
        assert "omp parallel" not in src and "onnxc_rnn_mul_s(" in src
        assert ("onnxc_rnn_steps(" in src) == (op != "GRU")
        assert ("onnxc_parallel(" in src) == (nd == 2)
        for T, lens in ((6, [6, 2, 0]), (9, [9]), (11, [3, 11]), (0, [0, 0])):
            N = len(lens)
            feeds = {"X": rng.standard_normal((T, N, 40)).astype(np.float32), "W": ins["W"], "R": ins["R"],
                     "B": ins["B"], "sequence_lens": np.array(lens, np.int32),
                     "initial_h": rng.standard_normal((nd, N, H)).astype(np.float32)}
            a, b = two.run(feeds), one.run(feeds)
            want = run(op, *[feeds.get(n) for n in NAMES], hidden_size=H, direction=direction)
            for i, w in enumerate(want):
                np.testing.assert_array_equal(a[f"y{i}"], b[f"y{i}"])
                np.testing.assert_allclose(a[f"y{i}"], w, rtol=1e-3, atol=1e-4)
