"""Image resampling ops: Resize (10-19), Upsample (7, 9), GridSample (16-22) and RoiAlign (10-22).

Compared with onnx.reference, or with onnxruntime where the reference does not implement the opset
(Resize-10, Upsample: asymmetric coordinates, floor/ceil nearest; RoiAlign-10: no half-pixel shift).
Covers non-square shapes, 3-D and 5-D inputs, resizing only some axes (axes, negative axes),
scales/sizes as constants (symbolic output dims) and as run-time data (shape function), symbolic N/C,
empty batches and float16/bfloat16/double/integer element types.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest

import onnxc
from onnxc.ir import ShapeError
from onnxc.ir.errors import OnnxcError

from .util import check_node, node_model, reference

rng = np.random.default_rng(11)
F32 = np.float32
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _x(*shape, dt=F32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def _resize(x, scales=None, sizes=None, roi=None, opset=19, const=(), shapes=None, tol=TOL, **attrs):
    """check_node for Resize with scales or sizes (the other absent)."""
    inputs = {"x": x, "roi": None if roi is None else np.asarray(roi, F32),
              "scales": None if scales is None else np.asarray(scales, F32),
              "sizes": None if sizes is None else np.asarray(sizes, np.int64)}
    if opset < 13:  # roi and scales are required inputs before opset 13 (empty when unused)
        inputs["roi"] = inputs["roi"] if roi is not None else np.zeros(0, F32)
        inputs["scales"] = inputs["scales"] if scales is not None else np.zeros(0, F32)
    return check_node("Resize", inputs, opset=opset, const_inputs=const, input_shapes=shapes, **tol, **attrs)


def _ort(op: str, inputs: dict, opset: int, const=(), **attrs) -> list[np.ndarray]:
    m = node_model(op, inputs, 1, opset, const_inputs=const, **attrs)
    m.graph.output[0].type.tensor_type.elem_type = 1 if next(iter(inputs.values())).dtype == F32 else 11
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in const}
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


# -- Resize: nearest -------------------------------------------------------------------------------------

CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [[1, 1, 1.7, 0.6], [1, 1, 0.5, 2.5], [1, 1, 3, 1]])
def test_nearest_modes(nearest_mode, ctm, scales):
    _resize(_x(2, 3, 5, 7), scales, mode="nearest", nearest_mode=nearest_mode,
            coordinate_transformation_mode=ctm, const=("scales",))


@pytest.mark.parametrize("sizes", [[2, 3, 9, 4], [1, 2, 1, 1], [2, 3, 5, 7]])
def test_nearest_sizes_runtime(sizes):
    _resize(_x(2, 3, 5, 7), sizes=sizes, mode="nearest")


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.int64, bool, np.float16, np.float64])
def test_nearest_dtypes(dt):
    x = rng.integers(0, 200, (1, 2, 4, 5)).astype(dt)
    if dt is bool:  # the reference cannot cast to bool: take the same gather on uint8
        want = _resize(x.astype(np.uint8), [1, 1, 1.5, 0.7], mode="nearest")["y0"].astype(bool)
        _resize(x, [1, 1, 1.5, 0.7], mode="nearest", expected=[want])
    else:
        _resize(x, [1, 1, 1.5, 0.7], mode="nearest")


def test_nearest_nhwc_axes_moves_blocks():
    x = _x(2, 4, 6, 3)
    _resize(x, [1.5, 0.5], mode="nearest", axes=[1, 2], const=("scales",))
    want = _resize(x, sizes=[7, 2], mode="nearest", axes=[1, 2])["y0"]  # the reference rejects negative axes
    _resize(x, sizes=[7, 2], mode="nearest", axes=[-3, -2], expected=[want])


# -- Resize: linear, cubic, antialias -----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [[1, 1, 1.7, 0.6], [1, 1, 0.25, 3]])
def test_interpolation_modes(mode, ctm, scales):
    _resize(_x(1, 2, 6, 5), scales, mode=mode, coordinate_transformation_mode=ctm)


@pytest.mark.parametrize("a,exclude", [(-0.5, 1), (-0.75, 0), (-0.6, 1)])
def test_cubic_coeff_and_exclude_outside(a, exclude):
    _resize(_x(2, 1, 7, 4), [1, 1, 1.3, 0.6], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    _resize(_x(2, 1, 7, 4), sizes=[2, 1, 3, 9], mode="linear", exclude_outside=exclude)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.3, 0.6], [1, 1, 0.45, 1.5]])
def test_antialias(mode, scales):
    _resize(_x(1, 2, 13, 9), scales, mode=mode, antialias=1)
    _resize(_x(1, 2, 13, 9), sizes=[1, 2, 4, 5], mode=mode, antialias=1, const=("sizes",))


def test_three_and_five_dims():
    _resize(_x(3, 5, 4), [1, 1.6, 0.75], mode="linear", const=("scales",))
    _resize(_x(1, 2, 3, 4, 5), [1, 1, 1.5, 0.5, 2], mode="linear")
    _resize(_x(1, 2, 3, 4, 5), sizes=[3, 2], axes=[2, 4], mode="cubic")
    _resize(_x(1, 2, 3, 4, 5), [2, 1, 0.7, 1, 1.2], mode="nearest")


# the reference computes cubic weights in float32 (cubic_coeff_a is a float32): 1e-5 of the data's scale
# (values up to ~250, so an output near 0 may differ by a few 1e-5) for double; its own seed, so the data does
# not depend on which tests ran before on the worker
@pytest.mark.parametrize("dt,tol", [(np.float64, 1e-5), (np.float16, 2e-3), (np.int32, 0), (np.uint8, 0)])
def test_interpolation_dtypes(dt, tol):
    x = (np.random.default_rng(116).standard_normal((1, 2, 5, 6)) * 50 + 100).astype(dt)
    scale = float(np.abs(x.astype(np.float64)).max())
    _resize(x, [1, 1, 1.4, 0.7], mode="linear", tol={"rtol": tol, "atol": tol * scale})
    _resize(x, sizes=[1, 2, 3, 9], mode="cubic", tol={"rtol": tol, "atol": tol * scale})


def test_bfloat16():
    x = _x(1, 1, 4, 6)
    xb = x.astype(ml_dtypes.bfloat16)
    want = check_node("Resize", {"x": x.astype(xb.dtype).astype(F32), "roi": None,
                                 "scales": np.array([1, 1, 1.5, 0.5], F32)}, opset=19, mode="linear")["y0"]
    m = node_model("Resize", {"x": xb, "roi": None, "scales": np.array([1, 1, 1.5, 0.5], F32)}, opset=19,
                   mode="linear")
    got = onnxc.compile(m).run({"x": xb, "scales": np.array([1, 1, 1.5, 0.5], F32)})["y0"]
    np.testing.assert_allclose(got.astype(F32), want, rtol=1e-2, atol=1e-2)


# -- Resize: tf_crop_and_resize, axes, aspect-ratio policies, opsets -------------------------------------

@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode):
    roi = [0, 0, 0.1, 0.3, 1, 1, 1.2, 0.9]
    _resize(_x(1, 2, 6, 5), sizes=[1, 2, 4, 7], roi=roi, mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=-3.0)
    _resize(_x(1, 2, 6, 5), sizes=[4, 1], roi=[-0.2, 0.4, 0.8, 0.6], axes=[3, 2], mode=mode,
            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.5)


def test_tf_crop_and_resize_double_roi():
    x = _x(1, 1, 5, 5)
    check_node("Resize", {"x": x, "roi": np.array([0.2, -0.1, 0.9, 1.1]), "scales": None,
                          "sizes": np.array([3, 6], np.int64)}, opset=19, axes=[2, 3], mode="linear",
               coordinate_transformation_mode="tf_crop_and_resize", **TOL)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller", "stretch"])
@pytest.mark.parametrize("const", [True, False])
def test_keep_aspect_ratio(policy, const):
    _resize(_x(1, 2, 5, 8), sizes=[6, 7], axes=[2, 3], mode="linear", keep_aspect_ratio_policy=policy,
            const=("sizes",) if const else ())
    _resize(_x(3, 6, 4), sizes=[2, 2, 9], mode="nearest", keep_aspect_ratio_policy=policy)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_older_opsets(opset):
    _resize(_x(1, 2, 5, 4), [1, 1, 1.5, 0.5], opset=opset, mode="linear", coordinate_transformation_mode="align_corners")
    _resize(_x(1, 2, 5, 4), sizes=[1, 2, 3, 7], opset=opset, mode="cubic")


def test_tf_half_pixel_for_nn_opset_11():
    x = _x(1, 1, 4, 6)
    got = _resize(x, [1, 1, 1.5, 0.5], opset=11, mode="nearest", nearest_mode="floor",
                  coordinate_transformation_mode="tf_half_pixel_for_nn", const=("scales",),
                  expected=[_tf_nn(x, [1.5, 0.5])])
    assert got["y0"].shape == (1, 1, 6, 3)


def _tf_nn(x, s):
    h = np.minimum(np.floor((np.arange(int(x.shape[2] * s[0])) + 0.5) / s[0]).astype(int), x.shape[2] - 1)
    w = np.minimum(np.floor((np.arange(int(x.shape[3] * s[1])) + 0.5) / s[1]).astype(int), x.shape[3] - 1)
    return x[:, :, h][:, :, :, w]


# -- Resize: symbolic dims, run-time scales, empty tensors, errors ---------------------------------------

def test_symbolic_dims_with_constant_scales():
    x = _x(2, 3, 5, 7)
    m = node_model("Resize", {"x": x, "roi": None, "scales": np.array([1, 1, 2, 0.5], F32)}, opset=19,
                   const_inputs=("scales",), input_shapes={"x": ["N", "C", "H", "W"]}, mode="linear")
    model = onnxc.compile(m)
    assert model.outputs[0].shape == ("N", "C", "2*H", "floor(W / 2)")
    for shape in [(2, 3, 5, 7), (1, 4, 6, 1), (0, 3, 4, 4)]:
        _resize(_x(*shape), [1, 1, 2, 0.5], mode="linear", const=("scales",), shapes={"x": ["N", "C", "H", "W"]})


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # the reference's 0 / 0 scale of an empty batch
def test_symbolic_batch_with_runtime_scales_and_sizes():
    shapes = {"x": ["N", "C", 5, 7]}
    for n in (3, 0):
        _resize(_x(n, 2, 5, 7), [1, 1, 1.3, 0.4], mode="cubic", shapes=shapes)
        _resize(_x(n, 2, 5, 7), sizes=[n, 2, 2, 11], mode="linear", shapes=shapes)
        _resize(_x(n, 2, 5, 7), [1, 1, 0.6, 1.9], mode="nearest", const=("scales",), shapes=shapes)


@pytest.mark.parametrize("mode,scales", [("nearest", [1, 1, 2, 2]), ("linear", [1, 1, 2, 1.5]),
                                         ("cubic", [1, 1, 0.5, 2]), ("linear", [1, 1, 1, 2])])
@pytest.mark.parametrize("const", [True, False])
def test_two_threads_match_one_thread(mode, scales, const):
    """Large enough for the runtime's pool at batch 1 (nearest: output planes; linear / cubic: each pass's
    rows or innermost dot products): two threads match onnx.reference and, bit for bit, one thread; with
    run-time scales the batch is symbolic."""
    x = _x(1, 16, 64, 64)
    inputs = {"x": x, "roi": None, "scales": np.array(scales, F32)}
    m = node_model("Resize", inputs, opset=19, const_inputs=("scales",) if const else (),
                   input_shapes=None if const else {"x": ["N", 16, 64, 64]}, mode=mode)
    feeds = {"x": x} if const else {"x": x, "scales": inputs["scales"]}
    one, two = onnxc.compile(m, threads=1), onnxc.compile(m, threads=2)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    got = two.run(feeds)["y0"]
    np.testing.assert_allclose(got, reference(m, feeds)[0], **TOL)
    np.testing.assert_array_equal(got, one.run(feeds)["y0"])


def test_runtime_errors_name_the_node():
    x = _x(1, 1, 4, 4)
    m = node_model("Resize", {"x": x, "roi": None, "scales": np.array([1, 1, 2, 2], F32)}, opset=19, mode="linear")
    model = onnxc.compile(m)
    with pytest.raises(OnnxcError, match="Resize.*scales"):
        model.run({"x": x, "scales": np.array([1, 1, -2, 2], F32)})
    m = node_model("Resize", {"x": x, "roi": None, "scales": None, "sizes": np.array([1, 1, 2, 2], np.int64)},
                   opset=19, mode="linear", input_shapes={"x": [1, 1, "H", 4]})
    with pytest.raises(OnnxcError, match="Resize.*empty axis"):
        onnxc.compile(m).run({"x": _x(1, 1, 0, 4), "sizes": np.array([1, 1, 2, 2], np.int64)})


def test_invalid_models():
    x = _x(1, 1, 4, 4)
    bad = [dict(mode="area"), dict(coordinate_transformation_mode="tf_half_pixel_for_nn"),
           dict(nearest_mode="round")]
    for attrs in bad:
        m = node_model("Resize", {"x": x, "roi": None, "scales": np.array([1, 1, 2, 2], F32)}, opset=19, **attrs)
        with pytest.raises(ShapeError):
            onnxc.compile(m)
    m = node_model("Resize", {"x": x, "roi": None, "scales": np.array([1, 2, 2], F32)}, opset=19)
    with pytest.raises(ShapeError, match="scales has 3 entries"):
        onnxc.compile(m)


# -- Resize-10 and Upsample (onnxruntime semantics) -------------------------------------------------------

# onnxruntime's linear Resize-10/Upsample needs the two outer scales to be 1
@pytest.mark.parametrize("mode,scales", [("nearest", [1, 1, 0.6, 0.7]), ("nearest", [1, 2, 1, 3]),
                                         ("nearest", [2, 1, 1.5, 0.5]), ("linear", [1, 1, 0.6, 0.7]),
                                         ("linear", [1, 1, 2, 1.5]), ("linear", [1, 1, 3, 1])])
def test_resize_10(mode, scales):
    x = _x(2, 2, 4, 5)
    inputs = {"x": x, "s": np.array(scales, F32)}
    want = _ort("Resize", inputs, 10, mode=mode)
    check_node("Resize", inputs, opset=10, expected=want, mode=mode, **TOL)


@pytest.mark.parametrize("mode,scales", [("nearest", [1, 1, 2, 1.5]), ("nearest", [1.5, 1, 1, 2.5]),
                                         ("nearest", [1, 3, 1, 1]), ("linear", [1, 1, 2, 1.5]),
                                         ("linear", [1, 1, 3, 1])])
def test_upsample(mode, scales):
    x = _x(2, 2, 3, 4)
    inputs = {"x": x, "s": np.array(scales, F32)}
    check_node("Upsample", inputs, opset=9, expected=_ort("Upsample", inputs, 9, mode=mode), mode=mode, **TOL)
    check_node("Upsample", inputs, opset=9, const_inputs=("s",), expected=_ort("Upsample", inputs, 9, mode=mode),
               mode=mode, **TOL)
    scales = [float(s) for s in scales]
    want = _ort("Upsample", {"x": x}, 7, mode=mode, scales=scales)
    check_node("Upsample", {"x": x}, opset=7, expected=want, mode=mode, scales=scales, **TOL)


# -- GridSample --------------------------------------------------------------------------------------------

def _grid(*shape) -> np.ndarray:
    return rng.uniform(-1.3, 1.3, shape).astype(F32)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_gridsample_2d(mode, padding, align):
    check_node("GridSample", {"x": _x(2, 3, 5, 4), "g": _grid(2, 3, 6, 2)}, opset=22, mode=mode,
               padding_mode=padding, align_corners=align, **TOL)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_gridsample_volumetric_and_1d(mode, padding):
    check_node("GridSample", {"x": _x(1, 2, 3, 4, 5), "g": _grid(1, 2, 3, 2, 3)}, opset=20, mode=mode,
               padding_mode=padding, **TOL)
    check_node("GridSample", {"x": _x(2, 2, 6), "g": _grid(2, 5, 1)}, opset=22, mode=mode, padding_mode=padding,
               **TOL)


@pytest.mark.parametrize("mode,new_name", [("bilinear", "linear"), ("nearest", "nearest"), ("bicubic", "cubic")])
def test_gridsample_opset16_names(mode, new_name):
    inputs = {"x": _x(1, 2, 4, 3), "g": _grid(1, 2, 5, 2)}
    want = check_node("GridSample", inputs, opset=22, mode=new_name, padding_mode="border", **TOL)["y0"]
    check_node("GridSample", inputs, opset=16, mode=mode, padding_mode="border", expected=[want], **TOL)


def test_gridsample_types_symbolic_and_empty():
    x, g = _x(2, 3, 4, 5, dt=np.float64), _grid(2, 2, 3, 2).astype(np.float64)
    # the reference rounds coordinates to float32 even for double
    check_node("GridSample", {"x": x, "g": g}, opset=22, mode="cubic", rtol=1e-5, atol=1e-5)
    check_node("GridSample", {"x": x.astype(np.float16), "g": g.astype(np.float16)}, opset=22, rtol=5e-3, atol=5e-3)
    check_node("GridSample", {"x": x.astype(F32), "g": g.astype(F32)}, opset=22,
               input_shapes={"x": ["N", "C", 4, 5], "g": ["N", "H", "W", 2]}, **TOL)
    check_node("GridSample", {"x": _x(0, 3, 4, 5), "g": _grid(0, 2, 3, 2)}, opset=22,  # (the reference fails)
               input_shapes={"x": ["N", 3, 4, 5], "g": ["N", 2, 3, 2]}, expected=[np.zeros((0, 3, 2, 3), F32)])


# -- RoiAlign ----------------------------------------------------------------------------------------------

def _rois(n: int, h: int, w: int, scale: float) -> np.ndarray:
    a = rng.uniform(-1, [w, h], (n, 2)) / scale
    b = a + rng.uniform(0.2, [w, h], (n, 2)) / scale
    return np.concatenate([a, b], axis=1).astype(F32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roialign(mode, ctm, sampling_ratio):
    x = _x(2, 3, 9, 11)
    inputs = {"x": x, "rois": _rois(5, 9, 11, 0.5), "b": np.array([0, 1, 1, 0, 1], np.int64)}
    check_node("RoiAlign", inputs, opset=22, mode=mode, coordinate_transformation_mode=ctm, output_height=3,
               output_width=4, sampling_ratio=sampling_ratio, spatial_scale=0.5, **TOL)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roialign_opset10_matches_onnxruntime(mode):
    x = _x(1, 2, 8, 6)
    inputs = {"x": x, "rois": _rois(3, 8, 6, 1.0), "b": np.zeros(3, np.int64)}
    want = _ort("RoiAlign", inputs, 10, mode=mode, output_height=2, output_width=3)
    check_node("RoiAlign", inputs, opset=10, expected=want, mode=mode, output_height=2, output_width=3, **TOL)


def test_roialign_types_empty_and_errors():
    x = _x(2, 3, 6, 6)
    rois, b = _rois(4, 6, 6, 1.0), np.array([1, 0, 1, 1], np.int64)
    check_node("RoiAlign", {"x": x.astype(np.float64), "rois": rois.astype(np.float64), "b": b}, opset=16,
               output_height=2, output_width=2, rtol=1e-9, atol=1e-9)
    check_node("RoiAlign", {"x": x.astype(np.float16), "rois": rois.astype(np.float16), "b": b}, opset=16,
               rtol=5e-3, atol=5e-3)
    check_node("RoiAlign", {"x": x, "rois": rois[:0], "b": b[:0]}, opset=22, output_height=2,
               input_shapes={"rois": ["R", 4], "b": ["R"]})
    m = node_model("RoiAlign", {"x": x, "rois": rois, "b": b}, opset=22)
    with pytest.raises(OnnxcError, match="RoiAlign.*batch_indices"):
        onnxc.compile(m).run({"x": x, "rois": rois, "b": np.array([0, 2, 0, 0], np.int64)})


def test_batch_mismatches_are_runtime_errors():
    m = node_model("GridSample", {"x": _x(2, 1, 3, 3), "g": _grid(2, 2, 2, 2)}, opset=22,
                   input_shapes={"x": ["N", 1, 3, 3], "g": ["M", 2, 2, 2]})
    with pytest.raises(OnnxcError, match="GridSample.*X.s batch. is 2, input 1 axis 0 .the grid.s batch. is 3"):
        onnxc.compile(m).run({"x": _x(2, 1, 3, 3), "g": _grid(3, 2, 2, 2)})
    m = node_model("RoiAlign", {"x": _x(1, 1, 4, 4), "rois": _rois(2, 4, 4, 1.0), "b": np.zeros(2, np.int64)},
                   opset=22, input_shapes={"rois": ["R", 4], "b": ["S"]})
    with pytest.raises(OnnxcError, match="RoiAlign.*batch_indices"):
        onnxc.compile(m).run({"x": _x(1, 1, 4, 4), "rois": _rois(2, 4, 4, 1.0), "b": np.zeros(3, np.int64)})


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_threads(mode):
    """Large enough for the OpenMP paths; results equal the single-threaded run."""
    x = _x(2, 8, 40, 50)
    m = node_model("Resize", {"x": x, "roi": None, "scales": np.array([1, 1, 1.5, 0.7], F32)}, opset=19,
                   const_inputs=("scales",), mode=mode)
    one, two = onnxc.compile(m, threads=1).run({"x": x})["y0"], onnxc.compile(m, threads=2).run({"x": x})["y0"]
    np.testing.assert_array_equal(one, two)
    g = _grid(2, 30, 40, 2)
    m = node_model("GridSample", {"x": x, "g": g}, opset=22, mode=mode)
    one, two = onnxc.compile(m, threads=1).run({"x": x, "g": g})["y0"], onnxc.compile(m, threads=2).run({"x": x, "g": g})["y0"]
    np.testing.assert_array_equal(one, two)
