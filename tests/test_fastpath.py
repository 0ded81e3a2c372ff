"""The per-call fast path (onnxc/fastpath.py) gives exactly what the general path gives, falls back
to it (and its precise errors) for anything unusual, and is safe to call from several threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxc


def _model(nodes, inputs, outputs, init=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(init))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def mixed():
    """Symbolic and static inputs, a broadcast output, a fixed-shape output and a data-dependent one."""
    nodes = [h.make_node("Add", ["x", "b"], ["sum"]),
             h.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             h.make_node("NonZero", ["x"], ["nz"])]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]), h.make_tensor_value_info("b", T.FLOAT, [3])],
               [h.make_tensor_value_info(n, T.UNDEFINED, None) for n in ("sum", "total", "nz")])
    return onnxc.compile(m)


def test_fast_and_general_paths_agree(mixed):
    assert mixed._fast is not None
    rng = np.random.default_rng(0)
    for n in (1, 4):
        x = (rng.random((n, 3)) > 0.5).astype(np.float32)
        b = rng.random(3, dtype=np.float32)
        fast = mixed.run({"x": x, "b": b})
        slow = dict(zip([o.name for o in mixed.outputs], mixed._native.run([x, b])))
        for k in slow:
            assert fast[k].dtype == slow[k].dtype and fast[k].shape == slow[k].shape
            np.testing.assert_array_equal(fast[k], slow[k])
        np.testing.assert_array_equal(fast["sum"], x + b)
        np.testing.assert_array_equal(fast["nz"], np.array(np.nonzero(x)))
        s, t, nz = mixed(x, b)
        np.testing.assert_array_equal(s, x + b)
        assert t.shape == () and t == np.float32(x.sum())


def test_unusual_inputs_take_the_general_path(mixed):
    x = np.ones((2, 3), np.float32)
    b = np.ones(3, np.float32)
    assert mixed._fast.call((np.asfortranarray(x), b)) is None
    np.testing.assert_array_equal(mixed(np.asfortranarray(x), b)[0], x + b)      # non-contiguous: copied
    np.testing.assert_array_equal(mixed(np.float32([[1, 1, 1]]), b[::-1])[0], [[2, 2, 2]])  # a view: fine
    assert mixed(np.zeros((0, 3), np.float32), b)[0].shape == (0, 3)             # empty: general path
    with pytest.raises(onnxc.InputError, match="expected element type float.*float64"):
        mixed(x.astype(np.float64), b)
    with pytest.raises(onnxc.InputError, match="axis 0: expected 3, got 4"):
        mixed(x, np.ones(4, np.float32))
    with pytest.raises(onnxc.InputError, match="missing input 'b'"):
        mixed.run({"x": x})


def test_outputs_are_fresh_arrays(mixed):
    x = np.ones((2, 3), np.float32)
    b = np.zeros(3, np.float32)
    first = mixed(x, b)[0]
    second = mixed(x * 2, b)[0]
    assert first is not second and np.all(first == 1) and np.all(second == 2)


def test_concurrent_calls_from_threads(mixed):
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            n = int(rng.integers(1, 6))
            x = rng.random((n, 3), dtype=np.float32)
            b = rng.random(3, dtype=np.float32)
            if not np.array_equal(mixed(x, b)[0], x + b):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_models_with_no_inputs_and_empty_static_outputs():
    const = h.make_node("Constant", [], ["c"], value=h.make_tensor("v", T.FLOAT, [2], [1.0, 2.0]))
    empty = h.make_node("Constant", [], ["e"], value=h.make_tensor("w", T.FLOAT, [0, 3], []))
    m = _model([const, empty, h.make_node("Neg", ["c"], ["n"]), h.make_node("Neg", ["e"], ["ne"])], [],
               [h.make_tensor_value_info("n", T.FLOAT, [2]), h.make_tensor_value_info("ne", T.FLOAT, [0, 3])])
    c = onnxc.compile(m)
    for _ in range(2):
        n, ne = c()
        np.testing.assert_array_equal(n, [-1, -2])
        assert ne.shape == (0, 3) and ne.dtype == np.float32


def test_one_pointer_entry_and_its_fallback(mixed, monkeypatch):
    """The fast path calls ``<prefix>_run_args`` (one struct pointer: cffi's ABI mode pays per argument);
    a library without it (an older AOT artifact) is called through the six-argument ``run_into``."""
    import onnxc.fastpath as fp

    assert mixed._fast._run_args is not None
    monkeypatch.setattr(fp, "_args_entry", lambda native: None)
    old = fp.FastPath(mixed._native, [i.type for i in mixed.inputs], [o.type for o in mixed.outputs],
                      [True, True, False])
    assert old._run_args is None
    x, b = np.float32([[1, 0, 2]]), np.float32([1, 2, 3])
    for fast in (mixed._fast, old):
        s, t, nz = fast.call((x, b))
        np.testing.assert_array_equal(s, x + b)
        assert t == 3 and nz.tolist() == [[0, 0], [0, 2]]
        assert fast.call((x.astype(np.float64), b)) is None   # wrong dtype: the general path raises
        assert fast.call((x, np.ones(4, np.float32))) is None  # wrong static shape
        assert fast.call((x, b[::-1])) is None                 # non-contiguous: copied by the general path
        assert fast.call(([[1.0, 0.0, 2.0]], b)) is None       # not an array


def test_errors_from_the_c_checks_name_the_problem():
    """A dimension variable bound inconsistently passes the Python checks of the fast path and is
    caught by the library's own checks, which raise with its message."""
    m = _model([h.make_node("Add", ["x", "y"], ["z"])],
               [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]), h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
               [h.make_tensor_value_info("z", T.FLOAT, None)])
    c = onnxc.compile(m)
    assert c._fast is not None
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(c(x, x), x + x)
    with pytest.raises(onnxc.InputError, match="'y'.*axis 0"):
        c._fast.call((x, np.ones((3, 3), np.float32)))
    with pytest.raises(onnxc.InputError, match="'y'.*axis 0"):
        c(x, np.ones((3, 3), np.float32))


