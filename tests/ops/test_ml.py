"""ai.onnx.ml LabelEncoder, ArrayFeatureExtractor, Binarizer, TreeEnsemble and ai.onnx TfIdfVectorizer.
LabelEncoder, ArrayFeatureExtractor and Binarizer sit side by side in a few models compared with
onnxruntime (and onnx.reference where they agree); the others are compared with onnx.reference (or
stated values where onnxc follows the spec/onnxruntime instead: targets no leaf reaches, post
transforms the reference ignores)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from tests.ops.test_ml_linear import SideBySide
from tests.ops.util import reference

ML = "ai.onnx.ml"


def ml_model(op: str, inputs: dict, out_type: int, *, domain: str = ML, version: int = 1, opset: int = 21,
             input_shapes: dict | None = None, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, list(inputs), ["y"], domain=domain or None, **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                         (input_shapes or {}).get(n, list(a.shape))) for n, a in inputs.items()]
    g = helper.make_graph([node], "t", ins, [helper.make_tensor_value_info("y", out_type, None)])
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, version)] if domain else [])
    return helper.make_model(g, opset_imports=ops)


def check(model: onnx.ModelProto, inputs: dict, expected=None, rtol: float = 1e-6, atol: float = 1e-6) -> np.ndarray:
    want = np.asarray(expected if expected is not None else reference(model, inputs)[0])
    got = onnxc.compile(model).run(inputs)["y"]
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "OUS":
        assert got.dtype == object and got.tolist() == want.astype(object).tolist(), (got, want)
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


def strs(*items) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


# -- LabelEncoder, ArrayFeatureExtractor, Binarizer (side by side, against onnxruntime) -----------

def test_label_encoder_opset_1():
    """A repeated class keeps its last index (onnxruntime; the spec does not say); int64 -> string indexes."""
    s = SideBySide(ml_opset=1)
    xs, xi = s.input("xs", TP.STRING, ["N"]), s.input("xi", TP.INT64, ["M", 2])
    (y,) = s.add("LabelEncoder", [xs], classes_strings=["a", "b", "a", ""], default_int64=-7)
    s.add("LabelEncoder", [xi], classes_strings=["a", "b", "é", "d"])
    f = {"xs": strs("b", "zz", "a", "", "b"), "xi": np.array([[0, 3], [-1, 9]], np.int64)}
    assert s.run(s.check([f]), f)[y].tolist() == [1, -7, 2, 3, 1]


@pytest.mark.parametrize("version", [2, 4])
def test_label_encoder_opsets_2_and_4(version):
    """Every key/value type pair of the attribute lists (and, from opset 4, tensors). A repeated key keeps
    its first value (onnxruntime's emplace; the opset 4 spec says the last); a NaN key matches a NaN input
    from opset 4 only (opsets 2-3: onnxruntime never matches NaN, though their spec promises a bitwise
    match); 0.0 and -0.0 are the same key."""
    s = SideBySide(ml_opset=version)
    xs, xi = s.input("xs", TP.STRING, ["N"]), s.input("xi", TP.INT64, ["M", 2])
    xf = s.input("xf", TP.FLOAT, ["K"])
    s.add("LabelEncoder", [xs], keys_strings=["Amy", "Sally", "é的", "Amy"], values_int64s=[5, 6, 7, 8],
          default_int64=42)
    s.add("LabelEncoder", [xs], keys_strings=["Amy", "Dori"], values_floats=[1.5, -2.0])
    s.add("LabelEncoder", [xs], keys_strings=["Amy", "Dori"], values_strings=["a", "d"], default_string="?")
    s.add("LabelEncoder", [xi], keys_int64s=[3, -1, 10**12, 3], values_strings=["three", "minus", "big", "again"])
    s.add("LabelEncoder", [xi], keys_int64s=[1, 2, 1], values_floats=[1.0, 2.0, 3.0])
    s.add("LabelEncoder", [xi], keys_int64s=[3, 2], values_int64s=[30, 20], default_int64=0)
    s.add("LabelEncoder", [xf], keys_floats=[0.5, -2.0, 3.25, float("nan"), 0.0, 0.5],
          values_floats=[1.5, 2.5, 3.5, 4.5, 5.5, 6.5], default_float=9.0)
    s.add("LabelEncoder", [xf], keys_floats=[float("nan"), 3.25], values_int64s=[1, 2])
    s.add("LabelEncoder", [xf], keys_floats=[-0.0], values_strings=["zero"])
    if version >= 4:
        s.add("LabelEncoder", [xi], keys_tensor=numpy_helper.from_array(np.array([3, -1], np.int64)),
              values_tensor=numpy_helper.from_array(np.array([1.5, 2.5])))  # double values
        s.add("LabelEncoder", [xs], keys_strings=["Amy", "Sally"],  # the spec's default {-1} without default_tensor
              values_tensor=numpy_helper.from_array(np.array([1, 2], np.int16)))
        xd = s.input("xd", TP.DOUBLE, ["D"])
        (d,) = s.add("LabelEncoder", [xd], keys_tensor=numpy_helper.from_array(np.array([1.5, np.nan, 0.0])),
                     values_tensor=numpy_helper.from_array(np.array([10, 20, 30], np.int32)),
                     default_tensor=numpy_helper.from_array(np.array([-5], np.int32)), ort=False)  # no kernel
    f = {"xs": strs("Dori", "Amy", "é的", "", "Sally"), "xi": np.array([[3, 4], [10**12, -1], [1, 2]], np.int64),
         "xf": np.array([0.5, 3.25, 7.0, np.nan, -0.0, 0.0], np.float32), "xd": np.array([1.5, np.nan, -0.0, 2.0])}
    compiled = s.check([f])
    if version >= 4:
        assert s.run(compiled, f)[d].tolist() == [10, 20, 30, -5]


def test_label_encoder_errors():
    x = strs("a")
    with pytest.raises(onnxc.ShapeError, match="entries"):
        onnxc.compile(ml_model("LabelEncoder", {"x": x}, TP.INT64, version=2, keys_strings=["a", "b"],
                               values_int64s=[1]))
    with pytest.raises(onnxc.ShapeError, match="cannot be looked up"):
        onnxc.compile(ml_model("LabelEncoder", {"x": x}, TP.INT64, version=2, keys_int64s=[1], values_int64s=[1]))


def test_label_encoder_folds():
    node = helper.make_node("LabelEncoder", ["c"], ["y"], domain=ML, keys_strings=["a", "a"], values_strings=["b", "c"])
    g = helper.make_graph([node], "t", [], [helper.make_tensor_value_info("y", TP.STRING, None)],
                          [numpy_helper.from_array(strs("a", "z"), "c")])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 2)]))
    assert not m.ir.graph.nodes
    assert m.run({})["y"].tolist() == ["b", "_Unused"]


def test_array_feature_extractor_and_binarizer():
    """ArrayFeatureExtractor over ranks 1-3 and strings (an index out of range is a run-time error);
    Binarizer on every type (onnxruntime: float only, the others against the reference) and its NaN
    error (onnxruntime's; the reference writes 0)."""
    s = SideBySide()
    cases = {"a1": (TP.FLOAT, [5], np.arange(5, dtype=np.float32), np.array([4, 0, 0], np.int64)),
             "a3": (TP.INT64, ["N", 3, 4], np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.array([[3, 1]], np.int64)),
             "a2": (TP.DOUBLE, ["P", 4], np.arange(12, dtype=np.float64).reshape(3, 4), np.array([[2], [1]], np.int64)),
             "as": (TP.STRING, ["M", 2], strs("a", "é", "c", "d").reshape(2, 2), np.array([1], np.int64)),
             "ai": (TP.INT32, ["N", 4], np.arange(8, dtype=np.int32).reshape(2, 4), np.array([0, 3], np.int64))}
    f = {}
    for n, (t, shape, x, idx) in cases.items():
        s.add("ArrayFeatureExtractor", [s.input(n, t, shape), s.input(f"{n}_i", TP.INT64, list(idx.shape))],
              reference=True)
        f.update({n: x, f"{n}_i": idx})
    for dt in (np.float32, np.float64, np.int64, np.int32):
        b = s.input(f"b_{np.dtype(dt).name}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), ["B", 5])
        s.add("Binarizer", [b], threshold=0.5, reference=True, ort=dt == np.float32)
        f[b] = (np.random.default_rng(0).standard_normal((3, 5)) * 4).astype(dt)
    compiled = s.check([f])
    with pytest.raises(onnxc.RuntimeFailure, match="ArrayFeatureExtractor.*index 4 is out of range"):
        compiled.run({**f, "a2_i": np.array([[4], [1]], np.int64)})
    for dt in (np.float32, np.float64):
        name = f"b_{np.dtype(dt).name}"
        bad = f[name].copy()
        bad[1, 2] = np.nan
        with pytest.raises(onnxc.RuntimeFailure, match="Binarizer.*input element 7 is NaN"):
            compiled.run({**f, name: bad})


# -- TreeEnsemble ---------------------------------------------------------------------------------

def random_forest(rng: np.random.Generator, n_trees: int, depth: int, n_features: int, n_targets: int,
                  modes: list[int], missing: bool = False) -> dict:
    """TreeEnsemble attributes of random full binary trees (leaves numbered in order of creation)."""
    a = {k: [] for k in ("feat", "mode", "split", "tid", "fid", "tleaf", "fleaf", "miss", "lt", "lw", "roots")}
    members: list[float] = []

    def grow(d: int) -> tuple[int, int]:  # (is_leaf, index)
        if d == depth:
            a["lt"].append(int(rng.integers(n_targets)))
            a["lw"].append(float(np.round(rng.standard_normal(), 3)))
            return 1, len(a["lt"]) - 1
        k = len(a["feat"])
        for key in ("feat", "mode", "split", "tid", "fid", "tleaf", "fleaf", "miss"):
            a[key].append(0)
        mode = int(rng.choice(modes))
        a["feat"][k], a["mode"][k], a["miss"][k] = int(rng.integers(n_features)), mode, int(missing and rng.random() < .5)
        a["split"][k] = float(rng.integers(-2, 3)) / 2 if mode != 6 else float("nan")
        if mode == 6:
            # no 0.0 members: the reference takes a 0.0 for the end of a set
            members.extend([float(v) for v in rng.choice([-1.0, -0.5, 0.5, 1.0], 3)] + [float("nan")])
        a["tleaf"][k], a["tid"][k] = grow(d + 1)
        a["fleaf"][k], a["fid"][k] = grow(d + 1)
        return 0, k

    for _ in range(n_trees):
        a["roots"].append(grow(0)[1])
    attrs = dict(nodes_featureids=a["feat"], nodes_modes=numpy_helper.from_array(np.array(a["mode"], np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.array(a["split"], np.float32)),
                 nodes_truenodeids=a["tid"], nodes_falsenodeids=a["fid"], nodes_trueleafs=a["tleaf"],
                 nodes_falseleafs=a["fleaf"], leaf_targetids=a["lt"],
                 leaf_weights=numpy_helper.from_array(np.array(a["lw"], np.float32)), tree_roots=a["roots"],
                 n_targets=n_targets)
    if missing:
        attrs["nodes_missing_value_tracks_true"] = a["miss"]
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32))
    return attrs


def tree_input(rng: np.random.Generator, n: int, f: int, dt=np.float32, nans: bool = False) -> np.ndarray:
    x = (rng.integers(-3, 4, (n, f)) / 2).astype(dt)
    if nans:
        x[rng.random((n, f)) < 0.2] = np.nan
    return x


@pytest.mark.parametrize("modes", [[0], [1, 2, 3], [4, 5], [0, 1, 2, 3, 4, 5, 6]])
@pytest.mark.parametrize("agg", [0, 1])
def test_tree_ensemble_sum_average(modes, agg):
    rng = np.random.default_rng(len(modes) * 10 + agg)
    attrs = random_forest(rng, 5, 3, 4, 3, modes)
    x = tree_input(rng, 40, 4)
    check(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, aggregate_function=agg,
                   input_shapes={"x": ["N", 4]}, **attrs), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("agg", [2, 3])
def test_tree_ensemble_min_max(agg):
    rng = np.random.default_rng(agg)
    attrs = random_forest(rng, 6, 2, 3, 2, [0, 3, 6])
    x = tree_input(rng, 30, 3)
    m = ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, aggregate_function=agg, **attrs)
    want = reference(m, {"x": x})[0]
    want[np.abs(want) == np.finfo(np.float32).max] = 0.0  # a target no leaf reached is 0 (as onnxruntime)
    check(m, {"x": x}, expected=want)


@pytest.mark.parametrize("dt,tp", [(np.float64, TP.DOUBLE), (np.float16, TP.FLOAT16)])
def test_tree_ensemble_types_and_missing(dt, tp):
    rng = np.random.default_rng(7)
    attrs = random_forest(rng, 4, 3, 3, 2, [0, 1, 4, 6], missing=True)
    x = tree_input(rng, 25, 3, dt, nans=True)
    check(ml_model("TreeEnsemble", {"x": x}, tp, version=5, **attrs), {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("post", [1, 2, 3])
def test_tree_ensemble_post_transform(post):
    """SOFTMAX, LOGISTIC and SOFTMAX_ZERO (zeros stay zero) on the reference's raw scores (the
    reference ignores post_transform)."""
    rng = np.random.default_rng(post)
    attrs = random_forest(rng, 3, 2, 2, 4, [0, 2])
    x = tree_input(rng, 12, 2)
    raw = reference(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, **attrs), {"x": x})[0].astype(np.float64)
    if post == 2:
        want = 1 / (1 + np.exp(-raw))
    else:
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        if post == 3:
            e = np.where(raw != 0, e, 0.0)
        want = e / e.sum(axis=1, keepdims=True)
    check(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, post_transform=post, **attrs), {"x": x},
          expected=want.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_tree_ensemble_probit():
    """PROBIT is the normal quantile: single-leaf trees whose weights are probabilities."""
    p = np.array([1e-6, 0.01, 0.3, 0.5, 0.77, 0.999], np.float32)
    t = len(p)
    attrs = dict(nodes_featureids=[0] * t, nodes_modes=numpy_helper.from_array(np.zeros(t, np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.zeros(t, np.float32)), nodes_truenodeids=list(range(t)),
                 nodes_falsenodeids=list(range(t)), nodes_trueleafs=[1] * t, nodes_falseleafs=[1] * t,
                 leaf_targetids=list(range(t)), leaf_weights=numpy_helper.from_array(p), tree_roots=list(range(t)),
                 n_targets=t, post_transform=4)
    x = np.zeros((2, 1), np.float32)
    want = np.array([NormalDist().inv_cdf(float(v)) for v in p], np.float32)
    check(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, **attrs), {"x": x},
          expected=np.stack([want, want]), rtol=1e-6, atol=1e-6)


def test_tree_ensemble_invalid():
    rng = np.random.default_rng(0)
    attrs = random_forest(rng, 1, 2, 2, 1, [0])
    attrs["nodes_truenodeids"] = [0] + attrs["nodes_truenodeids"][1:]
    attrs["nodes_trueleafs"] = [0] + attrs["nodes_trueleafs"][1:]
    x = tree_input(rng, 2, 2)
    with pytest.raises(onnxc.ShapeError, match="cycle"):
        onnxc.compile(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, **attrs))
    attrs = random_forest(rng, 1, 2, 5, 1, [0])
    attrs["nodes_featureids"] = [4] * len(attrs["nodes_featureids"])
    m = onnxc.compile(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, input_shapes={"x": ["N", "F"]},
                               **attrs))
    with pytest.raises(onnxc.RuntimeFailure, match="features"):
        m.run({"x": x})
    attrs["leaf_targetids"] = [1] * len(attrs["leaf_targetids"])
    with pytest.raises(onnxc.ShapeError, match="leaf_targetids"):
        onnxc.compile(ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, **attrs))


