"""Neural-net ops: MatMul, Gemm, Conv, ConvTranspose, pooling, normalizations and the softmax family,
against onnx.reference — or onnxruntime where the reference deviates from the spec (Softmax < 13,
BatchNormalization 9, LRN, grouped ConvTranspose) — plus the C GEMM against its naive reference."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxc
from onnxc.codegen.compiler import default_cc, runtime_dir, thread_flags
from onnxc.codegen.runtime_lib import sources_for
from onnxc.ir import ShapeError, UnsupportedOpError

from .util import check_node, node_model

rng = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _f(*shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def check_ort(op: str, inputs: dict, opset: int = 21, n_outputs: int = 1, out_types: tuple = (),
              input_shapes: dict | None = None, rtol: float = 1e-4, atol: float = 1e-5, **attrs) -> None:
    """Compare onnxc with onnxruntime (graph optimizations off) on a one-node model."""
    m = node_model(op, inputs, n_outputs, opset, input_shapes=input_shapes, **attrs)
    first = next(a for a in inputs.values() if a is not None)
    for i, o in enumerate(m.graph.output):
        o.type.tensor_type.elem_type = out_types[i] if i < len(out_types) else \
            onnx.helper.np_dtype_to_tensor_dtype(first.dtype)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxc.compile(m).run(feeds)
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# -- the C GEMM ------------------------------------------------------------------------------------

GEMM_TEST_C = r"""
#include "onnxc_gemm.h"
#define CASE(T, fn, ref, tol) \
static int check_##fn(int th, int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, T beta) { \
    int64_t lda = ta ? M + 1 : K + 2, ldb = tb ? K + 3 : N + 1, ldc = N + 2; \
    T *A = malloc(sizeof(T) * (size_t)((ta ? K : M) * lda + 1)); \
    T *B = malloc(sizeof(T) * (size_t)((tb ? N : K) * ldb + 1)); \
    T *C = malloc(sizeof(T) * (size_t)(M * ldc + 1)), *R = malloc(sizeof(T) * (size_t)(M * ldc + 1)); \
    for (int64_t i = 0; i < (ta ? K : M) * lda; i++) A[i] = (T)((i * 37 % 23) - 11) / 7; \
    for (int64_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = (T)((i * 53 % 19) - 9) / 5; \
    for (int64_t i = 0; i < M * ldc; i++) C[i] = R[i] = beta == 0 ? NAN : (T)((i % 13) - 6); \
    if (fn(th, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return 1; \
    ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc); \
    int bad = 0; \
    for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) { \
        T d = C[i * ldc + j] - R[i * ldc + j]; \
        if (!(fabs((double)d) <= tol * (1 + fabs((double)R[i * ldc + j])))) bad = 1; } \
    free(A); free(B); free(C); free(R); \
    if (bad) printf("mismatch " #fn " th=%d ta=%d tb=%d M=%ld N=%ld K=%ld\n", th, ta, tb, (long)M, (long)N, (long)K); \
    return bad; }
CASE(float, onnxc_sgemm, onnxc_sgemm_ref, 1e-4)
CASE(double, onnxc_dgemm, onnxc_dgemm_ref, 1e-10)
int main(void) {
    static const int64_t sz[][3] = {{1, 1, 1}, {7, 5, 3}, {6, 32, 256}, {13, 77, 300}, {130, 70, 9},
                                   {1, 100, 40}, {100, 1, 40}, {4, 5, 0}, {0, 5, 4}, {257, 129, 513}};
    int bad = 0;
    for (unsigned s = 0; s < sizeof sz / sizeof sz[0]; s++)
        for (int th = 1; th <= 2; th++)
            for (int t = 0; t < 4; t++) {
                bad |= check_onnxc_sgemm(th, t & 1, t >> 1, sz[s][0], sz[s][1], sz[s][2], 1.5f, t == 3 ? 0.5f : 0.0f);
                bad |= check_onnxc_dgemm(th, t & 1, t >> 1, sz[s][0], sz[s][1], sz[s][2], -0.5, t == 2 ? 1.0 : 0.0);
            }
    printf(bad ? "FAIL\n" : "OK\n");
    return bad;
}
"""


def test_c_gemm_matches_reference(tmp_path):
    src = tmp_path / "gemm_test.c"
    src.write_text(GEMM_TEST_C)
    exe = tmp_path / "gemm_test"
    cc = default_cc()
    cmd = [cc, "-std=gnu11", "-O2", "-march=native", "-I", str(runtime_dir()), str(src),
           *map(str, sources_for(GEMM_TEST_C)), "-o", str(exe), "-lm"]
    cmd[1:1] = thread_flags(cc)
    subprocess.run(cmd, check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout


# -- MatMul / Gemm --------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
                                 ((4,), (4,)), ((2, 1, 3, 4), (3, 4, 5)), ((1, 3, 4), (2, 4, 5)),
                                 ((3, 0), (0, 5)), ((0, 4), (4, 5)), ((70, 130), (130, 90))])
def test_matmul_shapes(a, b):
    check_node("MatMul", {"a": _f(*a), "b": _f(*b)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_matmul_dtypes(dt):
    def arr(*s):
        return rng.integers(0, 9, s).astype(dt) if np.dtype(dt).kind in "iu" else _f(*s, dt=dt)
    check_node("MatMul", {"a": arr(2, 3, 4), "b": arr(2, 4, 5)}, opset=13)


def test_matmul_symbolic_batch():
    check_node("MatMul", {"a": _f(2, 3, 4), "b": _f(4, 5)}, input_shapes={"a": ["N", "S", 4]}, **TOL)
    check_node("MatMul", {"a": _f(2, 3, 4), "b": _f(1, 4, 5)}, input_shapes={"a": ["N", 3, 4], "b": ["B", 4, 5]},
               **TOL)


def test_matmul_inner_mismatch_names_node():
    with pytest.raises(ShapeError, match="MatMul"):
        onnxc.compile(node_model("MatMul", {"a": _f(3, 4), "b": _f(5, 6)}))


@pytest.mark.parametrize("ta,tb,c_shape,alpha,beta", [(0, 0, (5,), 1.0, 1.0), (1, 0, (3, 1), 0.5, 2.0),
                                                     (0, 1, (1, 5), 1.0, 0.0), (1, 1, (3, 5), -1.0, 0.5),
                                                     (0, 0, (), 1.0, 1.0), (0, 0, None, 2.0, 1.0)])
def test_gemm(ta, tb, c_shape, alpha, beta):
    a = _f(4, 3) if ta else _f(3, 4)
    b = _f(5, 4) if tb else _f(4, 5)
    c = None if c_shape is None else _f(*c_shape)
    check_node("Gemm", {"a": a, "b": b, "c": c}, transA=ta, transB=tb, alpha=alpha, beta=beta, opset=13, **TOL)


def test_gemm_old_opsets_and_symbolic():
    check_node("Gemm", {"a": _f(3, 4), "b": _f(4, 5), "c": _f(5)}, opset=6, broadcast=1, **TOL)
    a, b, c = _f(3, 4), _f(4, 5), _f(3, 5)
    check_node("Gemm", {"a": a, "b": b, "c": c}, opset=1, expected=[a @ b + c], **TOL)
    check_node("Gemm", {"a": _f(3, 4), "b": _f(5, 4), "c": _f(5)}, transB=1, input_shapes={"a": ["N", 4]}, **TOL)
    check_node("Gemm", {"a": _f(1, 300), "b": _f(200, 300), "c": _f(200)}, transB=1, rtol=1e-4, atol=1e-4)


def test_gemm_ints_and_double():
    a, b = rng.integers(-5, 5, (3, 4)).astype(np.int64), rng.integers(-5, 5, (4, 2)).astype(np.int64)
    check_node("Gemm", {"a": a, "b": b, "c": np.array([1, 2], np.int64)}, opset=13)
    check_node("Gemm", {"a": _f(3, 4, dt=np.float64), "b": _f(2, 4, dt=np.float64)}, transB=1, alpha=0.3)


# -- Conv -----------------------------------------------------------------------------------------

CONVS = [  # x shape, w shape, attrs
    ((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 7), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 2, 1]}),
    ((2, 4, 9, 7), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 7), (8, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}),
    ((2, 4, 9, 7), (8, 4, 1, 1), {}),
    ((2, 4, 9, 7), (8, 4, 1, 1), {"strides": [2, 2]}),
    ((2, 4, 9), (8, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2]}),
    ((2, 4, 9), (8, 4, 3), {"auto_pad": "VALID", "kernel_shape": [3]}),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}),
    ((1, 16, 20, 20), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "dilations": [2, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(xs, ws, attrs, bias):
    ins = {"x": _f(*xs), "w": _f(*ws), "b": _f(ws[0]) if bias else None}
    check_node("Conv", ins, const_inputs=("w", "b") if bias else ("w",), rtol=1e-4, atol=1e-4, **attrs)


def test_conv_symbolic_dims_and_double():
    ins = {"x": _f(2, 3, 10, 11), "w": _f(4, 3, 3, 3)}
    shapes = {"x": ["N", 3, "H", "W"]}
    check_node("Conv", ins, input_shapes=shapes, pads=[1, 1, 1, 1], strides=[2, 2], rtol=1e-4, atol=1e-4)
    check_node("Conv", ins, input_shapes=shapes, auto_pad="SAME_UPPER", strides=[2, 2], rtol=1e-4, atol=1e-4)
    check_node("Conv", {"x": _f(1, 2, 6, 6, dt=np.float64), "w": _f(3, 2, 3, 3, dt=np.float64)}, pads=[0, 1, 2, 1])


def test_conv_invalid_channels_names_node():
    with pytest.raises(ShapeError, match="Conv"):
        onnxc.compile(node_model("Conv", {"x": _f(1, 3, 5, 5), "w": _f(2, 4, 3, 3)}))


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 4, 4, 5), (4, 3, 3, 2), {"group": 2, "strides": [2, 3], "pads": [1, 0, 1, 1], "output_padding": [1, 1],
                                  "dilations": [1, 2]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 11]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 6), (3, 2, 3), {"strides": [3]}),
    ((1, 2, 3, 4, 3), (2, 2, 3, 2, 2), {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}),
])
def test_conv_transpose(xs, ws, attrs):
    check_ort("ConvTranspose", {"x": _f(*xs), "w": _f(*ws), "b": _f(ws[1] * attrs.get("group", 1))}, **attrs)


def test_conv_transpose_symbolic():
    check_node("ConvTranspose", {"x": _f(2, 3, 4, 5), "w": _f(3, 2, 3, 3)}, input_shapes={"x": ["N", 3, "H", "W"]},
               strides=[2, 2], pads=[1, 1, 0, 0], **TOL)


# -- pooling ----------------------------------------------------------------------------------------

POOLS = [
    ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [1, 2], "auto_pad": "SAME_LOWER"}),
    ((2, 3, 9, 8), {"kernel_shape": [2, 2], "auto_pad": "VALID"}),
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
    ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 1], "pads": [1, 1, 2, 1]}),
]


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("xs,attrs", POOLS)
def test_pool(op, xs, attrs):
    if op == "LpPool":
        attrs = {**attrs, "p": 3}
    check_ort(op, {"x": _f(*xs)}, **attrs)


@pytest.mark.parametrize("ceil", [0, 1])
def test_average_pool_count_include_pad(ceil):
    check_ort("AveragePool", {"x": _f(2, 3, 9, 8)}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
              count_include_pad=1, ceil_mode=ceil)


@pytest.mark.parametrize("order", [0, 1])
def test_maxpool_indices(order):
    check_ort("MaxPool", {"x": _f(2, 3, 9, 8)}, n_outputs=2, out_types=(1, onnx.TensorProto.INT64), opset=11,
              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], storage_order=order)


def test_pool_symbolic_dims_and_types():
    shapes = {"x": ["N", 3, "H", "W"]}
    check_node("MaxPool", {"x": _f(2, 3, 9, 8)}, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, input_shapes=shapes)
    check_node("AveragePool", {"x": _f(2, 3, 9, 8)}, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER",
               input_shapes=shapes, **TOL)
    check_node("MaxPool", {"x": rng.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)}, kernel_shape=[2, 2], opset=12)
    check_node("AveragePool", {"x": _f(1, 2, 5, 5, dt=np.float64)}, kernel_shape=[2, 2], opset=7)


@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"])
def test_global_pool(op):
    check_ort(op, {"x": _f(2, 3, 9, 8)})
    x = _f(2, 3, 4, 5, 6)
    axes = (2, 3, 4)
    want = {"GlobalMaxPool": np.max(x, axis=axes, keepdims=True),
            "GlobalAveragePool": np.mean(x, axis=axes, keepdims=True),
            "GlobalLpPool": np.sqrt(np.sum(x * x, axis=axes, keepdims=True))}[op]
    check_node(op, {"x": x}, input_shapes={"x": ["N", 3, "H", 5, 6]}, expected=[want], **TOL)


# -- normalizations ---------------------------------------------------------------------------------

def _bn_inputs(x: np.ndarray, stat_shape: tuple) -> dict:
    return {"x": x, "s": _f(*stat_shape), "b": _f(*stat_shape), "m": _f(*stat_shape),
            "v": np.abs(_f(*stat_shape)) + 0.1}


def _bn_expected(ins: dict, eps: float = 1e-5) -> np.ndarray:
    x = ins["x"]
    shape = (1, -1) + (1,) * (x.ndim - 2) if ins["s"].ndim == 1 else (1, *ins["s"].shape)
    s, b, m, v = (ins[k].reshape(shape) for k in "sbmv")
    return ((x - m) / np.sqrt(v + eps) * s + b).astype(x.dtype)


def test_batchnorm_versions():
    ins = _bn_inputs(_f(2, 3, 4, 5), (3,))
    check_node("BatchNormalization", ins, opset=15, **TOL)
    check_node("BatchNormalization", ins, opset=14, epsilon=1e-3, **TOL)
    check_ort("BatchNormalization", ins, opset=9)
    check_ort("BatchNormalization", _bn_inputs(_f(2, 3), (3,)), opset=9)
    check_node("BatchNormalization", ins, opset=7, expected=[_bn_expected(ins)], **TOL)
    check_node("BatchNormalization", ins, opset=6, is_test=1, expected=[_bn_expected(ins)], **TOL)
    per_elem = _bn_inputs(_f(2, 3, 4, 5), (3, 4, 5))
    check_node("BatchNormalization", per_elem, opset=7, spatial=0, expected=[_bn_expected(per_elem)], **TOL)
    check_node("BatchNormalization", _bn_inputs(_f(2, 3, 4, 5, dt=np.float64), (3,)), opset=15,
               input_shapes={"x": ["N", 3, "H", "W"]})


def test_batchnorm_training_outputs_before_14_rejected():
    # training_mode=1 (opset >= 14) is tests/ops/test_training.py; the older training outputs are not supported
    with pytest.raises(UnsupportedOpError, match="training outputs"):
        onnxc.compile(node_model("BatchNormalization", _bn_inputs(_f(2, 3, 4), (3,)), n_outputs=5, opset=9))


def test_instance_norm():
    check_node("InstanceNormalization", {"x": _f(2, 3, 4, 5), "s": _f(3), "b": _f(3)}, epsilon=1e-3, **TOL)
    check_node("InstanceNormalization", {"x": _f(2, 3, 7), "s": _f(3), "b": _f(3)}, opset=6,
               input_shapes={"x": ["N", 3, "L"]}, **TOL)
    check_node("InstanceNormalization", {"x": _f(1, 2, 3, 4, 5, dt=np.float64), "s": _f(2, dt=np.float64),
                                         "b": _f(2, dt=np.float64)})


@pytest.mark.parametrize("axis,scale_rank,bias", [(-1, 1, True), (1, 2, False), (-2, 2, True), (0, 3, True)])
def test_layer_norm(axis, scale_rank, bias):
    x = _f(2, 3, 4)
    ins = {"x": x, "s": _f(*x.shape[3 - scale_rank:]), "b": _f(*x.shape[3 - scale_rank:]) if bias else None}
    check_node("LayerNormalization", ins, n_outputs=3, opset=17, axis=axis, **TOL)


def test_layer_norm_symbolic_and_double():
    check_node("LayerNormalization", {"x": _f(2, 3, 8), "s": _f(8), "b": _f(8)}, input_shapes={"x": ["B", "S", 8]},
               **TOL)
    check_node("LayerNormalization", {"x": _f(2, 3, 4, dt=np.float64), "s": _f(4, dt=np.float64)}, epsilon=1e-2)


def _lrn_expected(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    sq = np.zeros_like(x)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + (size - 1) - (size - 1) // 2)
        sq[:, c] = np.sum(x[:, lo:hi + 1] ** 2, axis=1)
    return (x / (bias + alpha / size * sq) ** beta).astype(x.dtype)


def test_lrn():
    check_ort("LRN", {"x": _f(2, 7, 4, 5)}, size=3, alpha=0.01, beta=0.6, bias=2.0)
    check_ort("LRN", {"x": _f(2, 7, 4, 5)}, size=5, opset=1)
    x = _f(2, 6, 3, 3)
    check_node("LRN", {"x": x}, size=4, expected=[_lrn_expected(x, 4, 1e-4, 0.75, 1.0)], **TOL)


# -- softmax family --------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax_family(op, axis):
    attrs = {} if axis is None else {"axis": axis}
    x = _f(2, 3, 4)
    check_node(op, {"x": x}, opset=13, **attrs, **TOL)
    check_ort(op, {"x": x}, opset=11, **attrs)  # < 13: coerced to 2-D at axis (reference lacks this)


def test_softmax_stable_symbolic_double():
    x = (_f(3, 5) * 1000).astype(np.float32)
    check_node("Softmax", {"x": x}, **TOL)
    lse = x.max(axis=1, keepdims=True) + np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
    check_node("LogSoftmax", {"x": x}, expected=[x - lse], rtol=1e-4, atol=1e-3)
    check_node("Softmax", {"x": _f(2, 3, 4)}, input_shapes={"x": ["N", 3, "L"]}, axis=1, **TOL)
    check_node("LogSoftmax", {"x": _f(2, 3, 4, dt=np.float64)}, axis=1)
    check_ort("Softmax", {"x": _f(2, 3, 4)}, opset=1)
