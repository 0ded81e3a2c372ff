"""4-bit weights kept 4-bit: onnxc::MatMulNBits (codegen/kernels/matmul_nbits.py, runtime_c/onnxc_nbits.h),
reached from com.microsoft MatMulNBits and from DequantizeLinear(uint4 / int4 blocked along K) -> MatMul.

Numbers against onnxruntime (MatMulNBits with accuracy_level 0, which computes in float; the DQ ->
MatMul form with basic graph optimizations, op by op) and against numpy in float64 on the dequantized
weights (rtol 1e-5). One compiled model holds many nodes and runs at several sizes of a symbolic M: 1
and 3 take the GEMV, 64 the dequantize-then-float-GEMM path (above 16 rows). Each test asserts the kernel path ran:
the generated C calls onnxc_nbits_matmul and the weights blob holds about K * N / 2 bytes per weight,
not 4 K N. The runtime kernel is also built for AVX2 and portable C and checked against numpy and its
naive reference. Models the kernel does not take stay on the expansion / fold path.
"""

from __future__ import annotations

import platform
import subprocess

import cffi
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.kernels.matmul_nbits import pack_q, pack_table
from onnxc.codegen.runtime_lib import sources_for
from onnxc.frontend import load_model
from onnxc.ir import ShapeError
from onnxc.passes.pipeline import optimize

from .util import cpu_flags

MS, NBITS = "com.microsoft", ("onnxc", "MatMulNBits")
RNG = np.random.default_rng(17)
CALL = "onnxc_nbits_matmul("


