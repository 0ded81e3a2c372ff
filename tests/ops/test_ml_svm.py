"""ai.onnx.ml SVMClassifier and SVMRegressor on hand-built models, compared with onnxruntime (labels
exactly, scores to 1e-5) and with onnx.reference where the two agree (codegen/kernels/svm.py lists
where they do not)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc

ML = "ai.onnx.ml"
KERNELS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.3, 1.0, 3.0], "RBF": [0.5, 0.0, 0.0], "SIGMOID": [0.2, 0.1, 0.0]}


def svm_model(op: str, n_features, rows="N", dtype=np.float32, **attrs) -> onnx.ModelProto:
    label = TP.STRING if attrs.get("classlabels_strings") else TP.INT64
    outs = {"y": label, "z": TP.FLOAT} if op == "SVMClassifier" else {"y": TP.FLOAT}
    node = helper.make_node(op, ["x"], list(outs), domain=ML, **attrs)
    shape = [n_features] if rows is None else [rows, n_features]
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(
        np.dtype(dtype)), shape)], [helper.make_tensor_value_info(o, t, None) for o, t in outs.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> list:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def check(model: onnx.ModelProto, x: np.ndarray, reference: bool = True, threads: int = 1, score_cols=None) -> list:
    """onnxc against onnxruntime (and onnx.reference): labels equal, scores close; returns onnxc's outputs."""
    got = list(onnxc.compile(model, threads=threads).run({"x": x}).values())
    wants = [run_ort(model, x)] + ([ReferenceEvaluator(model).run(None, {"x": x})] if reference else [])
    for want in wants:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np.asarray(w)
            if w.dtype.kind in "OUS" or w.dtype == np.int64:
                assert g.tolist() == w.tolist(), (g, w)
                continue
            assert g.dtype == np.float32 and g.shape == w.shape, (g.dtype, g.shape, w.shape)
            cols = slice(None) if score_cols is None else score_cols
            np.testing.assert_allclose(g[..., cols], w[..., cols].astype(np.float32), rtol=1e-5, atol=1e-5)
    return got


def reference_agrees(attrs: dict) -> bool:
    """onnx.reference fails on string labels when rho has one value (it reads classlabels_ints), and its
    pairwise coupling for 3+ classes fills Q's off-diagonal rows with one dot product."""
    if attrs.get("classlabels_strings") and len(attrs["rho"]) == 1:
        return False
    return not (attrs.get("prob_a") and len(attrs["rho"]) > 1)


def svc_attrs(kernel: str, vpc: list[int], n_features: int, proba: bool, strings: bool, seed: int = 0) -> dict:
    rng = np.random.RandomState(seed)
    nc, nv = len(vpc), sum(vpc)
    pairs = nc * (nc - 1) // 2
    attrs = dict(kernel_type=kernel, kernel_params=KERNELS[kernel], vectors_per_class=vpc,
                 support_vectors=rng.randn(nv * n_features).round(3).tolist(),
                 coefficients=rng.uniform(-1, 1, (nc - 1) * nv).round(3).tolist(),
                 rho=rng.uniform(-0.3, 0.3, pairs).round(3).tolist())
    if strings:
        attrs["classlabels_strings"] = ["cat", "dög", "emu", "yak"][:nc]
    else:
        attrs["classlabels_ints"] = [3, -1, 7, 12][:nc]
    if proba:
        attrs["prob_a"] = rng.uniform(-4, -1, pairs).round(3).tolist()
        attrs["prob_b"] = rng.uniform(-0.2, 0.2, pairs).round(3).tolist()
    return attrs


def rows(n: int, f: int, seed: int = 1, dtype=np.float32) -> np.ndarray:
    return np.random.RandomState(seed).randn(n, f).astype(dtype)


# -- SVMClassifier with support vectors -------------------------------------------------------------

