"""The packed float GEMM (runtime_c/onnxc_sgemm.h), its compile-time packed weights and the convolution
paths and fused epilogues built on it (codegen/kernels/conv.py, matmul.py, epilogue.py)."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.kernels.gemm_layout import MR, NR, pack_a, pack_b, packed_a_size, packed_b_size
from onnxc.codegen.runtime_lib import sources_for

from .util import check_node, cpu_flags, node_model, random_array, reference

CHECK_C = Path(__file__).with_name("gemm_check.c")
X86 = platform.machine() in ("x86_64", "AMD64")




def _build(tmp_path: Path, flags: list[str], cc: str | None = None) -> Path:
    cc = cc or default_cc()
    exe = tmp_path / "gemm_check"
    srcs = [str(CHECK_C), *map(str, sources_for(CHECK_C.read_text()))]
    cmd = [cc, "-std=gnu11", "-O2", *flags, "-I", str(runtime_dir()), *srcs, "-o", str(exe), "-lm"]
    cmd[1:1] = thread_flags(cc) if cc == default_cc() else ("-pthread",)
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


# -- the C GEMM against the reference, one build per micro-kernel -----------------------------------

TARGETS = [
    pytest.param("native", ["-march=native"], None, id="native"),
    pytest.param("avx2", ["-march=haswell"], "avx2", id="avx2",
                 marks=pytest.mark.skipif(not (X86 and {"avx2", "fma"} <= cpu_flags()), reason="needs AVX2+FMA")),
    pytest.param("portable", ["-march=x86-64"], "portable", id="portable",
                 marks=pytest.mark.skipif(not X86, reason="x86-64 baseline build")),
]


@pytest.mark.parametrize("name,flags,isa", TARGETS)
def test_sgemm_matches_reference(tmp_path, name, flags, isa):
    exe = _build(tmp_path, flags)
    r = subprocess.run([str(exe), "run"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-3000:]
    got_isa = r.stdout.split()[1]
    if isa is None:  # native: the widest kernel the machine has
        flags_ = cpu_flags()
        isa = "avx512" if "avx512f" in flags_ else "avx2" if {"avx2", "fma"} <= flags_ else got_isa
    assert got_isa == isa


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64")),
                    reason="needs an aarch64 cross compiler and qemu-user")
def test_sgemm_neon_under_qemu(tmp_path):
    exe = _build(tmp_path, ["-static"], cc="aarch64-linux-gnu-gcc")
    r = subprocess.run(["qemu-aarch64", str(exe), "run", "2e5"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-3000:]
    assert r.stdout.split()[1] == "neon"


# -- packed layout: numpy (compile time) and C (run time) agree --------------------------------------

@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (12, 5, 32), (13, 7, 33), (30, 17, 70), (5, 64, 100)])
def test_packed_layout_numpy_matches_c(tmp_path, m, k, n):
    exe = _build(tmp_path, ["-march=native"])
    raw = subprocess.run([str(exe), "pack", str(m), str(k), str(n)], capture_output=True, check=True).stdout
    got = np.frombuffer(raw, dtype=np.float32)
    na, nb = packed_a_size(m, k), packed_b_size(k, n)
    assert got.size == 2 * na + 2 * nb
    a = np.arange(m * k, dtype=np.float32).reshape(m, k)
    b = np.arange(k * n, dtype=np.float32).reshape(k, n)
    pa, pb = pack_a(a), pack_b(b)
    assert pa.size == na and pb.size == nb
    np.testing.assert_array_equal(got[:na], pa)
    np.testing.assert_array_equal(got[na:2 * na], pa)  # packed from the transposed storage
    np.testing.assert_array_equal(got[2 * na:2 * na + nb], pb)
    np.testing.assert_array_equal(got[2 * na + nb:], pb)


def test_packed_layout_formula():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((14, 3)).astype(np.float32), rng.standard_normal((3, 40)).astype(np.float32)
    pa, pb = pack_a(a), pack_b(b)
    for i in range(14):
        for p in range(3):
            assert pa[(i // MR) * 3 * MR + p * MR + i % MR] == a[i, p]
    for p in range(3):
        for j in range(40):
            assert pb[(j // NR) * 3 * NR + p * NR + j % NR] == b[p, j]
    assert not pa.reshape(-1, 3, MR)[1, :, 2:].any() and not pb.reshape(-1, 3, NR)[1, :, 8:].any()  # zero padding


# -- MatMul / Gemm with constant (pre-packed) and run-time B ----------------------------------------

def _weights_bytes(compiled) -> int:
    return len(compiled.program.weights)


# M > 8: rows counts up to 8 take the GEMV path (codegen/kernels/gemv.py), with its own packing
@pytest.mark.parametrize("m,k,n", [(9, 100, 33), (40, 7, 9), (17, 65, 127), (64, 1, 15), (33, 1000, 7)])
def test_matmul_constant_b_is_prepacked(m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    a, b = random_array(rng, (m, k)), random_array(rng, (k, n))
    check_node("MatMul", {"a": a, "b": b}, const_inputs=("b",), rtol=1e-4, atol=1e-4)
    compiled = onnxc.compile(node_model("MatMul", {"a": a, "b": b}, const_inputs=("b",)))
    assert "ONNXC_SG_PACKED" in compiled.c_source
    assert _weights_bytes(compiled) == 4 * packed_b_size(k, n)  # only the packed copy is stored


def test_matmul_batched_a_symbolic_rows():
    rng = np.random.default_rng(3)
    a, b = random_array(rng, (2, 3, 13, 40)), random_array(rng, (40, 70))
    check_node("MatMul", {"a": a, "b": b}, const_inputs=("b",), input_shapes={"a": ["N", 3, "S", 40]},
               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ta,tb,alpha,beta,cshape", [(0, 0, 1.0, 1.0, (1, 50)), (1, 0, 0.5, 2.0, (30, 1)),
                                                    (0, 1, -1.0, 0.0, None), (1, 1, 2.0, 0.5, (30, 50))])
@pytest.mark.parametrize("const_b", [True, False])
def test_gemm_transposes_alpha_beta(ta, tb, alpha, beta, cshape, const_b):
    rng = np.random.default_rng(ta * 2 + tb)
    a = random_array(rng, (40, 30) if ta else (30, 40))
    b = random_array(rng, (50, 40) if tb else (40, 50))
    ins = {"a": a, "b": b, "c": None if cshape is None else random_array(rng, cshape)}
    check_node("Gemm", ins, const_inputs=("b",) if const_b else (), transA=ta, transB=tb, alpha=alpha, beta=beta,
               rtol=1e-4, atol=1e-4)


def test_gemm_two_threads_matches_one():
    rng = np.random.default_rng(7)
    a, b = random_array(rng, (257, 300)), random_array(rng, (300, 129))
    m = node_model("Gemm", {"a": a, "b": b}, const_inputs=("b",))
    one = onnxc.compile(m, threads=1).run({"a": a})["y0"]
    two = onnxc.compile(m, threads=2).run({"a": a})["y0"]
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(one, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n,ta,tb", [
    (300, 450, 70, 0, 0),   # stripes of rows: B packed once for both threads
    (40, 450, 500, 0, 0),   # stripes of columns: A packed once
    (300, 450, 70, 1, 1),
    (40, 450, 500, 1, 1),
])
def test_gemm_two_threads_share_the_packed_operand(m, k, n, ta, tb):
    """Neither operand constant: with two threads the shared operand is packed once into whole panels;
    the K slices are the same, so the result is bit-identical to one thread."""
    rng = np.random.default_rng(11)
    a = random_array(rng, (k, m) if ta else (m, k))
    b = random_array(rng, (n, k) if tb else (k, n))
    mdl = node_model("Gemm", {"a": a, "b": b}, transA=ta, transB=tb)
    one = onnxc.compile(mdl, threads=1).run({"a": a, "b": b})["y0"]
    two = onnxc.compile(mdl, threads=2).run({"a": a, "b": b})["y0"]
    np.testing.assert_array_equal(two, one)
    ref = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(one, ref, rtol=1e-4, atol=1e-4)


# -- Conv: every path against onnx.reference --------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((2, 8, 7, 9), (40, 8, 1, 1), {}),                                            # pointwise
    ((1, 6, 9, 9), (4, 3, 1, 1), {"group": 2}),                                   # pointwise, grouped
    ((1, 3, 19, 17), (13, 3, 3, 3), {"pads": [1, 1, 1, 1]}),                      # im2col, padded
    ((1, 8, 17, 13), (16, 4, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 0, 1]}),
    ((1, 5, 40, 40), (7, 5, 5, 5), {"strides": [3, 3], "pads": [2, 1, 2, 3]}),    # strided gather
    ((1, 4, 12, 12), (6, 4, 1, 1), {"strides": [2, 2]}),                          # 1x1 stride 2: im2col
    ((1, 8, 11, 11), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # depthwise
    ((2, 4, 10, 13), (12, 1, 3, 5), {"group": 4, "dilations": [2, 1], "pads": [2, 2, 2, 2]}),  # depthwise x3
    ((1, 3, 30), (5, 3, 4), {"strides": [3], "pads": [1, 2]}),                    # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),             # 3-D
    ((1, 4, 6, 5, 4), (4, 1, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1, 1, 1]}),  # 3-D depthwise
    ((1, 16, 70, 3), (100, 16, 3, 3), {"auto_pad": "SAME_UPPER"}),                # many output channels
    # the rows variant (W stride 1 or 2): dilations, H strides, asymmetric pads, 3-D, output rows of 1
    ((1, 6, 20, 37), (9, 6, 3, 3), {"dilations": [2, 3], "pads": [2, 3, 1, 0], "strides": [3, 1]}),
    ((2, 5, 23, 41), (7, 5, 3, 5), {"strides": [2, 2], "pads": [0, 2, 1, 1]}),
    ((1, 3, 9, 8, 10), (4, 3, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]}),
    ((1, 4, 9, 3), (6, 4, 3, 3), {"strides": [1, 2]}),                          # OW = 1
    ((1, 3, 7, 7), (8, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),     # first ResNet conv, small
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("const_w", [True, False])
def test_conv_paths(xs, ws, attrs, const_w):
    rng = np.random.default_rng(len(xs) * 100 + ws[0])
    ins = {"x": random_array(rng, xs), "w": random_array(rng, ws), "b": random_array(rng, (ws[0],))}
    check_node("Conv", ins, const_inputs=("w", "b") if const_w else (), rtol=1e-4, atol=1e-4, **attrs)


@pytest.mark.parametrize("attrs", [{"pads": [1, 1, 1, 1]}, {"strides": [2, 2], "pads": [1, 0, 1, 0]},
                                   {"strides": [3, 3]}])
def test_conv_two_threads(attrs, monkeypatch):
    # the direct paths (the Winograd path has its own two-thread tests, with the tolerance of its float32 error)
    monkeypatch.setenv("ONNXC_WINOGRAD", "0")
    rng = np.random.default_rng(5)
    x, w, b = random_array(rng, (2, 48, 30, 30)), random_array(rng, (40, 48, 3, 3)), random_array(rng, (40,))
    m = node_model("Conv", {"x": x, "w": w, "b": b}, const_inputs=("w", "b"), **attrs)
    want = reference(m, {"x": x})[0]
    for threads in (1, 2):
        np.testing.assert_allclose(onnxc.compile(m, threads=threads).run({"x": x})["y0"], want, rtol=1e-4, atol=2e-4)


def test_conv_symbolic_batch_and_size():
    rng = np.random.default_rng(11)
    ins = {"x": random_array(rng, (3, 6, 15, 11)), "w": random_array(rng, (10, 3, 3, 3))}
    check_node("Conv", ins, const_inputs=("w",), input_shapes={"x": ["N", 6, "H", "W"]}, group=2,
               pads=[1, 0, 1, 2], strides=[1, 2], rtol=1e-4, atol=1e-4)


def test_conv_double_and_large_chunked(monkeypatch):
    monkeypatch.setenv("ONNXC_WINOGRAD", "0")  # the 3x3 case pins the GEMM path, not conv_winograd's
    rng = np.random.default_rng(12)
    check_node("Conv", {"x": random_array(rng, (1, 3, 9, 8), np.float64), "w": random_array(rng, (4, 3, 3, 3),
               np.float64)}, const_inputs=("w",), pads=[1, 1, 1, 1], rtol=1e-10, atol=1e-10)
    # K * positions beyond one packed im2col chunk: several chunks per image
    check_node("Conv", {"x": random_array(rng, (1, 64, 40, 40)), "w": random_array(rng, (20, 64, 3, 3))},
               const_inputs=("w",), pads=[1, 1, 1, 1], rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("ws,attrs,calls", [
    ((8, 4, 1, 1), {}, {"onnxc_sgemm_ex(": True, "onnxc_sg_conv_rows(": False, "onnxc_sg_im2col_packed(": False}),
    ((8, 4, 3, 3), {"pads": [1, 1, 1, 1]}, {"onnxc_sg_conv_rows(": True}),
    ((8, 4, 3, 3), {"strides": [2, 2]}, {"onnxc_sg_conv_rows(": True, "onnxc_sg_im2col_packed(": False}),
    ((8, 4, 3, 3), {"strides": [3, 3]}, {"onnxc_sg_conv_rows(": False, "onnxc_sg_im2col_packed(": True}),
    ((8, 4, 1, 1), {"strides": [2, 2]}, {"onnxc_sg_conv_rows(": False, "onnxc_sg_im2col_packed(": True}),
    ((4, 1, 3, 3), {"group": 4}, {"onnxc_sgemm_ex(": False}),
])
def test_conv_path_chosen(ws, attrs, calls):
    """The intended convolution path is in the generated code (rows: W stride 1 or 2 and more than one
    tap; chunked im2col otherwise; pointwise: one GEMM; depthwise: no GEMM)."""
    rng = np.random.default_rng(1)
    x, w = random_array(rng, (1, 4, 12, 12)), random_array(rng, ws)
    src = onnxc.compile(node_model("Conv", {"x": x, "w": w}, const_inputs=("w",), **attrs)).c_source
    for call, present in calls.items():
        assert (call in src) == present, call


def test_conv_weights_prepacked_once():
    rng = np.random.default_rng(13)
    x, w = random_array(rng, (1, 6, 9, 9)), random_array(rng, (10, 3, 3, 3))
    compiled = onnxc.compile(node_model("Conv", {"x": x, "w": w}, const_inputs=("w",), group=2))
    assert "onnxc_sg_pack_a(" not in compiled.c_source  # no packing of the filter at run time
    assert _weights_bytes(compiled) == 4 * 2 * packed_a_size(5, 27)


# -- fused epilogues (node attributes a fusion pass sets) --------------------------------------------

def _np_act(name: str | None, params: list[float], y: np.ndarray) -> np.ndarray:
    if name is None:
        return y
    if name == "Relu":
        return np.maximum(y, 0)
    if name == "Clip":
        lo, hi = (params + [-np.inf, np.inf][len(params):])
        return np.clip(y, lo, hi)
    if name == "LeakyRelu":
        return np.where(y < 0, (params or [0.01])[0] * y, y)
    if name == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    if name == "HardSigmoid":
        a, b = (params + [0.2, 0.5][len(params):])
        return np.clip(a * y + b, 0, 1)
    if name == "HardSwish":
        return y * np.clip(y / 6 + 0.5, 0, 1)
    return np.tanh(y)


EPILOGUES = [("Relu", []), ("Clip", [0.0, 6.0]), ("Clip", [-0.5]), ("LeakyRelu", [0.2]), ("LeakyRelu", []),
             ("Sigmoid", []), ("HardSigmoid", [0.3]), ("HardSwish", []), ("Tanh", [])]


def _fused_model(op: str, inputs: dict[str, np.ndarray | None], const: tuple, act: str | None, params: list[float],
                 residual: bool, dtype=np.float32, **attrs) -> onnx.ModelProto:
    extra = {}
    if act:
        extra["onnxc_activation"] = act
        if params:
            extra["onnxc_activation_params"] = params
    if residual:
        extra["onnxc_residual"] = 1
    names = list(inputs)
    node = helper.make_node(op, [n if inputs[n] is not None else "" for n in names], ["y"], **attrs, **extra)
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(v.shape))
            for n, v in inputs.items() if v is not None and n not in const]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in inputs.items() if v is not None and n in const]
    graph = helper.make_graph([node], "t", g_in, [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED,
                                                                              None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


# each activation once, on the conv paths in turn (im2col = the rows variant, chunked = W stride 3), with
# and without a residual
CONV_EPILOGUES = [(act, params, ("pointwise", "im2col", "depthwise")[i % 3], i % 2 == 0)
                  for i, (act, params) in enumerate(EPILOGUES)] + [("Relu", [], "im2col", False),
                                                                   ("Relu", [], "depthwise", False),
                                                                   (None, [], "pointwise", True),
                                                                   ("Relu", [], "chunked", True),
                                                                   ("HardSigmoid", [], "chunked", False)]


@pytest.mark.parametrize("act,params,kind,residual", CONV_EPILOGUES)
def test_conv_epilogue(act, params, kind, residual):
    rng = np.random.default_rng(len(act or "") + 10 * residual)
    xs, ws, attrs = {"pointwise": ((1, 8, 7, 9), (12, 8, 1, 1), {}),
                     "im2col": ((2, 6, 9, 8), (14, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
                     "depthwise": ((1, 6, 9, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
                     "chunked": ((1, 4, 20, 20), (40, 4, 3, 3), {"strides": [3, 3], "pads": [1, 1, 1, 1]})}[kind]
    x, w, b = random_array(rng, xs), random_array(rng, ws), random_array(rng, (ws[0],))
    plain = node_model("Conv", {"x": x, "w": w, "b": b}, const_inputs=("w", "b"), **attrs)
    y = reference(plain, {"x": x})[0]
    r = random_array(rng, y.shape)
    want = _np_act(act, params, y + r if residual else y)
    ins = {"x": x, "w": w, "b": b} | ({"r": r} if residual else {})
    m = _fused_model("Conv", ins, ("w", "b"), act, params, residual, **attrs)
    got = onnxc.compile(m).run({"x": x} | ({"r": r} if residual else {}))["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act,params", [("Relu", []), ("Clip", [-1.0, 1.0]), ("HardSwish", [])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_epilogue_no_bias_and_double(act, params, dtype):
    rng = np.random.default_rng(21)
    x, w = random_array(rng, (1, 4, 8, 8), dtype), random_array(rng, (5, 4, 3, 3), dtype)
    y = reference(node_model("Conv", {"x": x, "w": w}, const_inputs=("w",)), {"x": x})[0]
    r = random_array(rng, y.shape, dtype)
    m = _fused_model("Conv", {"x": x, "w": w, "b": None, "r": r}, ("w",), act, params, True, dtype=dtype)
    got = onnxc.compile(m).run({"x": x, "r": r})["y"]
    np.testing.assert_allclose(got, _np_act(act, params, y + r), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
@pytest.mark.parametrize("act,params", [("Relu", []), ("Sigmoid", []), ("Clip", [0.0, 6.0])])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("m", [1, 37])
def test_matmul_gemm_epilogue(op, act, params, residual, m):
    rng = np.random.default_rng(m + residual)
    a, b = random_array(rng, (m, 50)), random_array(rng, (50, 45))
    r = random_array(rng, (m, 45))
    ins = {"a": a, "b": b} | ({"c": random_array(rng, (45,))} if op == "Gemm" else {})
    y = a @ b + (ins["c"] if op == "Gemm" else 0)
    if residual:  # input 3 of Gemm (after C), input 2 of MatMul
        ins["r"] = r
    m_ = _fused_model(op, ins, ("b", "c"), act, params, residual)
    got = onnxc.compile(m_).run({"a": a} | ({"r": r} if residual else {}))["y"]
    np.testing.assert_allclose(got, _np_act(act, params, y + r if residual else y), rtol=1e-4, atol=1e-4)


def test_epilogue_rejects_unknown_activation():
    rng = np.random.default_rng(0)
    x, w = random_array(rng, (1, 2, 4, 4)), random_array(rng, (3, 2, 1, 1))
    m = _fused_model("Conv", {"x": x, "w": w}, ("w",), "Softsign", [], False)
    with pytest.raises(onnxc.UnsupportedOpError, match="onnxc_activation='Softsign'"):
        onnxc.compile(m)
