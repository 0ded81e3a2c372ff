"""Nearest Resize (templates/resize_nearest.c.j2): an integer upscale along the last axis (column j reads j / rep,
found from the table at run time) writes each row a source run at a time (runtime_c/onnxc_resize.h
onnxc_resize_repeat_<element size>: two permutes per 16 floats, masks for the last ones); every other table
takes the gather. Bit for bit against onnx.reference for each element size, factor and row length."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnxc


def _model(shape, scales, dt, ctm="asymmetric", nm="floor", symbolic=False):
    n = h.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nm)
    decl = ["N", *shape[1:]] if symbolic else shape
    g = h.make_graph([n], "g", [h.make_tensor_value_info("x", dt, decl)], [h.make_tensor_value_info("y", dt, None)],
                     [nh.from_array(np.array(scales, np.float32), "s")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)])


@pytest.mark.parametrize("shape,scales,dt,npdt,ctm,nm", [
    ([1, 8, 20, 20], [1, 1, 2, 2], TP.FLOAT, np.float32, "asymmetric", "floor"),          # 20 = 16 + 4 sources
    ([1, 4, 10, 10], [1, 1, 2, 2], TP.FLOAT, np.float32, "asymmetric", "floor"),          # masks only
    ([1, 4, 6, 40], [1, 1, 2, 2], TP.FLOAT, np.float32, "half_pixel", "round_prefer_floor"),  # same table
    ([1, 3, 5, 33], [1, 1, 1, 2], TP.INT32, np.int32, "asymmetric", "floor"),             # 33 = 2 x 16 + 1
    ([2, 3, 7, 5], [1, 1, 3, 3], TP.UINT8, np.uint8, "asymmetric", "floor"),
    ([2, 3, 7, 9], [1, 1, 2, 2], TP.DOUBLE, np.float64, "asymmetric", "floor"),
    ([1, 5, 17], [1, 1, 2], TP.FLOAT16, np.float16, "asymmetric", "floor"),
    ([1, 2, 4, 7], [1, 1, 2, 2.5], TP.FLOAT, np.float32, "asymmetric", "floor"),          # not an integer factor
    ([1, 2, 4, 8], [1, 1, 2, 0.5], TP.FLOAT, np.float32, "asymmetric", "floor"),          # a downscale
    ([1, 2, 4, 6], [1, 1, 2, 2], TP.FLOAT, np.float32, "align_corners", "round_prefer_ceil"),  # j / 2 breaks
])
def test_nearest_matches_reference(shape, scales, dt, npdt, ctm, nm):
    m = _model(shape, scales, dt, ctm, nm)
    x = (np.random.default_rng(0).standard_normal(shape) * 50).astype(npdt)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = onnxc.compile(m)(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_nearest_repeat_two_threads_symbolic_batch():
    m = _model([3, 16, 12, 18], [1, 1, 2, 2], TP.FLOAT, symbolic=True)
    x = np.random.default_rng(1).standard_normal([3, 16, 12, 18]).astype(np.float32)
    got = onnxc.compile(m, threads=2)(x)
    np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))
