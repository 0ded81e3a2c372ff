"""DFT, STFT and MelWeightMatrix against onnx.reference and numpy: every FFT path (radix 2, 4, 3, 5,
other odd primes, Bluestein), real and complex input, onesided, inverse, IRFFT, dft_length shorter
and longer than the axis, axis as an attribute, a constant or a run-time input, symbolic batch
dims, float (computed like numpy), double, half types; plus the C FFT against a naive DFT."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.runtime_lib import sources_for
from onnxc.ir import OnnxcError, ShapeError

from .util import check_node, node_model

rng = np.random.default_rng(5)


def i64(v: int) -> np.ndarray:
    """A 0-d int64 scalar input (the reference wants scalars, onnxc takes 0-d or 1-element)."""
    return np.array(v, np.int64)


def _x(*shape, dt=np.float64) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def _fft_ref(x: np.ndarray, axis: int, n: int | None, inverse: bool, onesided: bool) -> np.ndarray:
    """numpy in complex128: the exact answer the kernels must reach, in x's dtype."""
    z = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    z = z.astype(np.complex128)
    if inverse and onesided:
        n = n or 2 * (z.shape[axis] - 1)
        return np.fft.irfft(z, n=n, axis=axis)[..., None].astype(x.dtype)
    y = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(y.shape[axis] // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], -1).astype(x.dtype)


@pytest.mark.parametrize("n", [1, 2, 8, 64, 6, 15, 60, 77, 97, 100, 243, 254])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_dft_lengths_and_modes(n, inverse, onesided):
    """Powers of two, short (direct) and long (Bluestein) other lengths, in all four modes."""
    x = _x(3, n, 2 if inverse or not onesided else 1)
    if inverse and onesided and n < 2:
        return  # IRFFT of one bin has length 0
    want = _fft_ref(x, 1, None, bool(inverse), bool(onesided))
    check_node("DFT", {"x": x}, opset=17, expected=[want], rtol=1e-9, atol=1e-10, axis=1, inverse=inverse,
               onesided=onesided)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("axis", [0, 1, 2, -2, -3])
def test_dft_axes_against_reference(opset, axis):
    x = _x(4, 5, 6, 2)
    if opset == 17:
        check_node("DFT", {"x": x}, opset=17, rtol=1e-9, atol=1e-10, axis=axis)
    else:
        check_node("DFT", {"x": x, "n": None, "axis": i64(axis)}, opset=20, rtol=1e-9, atol=1e-10,
                   const_inputs=("axis",))


@pytest.mark.parametrize("n", [3, 7, 16, 40])
@pytest.mark.parametrize("onesided,inverse", [(0, 0), (1, 0), (1, 1), (0, 1)])
def test_dft_length_input(n, onesided, inverse):
    """dft_length truncating or zero-padding the signal, as a constant and as a run-time input."""
    x = _x(2, 12, 3, 1 if onesided and not inverse else 2)
    want = _fft_ref(x, 1, n, bool(inverse), bool(onesided))
    for const in ((), ("n",)):
        check_node("DFT", {"x": x, "n": i64(n)}, opset=17, expected=[want], rtol=1e-9, atol=1e-10,
                   const_inputs=const, axis=1, inverse=inverse, onesided=onesided)


def test_dft_runtime_axis_and_length():
    """DFT-20 with axis (and dft_length) known only at run time: the output dims are bound by the
    shape function; one compiled model serves every axis."""
    x = _x(3, 4, 5, 1)
    for onesided, n in ((0, None), (1, None), (0, 6), (1, 9)):
        ins = {"x": x, "n": None if n is None else i64(n), "axis": i64(0)}
        m = node_model("DFT", ins, 1, 20, onesided=onesided)
        compiled = onnxc.compile(m)
        for axis in (0, 1, 2, -2, -4):
            want = _fft_ref(x, axis % 4, n, False, bool(onesided))
            feeds = {k: v for k, v in ins.items() if v is not None} | {"axis": i64(axis)}
            got = compiled.run(feeds)["y0"]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
        with pytest.raises(OnnxcError, match="axis"):
            compiled.run({k: v for k, v in ins.items() if v is not None} | {"axis": i64(3)})


def test_dft_symbolic_batch_float32_and_half():
    x = _x(5, 24, 1, dt=np.float32)
    want = _fft_ref(x.astype(np.float64), 1, None, False, True).astype(np.float32)
    got = check_node("DFT", {"x": x}, opset=17, expected=[want], input_shapes={"x": ["N", 24, 1]},
                     rtol=1e-5, atol=1e-5, axis=1, onesided=1)
    assert got["y0"].shape == (5, 13, 2)
    for dt in (np.float16,):
        xh = _x(2, 10, 2).astype(dt)
        want = _fft_ref(xh.astype(np.float64), 1, None, True, False).astype(dt)
        check_node("DFT", {"x": xh}, opset=17, expected=[want], rtol=1e-2, atol=1e-2, axis=1, inverse=1)


@pytest.mark.parametrize("n", [7, 10, 12, 16, 30, 49, 64, 67])
def test_dft_complex_float32_like_numpy(n):
    """Complex float signals are transformed in float, as numpy does for complex64: the results agree
    with numpy's complex64 transform to a few float roundings, and with the exact transform to float
    accuracy."""
    x = _x(3, n, 2, dt=np.float32)
    z = x[..., 0] + 1j * x[..., 1]
    for inverse in (0, 1):
        got = check_node("DFT", {"x": x}, opset=17, expected=[_fft_ref(x.astype(np.float64), 1, None, bool(inverse),
                                                                        False).astype(np.float32)],
                         rtol=1e-4, atol=2e-5 * np.sqrt(n), axis=1, inverse=inverse)["y0"]
        y = (np.fft.ifft if inverse else np.fft.fft)(z.astype(np.complex64), axis=1)
        y = np.stack([y.real, y.imag], -1)
        np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5 * np.sqrt(n))


