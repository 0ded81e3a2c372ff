"""precision="bf16" (codegen/kernels/bf16.py, runtime_c/onnxc_bgemm.h).

- the bf16 GEMM through cffi (tests/ops/bgemm_check.c), each micro-kernel this CPU runs (avx512bf16, portable),
  at odd sizes, operand forms, threads, alpha/beta and epilogues, against numpy on operands rounded to bf16
  (the same products; only the float32 summation order differs);
- the C packers against codegen/kernels/bgemm_layout.py word for word, and the rounding rule itself;
- models (Conv of every kind the path takes, MatMul, Gemm, with fused epilogues) against onnxruntime in
  float32 with a bf16-sized tolerance, checking that the bf16 kernels are the ones in the C;
- the portable kernel under an ONNXC_ISA cap, in a fresh process; the option in the model-cache key, the CLI.
"""

from __future__ import annotations

import itertools
import os
import platform
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import cffi
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.kernels.bf16 import cpu_flags
from onnxc.codegen.kernels.bgemm_layout import (
    pack_a_bf16,
    pack_b_bf16,
    packed_a_size,
    packed_b_size,
    round_bf16,
    round_bf16_bits,
)
from onnxc.codegen.runtime_lib import sources_for

CHECK_C = Path(__file__).with_name("bgemm_check.c")
PLAIN, TRANS, PACKED = 0, 1, 4  # ONNXC_SG_PLAIN, ONNXC_SG_TRANS, ONNXC_BG_PACKED
ACT = {"none": 0, "relu": 1, "clip": 2, "sigmoid": 4}
HAS_BF16 = platform.machine() in ("x86_64", "AMD64") and "avx512_bf16" in (cpu_flags() or set())
ISAS = ["portable"] + (["avx512bf16"] if HAS_BF16 else [])

CDEF = """
const char *check_isa(void);
int check_use_isa(const char *name);
void check_pack_a(int trans, const float *A, int64_t lda, int64_t M, int64_t K, uint32_t *dst);
void check_pack_b(int trans, const float *B, int64_t ldb, int64_t K, int64_t N, uint32_t *dst);
int check_bgemm(int threads, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda, int fa,
                const void *B, int64_t ldb, int fb, float beta, float *C, int64_t ldc, const float *bias,
                const float *res, int act);
"""


def build_check(folder: Path) -> Path:
    so = folder / "bgemm_check.so"
    if not so.exists():
        cc = default_cc()
        srcs = [str(CHECK_C), *map(str, sources_for(CHECK_C.read_text()))]
        subprocess.run([cc, "-std=gnu11", "-O3", "-march=native", *thread_flags(cc), "-shared", "-fPIC", "-I",
                        str(runtime_dir()), *srcs, "-o", str(so), "-lm"], check=True, capture_output=True, text=True)
    return so


_copies = itertools.count()


class BGemm:
    """bgemm_check.c loaded through cffi with micro-kernel ``isa`` (its own copy of the library)."""

    def __init__(self, so: Path, isa: str):
        self.asked = isa
        copy = so.with_name(f"{so.stem}-{isa}-{next(_copies)}.so")  # never over a loaded copy
        shutil.copyfile(so, copy)
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self.ffi.dlopen(str(copy))
        assert self.lib.check_use_isa(isa.encode()) == 0
        self.isa = self.ffi.string(self.lib.check_isa()).decode()

    def p(self, a: np.ndarray | None, t: str = "void *"):
        return self.ffi.NULL if a is None else self.ffi.cast(t, a.ctypes.data)

    def pack(self, x: np.ndarray, b: bool, trans: bool = False) -> np.ndarray:
        """x (the logical operand, M x K or K x N), packed by C from its plain or transposed storage."""
        rows, cols = x.shape
        out = np.full(packed_b_size(rows, cols) if b else packed_a_size(rows, cols), 0xDEADBEEF, np.uint32)
        src = np.ascontiguousarray(x.T if trans else x, np.float32)
        (self.lib.check_pack_b if b else self.lib.check_pack_a)(int(trans), self.p(src, "float *"), src.shape[1],
                                                                rows, cols, self.p(out, "uint32_t *"))
        return out

    def gemm(self, A, B, fa, fb, shape, threads=1, alpha=1.0, beta=0.0, C=None, bias=None, res=None, act="none"):
        M, N, K = shape
        C = np.zeros((M, N), np.float32) if C is None else C.copy()
        lda = {PLAIN: K, TRANS: M, PACKED: 0}[fa]
        ldb = {PLAIN: N, TRANS: K, PACKED: 0}[fb]
        st = self.lib.check_bgemm(threads, M, N, K, alpha, self.p(A), lda, fa, self.p(B), ldb, fb, beta,
                                  self.p(C, "float *"), N, self.p(bias, "float *"), self.p(res, "float *"), ACT[act])
        assert st == 0
        return C


