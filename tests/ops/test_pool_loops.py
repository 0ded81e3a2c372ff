"""Row-wise kernels (normalization, softmax, attention, reduction, MatMul/Einsum batches, signal, sampling)
on the runtime's pool (codegen/kernels/parfor.py) when a model is built for several threads: the pool path
is taken for large work, no OpenMP region is left, and the results equal the one-thread build exactly
(each chunk writes its own rows) and the reference, for static and symbolic shapes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxc

from .util import node_model, reference

rng = np.random.default_rng(16)


def rand(*shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def check_pool(model, feeds: dict[str, np.ndarray], *, rtol: float = 1e-4, atol: float = 1e-5,
               want: list[np.ndarray] | None = None, exact: bool = True, use_ort: bool = False) -> str:
    """Compile at threads=1 and 2; the 2-thread C runs its loops on the pool (onnxc_parallel), and its
    outputs equal the 1-thread ones (bit for bit when ``exact``) and the reference (onnx.reference, or
    onnxruntime with ``use_ort``, or ``want``). Returns the C."""
    two = onnxc.compile(model, threads=2)
    one = onnxc.compile(model, threads=1)
    assert "onnxc_parallel(" in two.c_source
    assert "omp parallel" not in two.c_source and "onnxc_omp_threads" not in two.c_source
    got2, got1 = two.run(feeds), one.run(feeds)
    if want is None and use_ort:  # outputs typed as the first input (node_model leaves them untyped)
        for o in model.graph.output:
            o.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(next(iter(feeds.values())).dtype)
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    want = reference(model, feeds) if want is None else want
    for i, w in enumerate(want):
        name = f"y{i}"
        if exact:
            np.testing.assert_array_equal(got2[name], got1[name])
        else:
            np.testing.assert_allclose(got2[name], got1[name], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got2[name], np.asarray(w), rtol=rtol, atol=atol)
    return two.c_source


SYM = {"x": ["N", "C", "H", "W"]}


@pytest.mark.parametrize("shapes", [None, SYM])
def test_batch_norm(shapes):
    x = rand(4, 32, 48, 48)
    c = [rand(32), rand(32), rand(32), np.abs(rand(32)) + 0.5]
    m = node_model("BatchNormalization", {"x": x, "s": c[0], "b": c[1], "m": c[2], "v": c[3]},
                   input_shapes=shapes, const_inputs=("s", "b", "m", "v"))
    check_pool(m, {"x": x})


@pytest.mark.parametrize("shapes", [None, SYM])
def test_instance_norm(shapes):
    x = rand(2, 64, 48, 48)
    m = node_model("InstanceNormalization", {"x": x, "s": rand(64), "b": rand(64)}, input_shapes=shapes,
                   const_inputs=("s", "b"))
    check_pool(m, {"x": x})


@pytest.mark.parametrize("shapes", [None, {"x": ["B", "T", 768]}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm(shapes, dtype):
    x = rand(4, 128, 768, dtype=dtype)
    m = node_model("LayerNormalization", {"x": x, "s": rand(768, dtype=dtype), "b": rand(768, dtype=dtype)},
                   n_outputs=3, input_shapes=shapes, const_inputs=("s", "b"), axis=-1)
    check_pool(m, {"x": x})


@pytest.mark.parametrize("shapes", [None, SYM])
def test_lrn(shapes):
    x = rand(2, 32, 40, 40)
    m = node_model("LRN", {"x": x}, input_shapes=shapes, size=5, alpha=1e-3, beta=0.75, bias=1.0)
    check_pool(m, {"x": x}, use_ort=True)  # onnx.reference's LRN deviates from the spec


@pytest.mark.parametrize("shapes", [None, {"x": ["B", "T", 512]}])
@pytest.mark.parametrize("op, dtype", [("Softmax", np.float32), ("LogSoftmax", np.float32), ("Hardmax", np.float32),
                                       ("Softmax", np.float64), ("Softmax", np.float16),
                                       ("LogSoftmax", np.float16)])
def test_softmax_rows(op, dtype, shapes):
    x = rand(4, 256, 512, dtype=dtype)
    m = node_model(op, {"x": x}, input_shapes=shapes, axis=-1)
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {}
    check_pool(m, {"x": x}, **tol)


@pytest.mark.parametrize("shapes", [None, {"x": ["A", "B", "C"]}])
@pytest.mark.parametrize("op, axes, dtype", [("ReduceSum", [2], np.float32), ("ReduceMean", [1], np.float32),
                                             ("ReduceMax", [1], np.int32), ("ReduceL2", [2], np.float64),
                                             ("ReduceLogSumExp", [1], np.float32),
                                             ("ReduceSum", [1], np.float16)])
def test_reduce_kept_outer_axis(op, axes, dtype, shapes):
    """The outermost kept block is split on the pool: each thread writes its own outputs."""
    x = (rand(64, 96, 80) * (10 if dtype == np.int32 else 1)).astype(dtype)
    m = node_model(op, {"x": x, "axes": np.array(axes, np.int64)}, input_shapes=shapes, const_inputs=("axes",),
                   opset=18)
    tol = {"rtol": 2e-2, "atol": 2e-1} if dtype == np.float16 else {}
    check_pool(m, {"x": x}, **tol)


@pytest.mark.parametrize("shapes", [None, {"x": ["A", "B", "C"]}])
def test_mean_variance_normalization(shapes):
    x = rand(48, 96, 80)
    m = node_model("MeanVarianceNormalization", {"x": x}, input_shapes=shapes, axes=[1, 2])
    check_pool(m, {"x": x}, use_ort=True)


@pytest.mark.parametrize("sa, sb, shapes", [((64, 16, 24), (64, 24, 20), None),
                                            ((8, 8, 16, 24), (8, 1, 24, 20), {"a": ["B", 8, 16, 24]}),
                                            ((6, 5, 16, 24), (5, 24, 20), {"a": ["B", "H", 16, 24], "b": ["H", 24, 20]})])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
def test_batched_matmul_small_matrices(sa, sb, shapes, dtype):
    """Small matrices of a batch go to the pool one batch range per chunk (the GEMM runs on one thread)."""
    a, b = (rand(*sa) * 4).astype(dtype), (rand(*sb) * 4).astype(dtype)
    m = node_model("MatMul", {"a": a, "b": b}, input_shapes=shapes)
    tol = {"rtol": 1e-2, "atol": 1e-1} if dtype == np.float16 else {}
    check_pool(m, {"a": a, "b": b}, **tol)


@pytest.mark.parametrize("eq, sa, sb, shapes, dtype", [
    ("bij,bjk->bik", (64, 16, 24), (64, 24, 20), None, np.float32),                   # GEMM per batch item
    ("bij,bkj->bki", (64, 16, 24), (64, 20, 24), {"a": ["B", 16, 24], "b": ["B", 20, 24]}, np.float64),
    ("bij,bjk->bik", (64, 16, 24), (64, 24, 20), None, np.int32),                     # the loop nest
    ("bij,bjk->bki", (64, 16, 24), (64, 24, 20), {"a": ["B", 16, 24], "b": ["B", 24, 20]}, np.int64),
    ("ij,ij->ji", (600, 500), (600, 500), {"a": ["N", 500], "b": ["N", 500]}, np.float32)])
def test_einsum(eq, sa, sb, shapes, dtype):
    a, b = (rand(*sa) * 4).astype(dtype), (rand(*sb) * 4).astype(dtype)
    m = node_model("Einsum", {"a": a, "b": b}, input_shapes=shapes, equation=eq)
    check_pool(m, {"a": a, "b": b}, want=[np.einsum(eq, a, b)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes", [None, SYM])
def test_batch_norm_training(shapes):
    """Training-mode BatchNormalization: channels on the pool, with the running statistics."""
    x = rand(4, 32, 48, 48)
    c = [rand(32), rand(32), rand(32), np.abs(rand(32)) + 0.5]
    m = node_model("BatchNormalization", {"x": x, "s": c[0], "b": c[1], "m": c[2], "v": c[3]}, n_outputs=3,
                   input_shapes=shapes, const_inputs=("s", "b", "m", "v"), opset=15, training_mode=1)
    check_pool(m, {"x": x})


def _fft(x: np.ndarray, inverse: bool) -> np.ndarray:
    z = (x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]).astype(np.complex128)
    y = (np.fft.ifft if inverse else np.fft.fft)(z, axis=1)
    return np.stack([y.real, y.imag], -1).astype(x.dtype)


@pytest.mark.parametrize("cin, dtype, inverse, shapes", [(1, np.float32, 0, None), (2, np.float32, 1, {"x": ["B", 1000, 2]}),
                                                         (1, np.float64, 0, {"x": ["B", 1000, 1]})])
def test_dft_lines(cin, dtype, inverse, shapes):
    """Signal lines on the pool, each thread with its own FFT buffer and scratch (slot_)."""
    x = rand(300, 1000, cin, dtype=dtype)
    m = node_model("DFT", {"x": x}, input_shapes=shapes, opset=17, axis=1, inverse=inverse)
    check_pool(m, {"x": x}, want=[_fft(x, bool(inverse))], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes", [None, {"x": ["B", "L", 1]}])
def test_stft_frames(shapes):
    x = rand(8, 16000, 1)
    ins = {"x": x, "step": np.array(160, np.int64), "window": np.hanning(400).astype(np.float32)}
    m = node_model("STFT", ins, input_shapes=shapes, opset=17, const_inputs=("step", "window"))
    check_pool(m, {"x": x}, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["linear", "nearest"])  # (onnxruntime's cubic differs from the spec's)
@pytest.mark.parametrize("shapes", [None, {"x": ["N", "C", 24, 30], "g": ["N", "H", "W", 2]}])
def test_gridsample_channels(mode, shapes):
    x, g = rand(2, 64, 24, 30), rng.uniform(-1.2, 1.2, (2, 48, 64, 2)).astype(np.float32)
    m = node_model("GridSample", {"x": x, "g": g}, input_shapes=shapes, opset=20, mode=mode, padding_mode="border")
    check_pool(m, {"x": x, "g": g}, use_ort=True)  # onnx.reference takes minutes at this size


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("shapes", [None, {"rois": ["R", 4], "b": ["R"]}])
def test_roialign_channels(mode, shapes):
    # its own seed: the module's generator would give data depending on which tests ran before on this worker,
    # and max mode against onnxruntime is sensitive to samples at near-ties (one element in 600k off by 6e-4)
    r = np.random.default_rng(184)
    x = r.standard_normal((2, 512, 20, 20)).astype(np.float32)
    a = r.uniform(0, 12, (6, 2))
    rois = np.concatenate([a, a + r.uniform(2, 8, (6, 2))], axis=1).astype(np.float32)
    ins = {"x": x, "rois": rois, "b": np.array([0, 1, 1, 0, 1, 0], np.int64)}
    m = node_model("RoiAlign", ins, input_shapes=shapes, opset=16, mode=mode, output_height=14, output_width=14,
                   sampling_ratio=2)
    check_pool(m, ins, use_ort=True)  # onnx.reference takes minutes at this size


def test_softmax_half_inner_one_at_run_time():
    """float16 Softmax whose inner size is symbolic: the contiguous rows (I == 1 at run time) on the pool."""
    x = rand(600, 512, 1, dtype=np.float16)
    m = node_model("Softmax", {"x": x}, input_shapes={"x": ["B", "T", "S"]}, axis=1)
    check_pool(m, {"x": x}, rtol=2e-3, atol=2e-3)
