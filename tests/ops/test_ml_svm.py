"""ai.onnx.ml SVMClassifier and SVMRegressor on hand-built models, compared with onnxruntime (labels
exactly, scores to 1e-5) and with onnx.reference where the two agree (codegen/kernels/svm.py lists
where they do not). The attribute grid sits side by side in a few models (tests/ops/test_ml_linear.py
``SideBySide``), each compiled once."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from tests.ops.test_ml_linear import SideBySide, assert_same

ML = "ai.onnx.ml"
KERNELS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.3, 1.0, 3.0], "RBF": [0.5, 0.0, 0.0], "SIGMOID": [0.2, 0.1, 0.0]}
POST = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
LINEAR = [0.0, 0.0, 0.0]  # kernel_params: onnxruntime requires the attribute even in linear mode


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


VPC = {"binary": [3, 2], "3class": [2, 3, 2], "4class": [1, 2, 2, 3]}


# -- SVMClassifier with support vectors -------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")  # the reference's PROBIT
def test_svc_grid():
    """Kernels x 2/3/4 classes x scores/probabilities x int/string labels, post transforms, vote ties."""
    s = SideBySide()
    x = s.input("x", TP.FLOAT, ["N", 3])
    labels = []
    for kernel in KERNELS:
        for vpc in VPC.values():
            for proba in (False, True):
                attrs = svc_attrs(kernel, vpc, 3, proba, kernel in ("POLY", "RBF"))
                labels.append(s.add("SVMClassifier", [x], 2, reference=reference_agrees(attrs), atol=1e-5, **attrs)[0])
    for post in POST:
        for vpc, proba in (([3, 2], False), ([3, 2], True), ([2, 3, 2], False), ([2, 3, 2], True)):
            attrs = svc_attrs("RBF", vpc, 3, proba, False)
            # binary scores without probabilities: onnxruntime's two columns differ from the reference's
            # under SOFTMAX/SOFTMAX_ZERO/PROBIT, and it leaves the second PROBIT column unwritten (onnxc: 0)
            binary_raw = len(vpc) == 2 and not proba
            _, z = s.add("SVMClassifier", [x], 2, post_transform=post, atol=5e-5 if post == "PROBIT" else 1e-5,
                         cols=slice(0, 1) if binary_raw and post == "PROBIT" else slice(None),
                         reference=reference_agrees(attrs) and not (binary_raw and post in POST[2:]), **attrs)
            if binary_raw and post == "PROBIT":
                probit_z = z
    # zero coefficients: the decision values are rho, and (0,1) > 0, (0,2) <= 0, (1,2) > 0 give each
    # class one vote; the first class wins the tie
    x2 = s.input("x2", TP.FLOAT, ["M", 2])
    tie, _ = s.add("SVMClassifier", [x2], 2, kernel_type="LINEAR", kernel_params=LINEAR, vectors_per_class=[1, 1, 1],
                   support_vectors=[0.0] * 6, coefficients=[0.0] * 6, rho=[1.0, -1.0, 1.0], classlabels_ints=[4, 5, 6],
                   reference=True)
    feeds = [{"x": rows(40, 3), "x2": rows(3, 2)}, {"x": rows(1, 3, seed=2), "x2": rows(1, 2)}]
    compiled = s.check(feeds)
    got = compiled.run(feeds[0])
    assert all(len(set(got[y].tolist())) > 1 for y in labels)  # the data reaches more than one class
    assert (got[probit_z][:, 1] == 0).all()
    assert got[tie].tolist() == [4, 4, 4]


def test_svc_input_types_ranks_and_linear_mode():
    """Every input type (rounded to float), a static one-row input and a 1-D one, and the linear mode
    (no support vectors): binary with onnxruntime's label rule (mixed or positive weights, with and
    without prob_a), 1 and 3 classes, int and string labels, every post transform."""
    s = SideBySide()
    for dt in (np.float64, np.int64, np.int32):
        x = s.input(f"x_{np.dtype(dt).name}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), ["N", 3])
        for proba in (False, True):  # the reference computes doubles in double: onnxruntime only
            s.add("SVMClassifier", [x], 2, atol=1e-5, **svc_attrs("POLY", [2, 3, 2], 3, proba, False))
    one, flat = s.input("one", TP.FLOAT, [1, 4]), s.input("flat", TP.FLOAT, [4])
    for inp in (one, flat):
        s.add("SVMClassifier", [inp], 2, atol=1e-5, **svc_attrs("RBF", [2, 3, 2], 4, True, True))
    # a negative gamma (exp(+0.05 d)): the literal must not become "--0.05f"
    s.add("SVMClassifier", [one], 2, atol=1e-5, **{**svc_attrs("RBF", [2, 3, 2], 4, False, False, seed=5),
                                                    "kernel_params": [-0.05, 0.0, 0.0]})
    x2 = s.input("x2", TP.FLOAT, ["M", 2])
    for coef in ([0.3, -0.2, -0.1, 0.4], [0.3, 0.2, 0.1, 0.4]):
        for post in ("NONE", "LOGISTIC", "SOFTMAX", "PROBIT"):
            for proba in ({}, {"prob_a": [-1.0], "prob_b": [0.0]}):
                # the reference takes the argmax where onnxruntime's binary rule picks label 1
                y, _ = s.add("SVMClassifier", [x2], 2, kernel_params=LINEAR, coefficients=coef, rho=[0.05],
                             classlabels_ints=[5, 7], post_transform=post, atol=1e-5, **proba)
                if coef[1] < 0 and post == "NONE" and not proba:
                    mixed = y
    x4 = s.input("x4", TP.FLOAT, ["K", 4])
    rng = np.random.RandomState(3)
    for post in ("NONE", "SOFTMAX", "SOFTMAX_ZERO", "LOGISTIC"):
        for nc in (1, 3):  # the reference fails on string labels and labels 3 classes 1 or 0 with one rho
            s.add("SVMClassifier", [x4], 2, kernel_type="RBF", kernel_params=[0.5, 0.0, 0.0],  # ignored: linear
                  coefficients=rng.randn(nc * 4).tolist(), rho=[0.2], post_transform=post,
                  classlabels_strings=["a", "b", "c"][:nc], atol=1e-5)
            s.add("SVMClassifier", [x4], 2, kernel_params=LINEAR, coefficients=rng.randn(nc * 4).tolist(), rho=[0.2],
                  post_transform=post, classlabels_ints=[4, 6, 8][:nc], atol=1e-5)
    x2v = np.array([[1, 2], [-1, 0.5], [0.1, -0.2], [0, 0], [2, 1], [-2, -1]], np.float32)
    feeds = []
    for n in (25, 1):
        xi = rows(n, 3) * 3
        feeds.append({**{f"x_{np.dtype(dt).name}": xi.astype(dt) for dt in (np.float64, np.int64, np.int32)},
                      "one": rows(1, 4), "flat": rows(1, 4)[0], "x2": x2v[:max(n // 4, 1)], "x4": rows(n, 4)})
    compiled = s.check(feeds)
    # mixed weights: top score 0.12 (class 0) > 0 and a tie at 0.05 both pick label 1
    assert compiled.run(feeds[0])[mixed].tolist()[2:4] == [7, 7]


def test_svc_threads_and_empty_batch():
    """At threads=2 the rows (from 32) run on the runtime's pool with one scratch block per pool slot: against
    onnxruntime and bit for bit against the one-thread build, for several values of the symbolic N."""
    s = SideBySide()
    x = s.input("x", TP.FLOAT, ["N", 5])
    s.add("SVMClassifier", [x], 2, atol=1e-5, **svc_attrs("SIGMOID", [4, 3, 5], 5, True, False))
    s.add("SVMClassifier", [x], 2, atol=1e-5, **svc_attrs("RBF", [6, 2], 5, False, True))
    rng = np.random.RandomState(9)
    s.add("SVMRegressor", [x], kernel_type="POLY", kernel_params=KERNELS["POLY"], n_supports=7,
          support_vectors=rng.randn(35).tolist(), coefficients=rng.uniform(-1, 1, 7).tolist(), rho=[0.1], atol=1e-5)
    xv = rows(500, 5)
    two = s.check([{"x": xv[:n]} for n in (500, 32, 31, 1)], threads=2)
    one = onnxc.compile(s.model(s.nodes), threads=1)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    for n in (500, 32, 31, 1):
        for (name, g), w in zip(two.run({"x": xv[:n]}).items(), one.run({"x": xv[:n]}).values()):
            assert g.tolist() == w.tolist(), name
    for out in two.run({"x": np.zeros((0, 5), np.float32)}).values():
        assert out.shape[0] == 0


# -- SVMRegressor -----------------------------------------------------------------------------------

def test_regressor_grid():
    """Kernels x one_class, the linear mode on [N, F] and a static [1, F], and the other input types
    (onnxruntime's SVMRegressor only takes float: its twin reads the same values as float; the reference
    agrees for double)."""
    s = SideBySide()
    x = s.input("x", TP.FLOAT, ["N", 3])
    rng = np.random.RandomState(5)
    one_class_outs = []
    for kernel in KERNELS:
        for one_class in (0, 1):
            (y,) = s.add("SVMRegressor", [x], kernel_type=kernel, kernel_params=KERNELS[kernel], n_supports=6,
                         support_vectors=rng.randn(18).tolist(), coefficients=rng.uniform(-1, 1, 6).tolist(),
                         rho=[-0.2], one_class=one_class, reference=True, atol=1e-5)
            one_class_outs += [y] * one_class
    x4, one = s.input("x4", TP.FLOAT, ["M", 4]), s.input("one", TP.FLOAT, [1, 4])
    for inp in (x4, one):
        for one_class in (0, 1):
            (y,) = s.add("SVMRegressor", [inp], kernel_params=LINEAR, coefficients=[0.5, -1.0, 0.25, 2.0],
                         rho=[-0.3], one_class=one_class, reference=True)
            one_class_outs += [y] * one_class
    attrs = dict(kernel_type="RBF", kernel_params=[0.1, 0.0, 0.0], n_supports=4, support_vectors=rng.randn(12).tolist(),
                 coefficients=rng.uniform(-1, 1, 4).tolist(), rho=[0.1])
    for dt in (np.float64, np.int64, np.int32):
        xt = s.input(f"x_{np.dtype(dt).name}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), ["N", 3])
        s.add("SVMRegressor", [xt], twin_ins=["x_int"], reference=dt == np.float64, atol=1e-5, **attrs)
    s.input("x_int", TP.FLOAT, ["N", 3])
    feeds = []
    for n in (40, 1):
        xi = np.round(rows(n, 3) * 4)
        feeds.append({"x": rows(n, 3), "x4": rows(n + 2, 4), "one": rows(1, 4), "x_int": xi.astype(np.float32),
                      **{f"x_{np.dtype(dt).name}": xi.astype(dt) for dt in (np.float64, np.int64, np.int32)}})
    got = s.run(s.check(feeds), feeds[0])
    assert all(y.shape[1] == 1 for y in got.values())
    for name in one_class_outs:
        assert set(got[name].ravel().tolist()) <= {-1.0, 1.0}, name


# -- errors -----------------------------------------------------------------------------------------

def svm_model(op: str, n_features, **attrs) -> onnx.ModelProto:
    outs = ["y", "z"] if op == "SVMClassifier" else ["y"]
    node = helper.make_node(op, ["x"], outs, domain=ML, **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TP.FLOAT, ["N", n_features])],
                          [onnx.ValueInfoProto(name=o) for o in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


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
    s = SideBySide()
    x, f = s.input("x", TP.FLOAT, ["N", "F"]), s.input("f", TP.FLOAT, ["N", "G"])
    s.add("SVMClassifier", [x], 2, **attrs)
    s.add("SVMRegressor", [f], coefficients=[1.0, 2.0], rho=[0.0])
    m = onnxc.compile(s.model(s.nodes))
    assert_same(m.run({"x": rows(2, 3), "f": rows(2, 2)})["n1_SVMRegressor_y0"].shape, np.array([2, 1]), "shape")
    with pytest.raises(onnxc.OnnxcError, match="SVMClassifier.*the input has 5 features, the model expects 3"):
        m.run({"x": rows(2, 5), "f": rows(2, 2)})
    with pytest.raises(onnxc.OnnxcError, match="SVMRegressor.*the input has 3 features, the model expects 2"):
        m.run({"x": rows(2, 3), "f": rows(2, 3)})
