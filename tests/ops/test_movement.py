"""Data-movement ops that keep every element (views, Transpose, Concat, Split, Expand, Tile,
DepthToSpace/SpaceToDepth, Identity, Dropout), against onnx.reference, over opsets, dtypes and
symbolic dims."""

from __future__ import annotations

import numpy as np
import pytest

import onnxc
from onnxc.codegen.kernels.copyutil import reduce_perm
from onnxc.ir import UnsupportedOpError

from .util import check_node, i64, node_model, random_array

rng = np.random.default_rng(1)
DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.uint16, bool]


def _arr(shape, dt=np.float32) -> np.ndarray:
    return random_array(rng, shape, dt)


_i64 = i64


# -- Reshape / Flatten / Squeeze / Unsqueeze / Identity -------------------------------------------

@pytest.mark.parametrize("shape", [(4, 6), (2, -1), (0, -1, 2), (-1,), (2, 0, 4), (1, 24, 1)])
def test_reshape(shape):
    check_node("Reshape", {"x": _arr((2, 3, 4)), "s": _i64(*shape)}, const_inputs=("s",))


def test_reshape_allowzero():
    x = _arr((0, 3))
    check_node("Reshape", {"x": x, "s": _i64(3, 0)}, const_inputs=("s",), opset=14, allowzero=1)


def test_reshape_opset1_attr():
    x = _arr((2, 3, 4))
    check_node("Reshape", {"x": x}, opset=1, shape=[4, -1], expected=[x.reshape(4, -1)])


def test_reshape_symbolic():
    x = _arr((2, 3, 4))
    got = check_node("Reshape", {"x": x, "s": _i64(0, -1)}, const_inputs=("s",), input_shapes={"x": ["N", 3, 4]})
    assert got["y0"].shape == (2, 12)


@pytest.mark.parametrize("dt", DTYPES)
def test_reshape_dtypes(dt):
    check_node("Reshape", {"x": _arr((2, 3), dt), "s": _i64(3, 2)}, const_inputs=("s",))


@pytest.mark.parametrize("opset", [1, 11, 13, 21])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(opset, axis):
    if opset < 11 and axis < 0:
        return
    check_node("Flatten", {"x": _arr((2, 3, 4))}, opset=opset, axis=axis,
               input_shapes={"x": ["N", 3, "W"]})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [[0], [2], [-1], [0, 2], None])
def test_squeeze(opset, axes):
    x = _arr((1, 3, 1))
    if opset >= 13:
        ins = {"x": x} if axes is None else {"x": x, "a": _i64(*axes)}
        check_node("Squeeze", ins, opset=opset, const_inputs=("a",))
    else:
        check_node("Squeeze", {"x": x}, opset=opset, **({} if axes is None else {"axes": axes}))


def test_squeeze_symbolic():
    check_node("Squeeze", {"x": _arr((4, 1, 3)), "a": _i64(1)}, const_inputs=("a",), input_shapes={"x": ["N", 1, 3]})


@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("axes", [[0], [3], [-1], [0, 4], [2, 0], [-5, -1]])
def test_unsqueeze(opset, axes):
    if opset < 11 and min(axes) < 0:
        return
    x = _arr((2, 3, 4))
    if opset >= 13:
        check_node("Unsqueeze", {"x": x, "a": _i64(*axes)}, opset=opset, const_inputs=("a",))
    else:
        # the reference inserts old-opset axes one by one; the spec means positions in the output
        norm = {a % 5 for a in axes} if len(axes) == 2 else {a % 4 for a in axes}
        shape = list(x.shape)
        for a in sorted(norm):
            shape.insert(a, 1)
        check_node("Unsqueeze", {"x": x}, opset=opset, axes=axes, expected=[x.reshape(shape)])


@pytest.mark.parametrize("dt", DTYPES)
def test_identity(dt):
    check_node("Identity", {"x": _arr((2, 3), dt)})


# -- Transpose ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,perm", [
    ((3, 4), None), ((3, 4), [1, 0]), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [1, 0, 2]),
    ((2, 3, 4, 5), [0, 2, 3, 1]), ((2, 3, 4, 5), [0, 3, 1, 2]), ((2, 3, 4, 5), [0, 2, 1, 3]),
    ((2, 3, 4, 5), [3, 2, 1, 0]), ((1, 5, 1, 7), [3, 1, 2, 0]), ((70, 45), [1, 0]), ((3, 33, 65), [0, 2, 1]),
    ((2, 1, 3), [2, 1, 0]), ((5,), [0]), ((), None), ((0, 3), [1, 0]),
])
def test_transpose(shape, perm):
    attrs = {} if perm is None else {"perm": perm}
    check_node("Transpose", {"x": _arr(shape)}, **attrs)