# -- TfIdfVectorizer ------------------------------------------------------------------------------

# 4 unigrams, 3 bigrams and 1 trigram (the last pool item is left over, as the spec allows)
POOL = dict(ngram_counts=[0, 4, 10], ngram_indexes=[7, 6, 5, 4, 3, 2, 1, 0],
            pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 6])


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("grams,skip", [((1, 1), 0), ((1, 2), 0), ((2, 3), 2), ((1, 3), 5), ((3, 3), 1)])
@pytest.mark.parametrize("weights", [False, True])
def test_tfidf_int(mode, grams, skip, weights):
    x = np.array([[2, 3, 5, 6, 7, 5, 6, 2, 3, 5, 4, 4], [5, 6, 7, 7, 8, 6, 7, 2, 2, 3, 5, 6]], np.int64)
    attrs = dict(POOL, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1], max_skip_count=skip)
    want = None
    if weights:
        attrs["weights"] = [0.5 * (i + 1) for i in range(8)]
    elif mode != "TF":  # the reference fails without weights: IDF is 1 where counted, TFIDF the counts
        tf = reference(ml_model("TfIdfVectorizer", {"x": x}, TP.FLOAT, domain="", opset=9, **dict(attrs, mode="TF")),
                       {"x": x})[0]
        want = (tf > 0).astype(np.float32) if mode == "IDF" else tf
    check(ml_model("TfIdfVectorizer", {"x": x}, TP.FLOAT, domain="", opset=9, input_shapes={"x": ["B", "C"]},
                   **attrs), {"x": x}, expected=want)


