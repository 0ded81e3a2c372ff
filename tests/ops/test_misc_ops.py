"""Assorted single ops: Col2Im, DeformConv, MaxUnpool, Det, ReverseSequence and TensorScatter, against
onnx.reference (or numpy where the reference covers less than the spec: DeformConv beyond 2-D, Det
of float16), including shapes, dtypes and attribute variants the conformance suite lacks."""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import onnx
import pytest

import onnxc
from onnxc.ir import ShapeError

from .util import check_node, i64, node_model, random_array, reference

rng = np.random.default_rng(3)


def _f(*shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def _run_error(model: onnx.ModelProto, feeds: dict, match: str) -> None:
    with pytest.raises(Exception, match=match):
        onnxc.compile(model).run(feeds)


# -- Col2Im ---------------------------------------------------------------------------------------

COL2IM = [  # image, block, attrs
    ([5], [2], {}),
    ([6, 7], [2, 3], {"strides": [2, 1], "pads": [1, 0, 0, 2], "dilations": [1, 2]}),
    ([4, 5, 3], [2, 2, 1], {"dilations": [2, 1, 1], "pads": [1, 1, 0, 0, 1, 1]}),
]


def _col2im_input(image, block, attrs, n=2, c=3, dt=np.float32) -> np.ndarray:
    nd = len(image)
    pads = attrs.get("pads", [0] * 2 * nd)
    st, dl = attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    nb = [(image[a] + pads[a] + pads[nd + a] - dl[a] * (block[a] - 1) - 1) // st[a] + 1 for a in range(nd)]
    return random_array(rng, (n, c * math.prod(block), math.prod(nb)), dt)


@pytest.mark.parametrize("image, block, attrs", COL2IM)
@pytest.mark.parametrize("const", [True, False])
def test_col2im(image, block, attrs, const) -> None:
    x = _col2im_input(image, block, attrs)
    ins = {"x": x, "image": i64(*image), "block": i64(*block)}
    check_node("Col2Im", ins, opset=18, const_inputs=("image", "block") if const else (), **attrs)


@pytest.mark.parametrize("dt", [np.int32, np.float64, np.float16, bool])
def test_col2im_dtypes_symbolic_batch(dt) -> None:
    image, block, attrs = COL2IM[1]
    x = _col2im_input(image, block, attrs, n=3, dt=dt)
    ins = {"x": x, "image": i64(*image), "block": i64(*block)}
    check_node("Col2Im", ins, opset=18, const_inputs=("image", "block"), input_shapes={"x": ["N", 18, x.shape[2]]},
               **attrs)


def test_col2im_wrong_block_count() -> None:
    ins = {"x": _f(1, 4, 5), "image": i64(3, 3), "block": i64(2, 2)}
    _run_error(node_model("Col2Im", ins, opset=18), ins, "blocks")


# -- DeformConv -----------------------------------------------------------------------------------

def _interp(img: np.ndarray, p: list[float]) -> float:
    lo = [math.floor(v) for v in p]
    total = 0.0
    for bits in itertools.product((0, 1), repeat=len(p)):
        q = [lo[a] + bits[a] for a in range(len(p))]
        if any(q[a] < 0 or q[a] >= img.shape[a] for a in range(len(p))):
            continue
        w = math.prod((p[a] - lo[a]) if bits[a] else (1 - (p[a] - lo[a])) for a in range(len(p)))
        total += w * float(img[tuple(q)])
    return total


def deform_conv_ref(x, w, off, b=None, mask=None, strides=None, pads=None, dilations=None, group=1,
                    offset_group=1) -> np.ndarray:
    """N-D DeformConv from the spec, in double loops (onnx.reference only implements 2-D)."""
    n, c = x.shape[:2]
    oc, ks = w.shape[0], w.shape[2:]
    nd, k = len(ks), math.prod(ks)
    out = off.shape[2:]
    strides, dilations = strides or [1] * nd, dilations or [1] * nd
    pads = pads or [0] * 2 * nd
    cg, ocg, cog = c // group, oc // group, c // offset_group
    off = off.reshape(n, offset_group, k, nd, *out)
    mask = np.ones((n, offset_group, k, *out)) if mask is None else mask.reshape(n, offset_group, k, *out)
    y = np.zeros((n, oc, *out))
    for bi, o_c, o in itertools.product(range(n), range(oc), np.ndindex(*out)):
        g = o_c // ocg
        acc = 0.0 if b is None else float(b[o_c])
        for ci in range(g * cg, (g + 1) * cg):
            og = ci // cog
            for kk, kidx in enumerate(np.ndindex(*ks)):
                p = [o[a] * strides[a] - pads[a] + kidx[a] * dilations[a] + float(off[(bi, og, kk, a, *o)])
                     for a in range(nd)]
                acc += float(w[(o_c, ci - g * cg, *kidx)]) * _interp(x[bi, ci], p) * float(mask[(bi, og, kk, *o)])
        y[(bi, o_c, *o)] = acc
    return y


def _deform_inputs(spatial, ks, out, c=4, oc=6, group=2, og=2, n=2, mask=True, bias=True, dt=np.float32) -> dict:
    k = math.prod(ks)
    ins = {"x": _f(n, c, *spatial, dt=dt), "w": _f(oc, c // group, *ks, dt=dt),
           "offset": (_f(n, og * k * len(ks), *out, dt=dt) * 1.5).astype(dt),
           "b": _f(oc, dt=dt) if bias else None, "mask": rng.random((n, og * k, *out)).astype(dt) if mask else None}
    return ins


def test_deform_conv_ref_matches_onnx_reference_2d() -> None:
    ins = _deform_inputs((5, 4), (2, 2), (4, 3), dt=np.float64)
    m = node_model("DeformConv", ins, opset=22, group=2, offset_group=2)
    want = reference(m, {k: v for k, v in ins.items() if v is not None})[0]
    np.testing.assert_allclose(deform_conv_ref(*ins.values(), group=2, offset_group=2), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spatial, ks, attrs", [
    ((7,), (3,), {"strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((5, 6), (3, 2), {"strides": [1, 2], "pads": [1, 0, 2, 1]}),
    ((4, 3, 5), (2, 2, 3), {"pads": [1, 0, 1, 0, 1, 1], "dilations": [1, 2, 1]}),
])
@pytest.mark.parametrize("mask_bias", [True, False])
def test_deform_conv_nd(spatial, ks, attrs, mask_bias) -> None:
    nd = len(ks)
    pads = attrs.get("pads", [0] * 2 * nd)
    st, dl = attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    out = [(spatial[a] + pads[a] + pads[nd + a] - dl[a] * (ks[a] - 1) - 1) // st[a] + 1 for a in range(nd)]
    ins = _deform_inputs(spatial, ks, out, mask=mask_bias, bias=mask_bias)
    want = deform_conv_ref(*ins.values(), group=2, offset_group=2, **attrs)
    check_node("DeformConv", ins, opset=22, rtol=1e-4, atol=1e-4, expected=[want.astype(np.float32)],
               group=2, offset_group=2, **attrs)


def test_deform_conv_symbolic_batch_float16() -> None:
    ins = _deform_inputs((4, 4), (2, 2), (3, 3), c=2, oc=2, group=1, og=1, dt=np.float16)
    want = deform_conv_ref(*ins.values())
    check_node("DeformConv", ins, opset=22, rtol=1e-2, atol=1e-2, expected=[want.astype(np.float16)],
               input_shapes={"x": ["N", 2, 4, 4], "offset": ["N", 8, 3, 3], "mask": ["N", 4, 3, 3]})


def test_deform_conv_bad_offset_channels() -> None:
    ins = _deform_inputs((4, 4), (2, 2), (3, 3), c=2, oc=2, group=1, og=1, mask=False, bias=False)
    with pytest.raises(ShapeError, match="offset channels"):
        onnxc.compile(node_model("DeformConv", ins, opset=22, offset_group=2))


# -- MaxUnpool ------------------------------------------------------------------------------------

def _pooled(shape, ks, strides, pads=None, dt=np.float32):
    nd = len(ks)
    x = _f(*shape, dt=dt)
    attrs = {"kernel_shape": ks, "strides": strides, "pads": pads or [0] * 2 * nd}
    m = node_model("MaxPool", {"x": x}, 2, opset=12, **attrs)
    y, idx = reference(m, {"x": x})
    return y, idx, attrs


@pytest.mark.parametrize("shape, ks, strides, pads", [
    ((2, 3, 8), [2], [2], None),
    ((1, 2, 5, 6), [3, 2], [2, 2], [1, 0, 1, 0]),
    ((1, 2, 4, 4, 6), [2, 2, 3], [2, 2, 3], None),
])
@pytest.mark.parametrize("opset", [11, 22])
def test_maxunpool(shape, ks, strides, pads, opset) -> None:
    y, idx, attrs = _pooled(shape, ks, strides, pads)
    check_node("MaxUnpool", {"x": y, "i": idx}, opset=opset, input_shapes={"x": ["N", *y.shape[1:]]}, **attrs)


@pytest.mark.parametrize("const", [True, False])
def test_maxunpool_output_shape(const) -> None:
    y, idx, attrs = _pooled((2, 2, 4, 6), [2, 2], [2, 2])
    ins = {"x": y, "i": idx, "shape": i64(2, 2, 5, 7)}
    check_node("MaxUnpool", ins, opset=22, const_inputs=("shape",) if const else (), **attrs)


def test_maxunpool_double_and_half() -> None:
    for dt in (np.float64, np.float16):
        y, idx, attrs = _pooled((1, 3, 6), [3], [3], dt=dt)
        check_node("MaxUnpool", {"x": y, "i": idx}, opset=22, **attrs)


def test_maxunpool_bad_index() -> None:
    ins = {"x": _f(1, 1, 2), "i": i64(0, 9).reshape(1, 1, 2)}
    _run_error(node_model("MaxUnpool", ins, opset=22, kernel_shape=[2], strides=[2]), ins, "outside")


# -- Det ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 3, 5, 5)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_det(shape, dt) -> None:
    check_node("Det", {"x": _f(*shape, dt=dt)}, opset=22, rtol=1e-4 if dt == np.float32 else 1e-10, atol=1e-6)


def test_det_singular_and_pivoting_symbolic_batch() -> None:
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[0, 0], [0, 0]], [[1e-20, 1], [1, 1]]], np.float64)
    check_node("Det", {"x": x}, opset=11, input_shapes={"x": ["B", 2, 2]}, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_det_half(dt) -> None:
    x = _f(3, 3, 3).astype(dt)
    want = np.linalg.det(x.astype(np.float64)).astype(dt)
    got = onnxc.compile(node_model("Det", {"x": x}, opset=22)).run({"x": x})["y0"]
    assert got.dtype == want.dtype and got.shape == (3,)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2, atol=1e-2)


# -- ReverseSequence ------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_axis, time_axis", [(0, 1), (1, 0)])
@pytest.mark.parametrize("dt", [np.float32, np.int8, bool, np.uint64, np.float16])
def test_reverse_sequence(batch_axis, time_axis, dt) -> None:
    shape = [0, 0, 3, 2]
    shape[batch_axis], shape[time_axis] = 4, 5
    x = random_array(rng, shape, dt)
    lens = i64(5, 0, 3, 1)
    check_node("ReverseSequence", {"x": x, "lens": lens}, opset=10, batch_axis=batch_axis, time_axis=time_axis)


def test_reverse_sequence_bfloat16_symbolic() -> None:
    x = _f(6, 3).astype(ml_dtypes.bfloat16)
    check_node("ReverseSequence", {"x": x, "lens": i64(6, 2, 4)}, opset=28, input_shapes={"x": ["T", 3]})


def test_reverse_sequence_bad_length() -> None:
    ins = {"x": _f(3, 2), "lens": i64(1, 4)}
    _run_error(node_model("ReverseSequence", ins, opset=10), ins, "sequence_lens")


# -- TensorScatter --------------------------------------------------------------------------------

@pytest.mark.parametrize("axis, mode, writes", [
    (-2, "linear", [0, 2]), (1, "linear", [1, 0]), (2, "circular", [3, 5]), (-1, "circular", [-1, 2]),
    (-2, "linear", None),
])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.float16, bool])
def test_tensor_scatter(axis, mode, writes, dt) -> None:
    past = random_array(rng, (2, 4, 5, 6), dt)
    ushape = list(past.shape)
    ushape[axis] = 2
    upd = random_array(rng, ushape, dt)
    ins = {"past": past, "update": upd, "wi": None if writes is None else i64(*writes)}
    check_node("TensorScatter", ins, opset=24, axis=axis, mode=mode)


