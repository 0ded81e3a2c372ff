"""The run function's own checks (codegen/emit.py, templates/model.c.j2, runtime_c/onnxc_check.c): the
native entry points, called here with hostile descriptors that the Python layers never build, reject
every bad dtype, rank, dim, pointer and size with ONNXC_ERR_INPUT (or ONNXC_ERR_MEMORY for sizes that
cannot be allocated) and a message naming the input, the axis and expected vs got, instead of
ignoring the field, wrapping a size or reading through a NULL pointer."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxc
from onnxc.codegen.native import VALUE_DTYPE

OK, ERR_INPUT, ERR_MEMORY = 0, 1, 3
BIG = [2**61, -(2**62), 2**62, 2**63 - 1, -1]


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


@pytest.fixture(scope="module")
def mm():
    """y[N, 10] = x[N, 4] @ W, z[K] = k[K] + 1 (int64): two inputs of different element types."""
    w = np.arange(40, dtype=np.float32).reshape(4, 10) / 8
    m = _model([h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Add", ["k", "one"], ["z"])],
               [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("k", T.INT64, ["K"])],
               [h.make_tensor_value_info("y", T.FLOAT, ["N", 10]), h.make_tensor_value_info("z", T.INT64, ["K"])],
               [h.make_tensor("W", T.FLOAT, [4, 10], w.ravel()), h.make_tensor("one", T.INT64, [], [1])])
    return onnxc.compile(m, threads=1), w


class Raw:
    """Descriptors for the native entry points of a compiled model, filled field by field."""

    def __init__(self, cm: onnxc.CompiledModel, n_in: int, n_out: int):
        self.native = cm._native
        ffi = self.ffi = self.native.ffi
        self.ins = ffi.new("onnxc_tensor[]", max(1, n_in))
        self.outs = ffi.new("onnxc_tensor[]", max(1, n_out))
        self.n_out = n_out
        self.keep: list = []

    def tensor(self, t, data, dims, dtype: int, rank: int | None = None) -> None:
        if isinstance(data, np.ndarray):
            buf = self.ffi.from_buffer(data)
            self.keep += [data, buf]
            data = buf
        t.data = self.ffi.NULL if data is None else data
        t.rank = len(dims) if rank is None else rank
        t.dtype = dtype
        for k, d in enumerate(dims):
            t.dims[k] = d

    def call(self, into: bool = False, ins=None, outs=None) -> tuple[int, str]:
        ffi, n = self.ffi, self.native
        err = ffi.new("char[]", 1024)
        fn = n._run_into if into else n._run
        st = fn(n._wptr, self.ins if ins is None else ins, self.outs if outs is None else outs, err, 1024, 1)
        if st == OK and not into:
            for j in range(self.n_out):
                n._free(self.outs[j].data)
        return st, ffi.string(err).decode()


def _good(raw: Raw, n: int = 2, k: int = 3):
    x = np.ones((n, 4), np.float32)
    kk = np.arange(k, dtype=np.int64)
    raw.tensor(raw.ins[0], x, (n, 4), 1)
    raw.tensor(raw.ins[1], kk, (k,), 7)
    return x, kk


def test_python_calls_set_the_dtype_and_still_run(mm):
    """The general and fast paths fill in the dtype field the library now checks."""
    cm, w = mm
    x, k = np.float32(np.random.default_rng(0).standard_normal((3, 4))), np.int64([5, -2])
    y, z = cm(x, k)
    np.testing.assert_allclose(y, x @ w, rtol=1e-5)
    np.testing.assert_array_equal(z, k + 1)
    y, z = cm._native.run([x, k])  # the general path
    np.testing.assert_allclose(y, x @ w, rtol=1e-5)


def test_wrong_dtype_is_rejected(mm):
    raw = Raw(mm[0], 2, 2)
    _good(raw)
    assert raw.call() == (OK, "")
    raw.ins[0].dtype = 11
    st, msg = raw.call()
    assert st == ERR_INPUT and "input 'x': expected element type 1 (float), got 11 (double)" in msg
    raw.ins[0].dtype = 1
    raw.ins[1].dtype = 6
    st, msg = raw.call()
    assert st == ERR_INPUT and "input 'k': expected element type 7 (int64), got 6 (int32)" in msg
    raw.ins[1].dtype = -5
    st, msg = raw.call()
    assert st == ERR_INPUT and "got -5 (unknown)" in msg


@pytest.mark.parametrize("rank", [1, 3, 0, -1, 17, 2**30])
def test_wrong_rank_is_rejected(mm, rank):
    raw = Raw(mm[0], 2, 2)
    _good(raw)
    raw.ins[0].rank = rank
    st, msg = raw.call()
    assert st == ERR_INPUT and f"input 'x': expected rank 2, got {rank}" in msg


@pytest.mark.parametrize("n", BIG)
def test_hostile_dims_are_rejected(mm, n):
    """N = 2^61 used to write past the arena, N = -2^62 to succeed with dims [-2^62, 10]."""
    raw = Raw(mm[0], 2, 2)
    x, _ = _good(raw)
    raw.ins[0].dims[0] = n
    st, msg = raw.call()
    assert st == ERR_INPUT, msg
    why = "is negative" if n < 0 else "exceeds the limit of 2^48"
    assert f"input 'x' axis 0: dimension {n} {why}" in msg
    st, msg = raw.call(into=True)
    assert st == ERR_INPUT and f"input 'x' axis 0: dimension {n}" in msg


def test_element_count_and_byte_size_overflow(mm):
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, ["A", "B"])],
               [h.make_tensor_value_info("y", T.FLOAT, ["A", "B"])])
    raw = Raw(onnxc.compile(m, threads=1), 1, 1)
    x = np.ones(4, np.float32)
    raw.tensor(raw.ins[0], x, (2**40, 2**40), 1)  # 2^80 elements
    st, msg = raw.call()
    assert st == ERR_INPUT and "input 'x': shape [1099511627776, 1099511627776] has more elements than" in msg
    raw.tensor(raw.ins[0], x, (2**31, 2**31), 1)  # 2^62 elements fit in int64, 2^64 bytes do not fit
    st, msg = raw.call()
    assert st == ERR_INPUT and "input 'x': shape [2147483648, 2147483648] of float needs more than" in msg


def test_null_pointers(mm):
    raw = Raw(mm[0], 2, 2)
    _good(raw)
    raw.ins[0].data = raw.ffi.NULL
    st, msg = raw.call()
    assert st == ERR_INPUT and "input 'x': data is NULL but the shape [2, 4] has 8 elements" in msg
    raw.ins[0].dims[0] = 0  # no elements: NULL data is fine
    assert raw.call() == (OK, "")
    assert raw.outs[0].rank == 2 and list(raw.outs[0].dims)[:2] == [0, 10]
    st, msg = raw.call(ins=raw.ffi.NULL)
    assert st == ERR_INPUT and "the inputs array is NULL" in msg
    st, msg = raw.call(outs=raw.ffi.NULL)
    assert st == ERR_INPUT and "the outputs array is NULL" in msg


def test_into_outputs_are_checked(mm):
    """run_into (the fast path's entry) checks the caller's output buffers: data, dtype, rank, dims."""
    cm, w = mm
    raw = Raw(cm, 2, 2)
    x, kk = _good(raw)
    y, z = np.empty((2, 10), np.float32), np.empty(3, np.int64)
    raw.tensor(raw.outs[0], y, (2, 10), 1)
    raw.tensor(raw.outs[1], z, (3,), 7)
    assert raw.call(into=True) == (OK, "")
    np.testing.assert_allclose(y, x @ w, rtol=1e-6)
    raw.outs[1].dtype = 6
    st, msg = raw.call(into=True)
    assert st == ERR_INPUT and "output 'z': expected element type 7 (int64), got 6 (int32)" in msg
    raw.outs[1].dtype = 7
    raw.outs[0].dims[0] = 3
    st, msg = raw.call(into=True)
    assert st == ERR_INPUT and "output 'y' axis 0: expected 2, got 3" in msg
    raw.outs[0].dims[0] = 2
    raw.outs[0].rank = 5
    st, msg = raw.call(into=True)
    assert st == ERR_INPUT and "output 'y': expected rank 2, got 5" in msg
    raw.outs[0].rank = 2
    raw.outs[0].data = raw.ffi.NULL
    st, msg = raw.call(into=True)
    assert st == ERR_INPUT and "output 'y': data is NULL" in msg


@pytest.fixture(scope="module")
def outer():
    """p[N, M] = x[N, 1] * y[1, M] (an output), q = sum(exp(p)) over a [N, M] intermediate."""
    m = _model([h.make_node("Unsqueeze", ["x", "a1"], ["xc"]), h.make_node("Unsqueeze", ["y", "a0"], ["yr"]),
                h.make_node("Mul", ["xc", "yr"], ["p"]), h.make_node("Exp", ["p"], ["e"]),
                h.make_node("Softmax", ["e"], ["s"], axis=0), h.make_node("ReduceSum", ["s"], ["q"], keepdims=0)],
               [h.make_tensor_value_info("x", T.FLOAT, ["N"]), h.make_tensor_value_info("y", T.FLOAT, ["M"])],
               [h.make_tensor_value_info("p", T.FLOAT, ["N", "M"]), h.make_tensor_value_info("q", T.FLOAT, [])],
               [h.make_tensor("a1", T.INT64, [1], [1]), h.make_tensor("a0", T.INT64, [1], [0])])
    return onnxc.compile(m, threads=1)


def test_outer_model_runs(outer):
    x, y = np.float32([1, 2, 3]), np.float32([0.5, -1])
    p, q = outer(x, y)
    np.testing.assert_allclose(p, np.outer(x, y), rtol=1e-6)
    e = np.exp(np.outer(x, y))
    np.testing.assert_allclose(q, (e / e.sum(0)).sum(), rtol=1e-5)
    assert any(b.kind == "temp" and not all(isinstance(d, int) for d in b.shape)
               for b in outer.program.buffers.values()), "no run-time sized intermediate"


@pytest.mark.parametrize("n,m", [(2**31, 2**31), (2**33, 2**33), (2**47, 2**47), (2**20, 2**40)])
def test_run_time_sizes_do_not_wrap(outer, n, m):
    """Inputs whose dims each pass, but whose products do not fit: the output and the intermediates
    of [N, M] are refused before any kernel runs (the inputs' data are only 4 floats: a kernel that
    ran would read far past them)."""
    raw = Raw(outer, 2, 2)
    small = np.ones(4, np.float32)
    raw.tensor(raw.ins[0], small, (n,), 1)
    raw.tensor(raw.ins[1], small, (m,), 1)
    for into in (False, True):
        if into:
            raw.tensor(raw.outs[0], small, (n, m), 1)
            raw.tensor(raw.outs[1], small, (), 1)
        st, msg = raw.call(into=into)
        assert st == ERR_MEMORY, msg
        assert f"[{n}, {m}]" in msg and "bytes" in msg, msg


@pytest.fixture(scope="module")
def seq():
    """c = ConcatFromSequence(s, axis=0), s a sequence of float tensors."""
    st = h.make_tensor_sequence_value_info("s", T.FLOAT, ["L"])
    m = _model([h.make_node("ConcatFromSequence", ["s"], ["c"], axis=0)], [st],
               [h.make_tensor_value_info("c", T.FLOAT, None)])
    return onnxc.compile(m, threads=1)


def test_sequence_inputs_are_checked(seq):
    a, b = np.float32([1, 2]), np.float32([3, 4, 5])
    np.testing.assert_array_equal(seq([a, b]), np.concatenate([a, b]))
    raw = Raw(seq, 1, 1)
    ffi = raw.ffi
    v = ffi.new("onnxc_value *")
    items = ffi.new("onnxc_value *[]", 2)
    vals = [ffi.new("onnxc_value *") for _ in range(2)]
    for it, arr in zip(vals, (a, b)):
        it.kind, it.elem_dtype = 1, 1
        raw.tensor(it.t, arr, arr.shape, 1)
        items[vals.index(it)] = it
    v.kind, v.elem_dtype, v.n, v.cap, v.items = 2, 1, 2, 2, items
    raw.ins[0].data, raw.ins[0].dtype = v, VALUE_DTYPE
    assert raw.call() == (OK, "")

    def bad(expect: str) -> None:
        st, msg = raw.call()
        assert st == ERR_INPUT and expect in msg, msg

    raw.ins[0].dtype = 1
    bad("input 's': expected a sequence, map or optional value (dtype 1000), got dtype 1")
    raw.ins[0].dtype = VALUE_DTYPE
    v.n = -1
    bad("input 's': a sequence of -1 items")
    v.n = 2
    v.items = ffi.NULL
    bad("input 's': the items of a sequence of 2 items are NULL")
    v.items = items
    items[1] = ffi.NULL
    bad("input 's' item 1: NULL")
    items[1] = v  # a cycle: the sequence as its own item
    bad("input 's' item 1: expected a tensor, got a sequence")
    items[1] = vals[1]
    vals[1].t.dtype = 6
    bad("input 's' item 1: expected element type 1 (float), got 6 (int32)")
    vals[1].t.dtype = 1
    vals[0].t.dims[0] = -(2**62)
    bad("input 's' item 0 axis 0: dimension -4611686018427387904 is negative")
    vals[0].t.dims[0] = 2
    vals[0].t.rank = 40
    bad("input 's' item 0: rank 40 is out of range")
    vals[0].t.rank = 1
    vals[0].t.data = ffi.NULL
    bad("input 's' item 0: data is NULL but the shape [2] has 2 elements")
    raw.ins[0].data = ffi.NULL
    bad("input 's': data is NULL")
    v.kind = 7
    raw.ins[0].data = v
    bad("input 's': expected a sequence, got a value of kind 7")


@pytest.mark.parametrize("n", [2**61, -(2**62), 2**62, 2**48 + 1])
def test_the_example_cnn_refuses_hostile_batch_sizes(n):
    """The issue's case, on the shipped example CNN (input [N, 1, 28, 28], output [N, 10])."""
    from pathlib import Path

    cm = onnxc.compile(Path(onnxc.__file__).parent / "examples" / "small_cnn.onnx", threads=1)
    raw = Raw(cm, 1, 1)
    x = np.zeros((2, 1, 28, 28), np.float32)
    raw.tensor(raw.ins[0], x, (2, 1, 28, 28), 1)
    assert raw.call() == (OK, "")
    assert list(raw.outs[0].dims)[:2] == [2, 10]
    raw.ins[0].dims[0] = n
    st, msg = raw.call()
    assert st == ERR_INPUT and f"input 'image' axis 0: dimension {n} " in msg, msg