@pytest.fixture(scope="module", params=ISAS)
def bg(request, tmp_path_factory) -> BGemm:
    return BGemm(build_check(tmp_path_factory.getbasetemp()), request.param)


def test_kernel_in_use(bg):
    assert bg.isa == bg.asked


# -- rounding and layouts -------------------------------------------------------------------------------

def test_rounding_rule():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, np.inf, -np.inf, 0.0, -0.0,
                  3.4e38, 1e-40], np.float32)
    want = np.array([1.0, 1.0, 1 + 4 * 2 ** -8, 1 + 2 * 2 ** -8, -2.5, np.inf, -np.inf, 0.0, -0.0, np.inf],
                    np.float32)
    got = round_bf16(x)
    np.testing.assert_array_equal(got[:10], want)  # ties to even; 3.4e38 rounds past the largest bf16
    assert abs(got[10] - 1e-40) < 1e-41  # denormals are kept (with fewer bits) by the portable rule
    nan = np.array([np.nan, -np.nan], np.float32)
    assert np.isnan(round_bf16(nan)).all() and (round_bf16_bits(nan) & 0x40).all()  # quiet


@pytest.mark.parametrize("rows,cols", [(1, 1), (13, 9), (12, 32), (25, 70), (40, 1031), (7, 2)])
@pytest.mark.parametrize("trans", [False, True])
def test_packers_match_python(bg, rows, cols, trans):
    x = np.random.default_rng(rows * cols).standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_array_equal(bg.pack(x, False, trans), pack_a_bf16(x))
    np.testing.assert_array_equal(bg.pack(x, True, trans), pack_b_bf16(x))


# -- the GEMM -------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (13, 37, 9), (12, 32, 2), (25, 70, 515), (40, 100, 1031), (3, 1, 130), (7, 5, 0),
          (64, 96, 576)]
FORMS = [(PLAIN, PACKED), (TRANS, PACKED), (PACKED, PLAIN), (PACKED, TRANS), (PLAIN, PLAIN), (PACKED, PACKED)]


def _ref(A, B):
    """The product of the bf16-rounded operands in float64, and the bound of float32 summation error."""
    Ar, Br = round_bf16(A).astype(np.float64), round_bf16(B).astype(np.float64)
    return Ar @ Br, (np.abs(Ar) @ np.abs(Br)) * (A.shape[1] + 2) * 2.0 ** -24 + 1e-30


def _operand(x: np.ndarray, form: int, b: bool):
    if form == PACKED:
        return pack_b_bf16(x) if b else pack_a_bf16(x)
    return np.ascontiguousarray(x.T if form == TRANS else x)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("forms", FORMS)
def test_gemm_forms_and_sizes(bg, shape, forms):
    M, N, K = shape
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    ref, tol = _ref(A, B)
    for threads in (1, 2):
        C = bg.gemm(_operand(A, forms[0], False), _operand(B, forms[1], True), *forms, shape, threads)
        assert (np.abs(C - ref) <= tol).all(), (threads, np.abs(C - ref).max())


@pytest.mark.parametrize("act", ["none", "relu", "clip", "sigmoid"])
def test_gemm_alpha_beta_epilogue(bg, act):
    M, N, K = 29, 45, 77
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    C0, bias, res = (rng.standard_normal(s).astype(np.float32) for s in ((M, N), M, (M, N)))
    ref, tol = _ref(A, B)
    ref = 0.5 * ref + 2.0 * C0 + bias[:, None] + res
    ref = {"none": ref, "relu": np.maximum(ref, 0), "clip": np.clip(ref, 0, 6),
           "sigmoid": 1 / (1 + np.exp(-ref))}[act]
    C = bg.gemm(A, pack_b_bf16(B), PLAIN, PACKED, (M, N, K), 2, 0.5, 2.0, C0, bias, res, act)
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-5 + 2 * tol.max())