@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("vpc", [[3, 2], [2, 3, 2], [1, 2, 2, 3]], ids=["binary", "3class", "4class"])
@pytest.mark.parametrize("proba", [False, True], ids=["scores", "proba"])
def test_svc(kernel, vpc, proba):
    strings = kernel in ("POLY", "RBF")
    attrs = svc_attrs(kernel, vpc, 3, proba, strings)
    labels, _ = check(svm_model("SVMClassifier", 3, **attrs), rows(40, 3), reference=reference_agrees(attrs))
    assert len(set(labels.tolist())) > 1  # the data reaches more than one class


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")  # the reference's PROBIT
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("vpc,proba", [([3, 2], False), ([3, 2], True), ([2, 3, 2], False), ([2, 3, 2], True)])
def test_svc_post_transform(post, vpc, proba):
    attrs = svc_attrs("RBF", vpc, 3, proba, False)
    m = svm_model("SVMClassifier", 3, post_transform=post, **attrs)
    x = rows(30, 3)
    # binary scores without probabilities: onnxruntime's two columns differ from the reference's under
    # SOFTMAX/SOFTMAX_ZERO/PROBIT, and it leaves the second PROBIT column unwritten
    binary_raw = len(vpc) == 2 and not proba
    reference = reference_agrees(attrs) and not (binary_raw and post in ("SOFTMAX", "SOFTMAX_ZERO", "PROBIT"))
    _, z = check(m, x, reference=reference, score_cols=slice(0, 1) if binary_raw and post == "PROBIT" else None)
    if binary_raw and post == "PROBIT":
        assert (z[:, 1] == 0).all()


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_svc_input_types_round_to_float(dtype):
    attrs = svc_attrs("POLY", [2, 3, 2], 3, False, False)
    x = (rows(25, 3) * 3).astype(dtype)
    # the reference computes doubles in double and writes the scores of integer inputs as integers
    check(svm_model("SVMClassifier", 3, dtype=dtype, **attrs), x, reference=False)
    attrs = svc_attrs("POLY", [2, 3, 2], 3, True, False)
    check(svm_model("SVMClassifier", 3, dtype=dtype, **attrs), x, reference=False)


def test_svc_one_row_static_and_rank1():
    attrs = svc_attrs("RBF", [2, 3, 2], 4, True, True)
    x = rows(1, 4)
    check(svm_model("SVMClassifier", 4, rows=1, **attrs), x, reference=False)
    labels, z = onnxc.compile(svm_model("SVMClassifier", 4, rows=None, **attrs)).run({"x": x[0]}).values()
    want = run_ort(svm_model("SVMClassifier", 4, rows=None, **attrs), x[0])
    assert labels.tolist() == want[0].tolist() and z.shape == (1, 3)
    np.testing.assert_allclose(z, want[1], rtol=1e-5, atol=1e-5)


def test_svc_threads_and_empty_batch():
    """At threads=2 the rows (from 32) run on the runtime's pool with one scratch block per pool slot: against
    onnxruntime and bit for bit against the one-thread build, for several values of the symbolic N."""
    for kw in ({"kernel": "SIGMOID", "vpc": [4, 3, 5], "proba": True, "strings": False},
               {"kernel": "RBF", "vpc": [6, 2], "proba": False, "strings": True}):
        m = svm_model("SVMClassifier", 5, **svc_attrs(kw["kernel"], kw["vpc"], 5, kw["proba"], kw["strings"]))
        two, one = onnxc.compile(m, threads=2), onnxc.compile(m, threads=1)
        assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
        x = rows(500, 5)
        for n in (500, 32, 31, 1):
            got = check(m, x[:n], threads=2, reference=False)
            for g, w in zip(got, one.run({"x": x[:n]}).values()):
                assert g.tolist() == w.tolist()
        labels, z = two.run({"x": np.zeros((0, 5), np.float32)}).values()
        assert labels.shape == (0,) and z.shape[0] == 0
    rng = np.random.RandomState(9)
    r = svm_model("SVMRegressor", 5, kernel_type="POLY", kernel_params=KERNELS["POLY"], n_supports=7,
                  support_vectors=rng.randn(35).tolist(), coefficients=rng.uniform(-1, 1, 7).tolist(), rho=[0.1])
    x = rows(400, 5)
    np.testing.assert_array_equal(check(r, x, threads=2, reference=False)[0], onnxc.compile(r).run({"x": x})["y"])


