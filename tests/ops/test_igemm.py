"""The exact 8-bit integer GEMM (runtime_c/onnxc_igemm.h): each micro-kernel this CPU runs (chosen at run time:
avx512vnni, avx2, portable, switched with onnxc_igemm_use_isa as ONNXC_ISA caps it), in a -march=native and
an old-target (x86-64) build, against a numpy int64 reference over shapes, sign combinations, operand forms,
zero points, epilogues and threads; the C packers against codegen/kernels/igemm_layout.py byte for byte; and im2col
against a numpy im2col. tests/ops/igemm_check.c exports the runtime functions to cffi."""

from __future__ import annotations

import math
import platform
import shutil
import subprocess
from pathlib import Path

import cffi
import numpy as np
import pytest

from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.kernels.igemm_layout import MR, NR, pack_a, pack_b, packed_a_size, packed_b_size
from onnxc.codegen.runtime_lib import sources_for

from .util import cpu_flags

CHECK_C = Path(__file__).with_name("igemm_check.c")
X86 = platform.machine() in ("x86_64", "AMD64")
ERR_INPUT = 1
PLAIN, PACK, PACK_HOT, GIVEN, GIVEN_HOT = range(5)  # operand codes of check_gemm
I32, QLINEAR, DEQUANT = range(3)
OUT_I32, OUT_U8, OUT_S8, OUT_F32 = range(4)
ACT = {"none": 0, "relu": 1, "clip": 2, "leakyrelu": 3, "sigmoid": 4, "tanh": 7, "gelu": 9}

CDEF = """
const char *check_isa(void);
int check_use_isa(const char *name);
void check_pack_a(const uint8_t *A, int64_t lda, int a_u8, int64_t M, int64_t K, int to_u8, uint8_t *dst);
void check_pack_b(const uint8_t *B, int64_t ldb, int b_u8, int64_t K, int64_t N, int to_u8, uint8_t *dst);
void check_im2col(int threads, const uint8_t *x, int x_u8, int32_t x_zp, int to_u8, int64_t ID, int64_t IH,
                  int64_t IW, int64_t OH, int64_t OW, const int64_t *kdim, const int64_t *stride,
                  const int64_t *dil, const int64_t *pad, int64_t KG, int64_t j0, int64_t ncol, uint8_t *colp);
int check_gemm(int threads, int64_t M, int64_t N, int64_t K, const uint8_t *A, int64_t lda, int a_u8, int fa,
               int pa_u8, const int32_t *za, int za_per, const uint8_t *B, int64_t ldb, int b_u8, int fb, int pb_u8,
               const int32_t *zb, int zb_per, int mode, int per_n, const float *mult, int32_t zy,
               const int32_t *ibias, const float *scale, const float *bias, int act, float act_a, float act_b,
               float y_scale, int32_t y_zp, void *out, int out_type, int64_t ldc);
void check_sg_pack(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *Ap, float *Bp);
int check_sgemm(int threads, int64_t M, int64_t N, int64_t K, const float *Ap, const float *Bp, float *C);
"""




