"""runtime_c/onnxc_vmath.h against double-precision libm: ulp error over a dense sample of every float
range (a stride through all 2^32 bit patterns, a fine grid where the functions change fastest, the
subnormals) plus the edge cases (+-0, +-inf, NaN, overflow and underflow thresholds, the branch
points), evaluated through the same vectorized loop (``ONNXC_VM_SIMD``) the kernels use.

Also checks that the elementwise, fused and softmax kernels really call the vector functions."""

from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path

import numpy as np
import pytest

from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.runtime_lib import compile_with_runtime

# max ulp error each function must stay within (over all 2^32 floats: exp 1.010, log 0.827, tanh 1.509,
# erf 1.028, sigmoid 1.967; runtime_c/onnxc_vmath.h)
BOUNDS = {"exp": 1.02, "log": 0.83, "tanh": 1.51, "erf": 1.03, "sigmoid": 1.97}

SRC = """
#include "onnxc_vmath.h"
#include "onnxc_vmath_rows.h"
#define LOOP(fn, ref)                                                                    \\
    void v_##fn(const float *restrict x, float *restrict y, long n) {                    \\
        ONNXC_VM_SIMD                                                                    \\
        for (long i = 0; i < n; i++) y[i] = onnxc_v##fn##f(x[i]);                        \\
    }                                                                                    \\
    void r_##fn(const float *restrict x, double *restrict y, long n) {                   \\
        for (long i = 0; i < n; i++) { double x_ = x[i]; y[i] = ref(x_); }              \\
    }
#define REF_exp(x) exp(x)
#define REF_log(x) log(x)
#define REF_tanh(x) tanh(x)
#define REF_erf(x) erf(x)
#define REF_sigmoid(x) (1.0 / (1.0 + exp(-(x))))
LOOP(exp, REF_exp) LOOP(log, REF_log) LOOP(tanh, REF_tanh) LOOP(erf, REF_erf) LOOP(sigmoid, REF_sigmoid)
/* the row helper's exponentials (AVX-512 intrinsics where available) and its sum */
double v_exprow(const float *restrict x, float *restrict y, long n) {
    return onnxc_vm_expsum_f32(x, 0.0f, y, n);
}
void r_exprow(const float *restrict x, double *restrict y, long n) { r_exp(x, y, n); }
float v_maxrow(const float *x, long n) { return onnxc_vm_max_f32(x, n); }
"""


@pytest.fixture(scope="module")
def lib():
    d = Path(tempfile.mkdtemp(prefix="onnxc-vmath-"))
    (d / "vm.c").write_text(SRC)
    compile_with_runtime(d / "vm.c", d / "vm.so", CompilerConfig())
    return ctypes.CDLL(str(d / "vm.so"))


