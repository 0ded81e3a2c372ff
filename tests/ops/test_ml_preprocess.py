"""ai.onnx.ml Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer and CategoryMapper (expanded
into primitive ops and LabelEncoder), compared with onnxruntime, and with onnx.reference where the two
agree (see the docstring of passes/expansions/ml_preprocess.py for where they do not). Models declare
a symbolic batch dimension and run with several rows and with one; input types onnxruntime has no
kernel for are compared with onnxruntime on the same values in a type it takes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from onnxc.ir import RuntimeFailure, ShapeError, UnsupportedOpError
from tests.ops.test_ml_linear import assert_same, ops_after, ort_run
from tests.ops.util import reference

ML = "ai.onnx.ml"
NUMERIC = [np.float32, np.float64, np.int64, np.int32]


def model(op: str, inputs: dict, name: str = "n", **attrs) -> onnx.ModelProto:
    """One ai.onnx.ml node; ``inputs`` maps names to (numpy dtype, shape); output ``y`` is left untyped."""
    node = helper.make_node(op, list(inputs), ["y"], domain=ML, name=name, **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
           for n, (dt, shape) in inputs.items()]
    g = helper.make_graph([node], "t", ins, [onnx.ValueInfoProto(name="y")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def check(m: onnx.ModelProto, feeds_list: list[dict], *, ort_model: onnx.ModelProto | None = None,
          ort_cast=None, with_reference: bool = False, rtol: float = 1e-6, atol: float = 1e-6) -> onnxc.CompiledModel:
    """Compile once, run every feed and compare ``y`` with onnxruntime (on ``ort_model`` with inputs cast
    to ``ort_cast`` when given) and, if asked, with onnx.reference."""
    compiled = onnxc.compile(m)
    for feeds in feeds_list:
        got = compiled.run(feeds)["y"]
        ort_feeds = {k: v.astype(ort_cast) for k, v in feeds.items()} if ort_cast is not None else feeds
        assert_same(got, ort_run(ort_model or m, ort_feeds)[0], rtol, atol)
        if with_reference:
            assert_same(got, reference(m, feeds)[0], rtol, atol)
    return compiled


def strs(*items) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


X3 = np.array([[1.5, -2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, -4.0, 0.0], [2.0, 7.0, -0.5], [0.25, 0.0, 5.0]])


def _x(dt, x=X3) -> np.ndarray:
    return (np.trunc(x * 2) if np.dtype(dt).kind == "i" else x).astype(dt)


def _ort_float(op: str, shape, dt, **attrs) -> tuple[onnx.ModelProto | None, type | None]:
    """The model onnxruntime runs for input type ``dt``: the same with float input where it lacks one."""
    return (None, None) if dt == np.float32 else (model(op, {"x": (np.float32, shape)}, **attrs), np.float32)


# -- Scaler ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("per_feature", [True, False])
def test_scaler(dt, per_feature):
    attrs = dict(offset=[0.5, -1.0, 2.0], scale=[2.0, 0.25, -1.5]) if per_feature else dict(offset=[1.0], scale=[3.0])
    m = model("Scaler", {"x": (dt, ["N", 3])}, **attrs)
    x = _x(dt)
    check(m, [{"x": x}, {"x": x[:1]}], with_reference=dt == np.float32)  # the reference keeps double


def test_scaler_1d_and_rank3_and_defaults():
    check(model("Scaler", {"x": (np.float32, [3])}, offset=[1.0, 2.0, 3.0], scale=[1.0, 2.0, 3.0]),
          [{"x": np.array([1.0, 1.0, 1.0], np.float32)}], with_reference=True)
    check(model("Scaler", {"x": (np.float32, ["N", 2, 2])}, offset=[1.0], scale=[-2.0]),
          [{"x": np.arange(8, dtype=np.float32).reshape(2, 2, 2)}], with_reference=True)
    got = onnxc.compile(model("Scaler", {"x": (np.int64, ["N", 2])}, scale=[0.5])).run({"x": np.array([[3, -4]])})
    assert_same(got["y"], np.array([[1.5, -2.0]], np.float32))  # offset omitted: 0 (onnxruntime refuses)


# -- Normalizer -----------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dt", NUMERIC)
def test_normalizer(norm, dt):
    """Row 1 is all zeros (copied), row 2 has a zero maximum (MAX copies it)."""
    m = model("Normalizer", {"x": (dt, ["N", 3])}, norm=norm)
    x = _x(dt)
    check(m, [{"x": x}, {"x": x[:1]}], with_reference=norm != "MAX" and dt == np.float32, rtol=1e-5)


def test_normalizer_1d_and_negative_max():
    check(model("Normalizer", {"x": (np.float32, [3])}, norm="L2"), [{"x": np.array([3.0, -4.0, 0.0], np.float32)}])
    x = np.array([[-1.0, -4.0, -2.0]], np.float32)  # divided by the maximum -1 (the reference: by 4)
    got = check(model("Normalizer", {"x": (np.float32, ["N", 3])}, norm="MAX"), [{"x": x}]).run({"x": x})["y"]
    assert_same(got, np.array([[1.0, 4.0, 2.0]], np.float32))


# -- Imputer --------------------------------------------------------------------------------------

XN = np.array([[1.0, np.nan, 3.0], [0.0, 0.0, np.nan], [np.nan, 2.0, 0.0]], np.float32)


@pytest.mark.parametrize("replaced", [float("nan"), 0.0])
@pytest.mark.parametrize("values", [[7.0, 8.0, 9.0], [-1.0]])
def test_imputer_float(replaced, values):
    m = model("Imputer", {"x": (np.float32, ["N", 3])}, imputed_value_floats=values, replaced_value_float=replaced)
    check(m, [{"x": XN}, {"x": XN[:1]}], with_reference=True)


@pytest.mark.parametrize("dt", [np.int64, np.int32])
def test_imputer_int(dt):
    """int32 (no onnxruntime kernel) takes the int64 attributes and stays int32."""
    attrs = dict(imputed_value_int64s=[7, 8], replaced_value_int64=1)
    x = np.array([[1, 2], [3, 1], [1, 1]], dt)
    m = model("Imputer", {"x": (dt, ["N", 2])}, **attrs)
    if dt == np.int64:
        check(m, [{"x": x}, {"x": x[:1]}], with_reference=True)
    else:
        want = ort_run(model("Imputer", {"x": (np.int64, ["N", 2])}, **attrs), {"x": x.astype(np.int64)})[0]
        assert_same(onnxc.compile(m).run({"x": x})["y"], want.astype(np.int32))


def test_imputer_double_keeps_double():
    m = model("Imputer", {"x": (np.float64, ["N", 3])}, imputed_value_floats=[0.5], replaced_value_float=float("nan"))
    got = onnxc.compile(m).run({"x": XN.astype(np.float64)})["y"]
    assert_same(got, np.where(np.isnan(XN), 0.5, XN).astype(np.float64))
    assert_same(got, reference(m, {"x": XN.astype(np.float64)})[0])


# -- OneHotEncoder --------------------------------------------------------------------------------

def test_one_hot_encoder_strings():
    m = model("OneHotEncoder", {"x": (object, ["N", 2])}, cats_strings=["c", "b", "a", "é"])
    x = np.array([["a", "b"], ["zz", "é"], ["c", ""]], dtype=object)
    check(m, [{"x": x}, {"x": x[1:2]}], with_reference=True)


@pytest.mark.parametrize("dt", [np.int64, np.int32, np.float32, np.float64])
def test_one_hot_encoder_numbers(dt):
    """Floats truncate to int64; the repeated category 1 keeps its last position."""
    x = np.array([[1.7, -1.5], [2.0, 5.0], [-1.0, 1.0]]).astype(dt)
    shape = ["N", 2]
    m = model("OneHotEncoder", {"x": (dt, shape)}, cats_int64s=[1, 2, -1, 1])
    ort_m = model("OneHotEncoder", {"x": (np.int64, shape)}, cats_int64s=[1, 2, -1, 1]) if dt == np.int32 else None
    check(m, [{"x": x}, {"x": x[:1]}], ort_model=ort_m, ort_cast=np.int64 if dt == np.int32 else None)


def test_one_hot_encoder_ranks():
    check(model("OneHotEncoder", {"x": (np.int64, ["N"])}, cats_int64s=[3, 4]), [{"x": np.array([4, 3, 0])}],
          with_reference=True)
    check(model("OneHotEncoder", {"x": (np.int64, ["N", 2, 2])}, cats_int64s=[3, 4]),
          [{"x": np.array([[[4, 3], [0, 4]]])}])


def test_one_hot_encoder_zeros_0_fails_at_run_time_on_unknown_category():
    m = model("OneHotEncoder", {"x": (object, ["N", 2])}, name="ohe", cats_strings=["a", "b"], zeros=0)
    compiled = check(m, [{"x": np.array([["a", "b"], ["b", "b"]], dtype=object)}])
    with pytest.raises(RuntimeFailure, match="ohe/unknown_category.*index -1 is out of range"):
        compiled.run({"x": np.array([["a", "b"], ["c", "b"]], dtype=object)})
    ints = onnxc.compile(model("OneHotEncoder", {"x": (np.float32, ["N"])}, cats_int64s=[1, 2], zeros=0))
    assert_same(ints.run({"x": np.array([2.5, 1.0], np.float32)})["y"], np.array([[0, 1], [1, 0]], np.float32))
    with pytest.raises(RuntimeFailure, match="index -1"):
        ints.run({"x": np.array([3.0], np.float32)})


# -- FeatureVectorizer ----------------------------------------------------------------------------

def _fv(inputs: dict, dims: list[int], **kw) -> onnx.ModelProto:
    return model("FeatureVectorizer", inputs, inputdimensions=dims, **kw)


@pytest.mark.parametrize("dims", [[3, 1, 2], [2, 3, 1], [1, 1, 4]])
@pytest.mark.parametrize("dt", NUMERIC)
def test_feature_vectorizer_truncates_and_pads(dims, dt):
    a = np.arange(15).reshape(5, 3).astype(dt)
    b = np.array([[7], [8], [9], [10], [11]], dt)
    c = (np.arange(10).reshape(5, 2) * 3 - 5).astype(dt)
    m = _fv({"a": (dt, ["N", 3]), "b": (dt, ["N", 1]), "c": (dt, ["N", 2])}, dims)
    feeds = [{"a": a, "b": b, "c": c}, {"a": a[:1], "b": b[:1], "c": c[:1]}]
    check(m, feeds, with_reference=dt == np.float32)


def test_feature_vectorizer_1d_rank3_symbolic_and_mixed_types():
    # 1-D inputs are one row; rank 3 is flattened from axis 1; a symbolic feature count is padded then cut
    m = _fv({"a": (np.int32, [3]), "b": (np.float32, [1])}, [3, 1])
    check(m, [{"a": np.array([1, 2, 3], np.int32), "b": np.array([9.0], np.float32)}],
          ort_model=_fv({"a": (np.float32, [3]), "b": (np.float32, [1])}, [3, 1]), ort_cast=np.float32)
    m = _fv({"a": (np.float32, ["N", 2, 2])}, [6])
    check(m, [{"a": np.arange(8, dtype=np.float32).reshape(2, 2, 2)}])
    m = _fv({"a": (np.float64, ["N", "K"]), "b": (np.int64, ["N", 2])}, [3, 2])
    ort_m = _fv({"a": (np.float32, ["N", "K"]), "b": (np.float32, ["N", 2])}, [3, 2])
    feeds = [{"a": np.arange(k * 2, dtype=np.float64).reshape(2, k) + 0.5, "b": np.array([[1, 2], [3, 4]])}
             for k in (1, 3, 5)]
    check(m, feeds, ort_model=ort_m, ort_cast=np.float32)


# -- CategoryMapper -------------------------------------------------------------------------------

def test_category_mapper_string_to_int():
    m = model("CategoryMapper", {"x": (object, ["N", 2])}, cats_strings=["a", "b", "a", "é"],
              cats_int64s=[1, 2, 3, 4], default_int64=-5)
    x = np.array([["a", "b"], ["zz", "é"], ["", "a"]], dtype=object)
    got = check(m, [{"x": x}, {"x": x[:1]}]).run({"x": x})["y"]
    assert got.tolist() == [[3, 2], [-5, 4], [-5, 3]]  # a repeated string keeps its last value


@pytest.mark.parametrize("default", [{"default_string": "?"}, {}])
def test_category_mapper_int_to_string(default):
    m = model("CategoryMapper", {"x": (np.int64, ["N"])}, cats_strings=["a", "b", "c"], cats_int64s=[1, 2, 1],
              **default)
    check(m, [{"x": np.array([1, 5, 2, -1])}, {"x": np.array([2])}])


# -- pipelines, expansion ---------------------------------------------------------------------------

def test_imputer_scaler_normalizer_pipeline():
    nodes = [helper.make_node("Imputer", ["x"], ["i"], domain=ML, imputed_value_floats=[1.0, 2.0, 3.0],
                              replaced_value_float=float("nan")),
             helper.make_node("Scaler", ["i"], ["s"], domain=ML, offset=[0.5, 1.0, -1.0], scale=[2.0, 1.0, 0.5]),
             helper.make_node("Normalizer", ["s"], ["y"], domain=ML, norm="L2")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
                          [onnx.ValueInfoProto(name="y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    check(m, [{"x": XN}, {"x": XN[2:]}], with_reference=True, rtol=1e-5)


def test_one_hot_and_scaler_vectorized():
    nodes = [helper.make_node("OneHotEncoder", ["c"], ["h"], domain=ML, cats_strings=["x", "y", "z"]),
             helper.make_node("Reshape", ["h", "shape"], ["h2"]),
             helper.make_node("Scaler", ["n"], ["s"], domain=ML, offset=[1.0, 2.0], scale=[0.5, 0.25]),
             helper.make_node("FeatureVectorizer", ["s", "h2"], ["y"], domain=ML, inputdimensions=[2, 3])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("c", onnx.TensorProto.STRING, ["N", 1]),
                                       helper.make_tensor_value_info("n", onnx.TensorProto.FLOAT, ["N", 2])],
                          [onnx.ValueInfoProto(name="y")],
                          initializer=[onnx.numpy_helper.from_array(np.array([-1, 3], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    c = np.array([["y"], ["x"], ["w"]], dtype=object)
    n = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    check(m, [{"c": c, "n": n}, {"c": c[:1], "n": n[:1]}])


def test_preprocess_ops_expand_into_primitives():
    for op, dt, attrs in [("Scaler", np.float32, dict(scale=[2.0])), ("Normalizer", np.float32, {}),
                          ("Imputer", np.float32, dict(imputed_value_floats=[0.0])),
                          ("OneHotEncoder", np.int64, dict(cats_int64s=[1, 2])),
                          ("FeatureVectorizer", np.float32, dict(inputdimensions=[2]))]:
        ops = ops_after(model(op, {"x": (dt, ["N", 2])}, **attrs))
        assert op not in ops, (op, ops)
    cm = ops_after(model("CategoryMapper", {"x": (object, ["N"])}, cats_strings=["a"], cats_int64s=[1]))
    assert cm == ["LabelEncoder"], cm


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
    m = model(op, {"x": (dt, shape)}, name="bad_node", **attrs)
    with pytest.raises(err, match=match) as e:
        onnxc.compile(m)
    assert f"{op} 'bad_node'" in str(e.value)