class IGemm:
    """igemm_check.c built for one target and loaded through cffi; numpy arrays in and out."""

    def __init__(self, folder: Path, flags: list[str], isa: str | None = None):
        """``isa``: the micro-kernel to use (None: the one chosen at run time). Each (flags, isa) loads its own
        copy of the library, so the kernel choice of one does not reach another."""
        cc = default_cc()
        so = folder / f"igemm_check{abs(hash(tuple(flags)))}.so"
        if not so.exists():
            srcs = [str(CHECK_C), *map(str, sources_for(CHECK_C.read_text()))]
            cmd = [cc, "-std=gnu11", "-O3", *flags, *thread_flags(cc), "-shared", "-fPIC", "-I",
                   str(runtime_dir()), *srcs, "-o", str(so), "-lm"]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        if isa is not None:
            copy = so.with_name(f"{so.stem}-{isa}.so")
            shutil.copyfile(so, copy)
            so = copy
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self.ffi.dlopen(str(so))
        if isa is not None and self.lib.check_use_isa(isa.encode()) != 0:
            raise ValueError(f"this CPU does not run the {isa} micro-kernel")
        self.isa = self.ffi.string(self.lib.check_isa()).decode()
        self.flags = flags

    def ptr(self, a: np.ndarray | None, t: str = "void *"):
        return self.ffi.NULL if a is None else self.ffi.cast(t, a.ctypes.data)

    def pack(self, x: np.ndarray, to_u8: bool, b: bool) -> np.ndarray:
        rows, cols = x.shape
        out = np.zeros(packed_b_size(rows, cols) if b else packed_a_size(rows, cols), np.uint8)
        fn = self.lib.check_pack_b if b else self.lib.check_pack_a
        fn(self.ptr(x), cols, int(x.dtype == np.uint8), rows, cols, int(to_u8), self.ptr(out))
        return out

    def im2col(self, x: np.ndarray, zp: int, to_u8: bool, out_sp, kdim, stride, dil, pad, j0=0, ncol=None,
               threads=1) -> np.ndarray:
        """x: (C, D, H, W); returns the packed panels of output positions [j0, j0 + ncol)."""
        kg = x.shape[0] * int(np.prod(kdim))
        ncol = int(np.prod(out_sp)) - j0 if ncol is None else ncol
        out = np.full(packed_b_size(kg, ncol), 0xAB, np.uint8)
        i64 = [np.array(v, np.int64) for v in (kdim, stride, dil, pad)]
        self.lib.check_im2col(threads, self.ptr(x), int(x.dtype == np.uint8), zp, int(to_u8), *x.shape[1:],
                              out_sp[1], out_sp[2], *(self.ptr(v, "int64_t *") for v in i64), kg, j0, ncol,
                              self.ptr(out))
        return out[: out.size - 4 * (-(-ncol // NR) * NR)]

    def gemm(self, A, B, fa=PLAIN, fb=PLAIN, pa_u8=None, pb_u8=None, za=None, zb=None, threads=1, mode=I32,
             per_n=False, mult=None, zy=0, ibias=None, scale=None, bias=None, act="none", act_a=0.0, act_b=0.0,
             y_scale=0.0, y_zp=0, out_type=OUT_I32, shape=None, types=None):
        """C = epilogue((A - za) @ (B - zb)); A / B are plain 2-D arrays, or packed bytes (GIVEN forms: then
        shape = (M, N, K), types = the operands' own types (u8 flags), pa_u8 / pb_u8 the packed ones).
        Returns (status, C)."""
        M, N, K = shape or (A.shape[0], B.shape[1], A.shape[1])
        a_u8, b_u8 = types or (A.dtype == np.uint8, B.dtype == np.uint8)
        a_u8, b_u8 = int(a_u8), int(b_u8)
        pa_u8 = a_u8 if pa_u8 is None else int(pa_u8)
        pb_u8 = 1 - pa_u8 if pb_u8 is None else int(pb_u8)
        za = None if za is None else np.ascontiguousarray(za, np.int32)
        zb = None if zb is None else np.ascontiguousarray(zb, np.int32)
        dt = {OUT_I32: np.int32, OUT_U8: np.uint8, OUT_S8: np.int8, OUT_F32: np.float32}[out_type]
        C = np.zeros((max(M, 0), max(N, 0)), dt)
        f32 = [None if v is None else np.ascontiguousarray(v, np.float32) for v in (mult, scale, bias)]
        ibias = None if ibias is None else np.ascontiguousarray(ibias, np.int32)
        st = self.lib.check_gemm(
            threads, M, N, K, self.ptr(A), K, a_u8, fa, pa_u8, self.ptr(za), int(za is not None and za.size > 1),
            self.ptr(B), N, b_u8, fb, pb_u8, self.ptr(zb), int(zb is not None and zb.size > 1), mode, int(per_n),
            self.ptr(f32[0], "float *"), zy, self.ptr(ibias, "int32_t *"), *(self.ptr(v, "float *") for v in f32[1:]),
            ACT[act],
            act_a, act_b, y_scale, y_zp, self.ptr(C), out_type, N)
        return st, C


def acc_ref(A, B, za=None, zb=None) -> np.ndarray:
    """The accumulators in int64, wrapped to int32 like the GEMM's."""
    a = A.astype(np.int64) - (0 if za is None else np.asarray(za, np.int64).reshape(-1, 1))
    b = B.astype(np.int64) - (0 if zb is None else np.asarray(zb, np.int64).reshape(1, -1))
    return ((a @ b + 2**31) % 2**32 - 2**31).astype(np.int32)


def rand_bytes(rng, shape, u8: bool) -> np.ndarray:
    return rng.integers(0, 256, shape).astype(np.uint8) if u8 else rng.integers(-128, 128, shape).astype(np.int8)


def best_isa() -> str:
    flags = cpu_flags()
    return "avx512vnni" if {"avx512_vnni", "avx512bw"} <= flags else "avx2" if "avx2" in flags else "portable"


def _runs(isa: str) -> bool:
    return {"avx512vnni": best_isa() == "avx512vnni", "avx2": X86 and "avx2" in cpu_flags()}.get(isa, True)


# (build flags, micro-kernel): every kernel this CPU runs in the native build; the old-target build with the
# kernel chosen at run time (the best this CPU runs, not the build's target)
TARGETS = [
    *(pytest.param((["-march=native"], isa), id=f"native-{isa}",
                   marks=pytest.mark.skipif(not _runs(isa), reason=f"this CPU does not run {isa}"))
      for isa in ("avx512vnni", "avx2", "portable")),
    pytest.param((["-march=x86-64"], None), id="x86-64-dispatch",
                 marks=pytest.mark.skipif(not X86, reason="x86-64 build")),
]


@pytest.fixture(scope="module", params=TARGETS)
def ig(request, tmp_path_factory) -> IGemm:
    flags, isa = request.param
    return IGemm(tmp_path_factory.getbasetemp(), flags, isa)


def test_isa_of_each_build(ig):
    """The kernel asked for is the one in use; an old-target build runs the best kernel of this CPU."""
    if ig.flags == ["-march=x86-64"]:
        assert ig.isa == best_isa()
    assert ig.lib.check_use_isa(b"no-such-isa") == -1
    assert ig.isa == ig.ffi.string(ig.lib.check_isa()).decode()


def test_isa_cap_from_the_environment(tmp_path):
    """ONNXC_ISA caps the kernel chosen on first use (a fresh process reads it)."""
    import os
    import sys

    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[2])!r}); from tests.ops.test_igemm import IGemm; "
            f"from pathlib import Path; print(IGemm(Path({str(tmp_path)!r}), ['-march=native']).isa)")
    for cap, want in (("portable", "portable"), ("", best_isa()), ("avx2", "avx2" if _runs("avx2") else "portable")):
        env = dict(os.environ, ONNXC_ISA=cap)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want, (cap, out.stderr)