def test_tensor_scatter_symbolic_batch() -> None:
    ins = {"past": _f(3, 6, 2), "update": _f(3, 2, 2), "wi": i64(4, 0, 2)}
    check_node("TensorScatter", ins, opset=24, axis=1, input_shapes={"past": ["B", 6, 2], "update": ["B", 2, 2],
                                                                   "wi": ["B"]})


def test_tensor_scatter_linear_overflow() -> None:
    ins = {"past": _f(1, 4, 2), "update": _f(1, 2, 2), "wi": i64(3)}
    _run_error(node_model("TensorScatter", ins, opset=24, axis=1), ins, "write index")


def test_tensor_scatter_invalid_axis() -> None:
    ins = {"past": _f(2, 4), "update": _f(2, 4)}
    with pytest.raises(ShapeError, match="batch axis"):
        onnxc.compile(node_model("TensorScatter", ins, opset=24, axis=0))



def test_symbolic_sizes_checked_at_run_time() -> None:
    """Sizes the shape rule cannot compare (distinct symbols) are checked before any element is read."""
    ins = {"x": _f(3, 2), "lens": i64(1, 2, 3)}
    m = node_model("ReverseSequence", ins, opset=10, input_shapes={"x": ["T", "B"], "lens": ["L"]})
    _run_error(m, ins, "sequence_lens length is 3, the batch size is 2")
    ins = {"past": _f(2, 4, 3), "update": _f(2, 1, 5), "wi": i64(0, 1)}
    m = node_model("TensorScatter", ins, opset=24, axis=1, input_shapes={"update": [2, 1, "D"]})
    _run_error(m, ins, "update dim 2 is 5, past_cache is 3")
    y, idx, attrs = _pooled((1, 2, 4), [2], [2])
    ins = {"x": y, "i": idx[:, :1]}
    m = node_model("MaxUnpool", ins, opset=22, input_shapes={"i": [1, "K", 2]}, **attrs)
    _run_error(m, ins, "I dim 1 is 1, expected 2")
