"""Standard function ops onnxc expands into primitive ops (passes/expansions/), on variants beyond the
backend suite and tests/passes/test_expansions.py: window sizes (even, odd, 1) and output types,
CenterCropPad on every movable element type with odd crop/pad splits and symbolic dims, AffineGrid
in double with a run-time batch, DynamicQuantizeLinear's range edges, the losses' N-D double cases
with every reduction and fully ignored targets, the normalizations and RotaryEmbedding on negative
axes, double and symbolic dims. Compared with onnx.reference (or numpy where the reference departs
from the spec).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from .util import check_node, node_model, random_array, reference

rng = np.random.default_rng(23)
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _f(*shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


# -- windows --------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:invalid value", "ignore:divide by zero")  # symmetric size 1: 0 / 0
@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size", [1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_sizes(op, size, periodic):
    """Even and odd lengths, periodic and symmetric; size 1 symmetric is 0 / 0 (NaN) in both."""
    check_node(op, {"n": np.array(size, np.int64)}, opset=17, periodic=periodic, const_inputs=("n",), **TOL)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_window_runtime_int32_size_double_output(op):
    """A size known only at run time (int32) makes the length a run-time dim; double output."""
    check_node(op, {"n": np.array(9, np.int32)}, opset=17, output_datatype=11, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow"])
@pytest.mark.parametrize("out", [7, 6, 2])  # int64, int32, uint8: values truncate toward zero
def test_window_integer_output(op, out):
    check_node(op, {"n": np.array(7, np.int64)}, opset=17, periodic=0, output_datatype=out)


# -- CenterCropPad --------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.uint16, np.int64,
                                np.uint64, bool])
def test_center_crop_pad_element_types_negative_axes(dt):
    """Axis 0 crops 5 -> 2 (odd difference: the extra element comes off the end), axis 1 pads 4 -> 7."""
    x = random_array(rng, (5, 4, 3), dt)
    check_node("CenterCropPad", {"x": x, "s": np.array([2, 7], np.int64)}, opset=18, axes=[-3, 1],
               const_inputs=("s",))


@pytest.mark.parametrize("target", [[4, 1, 6], [6, 5, 3], [1, 9, 2]])
def test_center_crop_pad_symbolic_input_dims(target):
    """Input dims only known at run time: the pads are computed then."""
    x = _f(5, 4, 3)
    check_node("CenterCropPad", {"x": x, "s": np.array(target, np.int64)}, opset=18, const_inputs=("s",),
               input_shapes={"x": ["A", "B", 3]})


def test_center_crop_pad_runtime_shape_int32():
    x = rng.integers(-5, 5, (3, 8)).astype(np.int16)
    check_node("CenterCropPad", {"x": x, "s": np.array([5], np.int32)}, opset=18, axes=[-1])


# -- AffineGrid -----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:divide by zero")  # the reference's step for a 1-pixel axis
@pytest.mark.parametrize("size", [[3, 2, 4, 5], [2, 1, 2, 3, 4], [1, 1, 1, 6]])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_double(size, align_corners):
    """Double theta keeps a double grid (the reference returns float32: compared at its precision)."""
    nd = len(size) - 2
    theta = _f(size[0], nd, nd + 1, dt=np.float64)
    s = np.array(size, np.int64)
    want = reference(node_model("AffineGrid", {"t": theta, "s": s}, opset=20, const_inputs=("s",),
                                align_corners=align_corners), {"t": theta})[0]
    check_node("AffineGrid", {"t": theta, "s": s}, opset=20, const_inputs=("s",), align_corners=align_corners,
               expected=[want.astype(np.float64)], rtol=1e-5, atol=1e-6)


def test_affine_grid_symbolic_batch():
    theta = _f(4, 2, 3)
    check_node("AffineGrid", {"t": theta, "s": np.array([4, 3, 5, 2], np.int64)}, opset=20,
               input_shapes={"t": ["N", 2, 3]}, align_corners=1, **TOL)


# -- DynamicQuantizeLinear ------------------------------------------------------------------------

@pytest.mark.parametrize("x", [
    np.linspace(0.5, 7.0, 12, dtype=np.float32).reshape(3, 4),            # all positive: range starts at 0
    -np.linspace(100, 3000, 24, dtype=np.float32).reshape(2, 3, 4),      # all negative, large
    np.array([-0.5, 254.5, 1.5, 2.5, 3.5, 0.0], np.float32),             # scale 1: halves round to even
    np.array([[1e-8, -1e-8]], np.float32),                                # tiny range
])
def test_dynamic_quantize_linear_ranges(x):
    check_node("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11)


def test_dynamic_quantize_linear_symbolic_and_empty():
    x = _f(5, 4) * 10
    shapes = {"x": ["N", 4]}
    check_node("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11, input_shapes=shapes)
    # no elements: the range [0, 0] is empty, so the scale is 1/255 as for all zeros
    empty = np.zeros((0, 4), np.float32)
    check_node("DynamicQuantizeLinear", {"x": empty}, n_outputs=3, opset=11, input_shapes=shapes,
               expected=[np.zeros((0, 4), np.uint8), np.array(1 / 255, np.float32), np.array(0, np.uint8)])


# -- losses ---------------------------------------------------------------------------------------

def _targets(shape: tuple, c: int, ignore: int | None, dt=np.int64) -> np.ndarray:
    t = rng.integers(0, c, (shape[0], *shape[2:])).astype(dt)
    if ignore is not None:
        t.reshape(-1)[::2] = ignore
    return t


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [None, -1, 3])
def test_losses_double_nd_weighted(op, reduction, ignore_index):
    shape = (2, 4, 3, 2)
    ins = {"x": _f(*shape, dt=np.float64), "t": _targets(shape, 4, ignore_index), "w": rng.random(4)}
    n = 2 if op == "SoftmaxCrossEntropyLoss" else 1
    check_node(op, ins, n_outputs=n, opset=13, reduction=reduction, ignore_index=ignore_index, rtol=1e-10,
               atol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value")  # the reference's 0 / 0
@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_losses_every_target_ignored(op, reduction):
    """Sum is 0; mean divides 0 by a total weight of 0 (NaN, as the reference)."""
    ins = {"x": _f(3, 4), "t": np.full(3, 2, np.int64)}
    n = 2 if op == "SoftmaxCrossEntropyLoss" else 1
    check_node(op, ins, n_outputs=n, opset=13, reduction=reduction, ignore_index=2, **TOL)


@pytest.mark.parametrize("opset", [12, 13])
def test_softmax_cross_entropy_int32_targets_symbolic(opset):
    x, t = _f(4, 5, 3), rng.integers(0, 5, (4, 3)).astype(np.int32)
    t[1, 2] = -100
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, n_outputs=2, opset=opset, reduction="sum",
               ignore_index=-100, input_shapes={"x": ["N", 5, "D"], "t": ["N", "D"]}, **TOL)


def test_nll_loss_two_d_symbolic_batch_weighted():
    x, t, w = _f(6, 4), rng.integers(0, 4, 6).astype(np.int64), rng.random(4).astype(np.float32)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t, "w": w}, opset=13, reduction="mean",
               input_shapes={"x": ["N", 4], "t": ["N"]}, **TOL)


# -- normalizations -------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,scale_shape", [(-2, (4, 5)), (-3, (1, 4, 5)), (1, (3, 4, 5)), (-1, (5,))])
def test_rms_normalization_double_negative_axes_symbolic(axis, scale_shape):
    x, s = _f(2, 3, 4, 5, dt=np.float64), _f(*scale_shape, dt=np.float64)
    check_node("RMSNormalization", {"x": x, "s": s}, opset=23, axis=axis, epsilon=1e-2,
               input_shapes={"x": ["B", 3, 4, 5]}, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("stash_type", [1, 11])
def test_group_normalization_double_stash_and_symbolic_spatial(groups, stash_type):
    x, s, b = _f(2, 6, 3, 4, dt=np.float64), _f(6, dt=np.float64), _f(6, dt=np.float64)
    check_node("GroupNormalization", {"x": x, "s": s, "b": b}, opset=21, num_groups=groups, stash_type=stash_type,
               input_shapes={"x": ["N", 6, "H", "W"]}, rtol=1e-5, atol=1e-6)


# -- RotaryEmbedding ------------------------------------------------------------------------------

@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 2, 6])
def test_rotary_embedding_double_3d_symbolic(interleaved, rotary_dim):
    """[B, S, H * D] input with num_heads, a partial or full rotation, position ids, symbolic B and S."""
    b, s, h, d = 2, 5, 3, 6
    half = (rotary_dim or d) // 2
    ins = {"x": _f(b, s, h * d, dt=np.float64), "cos": _f(16, half, dt=np.float64),
           "sin": _f(16, half, dt=np.float64), "pos": rng.integers(0, 16, (b, s))}
    check_node("RotaryEmbedding", ins, opset=23, num_heads=h, interleaved=interleaved,
               rotary_embedding_dim=rotary_dim, input_shapes={"x": ["B", "S", h * d], "pos": ["B", "S"]},
               rtol=1e-12, atol=1e-12)


def test_rotary_embedding_cache_without_positions_symbolic():
    """cos/sin given per batch and position ([B, S, D/2]) with a symbolic sequence length."""
    x, cos, sin = _f(1, 2, 7, 4), _f(1, 7, 2), _f(1, 7, 2)
    check_node("RotaryEmbedding", {"x": x, "cos": cos, "sin": sin}, opset=23,
               input_shapes={"x": [1, 2, "S", 4], "cos": [1, "S", 2], "sin": [1, "S", 2]}, **TOL)