# -- int32 accumulators: shapes x signs x operand forms x zero points ------------------------------------

SHAPES = [(1, 1, 1), (1, 37, 5), (12, 32, 4), (13, 33, 7), (5, 100, 64), (30, 70, 17), (25, 40, 1001),
          (64, 96, 576), (3, 1, 130), (24, 64, 2)]
FORMS = [(PLAIN, PLAIN), (PLAIN, PACK), (PACK, PLAIN), (PACK, PACK_HOT), (PACK_HOT, PACK), (PLAIN, PACK_HOT)]


def _zero_points(rng, kind: str, n: int, u8: bool):
    lo, hi = (0, 256) if u8 else (-128, 128)
    return {"none": None, "zero": [0], "one": rng.integers(lo, hi, 1), "per": rng.integers(lo, hi, n)}[kind]


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_i32_signs_forms_zero_points(ig, m, n, k):
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    bad = []
    for case in range(24):
        a_u8, b_u8 = bool(case & 1), bool(case & 2)
        fa, fb = FORMS[case % len(FORMS)]
        pa_u8 = a_u8 if fa == PLAIN else bool(case & 4)  # a packed A holds either byte type
        A, B = rand_bytes(rng, (m, k), a_u8), rand_bytes(rng, (k, n), b_u8)
        za = _zero_points(rng, ("none", "one", "per", "zero")[case % 4], m, a_u8)
        zb = _zero_points(rng, ("per", "none", "one", "per")[(case // 4) % 4], n, b_u8)
        st, C = ig.gemm(A, B, fa, fb, pa_u8=pa_u8, za=za, zb=zb)
        if st != 0 or not np.array_equal(C, acc_ref(A, B, za, zb)):
            bad.append((a_u8, b_u8, fa, fb, pa_u8, za is not None, zb is not None, st))
    assert not bad, f"M={m} N={n} K={k}: (a_u8, b_u8, fa, fb, pa_u8, za, zb, status) failing: {bad}"


def test_given_packed_operands_and_wraparound(ig):
    rng = np.random.default_rng(1)
    A, B = rand_bytes(rng, (20, 45), False), rand_bytes(rng, (45, 50), True)
    Ap, Bp = ig.pack(A, False, False), ig.pack(B, True, True)
    for fa, fb in [(GIVEN, GIVEN), (GIVEN_HOT, GIVEN_HOT), (GIVEN, GIVEN_HOT)]:
        st, C = ig.gemm(Ap, Bp, fa, fb, pa_u8=False, pb_u8=True, za=[3], zb=[200], shape=(20, 50, 45),
                        types=(False, True))
        assert st == 0 and np.array_equal(C, acc_ref(A, B, [3], [200]))
    # |sum| > 2^31: int32 with wrap-around
    A, B = np.full((2, 70000), 255, np.uint8), np.full((70000, 3), -128, np.int8)
    assert (A[0].astype(np.int64) * (B[:, 0] - 127.0)).sum() < -(2**31)
    st, C = ig.gemm(A, B, za=[0], zb=[127])
    assert st == 0 and np.array_equal(C, acc_ref(A, B, [0], [127]))


@pytest.mark.parametrize("m,n,k,fb", [(200, 300, 100, PLAIN), (600, 40, 90, PLAIN), (200, 300, 100, PACK_HOT),
                                      (600, 40, 90, PACK)])
def test_two_threads_match_one(ig, m, n, k, fb):
    """Chunks along N (wide) or M (tall); a plain B is packed per thread."""
    rng = np.random.default_rng(m + n)
    A, B = rand_bytes(rng, (m, k), True), rand_bytes(rng, (k, n), True)
    za, zb = rng.integers(0, 256, m), [77]
    one, two = ig.gemm(A, B, PLAIN, fb, za=za, zb=zb), ig.gemm(A, B, PLAIN, fb, za=za, zb=zb, threads=2)
    assert one[0] == two[0] == 0
    np.testing.assert_array_equal(two[1], one[1])
    np.testing.assert_array_equal(one[1], acc_ref(A, B, za, zb))


def test_invalid_requests(ig):
    rng = np.random.default_rng(2)
    A, B = rand_bytes(rng, (4, 8), True), rand_bytes(rng, (8, 5), False)
    assert ig.gemm(A, B, PACK, PACK, pa_u8=True, pb_u8=True)[0] == ERR_INPUT  # one byte type on both sides
    assert ig.gemm(A, B, mode=QLINEAR, out_type=OUT_U8)[0] == ERR_INPUT  # no multipliers
    assert ig.gemm(A, B, mode=I32, out_type=OUT_F32)[0] == ERR_INPUT
    assert ig.gemm(A, B, mode=DEQUANT, scale=np.ones(4), out_type=OUT_I32)[0] == ERR_INPUT
    assert ig.gemm(A, B, shape=(-1, 5, 8))[0] == ERR_INPUT
    assert ig.gemm(A, B, shape=(0, 5, 8))[0] == 0
    st, C = ig.gemm(A[:, :0], B[:0], za=[9], zb=[4], shape=(4, 5, 0))  # K = 0: all zero
    assert st == 0 and not C.any()


# -- epilogues ---------------------------------------------------------------------------------------------

def _sat(r: np.ndarray, out_type: int) -> np.ndarray:
    lo, hi = (0, 255) if out_type == OUT_U8 else (-128, 127)
    return np.clip(r, lo, hi).astype(np.uint8 if out_type == OUT_U8 else np.int8)


@pytest.mark.parametrize("per_n", [False, True])
@pytest.mark.parametrize("out_type", [OUT_U8, OUT_S8])
def test_qlinear_is_bit_exact(ig, per_n, out_type):
    """saturate(rint((acc + ibias) * (double)mult + zy)), the ONNX reference rule: halves, saturation, a
    wrapping int32 bias."""
    rng = np.random.default_rng(3 + per_n)
    m, n, k = 29, 67, 300
    A, B = rand_bytes(rng, (m, k), True), rand_bytes(rng, (k, n), False)
    za, zb = rng.integers(0, 256, m), [5]
    c = n if per_n else m
    mult = (rng.random(c) * 2e-4).astype(np.float32)
    mult[:3] = [0.5, 2.0**-10, 1e-7]
    ibias = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    ibias[0] = 2**31 - 1
    sh = (1, -1) if per_n else (-1, 1)
    mm = mult.astype(np.float64).reshape(sh)
    for zy, bias in [(0, None), (100, ibias), (-20, ibias)]:
        acc = acc_ref(A, B, za, zb).astype(np.int64) + (0 if bias is None else bias.reshape(sh))
        acc = ((acc + 2**31) % 2**32 - 2**31).astype(np.float64)
        st, C = ig.gemm(A, B, PACK, PLAIN, pa_u8=False, za=za, zb=zb, mode=QLINEAR, per_n=per_n, mult=mult, zy=zy,
                        ibias=bias, out_type=out_type)
        assert st == 0
        np.testing.assert_array_equal(C, _sat(np.rint(acc * mm + zy), out_type))


def _erf(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(v)


LINEAR_ACT = {"none": lambda v: v, "relu": lambda v: np.maximum(v, np.float32(0)),
              "clip": lambda v: np.clip(v, np.float32(-1.0), np.float32(2.5)),
              "leakyrelu": lambda v: np.where(v < 0, np.float32(0.1) * v, v)}
SMOOTH_ACT = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh,
              "gelu": lambda v: 0.5 * v * (1 + _erf(v / np.sqrt(2)))}


@pytest.mark.parametrize("act", [*LINEAR_ACT, *SMOOTH_ACT])
@pytest.mark.parametrize("per_n", [False, True])
def test_dequant_float_and_requantized(ig, act, per_n):
    rng = np.random.default_rng(len(act) + 10 * per_n)
    m, n, k = 23, 45, 77
    A, B = rand_bytes(rng, (m, k), False), rand_bytes(rng, (k, n), True)
    zb = rng.integers(0, 256, n)
    c, sh = (n, (1, -1)) if per_n else (m, (-1, 1))
    scale = (rng.random(c) * 1e-4 + 1e-5).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    v = acc_ref(A, B, None, zb).astype(np.float32) * scale.reshape(sh) + bias.reshape(sh)  # float32 roundings
    ab = {"clip": (-1.0, 2.5), "leakyrelu": (0.1, 0.0)}.get(act, (0.0, 0.0))
    kw = dict(zb=zb, mode=DEQUANT, per_n=per_n, scale=scale, bias=bias, act=act, act_a=ab[0], act_b=ab[1])
    st, C = ig.gemm(A, B, PLAIN, PACK, **kw, out_type=OUT_F32)
    assert st == 0
    if act in LINEAR_ACT:  # the same float32 operations: bit for bit
        want = LINEAR_ACT[act](v)
        np.testing.assert_array_equal(C, want)
    else:
        want = SMOOTH_ACT[act](v.astype(np.float64))
        np.testing.assert_allclose(C, want, rtol=1e-6, atol=1e-6)
    for out_type, y_zp in [(OUT_U8, 128), (OUT_S8, -3)]:
        st, Q = ig.gemm(A, B, PLAIN, PACK, **kw, y_scale=0.02, y_zp=y_zp, out_type=out_type)
        ref = np.rint(np.asarray(want, np.float32) / np.float32(0.02)) + np.float32(y_zp)
        assert st == 0 and np.abs(Q.astype(np.int32) - _sat(ref, out_type).astype(np.int32)).max() <= (
            0 if act in LINEAR_ACT else 1)


# -- packed layout: numpy twin (compile time) and C packers (run time) agree -------------------------------

@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (12, 4, 32), (13, 7, 33), (30, 17, 70), (5, 64, 100), (40, 301, 3)])
def test_packers_match_numpy_twin(ig, m, k, n):
    rng = np.random.default_rng(m * 100 + k)
    for src_u8 in (False, True):
        A, B = rand_bytes(rng, (m, k), src_u8), rand_bytes(rng, (k, n), not src_u8)
        for to_u8 in (False, True):
            np.testing.assert_array_equal(ig.pack(A, to_u8, False), pack_a(A, to_u8))
            np.testing.assert_array_equal(ig.pack(B, to_u8, True), pack_b(B, to_u8))


def test_layout_formula():
    rng = np.random.default_rng(0)
    a, b = rand_bytes(rng, (14, 7), False), rand_bytes(rng, (6, 40), True)
    pa, pb = pack_a(a, to_u8=False), pack_b(b, to_u8=True)
    kq_a, kq_b = 2, 2
    for i in range(14):
        for k in range(7):
            assert pa[(i // MR) * kq_a * 4 * MR + (k // 4) * 4 * MR + (i % MR) * 4 + k % 4] == a.view(np.uint8)[i, k]
    for k in range(6):
        for j in range(40):
            assert pb[(j // NR) * kq_b * 4 * NR + (k // 4) * 4 * NR + (j % NR) * 4 + k % 4] == b[k, j]
    sums_a = pa[-(-14 // MR) * kq_a * 4 * MR:].view("<i4")
    np.testing.assert_array_equal(sums_a, np.r_[a.astype(np.int64).sum(1), np.zeros(-(-14 // MR) * MR - 14)])
    flipped = pack_b(b, to_u8=False)  # u8 -> int8 bytes: x ^ 0x80, sums of the int8 values
    assert flipped[0] == b[0, 0] ^ 0x80 and flipped[-4 * NR * 2:].view("<i4")[0] == (b[:, 0].astype(int) - 128).sum()
    assert packed_a_size(14, 7) == pa.size and packed_b_size(6, 40) == pb.size


# -- im2col into packed panels, and a convolution through it ----------------------------------------------

def np_im2col(x: np.ndarray, zp: int, kdim, stride, dil, pad, out_sp) -> np.ndarray:
    """The (C * KD * KH * KW) x (OD * OH * OW) column matrix of x (C, D, H, W); zp where padding is read."""
    C, D, H, W = x.shape
    kk = [g.reshape(-1, 1) for g in np.meshgrid(*map(np.arange, kdim), indexing="ij")]
    oo = [g.reshape(1, -1) for g in np.meshgrid(*map(np.arange, out_sp), indexing="ij")]
    idx = [o * s - p + k * d for o, s, p, k, d in zip(oo, stride, pad, kk, dil)]
    valid = np.ones(idx[0].shape, bool)
    for i, size in zip(idx, (D, H, W)):
        valid &= (i >= 0) & (i < size)
    vals = x[(slice(None), *(np.clip(i, 0, size - 1) for i, size in zip(idx, (D, H, W))))]
    return np.where(valid[None], vals, np.array(zp, x.dtype)).reshape(-1, valid.shape[1])


CONVS = [  # x (C, D, H, W), kernel, stride, dilation, leading pads, trailing pads, x is u8, zp, packed as u8
    ((5, 1, 13, 41), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1), True, 128, True),
    ((3, 1, 20, 17), (1, 3, 3), (1, 2, 2), (1, 2, 2), (0, 2, 2), (0, 1, 2), False, -5, True),
    ((4, 1, 1, 30), (1, 1, 5), (1, 1, 3), (1, 1, 1), (0, 0, 2), (0, 0, 1), True, 3, False),
    ((2, 5, 6, 7), (2, 3, 2), (2, 1, 2), (1, 1, 1), (1, 0, 1), (0, 1, 1), False, 0, True),
    ((4, 1, 9, 3), (1, 3, 3), (1, 1, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), True, 255, True),  # OW = 1
    ((4, 1, 40, 40), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1), True, 7, True),  # several blocks
    ((3, 1, 15, 16), (1, 7, 7), (1, 3, 3), (1, 1, 1), (0, 3, 3), (0, 3, 3), False, -128, False),
    ((256, 1, 14, 14), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1), True, 100, True),  # threads split K
]


@pytest.mark.parametrize("xs,kdim,stride,dil,pad,pend,x_u8,zp,to_u8", CONVS)
def test_im2col_and_conv(ig, xs, kdim, stride, dil, pad, pend, x_u8, zp, to_u8):
    rng = np.random.default_rng(sum(xs) + abs(zp))
    x = rand_bytes(rng, xs, x_u8)
    out_sp = [(n + p + q - d * (k - 1) - 1) // s + 1 for n, p, q, d, k, s in zip(xs[1:], pad, pend, dil, kdim, stride)]
    cols = np_im2col(x, zp, kdim, stride, dil, pad, out_sp)
    kg, op = cols.shape
    for j0, ncol, threads in [(0, op, 1), (min(37, op - 1), max(1, min(70, op - 37)), 2), (0, op, 2)]:
        got = ig.im2col(x, zp, to_u8, out_sp, kdim, stride, dil, pad, j0, ncol, threads)
        want = pack_b(cols[:, j0:j0 + ncol], to_u8)
        np.testing.assert_array_equal(got, want[: got.size], err_msg=f"chunk [{j0}, {j0 + ncol})")
    # the convolution: filter packed as A in the other byte type, per-channel zero points, the columns as B
    m = 19
    w = rand_bytes(rng, (m, kg), not x_u8)
    wz = rng.integers(0, 256, m) if not x_u8 else rng.integers(-128, 128, m)
    colp = ig.im2col(x, zp, to_u8, out_sp, kdim, stride, dil, pad)
    st, y = ig.gemm(ig.pack(w, not to_u8, False), colp, GIVEN, GIVEN_HOT, pa_u8=not to_u8, pb_u8=to_u8, za=wz,
                    zb=[zp], shape=(m, op, kg), types=(not x_u8, x_u8))
    assert st == 0
    np.testing.assert_array_equal(y, acc_ref(w, cols, wz, [zp]))