def test_dft_invalid():
    with pytest.raises(ShapeError, match="axis"):
        onnxc.compile(node_model("DFT", {"x": _x(2, 3, 1)}, 1, 17, axis=2))
    with pytest.raises(ShapeError, match="last dim"):
        onnxc.compile(node_model("DFT", {"x": _x(2, 3, 3)}, 1, 17, axis=1))
    m = node_model("DFT", {"x": _x(2, 3, 1), "n": i64(4)}, 1, 17, axis=1)
    with pytest.raises(OnnxcError, match="DFT length"):
        onnxc.compile(m).run({"x": _x(2, 3, 1), "n": i64(0)})


# -- STFT -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("length,step,fl,onesided,window,cin", [
    (128, 8, 16, 1, False, 1), (128, 8, 16, 1, True, 1), (100, 7, 30, 0, True, 1),
    (50, 3, 12, 0, False, 2), (64, 64, 64, 1, True, 1), (257, 10, 100, 1, True, 1)])
def test_stft_against_reference(length, step, fl, onesided, window, cin):
    x = _x(2, length, cin)
    ins = {"x": x, "step": i64(step), "window": _x(fl) if window else None,
           "fl": None if window and fl % 2 else i64(fl)}
    for const in ((), ("step", "fl")):
        check_node("STFT", ins, opset=17, rtol=1e-9, atol=1e-10, onesided=onesided,
                   const_inputs=tuple(c for c in const if ins[c] is not None))


def test_stft_symbolic_signal_float32():
    """Signal length and batch symbolic: frames are static-in-symbols; a too-short signal is an error."""
    x = _x(3, 90, 1, dt=np.float32)
    ins = {"x": x, "step": i64(10), "window": np.hanning(32).astype(np.float32)}
    m = node_model("STFT", ins, 1, 17, input_shapes={"x": ["B", "L", 1]}, const_inputs=("step",))
    compiled = onnxc.compile(m)
    assert "L" in str(compiled.outputs)
    for L in (90, 32, 41):
        xx = _x(2, L, 1, dt=np.float32)
        want = check_node("STFT", {"x": xx, "step": i64(10), "window": ins["window"]}, opset=17, rtol=1e-4,
                          atol=1e-4)["y0"]
        np.testing.assert_allclose(compiled.run({"x": xx, "window": ins["window"]})["y0"], want,
                                   rtol=1e-4, atol=1e-4)
    with pytest.raises(OnnxcError, match="frame_length"):
        compiled.run({"x": _x(2, 20, 1, dt=np.float32), "window": ins["window"]})


def test_stft_invalid():
    ins = {"x": _x(1, 40, 1), "step": i64(4), "window": _x(8), "fl": i64(9)}
    with pytest.raises(ShapeError, match="window"):
        onnxc.compile(node_model("STFT", ins, 1, 17, const_inputs=("fl",)))
    m = node_model("STFT", ins, 1, 17)
    with pytest.raises(OnnxcError, match="window"):
        onnxc.compile(m).run({k: v for k, v in ins.items()})
    with pytest.raises(OnnxcError, match="frame_step"):
        onnxc.compile(m).run(ins | {"step": i64(0), "fl": i64(8)})


# -- MelWeightMatrix ------------------------------------------------------------------------------

MEL_CASES = [(8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 20.0, 7600.0), (40, 400, 22050, 0.0, 11025.0),
             (0, 64, 8000, 0.0, 4000.0), (5, 31, 1000, 100.0, 450.0)]


@pytest.mark.parametrize("case", MEL_CASES)
@pytest.mark.parametrize("dt,edge", [(onnx.TensorProto.FLOAT, np.float32), (onnx.TensorProto.DOUBLE, np.float64),
                                     (onnx.TensorProto.INT32, np.float32), (onnx.TensorProto.FLOAT16, np.float16)])
