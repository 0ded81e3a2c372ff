"""ai.onnx.ml Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer and CategoryMapper (expanded
into primitive ops and LabelEncoder), compared with onnxruntime, and with onnx.reference where the two
agree (see the docstring of passes/expansions/ml_preprocess.py for where they do not). The attribute
grid sits side by side in a few models (tests/ops/test_ml_linear.py ``SideBySide``) with a symbolic
batch dimension, run with several rows and with one; where onnxruntime has no kernel for an input
type, its twin node reads the same values in a type it takes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import RuntimeFailure, ShapeError, UnsupportedOpError
from onnxc.passes.pipeline import optimize
from tests.ops.test_ml_linear import SideBySide, assert_same

ML = "ai.onnx.ml"
NUMERIC = [np.float32, np.float64, np.int64, np.int32]
X3 = np.array([[1.5, -2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, -4.0, 0.0], [2.0, 7.0, -0.5], [0.25, 0.0, 5.0],
               [-1.0, -4.0, -2.0]])  # row 1 all zeros (copied), row 2 a zero maximum, row 5 a negative one
XN = np.array([[1.0, np.nan, 3.0], [0.0, 0.0, np.nan], [np.nan, 2.0, 0.0]], np.float32)
# categories as floats: truncated, repeated category 1 keeps its last position, NaN and 1e30 unknown
XO = {"f": np.array([[1.7, -1.5], [2.0, 5.0], [-1.0, 1.0], [np.nan, 1e30]]),
      "i": np.array([[1, -1], [2, 5], [-1, 1], [0, 3]])}


def elem(dt) -> int:
    return TP.STRING if dt is object else helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def name(dt) -> str:
    return "str" if dt is object else np.dtype(dt).name


def typed(x: np.ndarray, dt) -> np.ndarray:
    return (np.trunc(x * 2) if np.dtype(dt).kind == "i" else x).astype(dt)


def strs(*items) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


def test_preprocess_grid():
    """Scaler, Normalizer, OneHotEncoder and FeatureVectorizer over every numeric input type, Imputer,
    string categories and CategoryMapper, in one model."""
    s = SideBySide()
    for dt in NUMERIC:
        x = s.input(f"x_{name(dt)}", elem(dt), ["N", 3])
        f32 = dt == np.float32
        s.add("Scaler", [x], offset=[0.5, -1.0, 2.0], scale=[2.0, 0.25, -1.5], reference=f32)
        s.add("Scaler", [x], offset=[1.0], scale=[3.0], reference=f32)
        # onnxc extensions onnxruntime refuses: offset omitted (0), lists of different lengths
        s.add("Scaler", [x], scale=[0.5], twin_attrs={"offset": [0.0]})
        s.add("Scaler", [x], offset=[1.0, 2.0, 3.0], scale=[2.0], twin_attrs={"scale": [2.0] * 3})
        for norm in ("MAX", "L1", "L2"):
            s.add("Normalizer", [x], norm=norm, rtol=1e-5, reference=f32 and norm != "MAX")
        for dims in ([3, 1, 2], [2, 3, 1], [1, 1, 4]):
            s.add("FeatureVectorizer", [x, x, x], inputdimensions=dims, reference=f32)
        xo = s.input(f"xo_{name(dt)}", elem(dt), ["M", 2])
        twin = [s.input("xo_int64", TP.INT64, ["M", 2])] if dt == np.int32 else None  # no int32 kernel
        s.add("OneHotEncoder", [xo], twin_ins=twin, cats_int64s=[1, 2, -1, 1])
    xn = s.input("xn", TP.FLOAT, ["K", 3])
    for replaced in (float("nan"), 0.0):
        for values in ([7.0, 8.0, 9.0], [-1.0]):
            s.add("Imputer", [xn], imputed_value_floats=values, replaced_value_float=replaced, reference=True)
    xi = s.input("xi", TP.INT64, ["K", 2])
    s.add("Imputer", [xi], imputed_value_int64s=[7, 8], replaced_value_int64=1, reference=True)
    xs = s.input("xs", TP.STRING, ["K", 2])
    s.add("OneHotEncoder", [xs], cats_strings=["c", "b", "a", "é"], reference=True)
    s.add("CategoryMapper", [xs], cats_strings=["a", "b", "a", "é"], cats_int64s=[1, 2, 3, 4], default_int64=-5)
    xc = s.input("xc", TP.INT64, ["K"])
    for default in ({"default_string": "?"}, {}):  # a repeated category keeps its last value
        s.add("CategoryMapper", [xc], cats_strings=["a", "b", "c"], cats_int64s=[1, 2, 1], **default)
    feeds = []
    for n, k in ((6, 3), (1, 1)):
        f = {f"x_{name(dt)}": typed(X3[:n], dt) for dt in NUMERIC}
        f.update({f"xo_{name(dt)}": XO[np.dtype(dt).kind].astype(dt)[:n] for dt in NUMERIC})
        f.update(xn=XN[:k], xi=np.array([[1, 2], [3, 1], [1, 1]])[:k],
                 xs=np.array([["a", "b"], ["zz", "é"], ["c", ""]], dtype=object)[:k], xc=np.array([1, 5, 2, -1])[:k])
        feeds.append(f)
    s.check(feeds)


def test_preprocess_other_ranks_types_and_pipelines():
    """1-D and rank-3 inputs, a symbolic feature count, FeatureVectorizer over mixed types, Imputer on
    int32 and double (no onnxruntime kernel: compared with int64 and stated values), and the
    Imputer -> Scaler -> Normalizer and OneHotEncoder -> FeatureVectorizer pipelines."""
    s = SideBySide()
    v3 = s.input("v3", TP.FLOAT, [3])
    s.add("Scaler", [v3], offset=[1.0, 2.0, 3.0], scale=[1.0, 2.0, 3.0], reference=True)
    s.add("Normalizer", [v3], norm="L2")
    r3 = s.input("r3", TP.FLOAT, ["N", 2, 2])
    s.add("Scaler", [r3], offset=[1.0], scale=[-2.0], reference=True)
    s.add("FeatureVectorizer", [r3], inputdimensions=[6])
    i3 = s.input("i3", TP.INT64, ["N", 2, 2])
    s.add("OneHotEncoder", [i3], cats_int64s=[3, 4])
    i1 = s.input("i1", TP.INT64, ["M"])
    s.add("OneHotEncoder", [i1], cats_int64s=[3, 4], reference=True)
    a1, b1 = s.input("a1", TP.INT32, [3]), s.input("b1", TP.FLOAT, [1])
    s.add("FeatureVectorizer", [a1, b1], twin_ins=[s.input("a1f", TP.FLOAT, [3]), b1], inputdimensions=[3, 1])
    ak, bk = s.input("ak", TP.DOUBLE, ["P", "K"]), s.input("bk", TP.INT64, ["P", 2])
    s.add("FeatureVectorizer", [ak, bk], twin_ins=[s.input("akf", TP.FLOAT, ["P", "K"]),
                                                   s.input("bkf", TP.FLOAT, ["P", 2])], inputdimensions=[3, 2])
    xn = s.input("xn", TP.FLOAT, ["N", 3])
    imputed = s.add("Imputer", [xn], imputed_value_floats=[1.0, 2.0, 3.0], replaced_value_float=float("nan"))
    scaled = s.add("Scaler", imputed, offset=[0.5, 1.0, -1.0], scale=[2.0, 1.0, 0.5])
    s.add("Normalizer", scaled, norm="L2", rtol=1e-5)
    (i32_out,) = s.add("Imputer", [s.input("i32", TP.INT32, ["N", 2])], imputed_value_int64s=[7, 8],
                       replaced_value_int64=1, ort=False)  # onnxruntime: int64 only
    (dbl_out,) = s.add("Imputer", [s.input("xd", TP.DOUBLE, ["N", 3])], imputed_value_floats=[0.5],
                       replaced_value_float=float("nan"), reference=True, ort=False)  # onnxruntime: float only
    cats, nums = s.input("cats", TP.STRING, ["N", 1]), s.input("nums", TP.FLOAT, ["N", 2])
    hot = s.add("OneHotEncoder", [cats], cats_strings=["x", "y", "z"])
    s.add("FeatureVectorizer", [s.add("Scaler", [nums], offset=[1.0, 2.0], scale=[0.5, 0.25])[0], hot[0]],
          inputdimensions=[2, 3])
    feeds = []
    for n in (3, 1):
        ak = np.arange(n * 2 * (n + 1), dtype=np.float64).reshape(2, -1)[:, :n + 1] + 0.5  # K = n + 1
        bk = np.array([[1, 2], [3, 4]])
        a1 = np.array([1, 2, 3], np.int32)
        feeds.append(dict(v3=np.array([3.0, -4.0, 0.0], np.float32),
                          r3=np.arange(4 * n, dtype=np.float32).reshape(-1, 2, 2), i3=np.array([[[4, 3], [0, 4]]] * n),
                          i1=np.array([4, 3, 0]), a1=a1, a1f=a1.astype(np.float32), b1=np.array([9.0], np.float32),
                          ak=ak, akf=ak.astype(np.float32), bk=bk, bkf=bk.astype(np.float32), xn=XN[:n],
                          i32=np.array([[1, 2], [3, 1], [1, 1]], np.int32)[:n], xd=XN[:n].astype(np.float64),
                          cats=np.array([["y"], ["x"], ["w"]], dtype=object)[:n],
                          nums=np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)[:n]))
    compiled = s.check(feeds)
    for f in feeds:
        got = s.run(compiled, f)
        assert_same(got[i32_out], np.where(f["i32"] == 1, np.array([7, 8], np.int32), f["i32"]), "int32 Imputer")
        assert_same(got[dbl_out], np.where(np.isnan(f["xd"]), 0.5, f["xd"]), "double Imputer")


def test_one_hot_encoder_zeros_0_fails_at_run_time_on_unknown_category():
    s = SideBySide()
    xs, xf = s.input("xs", TP.STRING, ["N", 2]), s.input("xf", TP.FLOAT, ["M"])
    s.add("OneHotEncoder", [xs], cats_strings=["a", "b"], zeros=0)
    s.add("OneHotEncoder", [xf], cats_int64s=[1, 2], zeros=0)
    good = {"xs": np.array([["a", "b"], ["b", "b"]], dtype=object), "xf": np.array([2.5, 1.0], np.float32)}
    compiled = s.check([good])
    with pytest.raises(RuntimeFailure, match="n0_OneHotEncoder/unknown_category.*index -1 is out of range"):
        compiled.run({**good, "xs": np.array([["a", "b"], ["c", "b"]], dtype=object)})
    for bad in (3.0, np.nan):  # NaN is an unknown category too (onnxruntime casts it to INT64_MIN)
        with pytest.raises(RuntimeFailure, match="n1_OneHotEncoder/unknown_category.*index -1"):
            compiled.run({**good, "xf": np.array([bad], np.float32)})


def test_preprocess_ops_expand_into_primitives():
    s = SideBySide()
    x, i = s.input("x", TP.FLOAT, ["N", 2]), s.input("i", TP.INT64, ["N", 2])
    for op, inp, attrs in [("Scaler", x, dict(scale=[2.0])), ("Normalizer", x, {}),
                           ("Imputer", x, dict(imputed_value_floats=[0.0])), ("OneHotEncoder", i, dict(cats_int64s=[1, 2])),
                           ("FeatureVectorizer", x, dict(inputdimensions=[2]))]:
        s.add(op, [inp], **attrs)
    ops = [n.op_type for n in optimize(load_model(s.model(s.nodes))).graph.nodes]
    assert not {"Scaler", "Normalizer", "Imputer", "OneHotEncoder", "FeatureVectorizer"} & set(ops), ops
    m = SideBySide()
    m.add("CategoryMapper", [m.input("c", TP.STRING, ["N"])], cats_strings=["a"], cats_int64s=[1])
    assert [n.op_type for n in optimize(load_model(m.model(m.nodes))).graph.nodes] == ["LabelEncoder"]


# -- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,dt,shape,attrs,err,match", [
    ("Scaler", np.float32, ["N", 3], dict(scale=[1.0, 2.0]), ShapeError,
     "attribute scale has 2 values; expected 1 or the 3 features"),
    ("Scaler", np.float32, ["N", 3], dict(scale=[1.0], offset=[1.0, 2.0, 3.0, 4.0]), ShapeError,
     "attribute offset has 4 values"),
    ("Scaler", np.float32, ["N", 2, 2], dict(scale=[1.0, 2.0]), UnsupportedOpError, "rank 3 are not supported"),
    ("Scaler", np.float32, ["N", "C"], dict(scale=[1.0, 2.0]), UnsupportedOpError, "must be static"),
    ("Scaler", np.float32, [], dict(scale=[1.0]), ShapeError, "at least one dimension"),
    ("Normalizer", np.float32, ["N", 3], dict(norm="L3"), ShapeError, "norm: unknown value 'L3'"),
    ("Normalizer", np.float32, ["N", 3, 1], {}, ShapeError, r"\[N, C\] or \[C\], got rank 3"),
    ("Imputer", np.float32, ["N", 3], dict(imputed_value_floats=[1.0], imputed_value_int64s=[1]), ShapeError,
     "only one of the attributes imputed_value_floats and imputed_value_int64s"),
    ("Imputer", np.int64, ["N", 3], dict(imputed_value_floats=[1.0]), ShapeError,
     "imputed_value_int64s is required for int64 input"),
    ("Imputer", np.float32, ["N", 3], dict(imputed_value_floats=[1.0, 2.0]), ShapeError,
     "imputed_value_floats has 2 values; expected 1 or the 3 features"),
    ("OneHotEncoder", np.int64, ["N"], dict(cats_int64s=[1], cats_strings=["a"]), ShapeError,
     "only one of the attributes cats_int64s and cats_strings"),
    ("OneHotEncoder", object, ["N"], dict(cats_int64s=[1]), ShapeError, "cats_strings is required for string"),
    ("OneHotEncoder", np.float32, ["N"], {}, ShapeError, "cats_int64s is required for float"),
    ("OneHotEncoder", np.bool_, ["N"], dict(cats_int64s=[1]), UnsupportedOpError, "bool tensors are not supported"),
    ("FeatureVectorizer", np.float32, ["N", 2], dict(inputdimensions=[2, 2]), ShapeError,
     "inputdimensions has 2 values for 1 inputs"),
    ("FeatureVectorizer", np.float32, ["N", 2], dict(inputdimensions=[-1]), ShapeError, "value 0 is negative"),
    ("CategoryMapper", object, ["N"], dict(cats_strings=["a", "b"], cats_int64s=[1]), ShapeError,
     r"cats_strings \(2 values\) and cats_int64s \(1\) must have the same length"),
    ("CategoryMapper", np.int32, ["N"], dict(cats_strings=["a"], cats_int64s=[1]), UnsupportedOpError,
     "int32 tensors are not supported"),
])
def test_preprocess_errors_name_node_and_attribute(op, dt, shape, attrs, err, match):
    node = helper.make_node(op, ["x"], ["y"], domain=ML, name="bad_node", **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", elem(dt), shape)],
                          [onnx.ValueInfoProto(name="y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    with pytest.raises(err, match=match) as e:
        onnxc.compile(m)
    assert f"{op} 'bad_node'" in str(e.value)