def test_tfidf_strings_and_int32():
    x = strs("the", "cat", "sat", "on", "the", "mat", "the", "cat", "é")
    attrs = dict(mode="TFIDF", min_gram_length=1, max_gram_length=2, max_skip_count=1, ngram_counts=[0, 3],
                 ngram_indexes=[2, 0, 1, 4, 3], pool_strings=["the", "cat", "é", "the", "cat", "on", "mat"],
                 weights=[1.0, 2.0, 3.0, 4.0, 5.0])
    check(ml_model("TfIdfVectorizer", {"x": x}, TP.FLOAT, domain="", opset=9, input_shapes={"x": ["C"]}, **attrs),
          {"x": x})
    xi = np.array([1, 2, 1, 2, 3], np.int32)
    attrs = dict(mode="TF", min_gram_length=2, max_gram_length=2, max_skip_count=0, ngram_counts=[0, 0],
                 ngram_indexes=[0], pool_int64s=[1, 2])
    check(ml_model("TfIdfVectorizer", {"x": xi}, TP.FLOAT, domain="", opset=9, **attrs), {"x": xi})


def test_tree_ensemble_parallel_rows():
    rng = np.random.default_rng(3)
    attrs = random_forest(rng, 8, 4, 5, 3, [0, 1, 2, 3, 4, 5, 6], missing=True)
    x = tree_input(rng, 300, 5, nans=True)
    m = ml_model("TreeEnsemble", {"x": x}, TP.FLOAT, version=5, input_shapes={"x": ["N", 5]}, **attrs)
    cm, one = onnxc.compile(m, threads=2), onnxc.compile(m, threads=1)
    assert "onnxc_parallel(" in cm.c_source and "omp parallel" not in cm.c_source
    # large and small row counts: the same bits as one thread
    for n in (300, 40):
        got = cm.run({"x": x[:n]})["y"]
        np.testing.assert_allclose(got, reference(m, {"x": x[:n]})[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got, one.run({"x": x[:n]})["y"])
