"""Data-dependent (run-time) output shapes: ops whose shape/axes/k/repeats/pads inputs are graph inputs,
and NonZero/Compress/Unique/NonMaxSuppression. Each model is compiled once and run with several
values, against onnx.reference (or numpy where the reference is wrong); invalid values raise
RuntimeFailure naming the node; a standalone C harness runs the models under ASan/LSan (slow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.codegen.compiler import runtime_dir
from onnxc.codegen.runtime_lib import sources_for
from onnxc.ir import RuntimeFailure, UnsupportedOpError

F, I64, I32, B = TP.FLOAT, TP.INT64, TP.INT32, TP.BOOL
rng = np.random.default_rng(0)
pytestmark = pytest.mark.hostile  # invalid run-time values: in the sanitizer slice (tests/sanitize.py)


def vi(name: str, t: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, n_out: int = 1, opset: int = 21, inits=()) -> onnx.ModelProto:
    outs = [o for n in nodes[-1:] for o in n.output][:n_out]
    g = helper.make_graph(nodes, "g", inputs, [vi(o, TP.UNDEFINED, None) for o in outs],
                          [onnx.numpy_helper.from_array(a, n) for n, a in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def i64(*v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def runs(m: onnx.ModelProto, feeds_list: list[dict], expected=None, rtol: float = 1e-6):
    """Compile once, run every feed, compare each output with the reference (or ``expected(feeds)``)."""
    cm = onnxc.compile(m)
    ref = ReferenceEvaluator(m)
    for feeds in feeds_list:
        want = expected(feeds) if expected else ref.run(None, feeds)
        got = list(cm.run(feeds).values())
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (k, feeds, g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)
    return cm


def shape_steps(cm) -> list[str]:
    """Descriptions of the steps that have a shape function."""
    return [st.node for st in cm.program.steps if st.shape_body is not None]


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

# -- shape-input ops ------------------------------------------------------------------------------


def test_reshape_runtime_shape_zero_minus_one():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4]), vi("s", I64, [3])])
    cm = runs(m, [{"x": X, "s": i64(*s)} for s in ([4, 3, 2], [0, -1, 2], [-1, 1, 1], [2, 0, 4], [1, 1, 24])])
    assert [str(d) for d in cm.outputs[0].shape] == ["y[0]", "y[1]", "y[2]"]
    assert shape_steps(cm) == ["Reshape (outputs 'y')"]
    assert cm.program.dimvars == ["y[0]", "y[1]", "y[2]"] and cm.program.n_bound == 0


def test_reshape_allowzero_and_symbolic_input():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)], [vi("x", F, ["N", 3]), vi("s", I64, [2])])
    runs(m, [{"x": np.zeros((0, 3), np.float32), "s": i64(3, 0)}, {"x": np.ones((2, 3), np.float32), "s": i64(3, 2)}])
    m = model([helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
              [vi("x", F, ["N", 3, 4]), vi("s", I64, [2])])
    runs(m, [{"x": X - 10, "s": i64(-1, 6)}, {"x": X[:1] - 10, "s": i64(3, 4)}, {"x": X[:0], "s": i64(0, 5)}])


@pytest.mark.parametrize("s, msg", [([5, 5], r"cannot reshape \[2, 3, 4\] \(24 elements\) to \[5, 5\]"),
                                    ([-1, -1], "more than one -1"), ([-2, 12], "invalid dim -2"),
                                    ([7, -1], "cannot reshape")])
def test_reshape_bad_shape_names_the_node(s, msg):
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"], name="the_reshape")],
              [vi("x", F, [2, 3, 4]), vi("s", I64, [2])])
    cm = onnxc.compile(m)
    with pytest.raises(RuntimeFailure, match=f"the_reshape.*{msg}"):
        cm.run({"x": X, "s": i64(*s)})
    assert cm.run({"x": X, "s": i64(4, 6)})["y"].shape == (4, 6)  # still usable after a failure


def test_expand_and_tile():
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    m = model([helper.make_node("Expand", ["x", "s"], ["y"])], [vi("x", F, [3, 1]), vi("s", I64, [3])])
    cm = runs(m, [{"x": x, "s": i64(*s)} for s in ([2, 1, 6], [1, 3, 1], [1, 1, 1], [4, 3, 0])])
    assert cm.outputs[0].shape[1] == 3  # a static non-1 input dim stays static
    with pytest.raises(RuntimeFailure, match="Expand.*cannot broadcast"):
        cm.run({"x": x, "s": i64(2, 2, 2)})
    with pytest.raises(RuntimeFailure, match="Expand.*negative"):
        cm.run({"x": x, "s": i64(-2, 1, 1)})
    m = model([helper.make_node("Tile", ["x", "r"], ["y"])], [vi("x", F, [2, 3, 4]), vi("r", I64, [3])])
    cm = runs(m, [{"x": X, "r": i64(*r)} for r in ([1, 2, 3], [2, 1, 1], [1, 0, 1])])
    with pytest.raises(RuntimeFailure, match="Tile.*negative"):
        cm.run({"x": X, "r": i64(1, -1, 1)})


def test_constant_of_shape_and_range():
    m = model([helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", I32, [1], [7]))],
              [vi("s", I64, [2])])
    cm = runs(m, [{"s": i64(*s)} for s in ([2, 3], [0, 4], [1, 1])])
    with pytest.raises(RuntimeFailure, match="ConstantOfShape.*negative dimension"):
        cm.run({"s": i64(2, -3)})
    for t, dt in ((F, np.float32), (TP.DOUBLE, np.float64), (I32, np.int32), (I64, np.int64)):
        m = model([helper.make_node("Range", ["a", "b", "c"], ["y"])], [vi(n, t, []) for n in "abc"])
        cm = runs(m, [{"a": np.array(a, dt), "b": np.array(b, dt), "c": np.array(c, dt)}
                      for a, b, c in ((1, 10, 3), (10, 1, -2), (10, 1, 2), (0, 0, 1), (-5, 5, 5))])
        with pytest.raises(RuntimeFailure, match="Range.*delta must not be zero"):
            cm.run({"a": np.array(1, dt), "b": np.array(4, dt), "c": np.array(0, dt)})
    m = model([helper.make_node("Range", ["a", "b", "c"], ["y"])], [vi(n, F, []) for n in "abc"])
    runs(m, [{"a": np.array(0.5, np.float32), "b": np.array(3.1, np.float32), "c": np.array(0.3, np.float32)}])


def test_slice_runtime_starts_ends_axes_steps():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    m = model([helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])],
              [vi("x", F, ["A", 4, 5])] + [vi(n, I64, [2]) for n in "seak"])
    cases = [([0, 1], [2, 4], [0, 1], [1, 1]), ([-1, 10], [-100, -10], [2, 0], [-1, -2]),
             ([1, 0], [1000, 3], [-1, -2], [2, 1]), ([4, 0], [0, 2], [2, 0], [-1, 1]),
             ([2**62, -2**62], [-2**62, 2**62], [0, 1], [-2**62, 2**62])]
    cm = runs(m, [dict(x=x, s=i64(*s), e=i64(*e), a=i64(*a), k=i64(*k)) for s, e, a, k in cases])
    with pytest.raises(RuntimeFailure, match="Slice.*steps must not be 0"):
        cm.run(dict(x=x, s=i64(0, 0), e=i64(1, 1), a=i64(0, 1), k=i64(1, 0)))
    with pytest.raises(RuntimeFailure, match="Slice.*out of range or repeated"):
        cm.run(dict(x=x, s=i64(0, 0), e=i64(1, 1), a=i64(1, -2), k=i64(1, 1)))
    # constant axes and steps: only the sliced axis is computed at run time
    m = model([helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])],
              [vi("x", F, [3, 4, 5]), vi("s", I64, [1]), vi("e", I64, [1])], inits={"a": i64(2), "k": i64(2)})
    cm = runs(m, [dict(x=x, s=i64(s), e=i64(e)) for s, e in ((1, 4), (-2, 100), (3, 1))])
    assert cm.outputs[0].shape[:2] == (3, 4)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_runtime_pads(mode):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    m = model([helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)], [vi("x", F, [3, 4, 5]), vi("p", I64, [6])])
    cm = runs(m, [{"x": x, "p": i64(*p)} for p in ([0, 1, 2, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0])])
    y = cm.run({"x": x, "p": i64(0, -1, 0, -1, -1, 2)})["y"]  # negative pads crop (the reference refuses them)
    want = x[:2, 1:3]
    if mode == "constant":
        want = np.pad(want, [(0, 0), (0, 0), (0, 2)])
    else:
        want = np.pad(want, [(0, 0), (0, 0), (0, 2)], mode={"reflect": "reflect", "edge": "edge",
                                                           "wrap": "wrap"}[mode])
    np.testing.assert_array_equal(y, want)
    with pytest.raises(RuntimeFailure, match="Pad.*below zero"):
        cm.run({"x": x, "p": i64(0, 0, -3, 0, 0, -3)})


def test_pad_runtime_axes_and_split():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    m = model([helper.make_node("Pad", ["x", "p", "", "a"], ["y"])],
              [vi("x", F, [3, 4, 5]), vi("p", I64, [2]), vi("a", I64, [1])])
    runs(m, [{"x": x, "p": i64(*p), "a": i64(a)} for p, a in (([1, 2], 0), ([0, 3], -1))])
    m = model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2)], [vi("x", F, [2, 3, 4]), vi("s", I64, [2])],
              n_out=2)
    cm = runs(m, [{"x": X, "s": i64(*s)} for s in ([1, 3], [4, 0], [2, 2])])
    with pytest.raises(RuntimeFailure, match="Split.*sum to 5"):
        cm.run({"x": X, "s": i64(2, 3)})
    with pytest.raises(RuntimeFailure, match="Split.*split size -1"):
        cm.run({"x": X, "s": i64(5, -1)})


def test_squeeze_unsqueeze_onehot_topk():
    x4 = np.arange(6, dtype=np.float32).reshape(2, 1, 3, 1)
    m = model([helper.make_node("Squeeze", ["x", "a"], ["y"])], [vi("x", F, [2, 1, 3, 1]), vi("a", I64, [1])])
    cm = runs(m, [{"x": x4, "a": i64(a)} for a in (1, -1, 3)])
    with pytest.raises(RuntimeFailure, match="Squeeze.*cannot squeeze axis 0 of size 2"):
        cm.run({"x": x4, "a": i64(0)})
    m = model([helper.make_node("Unsqueeze", ["x", "a"], ["y"])], [vi("x", F, [2, 3, 4]), vi("a", I64, [2])])
    cm = runs(m, [{"x": X, "a": i64(*a)} for a in ([0, 1], [-1, 0], [4, 2])])
    with pytest.raises(RuntimeFailure, match="Unsqueeze.*repeated"):
        cm.run({"x": X, "a": i64(1, 1)})
    for dt in (np.int64, np.float32):
        m = model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1)],
                  [vi("i", I64, [2, 3]), vi("d", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), []), vi("v", F, [2])])
        feeds = [{"i": i64([0, 1, 2], [3, -1, 9]), "d": np.array(d, dt), "v": np.array([0, 5], np.float32)}
                 for d in (3, 5, 10)]
        cm = runs(m, feeds)
        with pytest.raises(RuntimeFailure, match="OneHot.*depth must be positive"):
            cm.run({**feeds[0], "d": np.array(0, dt)})
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)], [vi("x", F, [3, 4, 5]), vi("k", I64, [1])],
              n_out=2)
    cm = runs(m, [{"x": x, "k": i64(k)} for k in (0, 1, 4)])
    assert cm.outputs[0].shape == cm.outputs[1].shape == (3, "v[1]", 5)
    with pytest.raises(RuntimeFailure, match="TopK.*k = 5 is out of range"):
        cm.run({"x": x, "k": i64(5)})


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
          "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_runtime_axes(op, keepdims):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    m = model([helper.make_node(op, ["x", "a"], ["y"], keepdims=keepdims)], [vi("x", F, ["N", 4, 5]), vi("a", I64, [2])],
              opset=18)
    cm = runs(m, [{"x": x, "a": i64(*a)} for a in ([0, 1], [2, 0], [-1, 1])] + [{"x": x[:0], "a": i64(1, 2)}],
              rtol=1e-5)
    with pytest.raises(RuntimeFailure, match=f"{op}.*out of range or repeated"):
        cm.run({"x": x, "a": i64(1, -2)})


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.bool_])
def test_reduce_runtime_axes_ints_and_bool(dt):
    op = "ReduceMax" if dt == np.bool_ else "ReduceSum"
    x = (rng.integers(-5, 5, (3, 4, 5)) > 0) if dt == np.bool_ else rng.integers(-50, 50, (3, 4, 5))
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    m = model([helper.make_node(op, ["x", "a"], ["y"], keepdims=0)], [vi("x", t, [3, 4, 5]), vi("a", I64, [1])],
              opset=18)
    runs(m, [{"x": x.astype(dt), "a": i64(a)} for a in (0, 2, -2)])


# -- selection ops --------------------------------------------------------------------------------


def test_nonzero():
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", F, ["a", "b"])])
    cm = runs(m, [{"x": (rng.standard_normal((3, 4)) > 0).astype(np.float32)}, {"x": np.zeros((2, 0), np.float32)},
                  {"x": np.ones((5, 1), np.float32)}, {"x": np.array([[np.nan, -0.0, 0.0]], np.float32)}])
    assert cm.outputs[0].shape == (2, "y[1]")
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", B, [])])
    runs(m, [{"x": np.array(True)}, {"x": np.array(False)}])
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", I32, [2, 2, 3])])
    runs(m, [{"x": rng.integers(-1, 2, (2, 2, 3)).astype(np.int32)}])


def test_compress():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], axis=-1)], [vi("x", F, [3, 4]), vi("c", B, ["n"])])
    cm = runs(m, [{"x": x, "c": np.array(c)} for c in ([True, False, True, True], [False, True], [False] * 4)])
    with pytest.raises(RuntimeFailure, match="Compress.*selects index 4"):
        cm.run({"x": x, "c": np.array([0, 0, 0, 0, 1], bool)})
    m = model([helper.make_node("Compress", ["x", "c"], ["y"])], [vi("x", F, [3, 4]), vi("c", B, ["n"])])
    runs(m, [{"x": x, "c": np.array(c)} for c in ([True, False, True, True], [False, True] * 6)])
    # constant inputs fold
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], axis=0)], [vi("x", F, [3, 4])],
              inits={"c": np.array([True, False, True])})
    cm = runs(m, [{"x": x}])
    assert cm.outputs[0].shape == (2, 4) and not shape_steps(cm)


def _unique_np(x: np.ndarray, axis, sorted_: bool) -> list[np.ndarray]:
    """Unique per the ONNX spec (the reference's unsorted path is wrong for axis != 0 and n-D inputs)."""
    flat = x.reshape(-1) if axis is None else np.moveaxis(x, axis, 0)
    y, idx, inv, cnt = np.unique(flat, return_index=True, return_inverse=True, return_counts=True, axis=0)
    inv = inv.reshape(-1)
    if not sorted_:
        order = np.argsort(idx)
        pos = np.empty_like(order)
        pos[order] = np.arange(len(order))
        y, idx, cnt, inv = y[order], idx[order], cnt[order], pos[inv]
    if axis is not None:
        y = np.moveaxis(y, 0, axis)
    return [y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)]


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique(sorted_, axis):
    kw = {} if axis is None else {"axis": axis}
    m = model([helper.make_node("Unique", ["x"], ["y", "i", "v", "c"], sorted=sorted_, **kw)], [vi("x", F, ["a", 3])],
              n_out=4)
    xs = [np.array([[2, 1, 1], [3, 4, 3], [2, 1, 1]], np.float32), np.array([[1, 0, 1], [1, 0, 1]], np.float32),
          np.zeros((0, 3), np.float32)]
    runs(m, [{"x": a} for a in xs], expected=lambda f: _unique_np(f["x"], axis, bool(sorted_)))