def test_input_too_small_for_a_window_is_an_error():
    """Two unpadded convolutions on a too short input: the output's formula gives a negative dim. The fast paths
    hand it to the general one, which names the output and its formula (numpy's bare ValueError before)."""
    w = np.ones((4, 2, 3), np.float32)
    m = _model([h.make_node("Conv", ["x", "w"], ["c"], strides=[2]),
                h.make_node("Conv", ["c", "w2"], ["y"], strides=[2])],
               [h.make_tensor_value_info("x", T.FLOAT, ["N", 2, "L"])], [h.make_tensor_value_info("y", T.FLOAT, None)],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.ones((4, 4, 3), np.float32), "w2")])
    c = onnxc.compile(m)
    assert c(np.ones((1, 2, 7), np.float32)).shape == (1, 4, 1)
    x = np.ones((1, 2, 1), np.float32)
    out = {"y": np.empty((1, 4, 1), np.float32)}
    for call in (lambda: c(x), lambda: c.run({"x": x}), lambda: c.run({"x": x}, out=out)):
        with pytest.raises(onnxc.OnnxcError, match="output 'y'.*negative dimension"):
            call()


def test_call_dict_by_name(mixed):
    """run(dict) goes through the generated by-name call: the outputs by name, None (the general path
    and its errors) for a missing, unknown or extra name."""
    fast = mixed._fast
    x, b = np.float32([[1, 0, 2]]), np.float32([1, 2, 3])
    res = fast.call_dict({"b": b, "x": x})
    assert list(res) == ["sum", "total", "nz"]
    np.testing.assert_array_equal(res["sum"], x + b)
    assert fast.call_dict({"x": x}) is None
    assert fast.call_dict({"x": x, "c": b}) is None
    assert fast.call_dict({"x": x, "b": b, "c": b}) is None
    with pytest.raises(onnxc.InputError, match="unknown input"):
        mixed.run({"x": x, "b": b, "c": b})
    assert list(mixed.run({"x": x, "b": b}, output_names=["nz"])) == ["nz"]
