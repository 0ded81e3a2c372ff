"""The fast pooling kernel (codegen/templates/pool.c.j2) on the code paths it splits into, against
onnx.reference (or onnxruntime where the reference deviates: count_include_pad with ceil_mode):
interior rows (one unrolled pass) against border rows (clipped taps), unit and larger strides,
ceil_mode, dilations, count_include_pad, wide kernels (a tap loop instead of unrolled taps), many
channels on two threads (the runtime's pool, bit-identical to one thread), MaxPool Indices with ties, symbolic dims, and other element types."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxc

from .util import node_model, reference

rng = np.random.default_rng(11)
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _f(*shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def _run(op: str, x: np.ndarray, n_outputs: int = 1, threads: int = 1, opset: int = 19, ref: str = "onnx",
         input_shapes: dict | None = None, expected: list | None = None, **attrs) -> onnxc.CompiledModel:
    """Compile a one-node pooling model with ``threads`` and compare every output with the reference
    (``expected``, else onnx.reference, or onnxruntime with ``ref="ort"``)."""
    m = node_model(op, {"x": x}, n_outputs, opset, input_shapes=input_shapes, **attrs)
    if expected is not None:
        want = expected
    elif ref == "onnx":
        want = reference(m, {"x": x})
    else:
        for i, o in enumerate(m.graph.output):
            o.type.tensor_type.elem_type = onnx.TensorProto.INT64 if i else \
                onnx.helper.np_dtype_to_tensor_dtype(x.dtype)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    compiled = onnxc.compile(m, threads=threads)
    got = compiled.run({"x": x})
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, **TOL)
        else:
            np.testing.assert_array_equal(g, w)
    return compiled


GEOMETRIES = [
    # (input shape, attributes): interior and border rows in both spatial axes
    ((1, 5, 23, 37), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ((2, 3, 23, 37), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 20, 33), {"kernel_shape": [5, 4], "strides": [3, 2], "pads": [2, 1, 2, 2]}),
    ((1, 3, 17, 19), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 3, 18, 20), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
    ((1, 3, 21, 25), {"kernel_shape": [3, 3], "strides": [1, 2], "dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 2, 12, 40), {"kernel_shape": [2, 19], "strides": [1, 1], "pads": [0, 4, 1, 5], "ref": "ort"}),  # a tap loop
    ((1, 2, 15, 16), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER", "ref": "ort"}),
    ((1, 2, 15, 16), {"kernel_shape": [4, 4], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 50), {"kernel_shape": [4], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 7, 9, 11), {"kernel_shape": [3, 3, 3], "strides": [2, 1, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 6, 8, 9), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "dilations": [2, 1, 2]}),
]


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("xs,attrs", GEOMETRIES)
def test_geometries(op, xs, attrs):
    """``ref="ort"``: onnx.reference fails on that geometry (an empty reduction, a wrong SAME_LOWER size)."""
    if op == "LpPool":
        attrs = {**attrs, "p": 2}
        x = _f(*xs)
        if "dilations" in attrs:
            # onnx.reference LpPool ignores dilations (and onnxruntime rejects pads >= kernel): the
            # windows lie inside the padded extent, so the sum of squares is K times their mean
            geo = {k: v for k, v in attrs.items() if k != "p"}
            avg = node_model("AveragePool", {"x": x * x}, 1, 19, count_include_pad=1, **geo)
            want = np.sqrt(reference(avg, {"x": x * x})[0] * np.prod(attrs["kernel_shape"])).astype(np.float32)
            _run(op, x, expected=[want], **attrs)
            return
        if "ceil_mode" in attrs:
            attrs["ref"] = "ort"  # onnx.reference LpPool ignores ceil_mode
        _run(op, x, **attrs)
        return
    _run(op, _f(*xs), **attrs)


@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.parametrize("strides", [[1, 1], [2, 2], [3, 2]])
def test_average_pool_count_include_pad(ceil, strides):
    """The padded-extent count of border windows; with ceil_mode, taps past the padding never count."""
    _run("AveragePool", _f(2, 3, 19, 22), kernel_shape=[3, 3], strides=strides, pads=[1, 2, 1, 2],
         count_include_pad=1, ceil_mode=ceil, ref="onnx" if not ceil else "ort")


def test_interior_rows_take_the_unrolled_pass():
    c = _run("MaxPool", _f(1, 4, 30, 30), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert "every tap inside the input: one unrolled pass" in c.c_source
    c = _run("MaxPool", _f(1, 4, 30, 30), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], n_outputs=2,
             ref="ort")
    assert "every tap inside the input: one unrolled pass" not in c.c_source  # Indices: the tap loop


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_many_channels_two_threads(op):
    x = _f(2, 256, 14, 14)
    c = _run(op, x, threads=2, kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    assert "onnxc_parallel(" in c.c_source and "omp parallel" not in c.c_source
    _run(op, x, threads=2, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, ref="ort")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_row_blocks(op):
    """Rows are processed in blocks of about 2048 buffer elements: several blocks per plane with a short
    last one, one row per block for rows wider than that, and blocks of one plane on two threads."""
    _run(op, _f(1, 2, 91, 300), kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    _run(op, _f(1, 2, 5, 2100), kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 1, 1])
    _run(op, _f(1, 1, 301, 257), threads=2, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    _run(op, _f(1, 2, 37, 300), n_outputs=2 if op == "MaxPool" else 1, ref="ort", kernel_shape=[3, 3],
         strides=[1, 1], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("threads", [1, 2])
def test_maxpool_indices_ties(order, threads):
    """Few distinct values: the index is the first maximum in row-major window order."""
    x = rng.integers(0, 3, (2, 64, 13, 15)).astype(np.float32)
    _run("MaxPool", x, n_outputs=2, threads=threads, ref="ort", kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1], storage_order=order)
    _run("MaxPool", x, n_outputs=2, threads=threads, ref="ort", kernel_shape=[2, 3], strides=[1, 2],
         dilations=[2, 1], storage_order=order)


def test_maxpool_indices_3d_and_ceil():
    x = rng.integers(0, 4, (1, 3, 6, 7, 9)).astype(np.float32)
    _run("MaxPool", x, n_outputs=2, ref="ort", kernel_shape=[2, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 0, 1, 1])
    x = _f(1, 3, 10, 11)
    _run("MaxPool", x, n_outputs=2, ref="ort", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)


def test_symbolic_dims_two_threads():
    shapes = {"x": ["N", "C", "H", "W"]}
    x = _f(3, 40, 17, 21)
    for op in ("MaxPool", "AveragePool"):
        _run(op, x, threads=2, input_shapes=shapes, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             ceil_mode=1)
        _run(op, x, threads=2, input_shapes=shapes, kernel_shape=[3, 2], auto_pad="SAME_UPPER")


@pytest.mark.parametrize("op,n_outputs,attrs", [
    ("MaxPool", 1, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", 2, {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", 1, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("AveragePool", 1, {"kernel_shape": [2, 2], "strides": [2, 2], "count_include_pad": 1, "pads": [1, 1, 0, 0]}),
    ("LpPool", 1, {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("GlobalAveragePool", 1, {}), ("GlobalMaxPool", 1, {}), ("GlobalLpPool", 1, {}),
])
@pytest.mark.parametrize("symbolic", [False, True])
def test_pool_threads_match_one_thread(op, n_outputs, attrs, symbolic):
    """Large enough for the runtime's pool at batch 1 (per-thread row buffers): two threads match the
    reference and, bit for bit, one thread."""
    x = rng.integers(0, 5, (1, 64, 64, 64)).astype(np.float32) if n_outputs == 2 else _f(1, 64, 64, 64)
    shapes = {"x": ["N", 64, "H", "W"]} if symbolic else None
    ref = "ort" if n_outputs == 2 or attrs.get("count_include_pad") or op == "GlobalLpPool" else "onnx"
    two = _run(op, x, n_outputs=n_outputs, threads=2, ref=ref, input_shapes=shapes, **attrs)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    one = onnxc.compile(node_model(op, {"x": x}, n_outputs, 19, input_shapes=shapes, **attrs), threads=1)
    want, got = one.run({"x": x}), two.run({"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_other_element_types():
    xi = rng.integers(-128, 128, (1, 3, 11, 13)).astype(np.int8)
    _run("MaxPool", xi, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    xu = rng.integers(0, 256, (1, 3, 11, 13)).astype(np.uint8)
    _run("MaxPool", xu, kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    xd = _f(1, 3, 11, 13, dt=np.float64)
    _run("AveragePool", xd, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    _run("MaxPool", xd, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)


def test_float16():
    x = _f(1, 3, 12, 14).astype(np.float16)
    m = node_model("AveragePool", {"x": x}, 1, 19, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    want = reference(m, {"x": x})[0]
    got = onnxc.compile(m).run({"x": x})["y0"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_empty_batch():
    m = node_model("MaxPool", {"x": _f(2, 3, 8, 8)}, 1, 19, input_shapes={"x": ["N", 3, 8, 8]},
                   kernel_shape=[3, 3], strides=[2, 2])
    got = onnxc.compile(m).run({"x": np.zeros((0, 3, 8, 8), np.float32)})["y0"]
    assert got.shape == (0, 3, 3, 3)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_empty_maps(op, threads):
    """An input with no rows or no columns (symbolic H, W at 0) gives an empty output; the kernel's setup,
    which the pool's tasks repeat, must not divide by the empty sizes (a fuzzed model did: SIGFPE)."""
    m = node_model(op, {"x": _f(1, 3, 6, 6)}, 1, 19, input_shapes={"x": ["N", 3, "H", "W"]},
                   kernel_shape=[2, 2], strides=[2, 2])
    cm = onnxc.compile(m, threads=threads)
    for shape in [(1, 3, 0, 6), (1, 3, 6, 0), (1, 3, 0, 0), (2, 3, 1, 1)]:
        got = cm.run({"x": np.zeros(shape, np.float32)})["y0"]
        assert got.shape == (shape[0], 3, max(shape[2] // 2, 0), max(shape[3] // 2, 0))