def test_svc_vote_ties_pick_the_first_class():
    # zero coefficients: the decision values are rho, and (0,1) > 0, (0,2) <= 0, (1,2) > 0 give each
    # class one vote; the first class wins the tie
    attrs = dict(kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0], vectors_per_class=[1, 1, 1],
                 support_vectors=[0.0] * 6, coefficients=[0.0] * 6, rho=[1.0, -1.0, 1.0], classlabels_ints=[4, 5, 6])
    labels, _ = check(svm_model("SVMClassifier", 2, **attrs), rows(3, 2))
    assert labels.tolist() == [4, 4, 4]


# -- SVMClassifier, linear mode ---------------------------------------------------------------------

@pytest.mark.parametrize("coef", [[0.3, -0.2, -0.1, 0.4], [0.3, 0.2, 0.1, 0.4]], ids=["mixed", "positive"])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "PROBIT"])
def test_linear_binary(coef, post):
    m = svm_model("SVMClassifier", 2, kernel_params=[0.0, 0.0, 0.0], coefficients=coef, rho=[0.05],
                  classlabels_ints=[5, 7], post_transform=post)
    x = np.array([[1, 2], [-1, 0.5], [0.1, -0.2], [0, 0], [2, 1], [-2, -1]], np.float32)
    # the reference takes the argmax where onnxruntime's binary rule picks label 1
    labels, _ = check(m, x, reference=False)
    if coef[1] < 0:
        assert labels.tolist()[2:4] == [7, 7]  # top score 0.12 (class 0) > 0, and a tie at 0.05
    check(svm_model("SVMClassifier", 2, kernel_params=[0.0, 0.0, 0.0], coefficients=coef, rho=[0.05],
                    classlabels_ints=[5, 7], post_transform=post, prob_a=[-1.0], prob_b=[0.0]), x, reference=False)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "SOFTMAX_ZERO", "LOGISTIC"])
@pytest.mark.parametrize("nc", [1, 3])
def test_linear_multiclass(post, nc):
    rng = np.random.RandomState(3)
    m = svm_model("SVMClassifier", 4, kernel_type="RBF", kernel_params=[0.5, 0.0, 0.0],  # ignored: linear
                  coefficients=rng.randn(nc * 4).tolist(), rho=[0.2], post_transform=post,
                  classlabels_strings=["a", "b", "c"][:nc])
    check(m, rows(20, 4), reference=False)  # the reference fails on string labels here
    m = svm_model("SVMClassifier", 4, kernel_params=[0.0, 0.0, 0.0], coefficients=rng.randn(nc * 4).tolist(),
                  rho=[0.2], post_transform=post, classlabels_ints=[4, 6, 8][:nc])
    check(m, rows(20, 4), reference=False)  # with one rho the reference labels 3 classes 1 or 0


# -- SVMRegressor -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("one_class", [0, 1])
def test_regressor(kernel, one_class):
    rng = np.random.RandomState(5)
    m = svm_model("SVMRegressor", 3, kernel_type=kernel, kernel_params=KERNELS[kernel], n_supports=6,
                  support_vectors=rng.randn(18).tolist(), coefficients=rng.uniform(-1, 1, 6).tolist(), rho=[-0.2],
                  one_class=one_class)
    y = check(m, rows(40, 3))[0]
    assert y.shape == (40, 1)
    if one_class:
        assert set(y.ravel().tolist()) <= {-1.0, 1.0}