def test_unique_1d_against_reference():
    for sorted_ in (0, 1):
        m = model([helper.make_node("Unique", ["x"], ["y", "i", "v", "c"], sorted=sorted_)], [vi("x", F, ["a"])], n_out=4)
        runs(m, [{"x": np.array([2, 1, 1, 3, 4, 3, np.nan, 0, np.nan, -0.0], np.float32)}, {"x": np.zeros(0, np.float32)}])
    m = model([helper.make_node("Unique", ["x"], ["y", "i"])], [vi("x", I64, ["a"])], n_out=2)
    runs(m, [{"x": i64(5, 5, -1, 7, -1)}])


def test_non_max_suppression():
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9], [0.0, 10.0, 1.0, 11.0],
                       [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]]], np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]], np.float32)
    for cpb in (0, 1):
        m = model([helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"], center_point_box=cpb)],
                  [vi("b", F, ["B", 6, 4]), vi("s", F, ["B", 2, 6]), vi("m", I64, [1]), vi("i", F, [1]), vi("t", F, [1])])
        runs(m, [{"b": boxes, "s": scores, "m": i64(mo), "i": np.array([0.5], np.float32),
                  "t": np.array([t], np.float32)} for mo, t in ((3, 0.0), (2, 0.0), (3, 0.4), (0, 0.0), (10, 0.99))])
    m = model([helper.make_node("NonMaxSuppression", ["b", "s"], ["y"])], [vi("b", F, [1, 6, 4]), vi("s", F, [1, 2, 6])])
    assert onnxc.compile(m).run({"b": boxes, "s": scores})["y"].shape == (0, 3)  # max_output_boxes_per_class = 0


# -- the mechanism --------------------------------------------------------------------------------


def test_dynamic_buffers_flow_through_later_ops_and_shape_tensors():
    """NonZero -> Transpose -> Shape -> Reshape(x, that shape): run-time dims reach a SymValue shape
    tensor; dynamic temps are allocated after their shape function and freed after their last use."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["t"]),
             helper.make_node("Cast", ["t"], ["tf"], to=F), helper.make_node("Shape", ["t"], ["s"]),
             helper.make_node("Mul", ["s", "two"], ["s2"]), helper.make_node("ConstantOfShape", ["s2"], ["z"]),
             helper.make_node("Shape", ["z"], ["zs"]), helper.make_node("Reshape", ["zs", "m1"], ["y"])]
    m = model(nodes, [vi("x", F, [3, 4])], inits={"two": i64(2, 1), "m1": i64(-1)})
    m.graph.output.insert(0, vi("tf", F, None))
    cm = runs(m, [{"x": (rng.standard_normal((3, 4)) > 0).astype(np.float32)} for _ in range(3)])
    dyn = [b for b in cm.program.buffers.values() if cm.program.is_dynamic(b)]
    assert dyn and "free(b" in cm.c_source


def test_shape_of_data_dependent_tensor_keeps_its_producer():
    """Range(0, Shape(NonZero(x))[1]): the Shape chain folds into a SymValue of the run-time dim, which
    keeps NonZero (whose shape function binds that dim) alive although its data is not read."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0), helper.make_node("Range", ["zero", "n", "one"], ["y"])]
    m = model(nodes, [vi("x", F, [3, 4])], inits={"one": np.array(1, np.int64), "zero": np.array(0, np.int64)})
    cm = runs(m, [{"x": (rng.standard_normal((3, 4)) > 0).astype(np.float32)} for _ in range(3)])
    assert [n.op_type for n in cm.ir.graph.nodes] == ["NonZero", "SymValue", "Range"]
    assert cm.outputs[0].shape == ("nonzero_len1",)  # nz is not a graph output: named after its op


def test_outputs_that_view_inputs_or_static_temps():
    """A run-time Reshape of a graph input (copied out) and of a static intermediate (allocated early)."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["a"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["b"])]
    m = model(nodes, [vi("x", F, [2, 3, 4]), vi("s", I64, [2])])
    m.graph.output.insert(0, vi("a", F, None))
    runs(m, [{"x": X - 5, "s": i64(*s)} for s in ([4, 6], [-1, 2], [24, 1])])


def test_constant_shape_inputs_need_no_shape_function():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4])], inits={"s": i64(4, -1)})
    cm = runs(m, [{"x": X}])
    assert cm.outputs[0].shape == (4, 6) and not shape_steps(cm)


def test_unknown_length_is_unsupported():
    m = model([helper.make_node("Expand", ["x", "s"], ["y"], name="e1")], [vi("x", F, [3, 1]), vi("s", I64, ["k"])])
    with pytest.raises(UnsupportedOpError, match="e1.*output rank is data-dependent"):
        onnxc.compile(m)


# -- sanitizers -----------------------------------------------------------------------------------

HARNESS = r"""
#include "onnxc.h"
int onnxc_model_run(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                    size_t errlen, int threads);
static const int64_t shape_ok[3] = {4, -1, 2}, shape_bad[3] = {5, 5, 1};
int main(void) {
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 5) - 2.0f;
    int failures = 0;
    for (int it = 0; it < 40; it++) {
        const int bad = it % 3 == 2;
        onnxc_tensor in[2] = {{x, {2, 3, 4}, 3, 1}, {(void *)(bad ? shape_bad : shape_ok), {3}, 1, 7}};
        onnxc_tensor out[3];
        char err[256];
        int st = onnxc_model_run((const unsigned char *)"", in, out, err, sizeof err, 1);
        if (st != 0) { failures++; continue; }
        for (int k = 0; k < 3; k++) free(out[k].data);
    }
    printf("failures %d\n", failures);
    return failures == 13 ? 0 : 1;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_runtime_shapes_under_address_sanitizer():
    """The generated run function under ASan/LSan in a plain C program: dynamic buffers are freed on
    success and on the error path of a failing shape function (Reshape to a bad shape every 3rd run)."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
             helper.make_node("Unique", ["x"], ["u", "ui"]), helper.make_node("Relu", ["r"], ["y"]),
             helper.make_node("Transpose", ["nz"], ["t"])]
    m = model(nodes, [vi("x", F, [2, 3, 4]), vi("s", I64, [3])])
    del m.graph.output[:]
    m.graph.output.extend([vi("y", F, None), vi("t", I64, None), vi("u", F, None)])
    cm = onnxc.compile(m)
    assert not cm.program.weights
    with tempfile.TemporaryDirectory() as d:
        Path(d, "model.c").write_text(cm.c_source)
        Path(d, "main.c").write_text(HARNESS)
        exe = Path(d, "a.out")
        subprocess.run(["gcc", "-std=gnu11", "-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                        "-I", str(runtime_dir()), "-o", str(exe), str(Path(d, "model.c")), str(Path(d, "main.c")),
                        *map(str, sources_for(cm.c_source)), "-lm"], check=True, capture_output=True, text=True)
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
                                "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failures 13" in r.stdout