def test_kernels_agree(tmp_path_factory):
    """The portable kernel follows VDPBF16PS's order of operations: the two give the same floats."""
    if not HAS_BF16:
        pytest.skip("this CPU has no AVX512_BF16")
    so = build_check(tmp_path_factory.getbasetemp())
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((30, 600)).astype(np.float32), rng.standard_normal((600, 70)).astype(np.float32)
    out = [BGemm(so, isa).gemm(A, pack_b_bf16(B), PLAIN, PACKED, (30, 70, 600)) for isa in ISAS]
    np.testing.assert_array_equal(out[0], out[1])


# -- models -------------------------------------------------------------------------------------------------

def _model(nodes, inputs, inits, opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, marker: str, tol: float = 2e-2):
    """bf16 against onnxruntime float32: max |d| within tol of the output's largest value, a bf16-sized
    error (not the float32 one: the bf16 kernels ran, which ``marker`` in the C confirms)."""
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    m = onnxc.compile(model, precision="bf16", quiet=True)
    assert marker in m.c_source
    y = m.run(feeds)["y"]
    err = np.abs(y - ref).max() / np.abs(ref).max()
    assert 1e-5 < err < tol, err
    return y


CONVS = [  # (input shape, weight shape, attributes)
    ((2, 16, 9, 11), (24, 16, 1, 1), {}),                                          # pointwise
    ((1, 7, 15, 13), (20, 7, 3, 3), {"pads": [1, 1, 1, 1]}),                        # 3x3 padded
    ((1, 8, 17, 16), (12, 8, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),     # strided
    ((1, 3, 20, 21), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),     # stem
    ((1, 8, 12, 12), (10, 8, 1, 1), {"strides": [2, 2]}),                           # strided 1x1
    ((1, 6, 14, 14), (9, 6, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),    # dilated
    ((2, 12, 10, 10), (18, 4, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),           # groups
    ((1, 5, 40), (11, 5, 5), {"pads": [2, 2], "strides": [3]}),                     # 1-D
    ((1, 4, 5, 6, 7), (6, 4, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),               # 3-D
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_conv(xs, ws, attrs):
    rng = np.random.default_rng(sum(ws))
    w, b = rng.standard_normal(ws).astype(np.float32), rng.standard_normal(ws[0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])]
    marker = "onnxc_bgemm_ex(" if all(k == 1 for k in ws[2:]) and "strides" not in attrs else "onnxc_bg_conv_rows("
    _check(_model(nodes, [("x", list(xs))], {"w": w, "b": b}), {"x": rng.standard_normal(xs).astype(np.float32)},
           marker)


def test_conv_residual_epilogue():
    """Conv -> Add(R) -> Relu (ResNet's block end) fuses into the bf16 GEMM's epilogue."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["t", "x"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    _check(_model(nodes, [("x", [1, 16, 12, 12])], {"w": w}), {"x": rng.standard_normal((1, 16, 12, 12), np.float32)},
           "onnxc_bg_conv_rows(")


def test_matmul_bias_relu_and_gemm():
    rng = np.random.default_rng(2)
    w, b = rng.standard_normal((77, 45)).astype(np.float32), rng.standard_normal(45).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    _check(_model(nodes, [("x", [3, 19, 77])], {"w": w, "b": b}), {"x": rng.standard_normal((3, 19, 77), np.float32)},
           "onnxc_bgemm_ex(")
    wt, c = rng.standard_normal((33, 50)).astype(np.float32), rng.standard_normal((40, 33)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)]
    _check(_model(nodes, [("x", [40, 50])], {"w": wt, "c": c}), {"x": rng.standard_normal((40, 50), np.float32)},
           "onnxc_bgemm_ex(")


def test_fp32_is_unchanged_and_the_cache_keys_on_precision(tmp_path):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [20, 64])], {"w": w})
    x = {"x": rng.standard_normal((20, 64), np.float32)}
    m32 = onnxc.compile(model, quiet=True, cache_dir=tmp_path)
    assert "onnxc_bgemm_ex(" not in m32.c_source
    m16 = onnxc.compile(model, quiet=True, precision="bf16", cache_dir=tmp_path)
    assert m16.timings.get("model_cache_hit") != 1.0  # not the fp32 entry
    assert not np.array_equal(m32.run(x)["y"], m16.run(x)["y"])
    again = onnxc.compile(model, quiet=True, precision="bf16", cache_dir=tmp_path)
    assert again.timings.get("model_cache_hit") == 1.0
    np.testing.assert_array_equal(again.run(x)["y"], m16.run(x)["y"])
    assert "onnxc_bgemm_ex(" in again.c_source  # computed again from the model, with the option
    with pytest.raises(ValueError, match="precision must be one of 'fp32', 'bf16'"):
        onnxc.compile(model, precision="fp16")


def test_portable_kernel_under_isa_cap(tmp_path):
    """ONNXC_ISA below avx512bf16: the model's first GEMM picks the portable kernel (a fresh process reads
    the cap), with the same values up to denormals as VDPBF16PS."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 5, 3, 3)).astype(np.float32)
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", [1, 5, 9, 9])], {"w": w})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = rng.standard_normal((1, 5, 9, 9)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = ("import numpy as np, onnxc, sys; m = onnxc.compile(sys.argv[1], precision='bf16', quiet=True); "
            "np.save(sys.argv[2], m.run({'x': np.load(sys.argv[3])})['y'])")
    outs = []
    for cap in ("avx512", ""):
        out = tmp_path / f"y{cap}.npy"
        subprocess.run([sys.executable, "-c", code, str(path), str(out), str(tmp_path / "x.npy")],
                       env=dict(os.environ, ONNXC_ISA=cap), check=True, capture_output=True, text=True)
        outs.append(np.load(out))
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for y in outs:
        assert np.abs(y - ref).max() < 2e-2 * np.abs(ref).max()
    np.testing.assert_array_equal(outs[0], outs[1])


def test_cli_info_reports_precision(tmp_path, capsys):
    from onnxc.cli import main

    rng = np.random.default_rng(7)
    path = tmp_path / "m.onnx"
    onnx.save(_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [16, 32])],
                     {"w": rng.standard_normal((32, 8)).astype(np.float32)}), path)
    assert main(["info", str(path), "--precision", "bf16"]) == 0
    assert "precision: bf16 (1 distinct kernels on bfloat16 weights, the rest float32)" in capsys.readouterr().out
    assert main(["info", str(path)]) == 0
    assert "precision: fp32\n" in capsys.readouterr().out
    assert main(["bench", str(path), "--precision", "bf16", "--no-ort", "--runs", "1", "--seconds", "0"]) == 0
    assert "precision bf16" in capsys.readouterr().out


def test_aot_build_takes_the_option(tmp_path):
    """onnxc.build(precision="bf16"): the artifact's library runs the bf16 kernels, as compile() does."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", [1, 4, 10, 10])], {"w": w})
    x = {"x": rng.standard_normal((1, 4, 10, 10), np.float32)}
    out = onnxc.build(model, tmp_path / "art", precision="bf16", quiet=True)
    assert "onnxc_bg_conv_rows(" in "".join(p.read_text() for p in out.glob("*.c"))
    np.testing.assert_array_equal(onnxc.load(out).run(x)["y"],
                                  onnxc.compile(model, precision="bf16", quiet=True).run(x)["y"])


def test_warning_where_the_cpu_lacks_avx512_bf16(monkeypatch):
    from onnxc.codegen.kernels import bf16

    monkeypatch.setattr(bf16, "cpu_flags", lambda: {"avx512f", "avx2"})
    with pytest.warns(RuntimeWarning, match="no AVX512_BF16"):
        bf16.warn_if_slow()
    monkeypatch.setattr(bf16, "cpu_flags", lambda: {"avx512f", "avx512_bf16"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bf16.warn_if_slow()