@pytest.mark.parametrize("dt", DTYPES)
def test_transpose_dtypes(dt):
    check_node("Transpose", {"x": _arr((5, 6, 7), dt)}, perm=[2, 0, 1])
    check_node("Transpose", {"x": _arr((2, 37, 50), dt)}, perm=[0, 2, 1])  # vector tiles plus edges


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2], [1, 0, 2, 3], [3, 2, 1, 0]])
def test_transpose_symbolic(perm):
    check_node("Transpose", {"x": _arr((2, 3, 40, 5))}, perm=perm, input_shapes={"x": ["N", 3, "H", "W"]})


def test_reduce_perm():
    assert reduce_perm(["2", "3", "4", "5"], [0, 2, 3, 1]) == (["2", "3", "20"], [0, 2, 1])
    assert reduce_perm(["2", "3", "4"], [0, 1, 2]) == (["24"], [0])
    assert reduce_perm(["1", "5", "1", "7"], [3, 1, 2, 0]) == (["5", "7"], [1, 0])


def test_float8_is_unsupported():
    """Copies (Transpose, Concat...) move float8 as bytes; Trilu writes zeros of the type: not float8."""
    import ml_dtypes

    m = node_model("Trilu", {"x": np.zeros((2, 3), ml_dtypes.float8_e4m3fn)})
    with pytest.raises(UnsupportedOpError, match="element type f8e4m3fn is not supported"):
        onnxc.compile(m)


# -- Concat / Split -------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dt", [np.float32, np.int64, bool])
def test_concat(axis, dt):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s in shapes[1:]:
        s[axis] = 1 + len(s)
    shapes[2][axis] = 0 if axis != 0 else shapes[2][axis]
    ins = {f"x{i}": _arr(tuple(s), dt) for i, s in enumerate(shapes)}
    check_node("Concat", ins, axis=axis)


def test_concat_opset1_default_axis():
    a, b = _arr((2, 3)), _arr((2, 1))
    check_node("Concat", {"a": a, "b": b}, opset=1, expected=[np.concatenate([a, b], axis=1)])


def test_concat_symbolic():
    check_node("Concat", {"a": _arr((3, 4)), "b": _arr((3, 2))}, axis=1,
               input_shapes={"a": ["N", 4], "b": ["N", 2]})
    check_node("Concat", {"a": _arr((3, 4)), "b": _arr((2, 4))}, axis=0,
               input_shapes={"a": ["N", 4], "b": ["M", 4]})


@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_split_equal(opset):
    attrs = {"num_outputs": 3} if opset >= 18 else {}
    check_node("Split", {"x": _arr((2, 6, 3))}, n_outputs=3, opset=opset, axis=1, **attrs)


@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_split_sizes(opset):
    if opset >= 13:
        check_node("Split", {"x": _arr((7, 2)), "s": _i64(2, 0, 5)}, n_outputs=3, opset=opset,
                   const_inputs=("s",))
    else:
        check_node("Split", {"x": _arr((7, 2))}, n_outputs=3, opset=opset, split=[2, 0, 5])


def test_split_uneven_num_outputs():
    check_node("Split", {"x": _arr((2, 7))}, n_outputs=3, opset=18, axis=-1, num_outputs=3)


def test_split_symbolic():
    x = _arr((3, 8))
    check_node("Split", {"x": x}, n_outputs=2, opset=13, axis=1, input_shapes={"x": ["N", 8]})
    check_node("Split", {"x": x}, n_outputs=2, opset=18, axis=0, num_outputs=2, input_shapes={"x": ["N", 8]},
               expected=[x[:2], x[2:]])


# -- Expand / Tile --------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,shape", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (3, 1, 1)), ((4, 1, 5), (4, 3, 5)),
                                      ((), (2, 2)), ((3, 1), (1, 1))])
@pytest.mark.parametrize("dt", [np.float32, np.int32, bool])
def test_expand(xs, shape, dt):
    check_node("Expand", {"x": _arr(xs, dt), "s": _i64(*shape)}, const_inputs=("s",))


def test_expand_symbolic():
    check_node("Expand", {"x": _arr((3, 1)), "s": _i64(1, 4)}, const_inputs=("s",), input_shapes={"x": ["N", 1]})