def _run(lib, fn: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    r = np.empty(x.shape, np.float64)
    p = ctypes.c_void_p
    getattr(lib, f"v_{fn}")(p(x.ctypes.data), p(y.ctypes.data), ctypes.c_long(x.size))
    getattr(lib, f"r_{fn}")(p(x.ctypes.data), p(r.ctypes.data), ctypes.c_long(x.size))
    return y, r


def ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the float32 spacing at ref; inf where NaN-ness or infinities disagree."""
    with np.errstate(over="ignore"):
        want = ref.astype(np.float32)  # beyond the float range: inf
    err = np.zeros(ref.shape)
    special = np.isnan(want) | np.isinf(want)
    mism = special & ~((np.isnan(got) & np.isnan(want)) | (got == want))
    err[mism] = np.inf
    err[~special & ~np.isfinite(got)] = np.inf
    ok = ~special & np.isfinite(got)
    a = np.abs(ref[ok])
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    spacing = np.maximum(np.exp2(e - 23), 2.0 ** -149)
    err[ok] = np.abs(got[ok].astype(np.float64) - ref[ok]) / spacing
    return err


def samples() -> np.ndarray:
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)        # all ranges, both signs
    grid = np.linspace(-12, 12, 600_001, dtype=np.float32)                      # where they change fastest
    sub = np.arange(1, 2**23, 997, dtype=np.uint32)                             # subnormals
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 1.1754944e-38,
                      -1.1754944e-38, 1e-45, -1e-45, 88.72283, 88.72284, 88.7229, 89.0, -87.33654, -87.3366,
                      -103.97207, -103.97208, -104.0, -150.0, 0.625, -0.625, 0.62499994, 0.927734375,
                      -0.927734375, 0.9277343, 4.0, 3.9999998, 9.0, -9.0, 1.0, 1.0000001, 0.99999994, 2.0,
                      0.70710677, 1.4142135, 1e-30, -1e-30, 1e30, -1e30, 20.0, -20.0], np.float32)
    return np.concatenate([bits.view(np.float32), grid, sub.view(np.float32), -sub.view(np.float32), edges])


@pytest.mark.parametrize("fn", [*sorted(BOUNDS), "exprow"])
def test_ulp_error_against_libm(lib, fn):
    x = samples()
    got, ref = _run(lib, fn, x)
    err = ulp_error(got, ref)
    worst = int(np.argmax(err))
    bound = BOUNDS.get(fn, BOUNDS["exp"])
    assert err[worst] <= bound, f"{fn}({x[worst]!r}) = {got[worst]!r}, libm {ref[worst]!r}: {err[worst]} ulp"


@pytest.mark.parametrize("fn, x, want", [
    ("exp", [-np.inf, np.inf, np.nan, 0.0, -0.0, 89.0, -104.0, -1000.0, 1000.0],
     [0.0, np.inf, np.nan, 1.0, 1.0, np.inf, 0.0, 0.0, np.inf]),
    ("log", [0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 1.0], [-np.inf, -np.inf, np.nan, np.nan, np.inf, np.nan, 0.0]),
    ("tanh", [np.inf, -np.inf, np.nan, 0.0, -0.0, 100.0, -100.0], [1.0, -1.0, np.nan, 0.0, -0.0, 1.0, -1.0]),
    ("erf", [np.inf, -np.inf, np.nan, 0.0, -0.0, 10.0, -10.0], [1.0, -1.0, np.nan, 0.0, -0.0, 1.0, -1.0]),
    ("sigmoid", [np.inf, -np.inf, np.nan, 0.0, 100.0, -1000.0], [1.0, 0.0, np.nan, 0.5, 1.0, 0.0]),
])
def test_special_values(lib, fn, x, want):
    got, _ = _run(lib, fn, np.array(x, np.float32))
    want = np.array(want, np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


def test_subnormal_results_round_once(lib):
    """exp and sigmoid of large negative x give the correctly rounded subnormals, not 0."""
    x = np.linspace(-103.9, -87.4, 5001, dtype=np.float32)
    for fn in ("exp", "sigmoid"):
        got, ref = _run(lib, fn, x)
        assert np.all(got > 0)
        assert ulp_error(got, ref).max() <= 1.0


@pytest.mark.parametrize("n", [1, 7, 16, 17, 40])
def test_row_helpers_tails(lib, n):
    """Masked tails: every element counted once, nothing beyond n read or written."""
    x = np.random.default_rng(n).standard_normal(n + 16).astype(np.float32)
    x[n:] = 1000.0  # beyond the row: would dominate the max and overflow the sum if read
    y = np.full(n + 16, -7.0, np.float32)
    p = ctypes.c_void_p
    lib.v_exprow.restype = ctypes.c_double
    lib.v_maxrow.restype = ctypes.c_float
    s = lib.v_exprow(p(x.ctypes.data), p(y.ctypes.data), ctypes.c_long(n))
    assert np.all(y[n:] == -7.0)
    np.testing.assert_allclose(y[:n], np.exp(x[:n].astype(np.float64)), rtol=2e-7)
    assert s == pytest.approx(float(np.exp(x[:n].astype(np.float64)).sum()), rel=1e-6)
    assert lib.v_maxrow(p(x.ctypes.data), ctypes.c_long(n)) == x[:n].max()


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(3, 1), (2, 15), (4, 17), (2, 3, 33)])
def test_softmax_rows(op, shape):
    from ops.util import check_node

    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 30).astype(np.float32)
    x.reshape(-1)[:2] = [-200.0, 60.0]  # exp(x - max) subnormal or 0 next to a large maximum
    # float64 expectation: onnx.reference takes log(softmax), -inf where the probability underflows
    d = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(d).sum(axis=-1, keepdims=True))
    want = [(np.exp(d - lse) if op == "Softmax" else d - lse).astype(np.float32)]
    check_node(op, {"x": x}, rtol=1e-5, atol=1e-7, expected=want)
    check_node(op, {"x": x}, input_shapes={"x": ["N"] + list(shape[1:])}, rtol=1e-5, atol=1e-7, expected=want)


def _emitted(model) -> str:
    from onnxc.api import lower_model
    from onnxc.codegen.emit import emit_c

    _, program, *_ = lower_model(model, threads=1)
    src = emit_c(program)
    return src if isinstance(src, str) else src[0]


@pytest.mark.parametrize("op, fn", [("Exp", "onnxc_vm_exp_float"), ("Log", "onnxc_vm_log_float"),
                                    ("Tanh", "onnxc_vm_tanh_float"), ("Erf", "onnxc_vm_erf_float"),
                                    ("Sigmoid", "onnxc_vm_sigmoid_float"), ("Softmax", "onnxc_att_softmax_row"),
                                    ("LogSoftmax", "onnxc_att_logsumexp_shift")])
def test_kernels_use_vector_math(op, fn):
    from ops.util import check_node, node_model

    x = np.random.default_rng(3).standard_normal((4, 37)).astype(np.float32)
    if op == "Log":
        x = np.abs(x) + 0.1
    src = _emitted(node_model(op, {"x": x}))
    assert fn in src and '#include "onnxc_vmath.h"' in src
    check_node(op, {"x": x}, rtol=1e-6, atol=1e-7)
