"""ai.onnx.ml LinearRegressor and LinearClassifier (expanded into MatMul/Add/ArgMax/Gather and the post
transform), compared with onnxruntime, and with onnx.reference where the two agree (see the docstring
of passes/expansions/ml_linear.py for where they do not). Each model declares a symbolic batch
dimension and runs with 1 and 5 rows; non-float inputs are compared with onnxruntime on the same
values as float (its LinearRegressor has a float kernel only)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import ModelError, ShapeError, UnsupportedOpError
from onnxc.passes.pipeline import optimize
from tests.ops.util import reference

ML = "ai.onnx.ml"
POST = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
DTYPES = [np.float32, np.float64, np.int64, np.int32]
rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same numbers whatever ran before it on its worker (stable compile cache keys)."""
    global rng
    rng = np.random.default_rng(5)


def ml_model(op: str, x_dtype, x_shape: list, n_out: int = 1, name: str = "n", **attrs) -> onnx.ModelProto:
    """One ai.onnx.ml node reading ``x``; outputs are left untyped (onnxruntime infers them)."""
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, ["x"], outs, domain=ML, name=name, **attrs)
    x = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(x_dtype)), x_shape)
    g = helper.make_graph([node], "t", [x], [onnx.ValueInfoProto(name=o) for o in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "OUS":
        assert got.tolist() == want.astype(object).tolist(), (got, want)
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check(model: onnx.ModelProto, xs: list[np.ndarray], *, ort_model: onnx.ModelProto | None = None,
          with_reference: bool = False, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Compile once; for each input ``x`` compare every output with onnxruntime (run on ``ort_model``
    with x as float when given) and, if asked, with onnx.reference."""
    compiled = onnxc.compile(model)
    for x in xs:
        got = compiled.run({"x": x})
        feed = {"x": x.astype(np.float32)} if ort_model is not None else {"x": x}
        want = ort_run(ort_model or model, feed)
        for i, w in enumerate(want):
            assert_same(got[f"y{i}"], w, rtol, atol)
        if with_reference:
            for i, w in enumerate(reference(model, {"x": x})):
                assert_same(got[f"y{i}"], np.asarray(w).astype(np.float32) if w.dtype == np.float64 else w,
                            rtol, atol)


def rows(dt, *shape) -> np.ndarray:
    if np.dtype(dt).kind == "i":
        return rng.integers(-5, 6, shape).astype(dt)
    return (rng.standard_normal(shape) * 2).astype(dt)


def batches(dt, c: int) -> list[np.ndarray]:
    """A 5-row batch (its last row all zeros: ties, and 0/0 for SOFTMAX_ZERO avoided by intercepts) and one row."""
    x = rows(dt, 5, c)
    x[-1] = 0
    return [x, rows(dt, 1, c)]


def ops_after(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in optimize(load_model(model)).graph.nodes]


# -- LinearRegressor ----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor_input_types(dt, targets):
    c = 4
    attrs = dict(coefficients=rows(np.float32, targets * c).tolist(), intercepts=rows(np.float32, targets).tolist(),
                 targets=targets)
    m = ml_model("LinearRegressor", dt, ["N", c], **attrs)
    ref_m = ml_model("LinearRegressor", np.float32, ["N", c], **attrs)
    check(m, batches(dt, c), ort_model=ref_m if dt != np.float32 else None, with_reference=dt == np.float32)


@pytest.mark.parametrize("post", POST)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor_post_transforms(post, targets):
    c = 3
    coef = (rows(np.float32, targets * c) * 0.2).tolist()
    m = ml_model("LinearRegressor", np.float32, ["N", c], coefficients=coef,
                 intercepts=[0.5] * targets, targets=targets, post_transform=post)
    xs = [rows(np.float32, 5, c) * 0.5, rows(np.float32, 1, c) * 0.5]
    check(m, xs, atol=5e-5 if post == "PROBIT" else 1e-5)


def test_linear_regressor_1d_input_and_no_intercepts():
    m = ml_model("LinearRegressor", np.float32, [3], coefficients=[1.0, -2.0, 0.5, 3.0, 0.0, 1.0], targets=2)
    check(m, [np.array([1.0, 2.0, -4.0], np.float32)])
    assert onnxc.compile(m).run({"x": np.array([1.0, 2.0, -4.0], np.float32)})["y0"].shape == (1, 2)


# -- LinearClassifier ---------------------------------------------------------------------------

LABELS = {"ints": {"classlabels_ints": [10, -3, 7, 2]}, "strings": {"classlabels_strings": ["cat", "dog", "é", ""]}}


def _classifier(dt, c: int, k: int, post: str, labels: dict, **extra) -> onnx.ModelProto:
    labels = {a: v[:max(k, 2)] for a, v in labels.items()}
    return ml_model("LinearClassifier", dt, ["N", c], n_out=2, coefficients=(rows(np.float32, k * c) * 0.5).tolist(),
                    intercepts=(rows(np.float32, k) * 0.1 + 0.05).tolist(), post_transform=post, **labels, **extra)


@pytest.mark.parametrize("post", POST)
@pytest.mark.parametrize("labels", ["ints", "strings"])
@pytest.mark.parametrize("k", [2, 4])
def test_linear_classifier_multiclass(post, labels, k):
    m = _classifier(np.float32, 3, k, post, LABELS[labels], multi_class=1)
    check(m, batches(np.float32, 3), with_reference=post in ("NONE", "LOGISTIC", "SOFTMAX"),
          atol=5e-5 if post == "PROBIT" else 1e-5)  # PROBIT: onnxruntime's float rounding near p = 0.5


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.int32])
def test_linear_classifier_input_types(dt):
    m = _classifier(dt, 4, 3, "SOFTMAX", LABELS["ints"])
    check(m, batches(dt, 4), atol=1e-5)


def test_linear_classifier_ties_pick_the_first_class():
    m = ml_model("LinearClassifier", np.float32, ["N", 2], n_out=2, coefficients=[1.0, 0.0, 1.0, 0.0, 0.0, 1.0],
                 intercepts=[0.0, 0.0, 0.0], classlabels_strings=["a", "b", "c"])
    x = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 2.0]], np.float32)
    check(m, [x], with_reference=True)
    assert onnxc.compile(m).run({"x": x})["y0"].tolist() == ["a", "a", "a", "c"]


@pytest.mark.parametrize("post,labels", [(p, lab) for p in POST for lab in ("ints", "strings", "none")
                                          if p != "PROBIT" or lab == "none"])  # PROBIT + 2 labels: refused
def test_linear_classifier_binary(post, labels):
    """One coefficient row: label from the sign; with two labels Z is [1 - s, s] (s: raw, or sigmoid
    for LOGISTIC), without labels Z is the raw score (PROBIT applied) and labels are 0/1."""
    lab = {} if labels == "none" else LABELS[labels]
    m = _classifier(np.float32, 3, 1, post, {a: v[:2] for a, v in lab.items()})
    xs = batches(np.float32, 3)
    if post == "PROBIT":
        xs = [np.abs(x) * 0.1 for x in xs]  # scores in (0, 1)
    check(m, xs, atol=5e-5)


def test_linear_classifier_1d_input():
    m = ml_model("LinearClassifier", np.float32, [3], n_out=2, coefficients=[1.0, 0.0, -1.0, 0.5, 0.5, 0.5],
                 intercepts=[0.0, 0.1], classlabels_ints=[4, 5], post_transform="LOGISTIC")
    check(m, [np.array([0.5, -1.0, 2.0], np.float32)])


def test_linear_classifier_label_output_only():
    """Only Y is a graph output: Z's transform is not built (a binary PROBIT would be refused)."""
    node = helper.make_node("LinearClassifier", ["x"], ["y", "z"], domain=ML, coefficients=[1.0, -1.0],
                            intercepts=[0.0], classlabels_strings=["no", "yes"], post_transform="PROBIT")
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2])],
                          [onnx.ValueInfoProto(name="y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    x = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    assert onnxc.compile(m).run({"x": x})["y"].tolist() == ["yes", "no"]


def test_linear_ops_expand_into_primitives():
    m = _classifier(np.float32, 3, 4, "SOFTMAX", LABELS["strings"])
    ops = ops_after(m)
    assert "LinearClassifier" not in ops and "ArgMax" in ops and "Gather" in ops, ops
    r = ml_model("LinearRegressor", np.float32, ["N", 3], coefficients=[1.0, 2.0, 3.0], intercepts=[1.0])
    assert "LinearRegressor" not in ops_after(r)


def test_scaler_then_linear_classifier():
    """The pipeline skl2onnx writes for StandardScaler + LogisticRegression (no ZipMap)."""
    c, k = 4, 3
    scaler = helper.make_node("Scaler", ["x"], ["s"], domain=ML, offset=rows(np.float32, c).tolist(),
                              scale=(np.abs(rows(np.float32, c)) + 0.5).tolist())
    clf = helper.make_node("LinearClassifier", ["s"], ["label", "scores"], domain=ML,
                           coefficients=rows(np.float32, k * c).tolist(), intercepts=rows(np.float32, k).tolist(),
                           classlabels_ints=[0, 1, 2], multi_class=1, post_transform="SOFTMAX")
    norm = helper.make_node("Normalizer", ["scores"], ["probs"], domain=ML, norm="L1")
    g = helper.make_graph([scaler, clf, norm], "t", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                                   ["N", c])],
                          [onnx.ValueInfoProto(name="label"), onnx.ValueInfoProto(name="probs")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    compiled = onnxc.compile(m)
    for x in batches(np.float32, c):
        got = compiled.run({"x": x})
        want = ort_run(m, {"x": x})
        assert_same(got["label"], want[0])
        assert_same(got["probs"], want[1], atol=1e-6)


# -- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,shape,attrs,err,match", [
    ("LinearClassifier", ["N", 3], dict(coefficients=[1.0] * 5, intercepts=[0.0], classlabels_ints=[0, 1]),
     ShapeError, "coefficients has 5 values, not a multiple of the 3 features"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 4, intercepts=[0.0] * 3, classlabels_ints=[0, 1]),
     ShapeError, "intercepts has 3 values, expected 2"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 4, classlabels_ints=[0, 1], post_transform="SIGMOID"),
     ShapeError, "post_transform: unknown value 'SIGMOID'"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 4, classlabels_ints=[0, 1], classlabels_strings=["a", "b"]),
     ShapeError, "only one of the attributes classlabels_ints and classlabels_strings"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 2, classlabels_strings=["a", "b", "c"]),
     ShapeError, "classlabels_strings has 3 labels; one coefficient row"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 6, classlabels_ints=[0, 1]),
     ShapeError, "classlabels_ints has 2 labels but coefficients define 3 classes"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 6),
     ShapeError, "classlabels_ints or classlabels_strings is required"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 2, classlabels_ints=[0, 1], post_transform="PROBIT"),
     UnsupportedOpError, "PROBIT with one coefficient row and two class labels"),
    ("LinearClassifier", ["N", 2], dict(classlabels_ints=[0, 1]), ModelError,
     "required attribute 'coefficients' is missing"),  # the schema check (frontend/op_schema.py)
    ("LinearClassifier", ["N", 2, 2], dict(coefficients=[1.0] * 2), ShapeError, r"\[N, C\] or \[C\], got rank 3"),
    ("LinearClassifier", ["N", "C"], dict(coefficients=[1.0] * 2), UnsupportedOpError, "feature count of X"),
    ("LinearRegressor", ["N", 3], dict(coefficients=[1.0] * 4, targets=2), ShapeError,
     "coefficients has 4 values, expected 2 targets x 3 features of X = 6"),
    ("LinearRegressor", ["N", 2], dict(coefficients=[1.0] * 4, intercepts=[1.0], targets=2), ShapeError,
     "intercepts has 1 values, expected 2"),
    ("LinearRegressor", ["N", 2], dict(coefficients=[1.0] * 2, targets=0), ShapeError, "targets must be >= 1"),
    ("LinearRegressor", ["N", 2], dict(coefficients=[1.0] * 2, post_transform="softmax"), ShapeError,
     "post_transform: unknown value 'softmax'"),
])
def test_linear_errors_name_node_and_attribute(op, shape, attrs, err, match):
    m = ml_model(op, np.float32, shape, n_out=2 if op == "LinearClassifier" else 1, name="bad_node", **attrs)
    with pytest.raises(err, match=match) as e:
        onnxc.compile(m)
    assert f"{op} 'bad_node'" in str(e.value)