# -- data ------------------------------------------------------------------------------------------
def weights(k: int, n: int, bs: int, zkind: str) -> dict:
    """Random q [K, N] (0..15), scales [nb, N] and zero points (None, uint8 or float) [nb, N]."""
    nb = -(-k // bs)
    z = None if zkind == "none" else RNG.integers(0, 16, (nb, n)).astype(np.uint8)
    if zkind == "float":
        z = (z + RNG.random((nb, n))).astype(np.float32)
    return {"q": RNG.integers(0, 16, (k, n)).astype(np.uint8), "s": RNG.uniform(0.01, 0.06, (nb, n)).astype(np.float32),
            "z": z, "bs": bs}


def dequantized(w: dict) -> np.ndarray:
    """W [K, N] in float64: (q - z) * s, z = 8 when absent."""
    rows = np.arange(w["q"].shape[0]) // w["bs"]
    z = 8.0 if w["z"] is None else w["z"].astype(np.float64)[rows]
    return (w["q"].astype(np.float64) - z) * w["s"].astype(np.float64)[rows]


def reference(a: np.ndarray, w: dict, bias: np.ndarray | None) -> np.ndarray:
    y = a.astype(np.float64) @ dequantized(w)
    return y if bias is None else y + bias


def check_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """rtol 1e-5, with an absolute floor for outputs that cancel to near 0."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max())), err_msg=what)


def pack_bits(v: np.ndarray) -> np.ndarray:
    """4-bit values along the last axis, two per byte, low nibble first (onnxruntime's packing)."""
    v = v.astype(np.uint8).reshape(*v.shape[:-1], -1, 2)
    return (v[..., 0] | (v[..., 1] << 4)).astype(np.uint8)


def ms_inputs(w: dict) -> dict:
    """MatMulNBits' B [N, nb, bs / 2], scales [N, nb] and zero points (packed uint8 or float) of ``w``."""
    (k, n), bs = w["q"].shape, w["bs"]
    nb = -(-k // bs)
    q = np.pad(w["q"].T, ((0, 0), (0, nb * bs - k)))
    out = {"b": pack_bits(q).reshape(n, nb, bs // 2), "s": np.ascontiguousarray(w["s"].T)}
    if w["z"] is not None:
        zt = w["z"].T
        out["z"] = np.ascontiguousarray(zt) if zt.dtype == np.float32 else pack_bits(np.pad(zt, ((0, 0), (0, nb % 2))))
    return out


def blob_bytes(cm: onnxc.CompiledModel) -> int:
    return len(memoryview(cm.program.weights).cast("B"))


def packed_bytes(k: int, n: int, bs: int, zkind: str) -> int:
    """The packed weights of one node: q, scales, zero points (uint8 or float)."""
    groups, nb = -(-n // 32), -(-k // bs)
    table = groups * nb * 32
    return groups * -(-k // 8) * 128 + 4 * table + {"none": 0, "packed": table, "float": 4 * table}[zkind]


# -- com.microsoft MatMulNBits ---------------------------------------------------------------------
# (K, N, block_size, zero points, bias, A's shape): K not a multiple of the block size (nor of 8), N not a
# multiple of 32, block sizes 16 / 32 / 128, packed uint8 and float zero points, batched A; the last one
# large enough to be split among threads on both paths
CASES = [(100, 70, 16, "packed", True, ["M", 100]), (300, 64, 32, "none", False, ["M", 300]),
         (200, 33, 128, "float", True, ["M", 200]), (256, 96, 32, "packed", False, [2, "M", 256]),
         (520, 40, 128, "none", True, ["M", 520]), (1040, 520, 32, "packed", True, ["M", 1040])]


def nbits_model() -> tuple[onnx.ModelProto, list[dict], list]:
    nodes, inits, inputs, ws, biases = [], [], [], [], []
    for j, (k, n, bs, zkind, has_bias, shape) in enumerate(CASES):
        w = weights(k, n, bs, "none" if zkind == "none" else "float" if zkind == "float" else "int")
        bias = RNG.standard_normal(n).astype(np.float32) if has_bias else None
        ins = ms_inputs(w)
        inits += [numpy_helper.from_array(v, f"{name}{j}") for name, v in ins.items()]
        names = [f"a{j}", f"b{j}", f"s{j}", f"z{j}" if "z" in ins else "", "", f"bias{j}" if has_bias else ""]
        if has_bias:
            inits.append(numpy_helper.from_array(bias, f"bias{j}"))
        while not names[-1]:
            names.pop()
        nodes.append(helper.make_node("MatMulNBits", names, [f"y{j}"], domain=MS, K=k, N=n, bits=4, block_size=bs,
                                      accuracy_level=0))
        inputs.append(helper.make_tensor_value_info(f"a{j}", TP.FLOAT, shape))
        ws.append(w)
        biases.append(bias)
    outs = [helper.make_tensor_value_info(f"y{j}", TP.FLOAT, None) for j in range(len(CASES))]
    g = helper.make_graph(nodes, "nbits", inputs, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]), ws, biases


def test_matmul_nbits_against_onnxruntime_and_numpy():
    """M = 1, 3 (GEMV) and 64 (prefill) through one compiled model per thread count; 1 and 2 threads
    give the same bits."""
    m, ws, biases = nbits_model()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert CALL in one.c_source and CALL in two.c_source
    assert [(n.domain, n.op_type) for n in one.ir.graph.nodes] == [NBITS] * len(CASES)
    want_bytes = sum(packed_bytes(k, n, bs, z) + 4 * n * b for k, n, bs, z, b, _ in CASES)
    assert want_bytes <= blob_bytes(one) <= want_bytes + 64 * 4 * len(CASES)  # 64-byte aligned pieces
    for rows in (1, 3, 64):
        feeds = {f"a{j}": RNG.standard_normal([rows if d == "M" else d for d in shape]).astype(np.float32)
                 for j, (*_, shape) in enumerate(CASES)}
        got, got2 = one.run(feeds), two.run(feeds)
        for j, want in enumerate(sess.run(None, feeds)):
            y = got[f"y{j}"]
            assert y.dtype == np.float32 and y.shape == want.shape
            check_close(y, reference(feeds[f"a{j}"], ws[j], biases[j]), f"y{j} M={rows} vs numpy")
            check_close(y, want, f"y{j} M={rows} vs onnxruntime")
            np.testing.assert_array_equal(got2[f"y{j}"], y, err_msg=f"y{j} M={rows}: 2 threads vs 1")


# -- DequantizeLinear -> MatMul --------------------------------------------------------------------
DQ_K, DQ_N = 1100, 1000  # 1.1M weights: above fold_constants' cap, so the DequantizeLinear reaches the pass


def dq_model() -> tuple[onnx.ModelProto, list[dict]]:
    """int4 blocked by 32 without zero points, uint4 blocked by 16 with zero points, int4 per column with
    zero points, uint4 per tensor without (zero point 0)."""
    nodes, inits, ws = [], [], []
    whole = -(-DQ_K // 8) * 8
    for name, signed, bs, zp in (("i", True, 32, False), ("u", False, 16, True), ("c", True, 0, True),
                                 ("t", False, -1, False)):
        w = weights(DQ_K, DQ_N, bs if bs > 0 else whole, "int" if zp else "none")
        if bs < 0:  # one scale
            w["s"][:] = w["s"][0, 0]
        if not zp:  # the standard op's default zero point
            w["z"] = np.full(w["s"].shape, 8 if signed else 0, np.uint8)
        dt = ml_dtypes.int4 if signed else ml_dtypes.uint4
        shift = 8 if signed else 0
        lay = {0: lambda a: a[0], -1: lambda a: a[:1, :1].reshape(1)}.get(bs, lambda a: a)  # per column / tensor
        inits += [numpy_helper.from_array((w["q"].astype(np.int16) - shift).astype(dt), f"q{name}"),
                  numpy_helper.from_array(lay(w["s"]), f"s{name}")]
        ins = [f"q{name}", f"s{name}"]
        if zp:
            inits.append(numpy_helper.from_array(lay(w["z"].astype(np.int16) - shift).astype(dt), f"z{name}"))
            ins.append(f"z{name}")
        attrs = {"axis": 0, "block_size": bs} if bs > 0 else {"axis": 1}
        nodes.append(helper.make_node("DequantizeLinear", ins, [f"w{name}"], **attrs))
        nodes.append(helper.make_node("MatMul", ["x", f"w{name}"], [f"y{name}"]))
        ws.append(w)
    outs = [helper.make_tensor_value_info(f"y{name}", TP.FLOAT, None) for name in "iuct"]
    g = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("x", TP.FLOAT, ["B", "M", DQ_K])], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), ws


def test_dequantize_matmul_keeps_4_bits():
    m, ws = dq_model()
    cm = onnxc.compile(m)
    assert [(n.domain, n.op_type) for n in cm.ir.graph.nodes] == [NBITS] * 4
    assert CALL in cm.c_source  # (identical kernels are emitted once)
    assert blob_bytes(cm) < 4 * DQ_K * DQ_N * 0.7  # ~0.55 bytes per weight (float32 weights: 4)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # op by op, float
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for rows in (1, 64):
        x = RNG.standard_normal((1, rows, DQ_K)).astype(np.float32)
        got = cm.run({"x": x})
        for w, (name, want) in zip(ws, zip("iuct", sess.run(None, {"x": x}))):
            check_close(got[f"y{name}"], reference(x, w, None), f"y{name} M={rows} vs numpy")
            check_close(got[f"y{name}"], want, f"y{name} M={rows} vs onnxruntime")


# -- what stays on the expansion / fold path; errors ------------------------------------------------
def _ops(m: onnx.ModelProto) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in optimize(load_model(m), check=True).graph.nodes]


def _one_nbits(bits: int = 4, a_type: int = TP.FLOAT, scales_input: bool = False) -> onnx.ModelProto:
    k, n, bs = 64, 8, 32
    np_t = helper.tensor_dtype_to_np_dtype(a_type)
    b = RNG.integers(0, 256, (n, k // bs, bs * bits // 8)).astype(np.uint8)
    s = RNG.uniform(0.01, 0.05, (n, k // bs)).astype(np_t)
    inputs = [helper.make_tensor_value_info("a", a_type, ["M", k])]
    inits = [numpy_helper.from_array(b, "b")]
    if scales_input:
        inputs.append(helper.make_tensor_value_info("s", a_type, [n, k // bs]))
    else:
        inits.append(numpy_helper.from_array(s, "s"))
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain=MS, K=k, N=n, bits=bits, block_size=bs)
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", a_type, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def test_other_cases_stay_expanded():
    """2 / 8 bits, float16 A and run-time scales keep the expansion (DequantizeLinear -> MatMul); a 4-bit
    float32 node with constants takes the kernel."""
    assert NBITS in _ops(_one_nbits())
    for m in (_one_nbits(bits=2), _one_nbits(bits=8), _one_nbits(a_type=TP.FLOAT16), _one_nbits(scales_input=True)):
        ops = _ops(m)
        assert NBITS not in ops and ("", "MatMul") in ops, ops


def _internal(block: int = 16, q_type: int = TP.UINT4, k_a: int = 32, s_shape: tuple = (2, 4)) -> onnx.ModelProto:
    q = helper.make_tensor("q", q_type, [32, 4], RNG.integers(0, 8, 128).tolist())
    s = numpy_helper.from_array(np.ones(s_shape, np.float32), "s")
    node = helper.make_node("MatMulNBits", ["a", "q", "s"], ["y"], domain="onnxc", block_size=block)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TP.FLOAT, ["M", k_a])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)], [q, s])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("onnxc", 1)])


@pytest.mark.parametrize("m, match", [
    (_internal(block=12), "block_size must be a positive multiple of 8, got 12"),
    (_internal(q_type=TP.INT4), r"Q \(input 1\) must be uint4 of a static shape \[K, N\]"),
    (_internal(s_shape=(4, 4)), r"S \(input 2\) must be float \[2, 4\], got float \[4, 4\]"),
    (_internal(k_a=48), "A axis 1 is 48 vs K of Q is 32"),
])
def test_internal_op_errors(m: onnx.ModelProto, match: str):
    with pytest.raises(ShapeError, match=match):
        optimize(load_model(m))


# -- the runtime kernel on every instruction set -----------------------------------------------------
CHECK_C = r"""
#include "onnxc_nbits.h"
#define EXPORT __attribute__((visibility("default")))
EXPORT const char *check_isa(void) { return onnxc_nbits_isa(); }
EXPORT int check_use_isa(const char *name) { return onnxc_nbits_use_isa(name); }
EXPORT int check_nbits(int threads, int64_t M, int64_t N, int64_t K, int64_t bs, const float *A, const uint8_t *q,
                       const float *s, const uint8_t *z, const float *zf, const float *bias, float *Y, int ref) {
    const onnxc_nb_weights w = {N, K, bs, q, s, z, zf, bias};
    if (ref) { onnxc_nbits_ref(M, A, K, &w, Y, N); return 0; }
    return onnxc_nbits_matmul(threads, M, A, K, &w, Y, N);
}
"""
CDEF = """const char *check_isa(void);
int check_use_isa(const char *name);
int check_nbits(int threads, int64_t M, int64_t N, int64_t K, int64_t bs, const float *A, const uint8_t *q,
                const float *s, const uint8_t *z, const float *zf, const float *bias, float *Y, int ref);"""




@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 targets")
@pytest.mark.parametrize("isa", ["avx512", "avx2", "portable"])
def test_runtime_isa_paths(tmp_path, isa: str):
    """Every path this CPU runs (all are built into the runtime; chosen at run time, here with
    onnxc_nbits_use_isa), in an old-target (x86-64) build, against numpy and the naive reference: GEMV rows
    1..16, prefill 17 and 40, zero points none / uint8 / float, bias, threads."""
    flags = cpu_flags()
    if isa == "avx512" and not {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags or \
            isa == "avx2" and not {"avx2", "fma"} <= flags:
        pytest.skip(f"this CPU does not run {isa}")
    src = tmp_path / "nbits_check.c"
    src.write_text(CHECK_C)
    so, cc = tmp_path / "nbits_check.so", default_cc()
    cmd = [cc, "-std=gnu11", "-O2", "-march=x86-64", *thread_flags(cc), "-shared", "-fPIC", "-I", str(runtime_dir()),
           str(src), *map(str, sources_for(CHECK_C)), "-o", str(so), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(so))
    assert lib.check_use_isa(isa.encode()) == 0 and lib.check_use_isa(b"no-such-isa") == -1
    assert ffi.string(lib.check_isa()).decode() == isa

    def ptr(a: np.ndarray | None, t: str):
        return ffi.NULL if a is None else ffi.cast(t, a.ctypes.data)

    for k, n, bs, zkind in ((100, 70, 16, "int"), (259, 40, 32, "float"), (64, 33, 64, "none")):
        w = weights(k, n, bs, zkind)
        bias = RNG.standard_normal(n).astype(np.float32) if zkind != "none" else None
        q, s = pack_q(w["q"]), pack_table(w["s"], 0.0)
        z = pack_table(w["z"], 8) if zkind == "int" else None
        zf = pack_table(w["z"], 8.0) if zkind == "float" else None
        for rows, threads in ((1, 1), (2, 2), (3, 1), (4, 2), (7, 1), (16, 2), (17, 1), (40, 2)):
            a = RNG.standard_normal((rows, k)).astype(np.float32)
            outs = []
            for ref in (0, 1):
                y = np.full((rows, n), np.nan, np.float32)
                assert lib.check_nbits(threads, rows, n, k, bs, ptr(a, "float *"), ptr(q, "uint8_t *"),
                                       ptr(s, "float *"), ptr(z, "uint8_t *"), ptr(zf, "float *"), ptr(bias, "float *"),
                                       ptr(y, "float *"), ref) == 0
                outs.append(y)
            want = reference(a, w, bias)
            check_close(outs[0], want, f"{isa} K={k} N={n} rows={rows}")
            check_close(outs[1], want, f"reference K={k} N={n} rows={rows}")