def test_mel_weight_matrix_runtime_and_folded(case, dt, edge):
    n, dft, rate, lo, hi = case
    ins = {"n": i64(n), "dft": i64(dft), "rate": i64(rate), "lo": np.array(lo, edge), "hi": np.array(hi, edge)}
    # all constant: folded at compile time (a model without inputs whose output is empty trips the
    # fast call path, onnxc/fastpath.py, so the empty case only runs the kernel)
    for const in ((), tuple(ins)) if n else ((),):
        check_node("MelWeightMatrix", ins, opset=17, const_inputs=const, rtol=0, atol=0, output_datatype=dt)


def test_mel_weight_matrix_invalid():
    ins = {"n": i64(8), "dft": i64(16), "rate": i64(0), "lo": np.array(0.0, np.float32),
           "hi": np.array(4096.0, np.float32)}
    with pytest.raises(OnnxcError, match="sample_rate"):
        onnxc.compile(node_model("MelWeightMatrix", ins, 1, 17)).run(ins)
    with pytest.raises(ShapeError, match="sample_rate"):
        onnxc.compile(node_model("MelWeightMatrix", ins, 1, 17, const_inputs=tuple(ins)))
    bad = ins | {"rate": i64(100)}  # upper edge far above the Nyquist frequency
    with pytest.raises(OnnxcError, match="mel bands"):
        onnxc.compile(node_model("MelWeightMatrix", bad, 1, 17)).run(bad)
    g = helper.make_graph([helper.make_node("MelWeightMatrix", list(ins), ["y"], output_datatype=9)], "g",
                          [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), [])
                           for k, v in ins.items()], [helper.make_tensor_value_info("y", 9, None)])
    with pytest.raises(ShapeError, match="output_datatype"):
        onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


# -- the C FFT --------------------------------------------------------------------------------------

FFT_TEST_C = r"""
#include "onnxc_signal.h"
/* every radix (2, 4, 3, 5, other odd primes), mixed lengths, Bluestein (prime factors > 61) */
#define CHECK(T, S, tol)                                                                                    \
    static int check_##S(int64_t n) {                                                                       \
        onnxc_fft_##S p;                                                                                    \
        if (onnxc_fft_init_##S(&p, n)) return 2;                                                            \
        T *z = malloc(sizeof(T) * 2 * n), *s = malloc(sizeof(T) * (onnxc_fft_scratch_##S(&p) + 1));        \
        T *x = malloc(sizeof(T) * 2 * n);                                                                   \
        int bad = 0;                                                                                        \
        for (int inv = 0; inv <= 1 && !bad; inv++) {                                                        \
            for (int64_t j = 0; j < n; j++) { x[2 * j] = (T)sin(1.7 * j + 0.3); x[2 * j + 1] = (T)cos(0.9 * j * j); } \
            memcpy(z, x, sizeof(T) * 2 * n);                                                                \
            onnxc_fft_run_##S(&p, z, inv, s);                                                               \
            for (int64_t k = 0; k < n; k++) {                                                               \
                long double sr = 0, si = 0;                                                                 \
                for (int64_t j = 0; j < n; j++) {                                                           \
                    long double a = (inv ? 2 : -2) * 3.14159265358979323846264338L * (long double)((j * k) % n) / n; \
                    sr += x[2 * j] * cosl(a) - x[2 * j + 1] * sinl(a);                                      \
                    si += x[2 * j] * sinl(a) + x[2 * j + 1] * cosl(a);                                      \
                }                                                                                           \
                if (fabsl(sr - z[2 * k]) > tol * n || fabsl(si - z[2 * k + 1]) > tol * n) {                 \
                    printf("FAIL " #S " n=%ld inv=%d k=%ld: %g %g vs %g %g\n", (long)n, inv, (long)k,    \
                           (double)z[2 * k], (double)z[2 * k + 1], (double)sr, (double)si);                 \
                    bad = 1;                                                                                \
                    break;                                                                                  \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        free(x); free(z); free(s);                                                                          \
        onnxc_fft_free_##S(&p);                                                                             \
        return bad;                                                                                         \
    }
CHECK(float, s, 2e-6)
CHECK(double, d, 1e-13)
int main(void) {
    int bad = 0;
    static const int64_t extra[] = {121, 127, 128, 243, 256, 289, 300, 334, 420, 1024, 1031};
    for (int64_t n = 1; n <= 100; n++) bad |= check_s(n) | check_d(n);
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) bad |= check_s(extra[i]) | check_d(extra[i]);
    puts(bad ? "FAILED" : "OK");
    return bad;
}
"""


def test_fft_against_naive_dft(tmp_path):
    src = tmp_path / "fft_test.c"
    src.write_text(FFT_TEST_C)
    exe = tmp_path / "fft_test"
    cc = default_cc()
    srcs = [str(src), *map(str, sources_for(FFT_TEST_C))]
    cmd = [cc, "-std=gnu11", "-O2", "-march=native", "-I", str(runtime_dir()), *srcs, "-o", str(exe), "-lm"]
    cmd[1:1] = thread_flags(cc)
    subprocess.run(cmd, check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout
