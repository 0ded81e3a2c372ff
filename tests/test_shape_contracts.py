"""Run-time shape contracts (ir/contracts.py): relations between symbolic dims that shape inference
assumed are checked once per call, with a message naming the node, the operands and both sizes; numpy
broadcasting of two symbols follows the 1-rule at run time."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxc
from onnxc.ir import InputError


def _model(nodes, ins, outs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", ins, outs, initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _f(name, shape, dtype=T.FLOAT):
    return h.make_tensor_value_info(name, dtype, shape)


def _x(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def concat():
    return onnxc.compile(_model([h.make_node("Concat", ["a", "b"], ["y"], axis=1)],
                                [_f("a", ["N", 2, "H"]), _f("b", ["N", 3, "W"])], [_f("y", None)]))


def test_concat_checks_other_axes(concat):
    a, b = _x(1, 2, 4), _x(1, 3, 4)
    np.testing.assert_array_equal(concat.run({"a": a, "b": b})["y"], np.concatenate([a, b], axis=1))
    for w in (7, 1):  # used to return shape (1, 5, 4): silently wrong, or garbage for W=1
        with pytest.raises(InputError, match=r"Concat \(outputs 'y'\).*input 0 axis 2 is 4, input 1 axis 2 is "
                                             rf"{w}"):
            concat.run({"a": a, "b": _x(1, 3, w)})


def test_concat_huge_mismatch_is_an_error_not_a_crash(concat):
    a = np.zeros((1, 2, 1), np.float32)
    b = np.broadcast_to(np.float32(0), (1, 3, 50_000_000))  # used to segfault
    with pytest.raises(InputError, match="input 1 axis 2 is 50000000"):
        concat.run({"a": a, "b": b})


def test_matmul_inner_dims_checked():
    m = onnxc.compile(_model([h.make_node("MatMul", ["a", "b"], ["y"])],
                             [_f("a", ["M", "K"]), _f("b", ["J", "N"])], [_f("y", None)]))
    a, b = _x(2, 3), _x(3, 5)
    np.testing.assert_allclose(m.run({"a": a, "b": b})["y"], a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match=r"MatMul.*input 0 axis 1 is 3, input 1 axis 0 is 4"):
        m.run({"a": a, "b": _x(4, 5)})


def test_gemm_inner_dims_checked():
    m = onnxc.compile(_model([h.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
                             [_f("a", ["M", "K"]), _f("b", ["N", "J"])], [_f("y", None)]))
    a, b = _x(2, 3), _x(4, 3)
    np.testing.assert_allclose(m.run({"a": a, "b": b})["y"], a @ b.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match=r"Gemm.*inner dim"):
        m.run({"a": a, "b": _x(4, 5)})


@pytest.fixture(scope="module")
def add():
    return onnxc.compile(_model([h.make_node("Add", ["a", "b"], ["y"])],
                                [_f("a", ["N", 3]), _f("b", ["M", 3])], [_f("y", None)]))


@pytest.mark.parametrize("n,m", [(1, 5), (5, 1), (5, 5), (1, 1), (0, 1), (1, 0), (0, 0)])
def test_broadcast_of_two_symbols_follows_numpy(add, n, m):
    a, b = _x(n, 3), _x(m, 3)
    got = add.run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, a + b)


def test_broadcast_of_two_symbols_names_both_sizes(add):
    assert add.outputs[0].shape[0] == "broadcast(M, N)"
    with pytest.raises(InputError, match=r"Add.*cannot broadcast input 0 axis 0 is 2, input 1 axis 0 is 3"):
        add.run({"a": _x(2, 3), "b": _x(3, 3)})


def test_broadcast_variable_flows_downstream():
    # (a + b) * a: the second broadcast is the first one's variable again; then a Concat with c
    nodes = [h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Mul", ["s", "a"], ["p"]),
             h.make_node("Concat", ["p", "c"], ["y"], axis=1)]
    m = onnxc.compile(_model(nodes, [_f("a", ["N", 3]), _f("b", ["M", 3]), _f("c", ["K", 2])], [_f("y", None)]))
    for n, k in ((1, 4), (4, 4)):
        a, b, c = _x(n, 3), _x(4, 3), _x(k, 2)
        np.testing.assert_allclose(m.run({"a": a, "b": b, "c": c})["y"], np.concatenate([(a + b) * a, c], 1),
                                   rtol=1e-6)
    with pytest.raises(InputError, match="Concat"):
        m.run({"a": _x(1, 3), "b": _x(4, 3), "c": _x(3, 2)})


def test_where_three_symbols():
    m = onnxc.compile(_model([h.make_node("Where", ["c", "x", "y"], ["z"])],
                             [_f("c", ["A"], T.BOOL), _f("x", ["B"]), _f("y", ["C"])], [_f("z", None)]))
    c = np.array([True, False, True])
    for xs, ys in ((1, 3), (3, 1), (3, 3)):
        x, y = _x(xs), _x(ys)
        np.testing.assert_array_equal(m.run({"c": c, "x": x, "y": y})["z"], np.where(c, x, y))
    with pytest.raises(InputError, match="Where"):
        m.run({"c": c, "x": _x(2), "y": _x(3)})


def test_symbol_against_static_extent():
    m = onnxc.compile(_model([h.make_node("Add", ["a", "b"], ["y"])], [_f("a", ["N", 3]), _f("b", [4, 3])],
                             [_f("y", None)]))
    for n in (1, 4):
        a, b = _x(n, 3), _x(4, 3)
        np.testing.assert_array_equal(m.run({"a": a, "b": b})["y"], a + b)
    with pytest.raises(InputError, match="cannot broadcast"):
        m.run({"a": _x(2, 3), "b": _x(4, 3)})


def test_conv_channels_checked():
    w = h.make_tensor("w", T.FLOAT, [4, 3, 1, 1], _x(4, 3, 1, 1).reshape(-1).tolist())
    m = onnxc.compile(_model([h.make_node("Conv", ["x", "w"], ["y"])], [_f("x", ["N", "C", 5, 5])],
                             [_f("y", None)], [w]))
    m.run({"x": _x(1, 3, 5, 5)})
    with pytest.raises(InputError, match=r"Conv.*input 0 axis 1 \(X's channels\) is 5"):
        m.run({"x": _x(1, 5, 5, 5)})


def test_reshape_element_count_checked():
    shape = h.make_tensor("s", T.INT64, [2], [2, 6])
    m = onnxc.compile(_model([h.make_node("Reshape", ["x", "s"], ["y"])], [_f("x", ["N", 4])], [_f("y", None)],
                             [shape]))
    x = _x(3, 4)
    np.testing.assert_array_equal(m.run({"x": x})["y"], x.reshape(2, 6))
    with pytest.raises(InputError, match=r"Reshape.*element count is 20, the target shape's element count is 12"):
        m.run({"x": _x(5, 4)})


def test_batchnorm_channels_checked():
    inits = [h.make_tensor(n, T.FLOAT, [3], [1.0, 2.0, 3.0]) for n in ("s", "b", "mu", "var")]
    m = onnxc.compile(_model([h.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"])],
                             [_f("x", ["N", "C", 2])], [_f("y", None)], inits))
    m.run({"x": _x(1, 3, 2)})
    with pytest.raises(InputError, match="BatchNormalization.*input 0 axis 1 .channels. is 4"):
        m.run({"x": _x(1, 4, 2)})


def test_contract_in_an_untaken_branch_is_not_checked():
    then = h.make_graph([h.make_node("Concat", ["a", "b"], ["t"], axis=0)], "then", [], [_f("t", None)])
    other = h.make_graph([h.make_node("Identity", ["a"], ["e"])], "else", [], [_f("e", None)])
    m = onnxc.compile(_model([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                             [_f("c", [], T.BOOL), _f("a", ["N", "H"]), _f("b", ["M", "W"])], [_f("y", None)]))
    a, b = _x(2, 3), _x(1, 4)
    np.testing.assert_array_equal(m.run({"c": np.array(False), "a": a, "b": b})["y"], a)
    with pytest.raises(InputError, match="Concat"):
        m.run({"c": np.array(True), "a": a, "b": b})


def test_contract_over_a_run_time_dim():
    # NonZero's count is known only after it ran: the check comes right after that step
    nodes = [h.make_node("NonZero", ["m"], ["nz"]), h.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             h.make_node("Cast", ["idx"], ["f"], to=T.FLOAT), h.make_node("Add", ["f", "x"], ["y"])]
    m = onnxc.compile(_model(nodes, [_f("m", ["K"], T.BOOL), _f("x", ["P", 1])], [_f("y", None)]))
    mask = np.array([True, False, True, True])
    x = _x(3, 1)
    want = np.nonzero(mask)[0][:, None].astype(np.float32) + x
    np.testing.assert_array_equal(m.run({"m": mask, "x": x})["y"], want)
    np.testing.assert_array_equal(m.run({"m": mask, "x": x[:1]})["y"],
                                  np.nonzero(mask)[0][:, None].astype(np.float32) + x[:1])
    with pytest.raises(InputError, match="Add.*cannot broadcast"):
        m.run({"m": mask, "x": _x(2, 1)})


def test_squeeze_of_a_symbolic_axis_checks_it_is_1():
    # found by the fuzzer under ASan: the output was sized for C == 1 and written past with C == 3
    nodes = [h.make_node("ReduceSum", ["x", "ax"], ["r"], keepdims=0), h.make_node("Squeeze", ["r", "ax"], ["y"])]
    ax = h.make_tensor("ax", T.INT64, [1], [0])
    m = onnxc.compile(_model(nodes, [_f("x", ["N", "C", 4])], [_f("y", None)], [ax], opset=18))
    x = _x(2, 1, 4)
    np.testing.assert_allclose(m.run({"x": x})["y"], x.sum(0)[0], rtol=1e-6)
    with pytest.raises(InputError, match=r"Squeeze.*input 0 axis 0 is 3"):
        m.run({"x": _x(2, 3, 4)})
