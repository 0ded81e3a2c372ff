"""Slice, Pad, Gather/GatherElements/GatherND, ScatterND/ScatterElements/Scatter, OneHot, Trilu and
EyeLike against onnx.reference: opset variants, negative and clamped indices, symbolic dims, and
out-of-range indices reported at run time."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import onnxc
from onnxc.ir import RuntimeFailure

from .util import check_node, i64, node_model, random_array

rng = np.random.default_rng(2)
BIG = np.iinfo(np.int64).max


def _arr(shape, dt=np.float32) -> np.ndarray:
    return random_array(rng, shape, dt)


_i64 = i64


# -- Slice ----------------------------------------------------------------------------------------

SLICES = [  # starts, ends, axes, steps
    ([0, 1], [2, 3], None, None), ([1], [BIG], [1], None), ([-2], [-1], [0], None), ([-100], [100], [2], None),
    ([3], [0], [1], [-1]), ([-1], [-BIG], [2], [-2]), ([0, 0], [3, 5], [-1, -2], [2, 3]), ([5], [1], [1], [1]),
    ([2], [2], [0], None), ([10], [-10], [1], [-1]), ([-10], [10], [1], [-1]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(starts, ends, axes, steps):
    ins = {"x": _arr((3, 5, 4)), "s": _i64(*starts), "e": _i64(*ends)}
    if axes is not None:
        ins["a"] = _i64(*axes)
    if steps is not None:
        ins["k"] = _i64(*steps)
        ins.setdefault("a", _i64(*range(len(starts))))
    ins = {k: ins[k] for k in ("x", "s", "e", "a", "k") if k in ins}
    check_node("Slice", ins, const_inputs=("s", "e", "a", "k"))


def test_slice_int32_params_and_dtypes():
    for dt in (np.int64, bool, np.uint8, np.float64):
        check_node("Slice", {"x": _arr((4, 6), dt), "s": np.array([1, 1], np.int32), "e": np.array([3, 5], np.int32)},
                   const_inputs=("s", "e"))


def test_slice_opset1():
    x = _arr((3, 5))
    check_node("Slice", {"x": x}, opset=9, starts=[1, -3], ends=[BIG, -1], axes=[0, 1])
    check_node("Slice", {"x": x}, opset=1, starts=[1], ends=[3], expected=[x[1:3]])


@pytest.mark.parametrize("starts,ends,steps", [([1], [BIG], [1]), ([0], [2], [1]), ([-1], [-BIG], [-1]),
                                               ([-2], [BIG], [1]), ([1], [-1], [2])])
def test_slice_symbolic(starts, ends, steps):
    for n in (5, 1):
        check_node("Slice", {"x": _arr((n, 3)), "s": _i64(*starts), "e": _i64(*ends), "a": _i64(0),
                             "k": _i64(*steps)}, const_inputs=("s", "e", "a", "k"), input_shapes={"x": ["N", 3]})


# -- Pad ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 1], [2, 0, 0, 3], [0, 0, 0, 0], [3, 4, 3, 4]])
def test_pad_modes(mode, pads):
    x = _arr((3, 4))
    ins = {"x": x, "p": _i64(*pads)}
    if mode == "constant":
        ins["v"] = np.array(1.5, np.float32)
    check_node("Pad", ins, const_inputs=("p", "v"), opset=19, mode=mode)


@pytest.mark.parametrize("dt", [np.int32, np.uint8, bool, np.float64])
def test_pad_dtypes(dt):
    check_node("Pad", {"x": _arr((2, 3, 4), dt), "p": _i64(1, 0, 2, 0, 1, 1)}, const_inputs=("p",), opset=13)


def test_pad_axes_opset18():
    check_node("Pad", {"x": _arr((2, 3, 4)), "p": _i64(1, 2, 3, 0), "v": None, "a": _i64(-1, 0)},
               const_inputs=("p", "a"), opset=18, mode="edge")


def test_pad_opset2_attrs():
    x = _arr((2, 3))
    check_node("Pad", {"x": x}, opset=2, pads=[1, 0, 0, 2], value=2.0)
    check_node("Pad", {"x": x}, opset=1, paddings=[0, 1, 1, 0], mode="reflect",
               expected=[np.pad(x, [(0, 1), (1, 0)], mode="reflect")])


def test_pad_negative_crops():
    x = _arr((4, 5))
    check_node("Pad", {"x": x, "p": _i64(-1, 2, 0, -2)}, const_inputs=("p",),
               expected=[np.pad(x[1:, :3], [(0, 0), (2, 0)])])


def test_pad_runtime_constant_and_symbolic():
    x = _arr((3, 4))
    check_node("Pad", {"x": x, "p": _i64(1, 1, 1, 1), "v": np.array(-2.0, np.float32)}, const_inputs=("p",),
               input_shapes={"x": ["N", 4]})
    check_node("Pad", {"x": x, "p": _i64(1, 2, 2, 1)}, const_inputs=("p",), mode="reflect",
               input_shapes={"x": ["N", "M"]})


# -- Gather family --------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("ind", [[0, 2], [[1, -1], [0, 0]], 1, [-3]])
@pytest.mark.parametrize("it", [np.int64, np.int32])
def test_gather(axis, ind, it):
    check_node("Gather", {"x": _arr((3, 4, 5)), "i": np.array(ind, it)}, axis=axis)


@pytest.mark.parametrize("dt", [np.int64, bool, np.int8])
def test_gather_dtypes_symbolic(dt):
    check_node("Gather", {"x": _arr((6, 3), dt), "i": _i64(5, 0, -1)}, input_shapes={"x": ["N", 3]})
    check_node("Gather", {"x": _arr((2, 7), dt), "i": _i64(6, 0)}, axis=1, input_shapes={"x": ["N", 7], "i": ["K"]})


def test_gather_out_of_range_is_runtime_error():
    m = node_model("Gather", {"x": _arr((3, 4)), "i": _i64(0, 3)}, axis=0)
    cm = onnxc.compile(m)
    with pytest.raises(RuntimeFailure, match="index 3 is out of range"):
        cm.run({"x": _arr((3, 4)), "i": _i64(0, 3)})
    with pytest.raises(RuntimeFailure, match="index -4 is out of range"):
        cm.run({"x": _arr((3, 4)), "i": _i64(-4, 1)})
    np.testing.assert_array_equal(cm.run({"x": np.eye(3, 4, dtype=np.float32), "i": _i64(-1, 0)})["y0"],
                                  np.eye(3, 4, dtype=np.float32)[[-1, 0]])


def test_gather_const_out_of_range_not_folded():
    m = node_model("Gather", {"x": _arr((3,)), "i": _i64(5)}, const_inputs=("x", "i"))
    with pytest.raises(RuntimeFailure, match="out of range"):
        onnxc.compile(m).run({})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    x = _arr((3, 4))
    n = x.shape[axis]
    ind = rng.integers(-n, n, (2, 4) if axis == 0 else (3, 2)).astype(np.int64)
    full = np.take_along_axis(x, np.where(ind < 0, ind + n, ind), axis=axis)
    check_node("GatherElements", {"x": x, "i": ind}, axis=axis, expected=None if axis >= 0 else [full])
    # indices smaller than the data on the other axes too (the reference rejects this)
    small = ind[:, :2] if axis == 0 else ind[:2]
    want = np.take_along_axis(x[:2, :] if axis != 0 else x[:, :2], np.where(small < 0, small + n, small), axis=axis)
    check_node("GatherElements", {"x": x, "i": small}, axis=axis, expected=[want])


def test_gather_elements_3d_symbolic():
    x = _arr((2, 3, 4))
    ind = rng.integers(-3, 3, (2, 2, 4)).astype(np.int32)
    check_node("GatherElements", {"x": x, "i": ind}, axis=1, input_shapes={"x": ["N", 3, 4], "i": ["N", 2, 4]})


@pytest.mark.parametrize("data,ind,b", [
    ((2, 2), [[0, 0], [1, 1]], 0), ((2, 2), [[1], [0]], 0), ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0),
    ((2, 2, 2), [[1], [0]], 1), ((2, 3, 4), [[[1, -1]], [[0, 2]]], 1), ((2, 3), [[-1, -3]], 0),
])
def test_gather_nd(data, ind, b):
    check_node("GatherND", {"x": _arr(data), "i": np.array(ind, np.int64)}, batch_dims=b)


def test_gather_nd_out_of_range():
    m = node_model("GatherND", {"x": _arr((2, 2)), "i": _i64(0, 2).reshape(1, 2)})
    with pytest.raises(RuntimeFailure, match="out of range"):
        onnxc.compile(m).run({"x": _arr((2, 2)), "i": _i64(0, 2).reshape(1, 2)})


# -- Scatter family -------------------------------------------------------------------------------

@pytest.mark.parametrize("red,opset", [("none", 11), ("none", 18), ("add", 16), ("mul", 16), ("max", 18),
                                       ("min", 18)])
def test_scatter_nd(red, opset):
    x = _arr((4, 4, 4))
    ind = np.array([[0], [2], [-1]], np.int64)
    upd = _arr((3, 4, 4))
    attrs = {} if opset < 16 else {"reduction": red}
    check_node("ScatterND", {"x": x, "i": ind, "u": upd}, opset=opset, **attrs)
    check_node("ScatterND", {"x": x, "i": np.array([[1, 2], [3, -4]], np.int64), "u": _arr((2, 4))}, opset=opset,
               **attrs)


def test_scatter_nd_int_and_duplicates():
    x = _arr((5,), np.int32)
    check_node("ScatterND", {"x": x, "i": _i64(1, 1, 3).reshape(3, 1), "u": _arr((3,), np.int32)}, opset=16,
               reduction="add")


@pytest.mark.parametrize("red", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(red, axis):
    x = _arr((3, 4))
    ind = np.array([[1, 0, 2], [0, -1, 1]], np.int64) if axis == 0 else np.array([[1, 0], [3, -1], [2, 2]], np.int64)
    check_node("ScatterElements", {"x": x, "i": ind, "u": _arr(ind.shape)}, opset=18, axis=axis, reduction=red)


def test_scatter_opset9_and_errors():
    x = _arr((3, 3))
    ind = np.array([[1, 0, 2]], np.int64)
    u = _arr((1, 3))
    want = x.copy()
    want[ind[0], [0, 1, 2]] = u[0]
    check_node("Scatter", {"x": x, "i": ind, "u": u}, opset=9, axis=0, expected=[want])
    check_node("ScatterElements", {"x": x, "i": ind.astype(np.int32), "u": _arr((1, 3))}, opset=11, axis=1)
    m = node_model("ScatterElements", {"x": x, "i": ind + 5, "u": _arr((1, 3))}, opset=13)
    with pytest.raises(RuntimeFailure, match="out of range"):
        onnxc.compile(m).run({"x": x, "i": ind + 5, "u": _arr((1, 3))})


# -- OneHot / Trilu / EyeLike ---------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("it", [np.int64, np.int32, np.float32])
def test_onehot(axis, it):
    ind = np.array([[1, 9], [-2, 11], [0, -11]], it)
    vals = np.array([2, 5], np.float32)
    check_node("OneHot", {"i": ind, "d": np.array(10, np.int64), "v": vals}, const_inputs=("d",), axis=axis)


def test_onehot_opset9_float_depth_int_values():
    check_node("OneHot", {"i": _i64(0, 3, 2), "d": np.array(4.0, np.float32), "v": _i64(0, 1)}, opset=9,
               const_inputs=("d",))


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -1, 5, -5])
def test_trilu(upper, k):
    ins = {"x": _arr((2, 4, 5))}
    if k is not None:
        ins["k"] = np.array(k, np.int64)
    check_node("Trilu", ins, upper=upper)


def test_trilu_symbolic_int():
    check_node("Trilu", {"x": _arr((3, 3), np.int32), "k": np.array(1, np.int64)}, upper=0,
               input_shapes={"x": ["N", "N"]})


@pytest.mark.parametrize("k", [0, 1, -2, 7])
@pytest.mark.parametrize("dtype", [None, onnx.TensorProto.INT32, onnx.TensorProto.DOUBLE, onnx.TensorProto.BOOL])
def test_eyelike(k, dtype):
    attrs = {"k": k} | ({} if dtype is None else {"dtype": dtype})
    check_node("EyeLike", {"x": _arr((3, 4))}, opset=9, **attrs)
    check_node("EyeLike", {"x": _arr((4, 2), np.int64)}, input_shapes={"x": ["N", "M"]}, **attrs)


def test_runtime_slice_bounds():
    """starts known only at run time: a shape function computes the slice (tests/ops/test_runtime_shapes.py)."""
    x = _arr((3, 4))
    cm = onnxc.compile(node_model("Slice", {"x": x, "s": _i64(1), "e": _i64(2)}, const_inputs=("e",)))
    for s in (0, 1, -3):
        np.testing.assert_array_equal(cm.run({"x": x, "s": _i64(s)})["y0"], x[s:2])


# -- constant folding matches the reference -------------------------------------------------------

FOLD_CASES = [
    ("Transpose", {"x": _arr((2, 3, 4))}, {"perm": [2, 0, 1]}),
    ("Concat", {"a": _arr((2, 3)), "b": _arr((2, 2))}, {"axis": -1}),
    ("Slice", {"x": _arr((5, 4)), "s": _i64(-1, 0), "e": _i64(-BIG, 4), "a": _i64(0, 1), "k": _i64(-2, 3)}, {}),
    ("Gather", {"x": _arr((4, 3)), "i": _i64(-1, 2)}, {"axis": 0}),
    ("GatherElements", {"x": _arr((3, 3)), "i": np.array([[0, -1, 2], [1, 1, 0], [2, 0, 0]])}, {"axis": 1}),
    ("GatherND", {"x": _arr((2, 3, 4)), "i": np.array([[1, -1], [0, 2]])}, {}),
    ("ScatterND", {"x": _arr((4, 3)), "i": np.array([[1], [-1]]), "u": _arr((2, 3))}, {"reduction": "add"}),
    ("ScatterElements", {"x": _arr((3, 3)), "i": np.array([[0, 2, 1]]), "u": _arr((1, 3))}, {"reduction": "max"}),
    ("Pad", {"x": _arr((3, 4)), "p": _i64(1, 2, 3, 1)}, {"mode": "reflect"}),
    ("Pad", {"x": _arr((3, 4)), "p": _i64(4, 2, 3, 5)}, {"mode": "wrap"}),
    ("Tile", {"x": _arr((2, 3)), "r": _i64(2, 3)}, {}),
    ("Expand", {"x": _arr((3, 1)), "s": _i64(2, 3, 4)}, {}),
    ("DepthToSpace", {"x": _arr((1, 8, 2, 3))}, {"blocksize": 2, "mode": "CRD"}),
    ("SpaceToDepth", {"x": _arr((1, 2, 4, 6))}, {"blocksize": 2}),
    ("OneHot", {"i": _i64(0, -1, 7), "d": np.array(4), "v": np.array([0, 3], np.int32)}, {"axis": 0}),
    ("Trilu", {"x": _arr((3, 4)), "k": np.array(-1)}, {"upper": 0}),
    ("EyeLike", {"x": _arr((3, 4))}, {"k": 1}),
    ("Split", {"x": _arr((7, 2))}, {"num_outputs": 3}),
    ("Range", {"a": np.array(7), "b": np.array(-3), "c": np.array(-2)}, {}),
]


@pytest.mark.parametrize("op,ins,attrs", FOLD_CASES, ids=[c[0] for c in FOLD_CASES])
def test_fold_matches_reference(op, ins, attrs):
    from .util import reference

    n_out = 3 if op == "Split" else 1
    m = node_model(op, ins, n_outputs=n_out, const_inputs=tuple(ins), **attrs)
    cm = onnxc.compile(m)
    assert cm.ir.graph.nodes == [], "the node should have been folded"
    got = cm.run({})
    for i, w in enumerate(reference(m, {})):
        np.testing.assert_array_equal(got[f"y{i}"], w)
        assert got[f"y{i}"].dtype == w.dtype
