"""Einsum: equations beyond the conformance suite, checked against onnx.reference (numpy.einsum).

Covers both lowerings (the loop nest and the packed-GEMM form, asserted from the generated C),
implicit and explicit outputs, diagonals, ellipsis broadcasting with symbolic dims, label
broadcasting of size-1 axes, integer wrap-around, float16/bfloat16, empty axes and invalid equations.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc

BF16 = np.dtype(ml_dtypes.bfloat16)


def _model(eq: str, arrays: list[np.ndarray], shapes: list | None = None, opset: int = 12):
    names = [f"x{i}" for i in range(len(arrays))]
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                        shapes[i] if shapes else list(a.shape)) for i, (n, a) in enumerate(zip(names, arrays))]
    g = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=eq)], "t", vi,
                          [helper.make_tensor_value_info("y", 0, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(eq: str, arrays: list[np.ndarray], shapes: list | None = None, path: str | None = None,
          rtol: float = 1e-5, atol: float = 1e-5, opset: int = 12) -> np.ndarray:
    """Compile and run ``eq``, compare with the reference; ``path`` is "gemm" or "loops" when given."""
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    want = np.asarray(ReferenceEvaluator(_model(eq, arrays, opset=opset)).run(None, feeds)[0])
    compiled = onnxc.compile(_model(eq, arrays, shapes, opset))
    got = np.asarray(compiled.run({k: v.view(np.uint16) if v.dtype == BF16 else v for k, v in feeds.items()})["y"])
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind in "iu":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    if path is not None:
        uses_gemm = "onnxc_sgemm(" in compiled.c_source or "onnxc_dgemm(" in compiled.c_source
        assert uses_gemm == (path == "gemm"), f"expected the {path} lowering"
    return got


def _f(rng, *shape, dt=np.float32):
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("eq,shapes,path", [
    ("ij,jk->ik", [(3, 4), (4, 5)], "gemm"),
    ("ij,jk", [(3, 4), (4, 5)], "gemm"),                          # implicit output "ik"
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)], "gemm"),      # attention scores, B transposed
    ("bhqk,bhkd->bqhd", [(2, 3, 4, 6), (2, 3, 6, 8)], "gemm"),      # output scattered
    ("kb,kn->bn", [(7, 3), (7, 5)], "gemm"),                        # A transposed
    ("abc,cd->abd", [(2, 3, 4), (4, 5)], "gemm"),                   # two M labels
    ("bij,jk->bki", [(2, 3, 4), (4, 5)], "gemm"),
    ("ab,cb->", [(3, 4), (5, 4)], "loops"),                         # summed labels only
    ("i,i", [(5,), (5,)], "loops"),
    ("i,j->ij", [(3,), (4,)], "loops"),
    ("ij,ij->ij", [(3, 4), (3, 4)], "loops"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "loops"),
    ("ii->i", [(4, 4)], "loops"),
    ("ii", [(4, 4)], "loops"),                                      # trace
    ("iij->ji", [(3, 3, 2)], "loops"),
    ("ijk->kji", [(2, 3, 4)], "loops"),
    ("ijk->", [(2, 3, 4)], "loops"),
    ("ij->j", [(5, 6)], "loops"),
    ("ba", [(3, 4)], "loops"),                                      # implicit transpose
    ("Ab,bC->CA", [(3, 4), (4, 2)], "gemm"),                        # upper case labels
    (" i j , j k -> i k ", [(3, 4), (4, 5)], "gemm"),               # spaces
    ("ij,jk->ik", [(3, 1), (4, 5)], "gemm"),                        # size-1 label broadcasts
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)], "gemm"),      # ellipses of different ranks
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)], "gemm"),                # implicit: "...ik"
    ("...ii->...i", [(2, 3, 3)], "loops"),
    ("i...->...", [(3, 2, 4)], "loops"),
    ("...,...->...", [(3, 1), (4,)], "loops"),
    ("ij,jk->ik", [(0, 3), (3, 5)], "gemm"),
    ("ij,jk->ik", [(2, 0), (0, 5)], "gemm"),
    ("ij->", [(0, 3)], "loops"),
    (",->", [(), ()], "loops"),
    ("i,->i", [(3,), ()], "loops"),
])
def test_float_equations(eq, shapes, path):
    rng = np.random.default_rng(len(eq))
    check(eq, [_f(rng, *s) for s in shapes], path=path)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
                                       ("ii->i", [(3, 3)])])
def test_double(eq, shapes):
    rng = np.random.default_rng(7)
    check(eq, [_f(rng, *s, dt=np.float64) for s in shapes], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->i", [(4, 70)]),
                                       ("bii->b", [(2, 3, 3)]), ("i,j,k->ijk", [(2,), (3,), (4,)])])
def test_integers_wrap_like_numpy(dt, eq, shapes):
    rng = np.random.default_rng(11)
    info = np.iinfo(dt)
    arrays = [rng.integers(max(info.min, -120), min(info.max, 120), s, endpoint=True).astype(dt) for s in shapes]
    check(eq, arrays, path="loops")


@pytest.mark.parametrize("dt,rtol", [(np.dtype(np.float16), 2e-3), (BF16, 1e-2)])
@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(3, 2, 5), (3, 5, 4)]), ("ij->i", [(3, 40)]),
                                       ("ij->ji", [(3, 4)]), ("i,i", [(30,), (30,)])])
def test_half(dt, rtol, eq, shapes):
    rng = np.random.default_rng(5)
    check(eq, [_f(rng, *s).astype(dt) for s in shapes], rtol=rtol, atol=1e-2)


def test_symbolic_ellipsis_and_labels():
    rng = np.random.default_rng(2)
    a, b = _f(rng, 2, 3, 4, 5), _f(rng, 3, 5, 6)
    got = check("...ij,...jk->...ik", [a, b], shapes=[["B", "H", "M", 5], ["H", 5, "N"]], path="gemm")
    assert got.shape == (2, 3, 4, 6)
    # a symbolic size-1 broadcast, only known at run time
    check("...i,...i->...", [_f(rng, 4, 1, 3), _f(rng, 5, 3)], shapes=[["A", "B", 3], ["C", 3]], path="gemm")


def test_symbolic_label_mismatch_fails_at_run_time():
    x, y = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    compiled = onnxc.compile(_model("ij,ij->ij", [x, y], shapes=[["N", 3], ["M", 3]]))
    with pytest.raises(onnxc.OnnxcError, match="Einsum"):
        compiled.run({"x0": x, "x1": y})


def test_constant_inputs_fold():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = helper.make_graph([helper.make_node("Einsum", ["a"], ["y"], equation="ij->ji")], "t", [],
                          [helper.make_tensor_value_info("y", 0, None)],
                          initializer=[helper.make_tensor("a", 1, a.shape, a.reshape(-1).tolist())])
    compiled = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)]))
    assert np.array_equal(compiled.run({})["y"], a.T)


def test_opset_28():
    rng = np.random.default_rng(8)
    check("bHd,bKd->bHK", [_f(rng, 2, 3, 4), _f(rng, 2, 5, 4)], opset=28, path="gemm")


@pytest.mark.parametrize("eq,shapes,match", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "do not agree"),
    ("ij->ik", [(3, 4)], "does not occur"),
    ("ij,jk->ik", [(3, 4)], "input terms"),
    ("ijk->i", [(3, 4)], "does not match"),
    ("...ij->ij", [(2, 3, 4)], "needs '...'"),
    ("ij->ii", [(3, 3)], "repeats"),
    ("i1->i", [(3, 3)], "invalid character"),
    ("i->i->i", [(3,)], "more than one"),
])
def test_invalid_equations(eq, shapes, match):
    arrays = [np.ones(s, np.float32) for s in shapes]
    model = _model(eq, arrays if len(arrays) > 1 or eq != "ij,jk->ik" else arrays)
    with pytest.raises(onnxc.ShapeError, match=match):
        onnxc.compile(model)
