"""The GEMV path of Gemm/MatMul (codegen/kernels/gemv.py, runtime_c/onnxc_gemv.h): numbers against
numpy / onnx.reference over odd shapes, transposes, alpha/beta, every bias broadcast form and thread
counts, and checks that the intended path (or the fallback) ran. The activations and residuals that
passes/fuse_epilogues.py folds into it are tested in tests/test_fuse_epilogues.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc.codegen.kernels.gemv import pack_gemv, packed_size

from .util import check_node, random_array

RNG = np.random.default_rng(7)


def _ref_gemm(a, b, c=None, alpha=1.0, beta=1.0, ta=0, tb=0):
    a = a.T if ta else a
    b = b.T if tb else b
    y = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None:
        y = y + beta * c.astype(np.float64)
    return y.astype(np.float32)


def _gemm_model(m, k, n, ta=0, tb=0, c_shape=(None,), alpha=1.0, beta=1.0, act=None, act_attrs=None,
                a_shape=None, opset=21):
    """Gemm (B and C constants) optionally followed by an activation node."""
    b = random_array(RNG, (n, k) if tb else (k, n))
    inits = [onnx.numpy_helper.from_array(b, "B")]
    ins = ["A", "B"]
    c = None
    if c_shape != (None,):
        c = random_array(RNG, c_shape)
        inits.append(onnx.numpy_helper.from_array(c, "C"))
        ins.append("C")
    nodes = [helper.make_node("Gemm", ins, ["t" if act else "y"], transA=ta, transB=tb, alpha=alpha, beta=beta)]
    if act:
        nodes.append(helper.make_node(act, ["t"], ["y"], **(act_attrs or {})))
    a_decl = a_shape or ([k, m] if ta else [m, k])
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, a_decl)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), b, c


def _close(got, want, k):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, np.sqrt(k)))


def test_pack_layout():
    """Panels of 64 columns, the last one rounded up to 16 with zeros, each read row by row."""
    k, n = 5, 150
    b = np.arange(k * n, dtype=np.float32).reshape(k, n)
    p = pack_gemv(b)
    assert p.size == packed_size(k, n) == (128 + 32) * k
    assert np.array_equal(p[:64 * k].reshape(k, 64), b[:, :64])
    assert np.array_equal(p[64 * k:128 * k].reshape(k, 64), b[:, 64:128])
    last = p[128 * k:].reshape(k, 32)
    assert np.array_equal(last[:, :22], b[:, 128:]) and not last[:, 22:].any()


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 3), (1, 784, 1024), (1, 33, 65), (2, 17, 130), (3, 64, 16),
                                   (4, 100, 200), (5, 300, 47), (8, 513, 70), (1, 0, 5)])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_shapes(m, k, n, threads):
    model, b, c = _gemm_model(m, k, n, tb=1, c_shape=(n,))
    a = random_array(RNG, (m, k))
    cm = onnxc.compile(model, threads=threads)
    assert "onnxc_gemv(" in cm.c_source
    _close(cm.run({"A": a})["y"], _ref_gemm(a, b, c, tb=1), k)


@pytest.mark.parametrize("c_shape", [(None,), (1,), (37,), (1, 37), (3, 1), (3, 37), (1, 1)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0)])
def test_gemm_bias_forms(c_shape, alpha, beta):
    m, k, n = 3, 45, 37
    model, b, c = _gemm_model(m, k, n, c_shape=c_shape, alpha=alpha, beta=beta)
    a = random_array(RNG, (m, k))
    cm = onnxc.compile(model)
    assert "onnxc_gemv(" in cm.c_source
    _close(cm.run({"A": a})["y"], _ref_gemm(a, b, c if beta else None, alpha, beta), k)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_transposes_m1(ta, tb):
    k, n = 70, 90
    model, b, c = _gemm_model(1, k, n, ta=ta, tb=tb, c_shape=(1, n))
    a = random_array(RNG, (k, 1) if ta else (1, k))
    cm = onnxc.compile(model)
    assert "onnxc_gemv(" in cm.c_source
    _close(cm.run({"A": a})["y"], _ref_gemm(a, b, c, ta=ta, tb=tb), k)


def test_transposed_a_with_rows_takes_the_gemm():
    """transA with M > 1: not a GEMV; the blocked GEMM computes it."""
    m, k, n = 3, 20, 40
    model, b, c = _gemm_model(m, k, n, ta=1, c_shape=(n,))
    a = random_array(RNG, (k, m))
    cm = onnxc.compile(model)
    assert "onnxc_gemv(" not in cm.c_source
    _close(cm.run({"A": a})["y"], _ref_gemm(a, b, c, ta=1), k)


@pytest.mark.parametrize("a_shape", [[1, 1, 96], [2, 3, 96], [96], [4, 96]])
def test_matmul(a_shape):
    b = random_array(RNG, (96, 70))
    a = random_array(RNG, a_shape)
    check_node("MatMul", {"A": a, "B": b}, const_inputs=("B",), rtol=1e-4, atol=1e-4)
    cm = onnxc.compile(helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["y"])], "g",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, a_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(b, "B")]), opset_imports=[helper.make_opsetid("", 17)]))
    assert "onnxc_gemv(" in cm.c_source


def test_symbolic_batch_is_one_at_run_time():
    """A symbolic M takes the blocked GEMM (its layout serves every batch) and is right at batch 1."""
    k, n = 200, 300
    model, b, c = _gemm_model(1, k, n, tb=1, c_shape=(n,), act="Relu", a_shape=["N", k])
    cm = onnxc.compile(model, threads=2)
    assert "onnxc_gemv(" not in cm.c_source
    for m in (1, 3):
        a = random_array(RNG, (m, k))
        _close(cm.run({"A": a})["y"], np.maximum(_ref_gemm(a, b, c, tb=1), 0), k)


def test_nonconstant_b_and_double_take_the_gemm():
    a, b = random_array(RNG, (1, 20)), random_array(RNG, (20, 30))
    check_node("MatMul", {"A": a, "B": b}, rtol=1e-4, atol=1e-5)
    check_node("Gemm", {"A": a.astype(np.float64), "B": b.astype(np.float64)}, const_inputs=("B",))


def test_nan_propagates():
    model, b, c = _gemm_model(1, 10, 20, c_shape=(20,), act="Relu")
    a = random_array(RNG, (1, 10))
    a[0, 3] = np.nan
    y = onnxc.compile(model).run({"A": a})["y"]
    assert np.isnan(y).all()
