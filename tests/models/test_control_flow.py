"""If / Loop / Scan / SequenceMap and sequences/optionals beyond the ONNX suite's cases: symbolic
dims, captures from two levels up, shapes that change across iterations, values crossing the API,
and run-time errors. Checked against onnx.reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.ir import RuntimeFailure


def model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "g", inputs, outputs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def vi(name, dt=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, dt, shape)


def check(m, feeds, rtol=1e-5):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = onnxc.compile(m).run(feeds)
    for w, (name, g) in zip(want, got.items()):
        if isinstance(w, list):
            assert len(g) == len(w), name
            for a, b in zip(g, w):
                assert a.shape == b.shape and a.dtype == b.dtype
                np.testing.assert_allclose(a, b, rtol=rtol)
        else:
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=rtol)
    return got


def test_if_branches_of_different_shapes_over_symbolic_input():
    then = h.make_graph([h.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then", [], [vi("t")])
    els = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e")])
    m = model([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
              [vi("c", T.BOOL, []), vi("x", T.FLOAT, ["N", 3])], [vi("y")])
    c = onnxc.compile(m)
    for n in (1, 4):
        x = np.random.default_rng(n).random((n, 3), dtype=np.float32)
        for cond in (True, False):
            want = ReferenceEvaluator(m).run(None, {"c": np.array(cond), "x": x})[0]
            got = c.run({"c": np.array(cond), "x": x})["y"]
            np.testing.assert_array_equal(got, want)


def test_loop_with_growing_carried_value_scan_output_and_outer_capture():
    # acc = concat(acc, x * i) each iteration; scan output: sum(acc); x comes from the outer graph
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["x", "fi"], ["xi"]),
         h.make_node("Concat", ["acc_in", "xi"], ["acc_out"], axis=0),
         h.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, None)],
        [vi("cond_out", T.BOOL, []), vi("acc_out"), vi("s")])
    m = model([h.make_node("Loop", ["M", "", "acc0"], ["acc", "sums"], body=body)],
              [vi("M", T.INT64, []), vi("acc0", T.FLOAT, ["K"]), vi("x", T.FLOAT, ["N"])],
              [vi("acc"), vi("sums")])
    c = onnxc.compile(m)
    for trips, k, n in ((3, 2, 4), (5, 1, 3)):
        acc, x = np.arange(k, dtype=np.float32), np.arange(1, n + 1, dtype=np.float32)
        got = c.run({"M": np.array(trips), "acc0": acc, "x": x})
        sums = []
        for i in range(trips):  # numpy: onnx.reference's Loop vstacks scan outputs (and fails on some)
            acc = np.concatenate([acc, x * i])
            sums.append(acc.sum())
        np.testing.assert_allclose(got["acc"], acc)
        np.testing.assert_allclose(got["sums"], np.array(sums, np.float32), rtol=1e-6)
    # zero iterations (the reference cannot stack zero scan outputs): carried value as given, empty scan
    got = onnxc.compile(m).run({"M": np.array(0), "acc0": np.arange(2, dtype=np.float32),
                                "x": np.ones(3, np.float32)})
    np.testing.assert_array_equal(got["acc"], [0, 1])
    assert got["sums"].shape == (0,) and got["sums"].dtype == np.float32


def test_loop_condition_stops_early():
    body = h.make_graph(
        [h.make_node("Add", ["v_in", "one"], ["v_out"]),
         h.make_node("Less", ["v_out", "lim"], ["cond_out"]),
         h.make_node("Identity", ["v_out"], ["v_out2"])],
        "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("v_in", T.FLOAT, [])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, []), vi("v_out2", T.FLOAT, [])],
        initializer=[onnx.numpy_helper.from_array(np.array(1, np.float32), "one")])
    m = model([h.make_node("Loop", ["", "c0", "v0"], ["v", "scan"], body=body)],
              [vi("c0", T.BOOL, []), vi("v0", T.FLOAT, []), vi("lim", T.FLOAT, [])], [vi("v"), vi("scan")])
    got = onnxc.compile(m).run({"c0": np.array(True), "v0": np.array(0, np.float32),
                                "lim": np.array(4.5, np.float32)})
    # per-iteration scalars stack to [iterations] as onnxruntime does (onnx.reference vstacks them to [n, 1])
    assert got["v"] == 5 and got["v"].shape == ()
    np.testing.assert_array_equal(got["scan"], np.arange(1, 6, dtype=np.float32))


def test_scan_reverse_axis1_with_nested_if_reading_a_value_two_levels_up():
    inner_then = h.make_graph([h.make_node("Mul", ["xt", "w"], ["o1"])], "t", [], [vi("o1")])
    inner_else = h.make_graph([h.make_node("Sub", ["xt", "w"], ["o2"])], "e", [], [vi("o2")])
    body = h.make_graph(
        [h.make_node("If", ["flag"], ["z"], then_branch=inner_then, else_branch=inner_else),
         h.make_node("Add", ["st_in", "z"], ["st_out"]),
         h.make_node("Identity", ["st_out"], ["y"])],
        "body", [vi("st_in", T.FLOAT, None), vi("xt", T.FLOAT, None)], [vi("st_out"), vi("y")])
    m = model([h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                           scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1])],
              [vi("s0", T.FLOAT, ["B"]), vi("x", T.FLOAT, ["B", "T"]), vi("w", T.FLOAT, ["B"]),
               vi("flag", T.BOOL, [])], [vi("s"), vi("ys")])
    c = onnxc.compile(m)
    rng = np.random.default_rng(0)
    for b, t in ((2, 3), (3, 1)):
        for flag in (True, False):
            s0, x, w = (rng.random(b, dtype=np.float32), rng.random((b, t), dtype=np.float32),
                        rng.random(b, dtype=np.float32))
            got = c.run({"s0": s0, "x": x, "w": w, "flag": np.array(flag)})
            st, ys = s0.copy(), []
            for k in range(t):  # the reference evaluator lacks reverse scans: numpy
                xt = x[:, t - 1 - k]
                st = st + (xt * w if flag else xt - w)
                ys.append(st)
            np.testing.assert_allclose(got["s"], st, rtol=1e-6)
            np.testing.assert_allclose(got["ys"], np.stack(ys, axis=-1), rtol=1e-6)


def test_sequences_through_the_api_and_ops():
    nodes = [h.make_node("SequenceLength", ["seq"], ["n"]),
             h.make_node("SequenceInsert", ["seq", "x", "pos"], ["s2"]),
             h.make_node("SequenceErase", ["s2", "neg"], ["s3"]),
             h.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=-1, new_axis=1),
             h.make_node("SequenceAt", ["s3", "neg"], ["last"]),
             h.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0)]
    m = model(nodes, [h.make_tensor_sequence_value_info("seq", T.FLOAT, ["N", 2]), vi("x", T.FLOAT, ["N", 2]),
                      vi("pos", T.INT64, []), vi("neg", T.INT64, [])],
              [vi("n", T.INT64, []), vi("cat"), vi("last"), h.make_tensor_sequence_value_info("parts", T.FLOAT, None)])
    rng = np.random.default_rng(1)
    seq = [rng.random((3, 2), dtype=np.float32) for _ in range(3)]
    feeds = {"seq": seq, "x": rng.random((3, 2), dtype=np.float32), "pos": np.array(-1), "neg": np.array(-2)}
    check(m, feeds)
    with pytest.raises(RuntimeFailure, match="position 7 is out of range"):
        onnxc.compile(m).run({**feeds, "neg": np.array(7)})


def test_optional_input_none_and_present():
    nodes = [h.make_node("OptionalHasElement", ["o"], ["has"])]
    opt = h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [2])))
    m = model(nodes, [opt], [vi("has", T.BOOL, [])])
    c = onnxc.compile(m)
    assert c.run({"o": None})["has"] == np.array(False)
    assert c.run({"o": np.ones(2, np.float32)})["has"] == np.array(True)


def test_sequence_map_with_tensor_argument():
    body = h.make_graph([h.make_node("Add", ["a", "b"], ["c"])], "body", [vi("a"), vi("b")], [vi("c")])
    m = model([h.make_node("SequenceMap", ["s", "t"], ["r"], body=body)],
              [h.make_tensor_sequence_value_info("s", T.FLOAT, ["K"]), vi("t", T.FLOAT, [1])],
              [h.make_tensor_sequence_value_info("r", T.FLOAT, None)])
    seq = [np.arange(k, dtype=np.float32) for k in (1, 4, 2)]
    check(m, {"s": seq, "t": np.array([10], np.float32)})


def test_scan_output_changing_shape_is_a_clear_error():
    body = h.make_graph(
        [h.make_node("Range", ["zero", "n_in", "one"], ["r"]),
         h.make_node("Add", ["n_in", "one"], ["n_out"])],
        "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("n_in", T.INT64, [])],
        [vi("c_out", T.BOOL, []), vi("n_out", T.INT64, []), vi("r", T.INT64, None)],
        initializer=[onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"),
                     onnx.numpy_helper.from_array(np.array(1, np.int64), "one")])
    body.node.append(h.make_node("Identity", ["c"], ["c_out"]))
    m = model([h.make_node("Loop", ["M", "", "n0"], ["n", "rs"], body=body)],
              [vi("M", T.INT64, []), vi("n0", T.INT64, [])], [vi("n", T.INT64), vi("rs", T.INT64)])
    c = onnxc.compile(m)
    got = c.run({"M": np.array(1), "n0": np.array(2)})
    np.testing.assert_array_equal(got["rs"], [[0, 1]])
    with pytest.raises(RuntimeFailure, match="scan output 0 changes shape"):
        c.run({"M": np.array(3), "n0": np.array(2)})