@pytest.mark.parametrize("xs,reps", [((2, 3), (1, 1)), ((2, 3), (2, 3)), ((3,), (4,)), ((2, 1, 3), (1, 5, 2)),
                                     ((2, 3), (0, 2))])
@pytest.mark.parametrize("dt", [np.float64, np.int8, bool])
def test_tile(xs, reps, dt):
    check_node("Tile", {"x": _arr(xs, dt), "r": _i64(*reps)}, const_inputs=("r",))


def test_tile_symbolic():
    check_node("Tile", {"x": _arr((2, 3)), "r": _i64(2, 2)}, const_inputs=("r",), input_shapes={"x": ["N", 3]})


def test_tile_opset1():
    x = _arr((2, 3))
    check_node("Tile", {"x": x, "t": _i64(3), "a": _i64(1)}, opset=1, const_inputs=("t", "a"),
               expected=[np.tile(x, (1, 3))])


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("bs", [1, 2, 3])
def test_depth_to_space(mode, bs):
    check_node("DepthToSpace", {"x": _arr((2, 2 * bs * bs, 3, 4))}, opset=13, blocksize=bs, mode=mode)


def test_depth_to_space_symbolic():
    check_node("DepthToSpace", {"x": _arr((2, 8, 3, 4))}, blocksize=2, input_shapes={"x": ["N", 8, "H", "W"]})


@pytest.mark.parametrize("bs", [1, 2, 3])
def test_space_to_depth(bs):
    check_node("SpaceToDepth", {"x": _arr((2, 3, 2 * bs, 3 * bs))}, opset=13, blocksize=bs)


def test_space_to_depth_crd():
    check_node("SpaceToDepth", {"x": _arr((1, 2, 4, 6))}, opset=28, blocksize=2, mode="CRD")


# -- Dropout --------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset,n_out", [(7, 1), (7, 2), (10, 2), (12, 1), (12, 2), (22, 2)])
def test_dropout_inference(opset, n_out):
    x = _arr((3, 4))
    mask = np.ones((3, 4), bool if opset >= 10 else np.float32)
    check_node("Dropout", {"x": x}, n_outputs=n_out, opset=opset, expected=[x, mask][:n_out])


def test_dropout_training_mode_false():
    x = _arr((3, 4))
    check_node("Dropout", {"x": x, "r": np.array(0.3, np.float32), "t": np.array(False)}, n_outputs=2,
               const_inputs=("t",), expected=[x, np.ones((3, 4), bool)])
    # training mode draws masks (tests/ops/test_random.py); seeded, they are the reference's
    check_node("Dropout", {"x": x, "r": np.array(0.3, np.float32), "t": np.array(True)}, n_outputs=2, seed=0)
    # a constant zero ratio makes training mode an identity too
    check_node("Dropout", {"x": x, "r": np.array(0.0, np.float32), "t": np.array(True)}, n_outputs=2,
               const_inputs=("r",), expected=[x, np.ones((3, 4), bool)])


def test_large_copies_on_the_pool():
    """Concat, Split and Slice copies of 128 KiB and more run in pieces on the runtime's pool
    (onnxc_copy_par): the same bytes at 2 threads, pieces that do not divide the copy evenly, and a
    symbolic batch (sizes known at run time only)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 37, 41, 43)).astype(np.float32)
    b = rng.standard_normal((2, 19, 41, 43)).astype(np.float32)
    cases = [
        ("Concat", {"a": a, "b": b}, 1, {"axis": 1}, [np.concatenate([a, b], axis=1)]),
        ("Split", {"x": a}, 2, {"axis": 1, "num_outputs": 2}, np.array_split(a, 2, axis=1)),
    ]
    for op, ins, n_out, attrs, want in cases:
        model = node_model(op, ins, n_out, 18, input_shapes={k: ["N", *v.shape[1:]] for k, v in ins.items()}, **attrs)
        cm = onnxc.compile(model, threads=2)
        assert "onnxc_copy_par(" in cm.c_source
        got = cm.run(ins)
        for i, w in enumerate(want):
            np.testing.assert_array_equal(got[f"y{i}"], w)
    starts, ends = np.array([0, 5], np.int64), np.array([2, 33], np.int64)
    model = node_model("Slice", {"x": a, "s": starts, "e": ends, "ax": np.array([0, 1], np.int64)}, 1, 18,
                       const_inputs=("s", "e", "ax"))
    cm = onnxc.compile(model, threads=2)
    assert "onnxc_copy_par(" in cm.c_source
    np.testing.assert_array_equal(cm.run({"x": a})["y0"], a[0:2, 5:33])