@pytest.mark.parametrize("one_class", [0, 1])
def test_regressor_linear_mode(one_class):
    m = svm_model("SVMRegressor", 4, kernel_params=[0.0, 0.0, 0.0], coefficients=[0.5, -1.0, 0.25, 2.0],
                  rho=[-0.3], one_class=one_class)
    check(m, rows(17, 4))
    check(svm_model("SVMRegressor", 4, rows=1, kernel_params=[0.0, 0.0, 0.0], coefficients=[0.5, -1.0, 0.25, 2.0],
                    rho=[-0.3], one_class=one_class), rows(1, 4))


def test_regressor_other_input_types_against_the_reference():
    # onnxruntime's SVMRegressor only takes float; onnxc rounds every input type to float (small integers
    # are exact, so the reference's double arithmetic agrees)
    rng = np.random.RandomState(6)
    attrs = dict(kernel_type="RBF", kernel_params=[0.1, 0.0, 0.0], n_supports=4, support_vectors=rng.randn(12).tolist(),
                 coefficients=rng.uniform(-1, 1, 4).tolist(), rho=[0.1])
    x = rows(9, 3) * 4
    want = run_ort(svm_model("SVMRegressor", 3, **attrs), np.round(x).astype(np.float32))[0]
    for dt in (np.float64, np.int64, np.int32):
        xi = np.round(x).astype(dt)
        got = onnxc.compile(svm_model("SVMRegressor", 3, dtype=dt, **attrs)).run({"x": xi})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        if dt == np.float64:  # the reference writes integer outputs for integer inputs
            ref = ReferenceEvaluator(svm_model("SVMRegressor", 3, dtype=dt, **attrs)).run(None, {"x": xi})[0]
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# -- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change,match", [
    ({"coefficients": [0.1] * 5}, "coefficients has 5 values, expected"),
    ({"rho": [0.1]}, "rho has 1 values, expected one per class pair"),
    ({"vectors_per_class": [2, 5]}, "vectors_per_class has 2 entries for 3 class labels"),
    ({"support_vectors": [0.1] * 20}, "support_vectors has 20 values"),
    ({"kernel_type": "CUBIC"}, "kernel_type is 'CUBIC'"),
    ({"post_transform": "SOFTPLUS"}, "post_transform is 'SOFTPLUS'"),
    ({"prob_a": [1.0, 2.0, 3.0]}, "prob_a .3 values. and prob_b"),
    ({"kernel_params": [1.0]}, "kernel_params must hold 3 values"),
    ({"classlabels_strings": ["a", "b", "c"]}, "exactly one of the attributes classlabels_ints"),
])
def test_invalid_attributes(change, match):
    attrs = svc_attrs("RBF", [2, 3, 2], 3, False, False)
    attrs.update(change)
    with pytest.raises(onnxc.ShapeError, match=match) as e:
        onnxc.compile(svm_model("SVMClassifier", 3, **attrs))
    assert "SVMClassifier" in str(e.value)


def test_invalid_regressor_attributes():
    with pytest.raises(onnxc.ShapeError, match="coefficients has 3 values, expected n_supports = 2"):
        onnxc.compile(svm_model("SVMRegressor", 2, n_supports=2, support_vectors=[0.0] * 4, coefficients=[1.0] * 3,
                                rho=[0.0]))


def test_feature_count_checked():
    attrs = svc_attrs("RBF", [2, 3, 2], 3, False, False)
    with pytest.raises(onnxc.ShapeError, match="input has 4 features, the model expects 3"):
        onnxc.compile(svm_model("SVMClassifier", 4, **attrs))
    m = onnxc.compile(svm_model("SVMClassifier", "F", **attrs))
    with pytest.raises(onnxc.OnnxcError, match="the input has 5 features, the model expects 3"):
        m.run({"x": rows(2, 5)})
    reg = onnxc.compile(svm_model("SVMRegressor", "F", coefficients=[1.0, 2.0], rho=[0.0]))
    with pytest.raises(onnxc.OnnxcError, match="SVMRegressor.*the input has 3 features, the model expects 2"):
        reg.run({"x": rows(2, 3)})
