"""ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (ml opsets 1 and 3) on hand-built random
forests, compared with onnxruntime (and onnx.reference where the two agree: see
codegen/kernels/trees_classic.py for where they do not)."""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from tests.ops.util import reference

ML = "ai.onnx.ml"
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
GRID = np.arange(-4, 5, dtype=np.float64) / 4  # thresholds and inputs share values, so EQ/NEQ branch both ways


def forest(rng: np.random.Generator, n_trees: int, depth: int, n_features: int, modes: list[str],
           leaf_ids, missing: bool = False, nan_splits: bool = False) -> tuple[dict, dict]:
    """Node attributes of random trees (node ids shuffled, root first) and leaf weights: ``leaf_ids(tree)``
    gives the target/class ids of one leaf; weights are multiples of 1/8 (sums exact in float);
    ``nan_splits``: some thresholds are NaN."""
    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "truenodeids", "falsenodeids", "values",
                             "missing_value_tracks_true")}
    w = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t in range(n_trees):
        tree_depth = int(rng.integers(0, depth + 1))
        n_nodes = 2 ** (tree_depth + 1) - 1
        ids = [0] + list(rng.permutation(np.arange(1, n_nodes)))  # root id 0, others shuffled (ids < n_nodes: ORT)
        for i in range(n_nodes):
            leaf = 2 * i + 1 >= n_nodes
            nodes["treeids"].append(t)
            nodes["nodeids"].append(int(ids[i]))
            nodes["featureids"].append(0 if leaf else int(rng.integers(n_features)))
            nodes["modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            nodes["truenodeids"].append(0 if leaf else int(ids[2 * i + 1]))
            nodes["falsenodeids"].append(0 if leaf else int(ids[2 * i + 2]))
            nan = nan_splits and not leaf and rng.random() < 0.2
            nodes["values"].append(0.0 if leaf else float("nan") if nan else float(rng.choice(GRID)))
            nodes["missing_value_tracks_true"].append(int(missing and not leaf and rng.random() < 0.5))
            if leaf:
                for k in leaf_ids(t):
                    w["treeids"].append(t)
                    w["nodeids"].append(int(ids[i]))
                    w["ids"].append(int(k))
                    w["weights"].append(float(rng.integers(-8, 9)) / 8)
    return {f"nodes_{k}": v for k, v in nodes.items()}, w


def seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def inputs(rng: np.random.Generator, n: int, f: int, dt=np.float32, nans: bool = False) -> np.ndarray:
    x = rng.choice(GRID, size=(n, f)) + rng.choice([0.0, 0.0, 0.1, -0.1], size=(n, f))
    if nans:
        x[rng.random((n, f)) < 0.2] = np.nan
    return x.astype(dt)


def model(op: str, x: np.ndarray, attrs: dict, version: int = 3) -> onnx.ModelProto:
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, None)]
    if op == "TreeEnsembleClassifier":
        lt = TP.STRING if "classlabels_strings" in attrs else TP.INT64
        outs = [helper.make_tensor_value_info("label", lt, None), helper.make_tensor_value_info("y", TP.FLOAT, None)]
    node = helper.make_node(op, ["x"], [o.name for o in outs], domain=ML, **attrs)
    xin = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), ["N", x.shape[1]])
    g = helper.make_graph([node], "t", [xin], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, version)])


def weights(w: dict, prefix: str, tensor: bool) -> dict:
    out = {f"{prefix}_{k}": v for k, v in w.items() if k != "weights"}
    if tensor:
        out[f"{prefix}_weights_as_tensor"] = numpy_helper.from_array(np.array(w["weights"], np.float64))
    else:
        out[f"{prefix}_weights"] = w["weights"]
    return out


def as_tensors(nodes: dict, base: list | None) -> dict:
    """v3 form: thresholds (and base values) as double tensors."""
    out = dict(nodes)
    out["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(out.pop("nodes_values"), np.float64))
    if base is not None:
        out["base_values_as_tensor"] = numpy_helper.from_array(np.array(base, np.float64))
    return out


def check(m: onnx.ModelProto, x: np.ndarray, with_reference: bool = False, rtol: float = 1e-5,
          atol: float = 1e-5, threads: int = 1, probit_column_1: bool = False) -> dict:
    """onnxc against onnxruntime (and onnx.reference); ``probit_column_1``: onnxruntime leaves column 1
    of the scores unwritten (onnxc: NaN)."""
    cm = onnxc.compile(m, threads=threads)
    got = cm.run({"x": x})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    wants = [dict(zip(names, sess.run(None, {"x": x})))]
    if with_reference:
        wants.append(dict(zip(names, reference(m, {"x": x}))))
    for want in wants:
        for name, w in want.items():
            g = got[name]
            assert g.shape == w.shape, (name, g.shape, w.shape)
            if w.dtype.kind in "OUS":
                assert g.tolist() == w.astype(object).tolist(), (name, g, w)
            elif w.dtype.kind == "i":
                assert g.dtype == np.int64
                np.testing.assert_array_equal(g, w, err_msg=name)
            else:
                assert g.dtype == np.float32
                if probit_column_1:
                    assert np.isnan(g[:, 1]).all()
                    g, w = g[:, :1], w[:, :1]
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
    return {"compiled": cm, **got}


# -- TreeEnsembleRegressor ------------------------------------------------------------------------

@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("version,dt", [(1, np.float32), (3, np.float32), (3, np.float64)])
def test_regressor(agg, n_targets, version, dt):
    rng = np.random.default_rng(seed((agg, n_targets, version, dt == np.float64)))
    nodes, w = forest(rng, 6, 3, 4, MODES, lambda t: rng.choice(n_targets, size=rng.integers(1, n_targets + 1),
                                                               replace=False))
    base = list(rng.integers(-8, 8, size=n_targets) / 4)
    tensor = dt == np.float64
    attrs = dict(as_tensors(nodes, base) if tensor else dict(nodes, base_values=base), n_targets=n_targets,
                 aggregate_function=agg, **weights(w, "target", tensor))
    x = inputs(rng, 40, 4, dt)
    # onnx.reference agrees for SUM/AVERAGE (MIN/MAX: it keeps +-FLT_MAX where no leaf reached a target),
    # with float attributes (it reads no *_as_tensor weights)
    check(model("TreeEnsembleRegressor", x, attrs, version), x, with_reference=agg in ("SUM", "AVERAGE") and not tensor)


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_regressor_post_transform(post, n_targets):
    """With one target onnxruntime applies only PROBIT; PROBIT is its erfinv approximation."""
    rng = np.random.default_rng(len(post) * 10 + n_targets)
    nodes, w = forest(rng, 4, 3, 3, ["BRANCH_LEQ"], lambda t: range(n_targets))
    if post == "PROBIT":
        w["weights"] = [abs(v) / 4 + 0.01 for v in w["weights"]]  # sums in (0, 1)
    if post == "SOFTMAX_ZERO":
        w["weights"] = [0.0 if i % 3 == 0 else v for i, v in enumerate(w["weights"])]
    attrs = dict(nodes, n_targets=n_targets, post_transform=post, **weights(w, "target", False))
    x = inputs(rng, 30, 3)
    check(model("TreeEnsembleRegressor", x, attrs), x)


def test_regressor_missing_values_and_threads():
    """Mixed modes, missing values and NaN thresholds (BRANCH_NEQ: true; the others: false, but a tracked NaN
    feature) take the walk of per-node truth masks."""
    rng = np.random.default_rng(7)
    nodes, w = forest(rng, 20, 4, 5, MODES, lambda t: [t % 2], missing=True, nan_splits=True)
    attrs = dict(nodes, n_targets=2, aggregate_function="AVERAGE", **weights(w, "target", False))
    x = inputs(rng, 300, 5, nans=True)
    # not onnx.reference: it sends NaN by the missing flag alone, onnxruntime by the comparison too (NaN != t)
    got = check(model("TreeEnsembleRegressor", x, attrs), x, threads=2)
    c = got["compiled"].c_source
    assert "onnxc_parallel(" in c and ".mode = 6," in c  # ONNXC_TREE_MASK


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("missing", [False, True])
def test_single_mode_forests(mode, missing):
    """Forests whose nodes all compare one way take that comparison's walk (with missing-value tracking: the
    same plus ONNXC_TREE_MISSING; without, over complete trees): 1 and 3 rows walk row by row, more go tree
    by tree in blocks of rows (counts that are not multiples of 16 or 64, NaN features, deep and one-leaf
    trees), 300 rows on two threads with the bits of a one-thread build."""
    if mode == "BRANCH_NEQ" and missing:
        pytest.skip("a NaN feature already takes the true branch of BRANCH_NEQ")
    rng = np.random.default_rng(seed(mode, missing))
    nodes, w = forest(rng, 40, 6, 5, [mode], lambda t: [t % 3], missing=missing)
    attrs = dict(nodes, n_targets=3, aggregate_function="SUM", **weights(w, "target", False))
    x = inputs(rng, 300, 5, nans=True)
    code = MODES.index(mode) + (8 if missing else 0)
    for n in (300, 37, 18, 3, 1):
        got = check(model("TreeEnsembleRegressor", x, attrs), x[:n], threads=2)
        c = got["compiled"].c_source
        assert f".mode = {code}," in c and "onnxc_parallel(" in c
        assert (".cbase = bt_cbase" in c) == (not missing)  # shallow trees, no tracking: complete trees
    if mode == "BRANCH_LT" and missing:
        one = onnxc.compile(model("TreeEnsembleRegressor", x, attrs), threads=1).run({"x": x})["y"]
        np.testing.assert_array_equal(check(model("TreeEnsembleRegressor", x, attrs), x, threads=2)["y"], one)


def test_regressor_single_leaf_trees():
    """A tree may be one leaf (its root); with one target onnxruntime reads a leaf's first weight only."""
    attrs = dict(nodes_treeids=[0, 1, 1, 1], nodes_nodeids=[0, 0, 1, 2], nodes_featureids=[0, 1, 0, 0],
                 nodes_modes=["LEAF", "BRANCH_GT", "LEAF", "LEAF"], nodes_truenodeids=[0, 1, 0, 0],
                 nodes_falsenodeids=[0, 2, 0, 0], nodes_values=[0.0, 0.5, 0.0, 0.0], n_targets=1,
                 target_treeids=[0, 1, 1, 1], target_nodeids=[0, 1, 2, 2], target_ids=[0, 0, 0, 0],
                 target_weights=[1.5, 99.0, 2.0, 0.25])  # the weight of branch node (1, 1) is ignored
    x = np.array([[0.0, 1.0], [0.0, 0.0]], np.float32)
    check(model("TreeEnsembleRegressor", x, attrs), x)


# -- TreeEnsembleClassifier -----------------------------------------------------------------------

LABELS = {"ints": {"classlabels_int64s": [3, 7, 11, 19]}, "strings": {"classlabels_strings": ["a", "bé", "c", "d"]}}


def labels(kind: str, n: int) -> dict:
    k, v = next(iter(LABELS[kind].items()))
    return {k: v[:n]}


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("kind", ["ints", "strings"])
@pytest.mark.parametrize("layout", ["all", "one", "some"])
def test_classifier_multiclass(post, kind, layout):
    """Leaves with every class (random forest), one class per tree (gradient boosting), or a few."""
    rng = np.random.default_rng(seed((post, kind, layout)))
    pick = {"all": lambda t: range(4), "one": lambda t: [t % 4],
            "some": lambda t: rng.choice(4, size=rng.integers(1, 3), replace=False)}[layout]
    nodes, w = forest(rng, 8, 3, 4, MODES, pick)
    if post == "PROBIT":
        w["weights"] = [abs(v) / 8 + 1 / 64 for v in w["weights"]]
    base = [0.25, -0.5, 0.0, 0.125]  # onnxruntime wants 0 or one per class
    attrs = dict(nodes, base_values=base, post_transform=post, **labels(kind, 4), **weights(w, "class", False))
    x = inputs(rng, 50, 4)
    check(model("TreeEnsembleClassifier", x, attrs), x, with_reference=post == "NONE" and layout != "some")


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "PROBIT"])
@pytest.mark.parametrize("sign", ["positive", "mixed"])
@pytest.mark.parametrize("base", [None, [0.25], [0.125, 0.25]])
@pytest.mark.parametrize("class_id", [0, 1])
def test_classifier_binary_one_column(post, sign, base, class_id):
    """One score column for two labels (gradient boosting): onnxruntime's binary rules."""
    rng = np.random.default_rng(seed((post, sign, str(base), class_id)))
    nodes, w = forest(rng, 5, 2, 3, ["BRANCH_LEQ", "BRANCH_GT"], lambda t: [class_id])
    if sign == "positive":
        w["weights"] = [abs(v) / 4 for v in w["weights"]]
    attrs = dict(nodes, post_transform=post, classlabels_int64s=[4, 9], **weights(w, "class", False))
    if base is not None:
        attrs["base_values"] = base
    x = inputs(rng, 40, 3)
    check(model("TreeEnsembleClassifier", x, attrs), x, probit_column_1=post == "PROBIT" and class_id == 0
                and base != [0.125, 0.25])


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC"])
@pytest.mark.parametrize("kind", ["ints", "strings"])
def test_classifier_binary_two_columns(post, kind):
    """Both class ids used (a binary random forest): both columns transformed; labels as onnxruntime."""
    rng = np.random.default_rng(len(post) + len(kind))
    nodes, w = forest(rng, 5, 3, 3, MODES, lambda t: [0, 1])
    attrs = dict(nodes, post_transform=post, **labels(kind, 2), **weights(w, "class", False))
    x = inputs(rng, 40, 3)
    check(model("TreeEnsembleClassifier", x, attrs, version=1), x)


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.int32])
def test_classifier_input_types(dt):
    """Double inputs with v3 double tensors; integer inputs compare as float (onnxruntime)."""
    rng = np.random.default_rng(3)
    nodes, w = forest(rng, 6, 3, 3, MODES, lambda t: range(3))
    tensor = dt == np.float64
    attrs = dict(as_tensors(nodes, None) if tensor else nodes, **labels("ints", 3), **weights(w, "class", tensor))
    x = (inputs(rng, 40, 3, np.float64) * (1 if tensor else 4)).astype(dt)
    check(model("TreeEnsembleClassifier", x, attrs), x)


def test_classifier_missing_values():
    rng = np.random.default_rng(11)
    nodes, w = forest(rng, 10, 4, 4, MODES, lambda t: range(3), missing=True)
    attrs = dict(nodes, **labels("strings", 3), **weights(w, "class", False))
    x = inputs(rng, 100, 4, nans=True)
    check(model("TreeEnsembleClassifier", x, attrs), x)


# -- errors ---------------------------------------------------------------------------------------

def _small() -> dict:
    return dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[2, 0, 0],
                nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
                nodes_values=[0.5, 0.0, 0.0], n_targets=1, target_treeids=[0, 0], target_nodeids=[1, 2],
                target_ids=[0, 0], target_weights=[1.0, 2.0])


@pytest.mark.parametrize("change,match", [
    ({"nodes_values": [0.5, 0.0]}, "nodes_values has 2 entries"),
    ({"nodes_modes": ["BRANCH_LE", "LEAF", "LEAF"]}, "'BRANCH_LE'"),
    ({"nodes_truenodeids": [5, 0, 0]}, "names node 5"),
    ({"nodes_modes": ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], "nodes_truenodeids": [1, 0, 0],
      "nodes_falsenodeids": [2, 2, 0]}, "cycle"),
    ({"target_nodeids": [1, 4]}, "node 4 of tree 0"),
    ({"target_ids": [0, 1]}, r"target_ids must be in \[0, 1\)"),
    ({"target_nodeids": [1, 1]}, "leaf 2 of tree 0 has no target"),
    ({"nodes_nodeids": [0, 1, 1]}, "defined twice"),
    ({"post_transform": "SIGMOID"}, "post_transform 'SIGMOID'"),
    ({"aggregate_function": "MEDIAN"}, "aggregate_function 'MEDIAN'"),
    ({"target_weights": [1.0]}, "target_weights has 1 entries"),
])
def test_errors_name_the_attribute(change, match):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(onnxc.ShapeError, match=match):
        onnxc.compile(model("TreeEnsembleRegressor", x, {**_small(), **change}))


def test_too_few_features_fails_at_run_time():
    x = np.zeros((2, 3), np.float32)
    assert onnxc.compile(model("TreeEnsembleRegressor", x, _small())).run({"x": x})["y"].shape == (2, 1)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, **_small())
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TP.FLOAT, ["N", "F"])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    cm = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)]))
    with pytest.raises(onnxc.RuntimeFailure, match="feature 2, but the input has 2 features"):
        cm.run({"x": np.zeros((2, 2), np.float32)})


def test_classifier_label_errors():
    x = np.zeros((2, 3), np.float32)
    base = {k: v for k, v in _small().items() if not k.startswith("target") and k != "n_targets"}
    cls = dict(class_treeids=[0, 0], class_nodeids=[1, 2], class_ids=[0, 1], class_weights=[1.0, 2.0])
    with pytest.raises(onnxc.ShapeError, match="exactly one of classlabels"):
        onnxc.compile(model("TreeEnsembleClassifier", x, {**base, **cls, "classlabels_int64s": [1, 2]} |
                            {"classlabels_strings": ["a", "b"]}))
    with pytest.raises(onnxc.OnnxcError, match="single class label"):
        onnxc.compile(model("TreeEnsembleClassifier", x, {**base, **cls, "class_ids": [0, 0],
                                                          "classlabels_int64s": [1]}))


@pytest.mark.parametrize("kind", ["ints", "strings"])
def test_classifier_rows_on_the_pool(kind):
    """At threads=2 the rows run on the runtime's pool (onnxc_parallel, no OpenMP region) from 64 rows: the
    same labels and bits as the one-thread build, against onnxruntime, for several values of the symbolic N."""
    rng = np.random.default_rng(seed(("pool", kind)))
    nodes, w = forest(rng, 12, 4, 5, MODES, lambda t: range(3), missing=True)
    attrs = dict(nodes, post_transform="SOFTMAX", **labels(kind, 3), **weights(w, "class", False))
    x = inputs(rng, 700, 5, nans=True)
    m = model("TreeEnsembleClassifier", x, attrs)
    one = onnxc.compile(m, threads=1)
    for n in (700, 64, 63, 1):
        got = check(m, x[:n], threads=2)
        assert "onnxc_parallel(" in got["compiled"].c_source and "omp parallel" not in got["compiled"].c_source
        base = one.run({"x": x[:n]})
        for k in ("label", "y"):
            np.testing.assert_array_equal(got[k], base[k])


# -- forests as data ------------------------------------------------------------------------------

def test_forest_is_data_not_code():
    """A LightGBM-like classifier (BRANCH_LEQ, missing values tracked, one class per tree) + ZipMap: its nodes
    go to the weights blob, so the generated C is the same size for 15 trees as for 1,500; the 1,500 trees
    agree with onnxruntime for one row (8 trees at a time over the whole forest), for several (2 to 100 rows
    passing groups of trees of about 8192 nodes, 15 groups here) and on the pool (300 rows, two threads)."""
    from benchmarks.forest_scale import lightgbm_like
    from onnxc.api import lower_model
    from onnxc.codegen.emit import emit_c

    big, small = lightgbm_like(1500, 40, 20, 5, seed=3), lightgbm_like(15, 40, 20, 5, seed=4)
    sizes = [len(emit_c(lower_model(m.SerializeToString(), threads=2)[1])) for m in (small, big)]
    assert abs(sizes[0] - sizes[1]) < 64, sizes
    cm = onnxc.compile(big, threads=2)
    c = cm.c_source
    assert len(c) < 40_000 and ".mode = 8," in c  # BRANCH_LEQ + ONNXC_TREE_MISSING
    sess = ort.InferenceSession(big.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 20)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    for n in (1, 2, 5, 16, 100, 300):
        got, (label, probs) = cm.run({"input": x[:n]}), sess.run(None, {"input": x[:n]})
        np.testing.assert_array_equal(got["label"], label)
        want = np.array([[d[k] for k in range(5)] for d in probs])
        np.testing.assert_allclose([[d[k] for k in range(5)] for d in got["output_probability"]], want,
                                   rtol=1e-5, atol=1e-6)


def test_shared_nodes_and_double_thresholds():
    """TreeEnsemble trees may share nodes (tree 1 is the true child of tree 0's root): each tree's depth is its
    longest path. Thresholds that are not floats compare in double: x = 0.1f is above 0.1 (BRANCH_LEQ false)
    for float inputs, 0.1 is not above it for double inputs; integer inputs compare as float."""
    shared = dict(nodes_featureids=[0, 1], nodes_modes=numpy_helper.from_array(np.array([0, 3], np.uint8)),
                  nodes_splits=numpy_helper.from_array(np.array([0.5, 0.25], np.float32)),
                  nodes_truenodeids=[1, 0], nodes_falsenodeids=[0, 1], nodes_trueleafs=[0, 1],
                  nodes_falseleafs=[1, 1], leaf_targetids=[0, 1],
                  leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0], np.float32)), tree_roots=[0, 1], n_targets=2)
    g = helper.make_graph([helper.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, **shared)], "t",
                          [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 2])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)])
    cm = onnxc.compile(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 5, np.float32)
    for n in (1, 20):  # row by row, and in a block (tree 0 is two nodes deep)
        np.testing.assert_array_equal(cm.run({"x": x[:n]})["y"], sess.run(None, {"x": x[:n]})[0])
    fine = dict(_small(), nodes_featureids=[0, 0, 0], nodes_values_as_tensor=numpy_helper.from_array(
        np.array([0.1, 0.0, 0.0])))
    del fine["nodes_values"]
    types = [TP.FLOAT, TP.DOUBLE, TP.INT64]
    g = helper.make_graph([helper.make_node("TreeEnsembleRegressor", [f"x{k}"], [f"y{k}"], domain=ML, **fine)
                           for k in range(3)], "t",
                          [helper.make_tensor_value_info(f"x{k}", t, ["M", 1]) for k, t in enumerate(types)],
                          [helper.make_tensor_value_info(f"y{k}", TP.FLOAT, None) for k in range(3)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)])
    got = onnxc.compile(m).run({"x0": np.array([[0.1], [0.0]], np.float32), "x1": np.array([[0.1], [0.2]]),
                                "x2": np.array([[0], [1]], np.int64)})
    for k in range(3):
        np.testing.assert_array_equal(got[f"y{k}"], [[2.0], [1.0]] if k == 0 else [[1.0], [2.0]])


@pytest.mark.parametrize("change,match", [
    ({"nodes_modes": ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], "nodes_truenodeids": [1, 0, 0],
      "nodes_falsenodeids": [2, 0, 0]}, "tree 0 has a cycle through node"),
    ({"nodes_featureids": [2**28, 0, 0]}, "feature index 268435456 is too large"),
    ({"nodes_falsenodeids": [2, 0, 0], "nodes_treeids": [0, 0, 1]}, "names node 2, which does not exist"),
    ({"target_treeids": [0, 3]}, "names node 2 of tree 3, which does not exist"),
])
def test_more_errors(change, match):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(onnxc.ShapeError, match=match):
        onnxc.compile(model("TreeEnsembleRegressor", x, {**_small(), **change}))


def test_layout_preorder_and_leaves():
    """The blob layout (codegen/kernels/trees_layout.py): 16 bytes a node, tree after tree, each in preorder
    with the true child next; leaves flagged, pointing at themselves, numbered in that order."""
    from onnxc.codegen.kernels.trees_classic import classic
    from onnxc.codegen.kernels.trees_layout import LEAF, forest_tables
    from onnxc.frontend import load_model

    rng = np.random.default_rng(9)
    nodes, w = forest(rng, 6, 4, 3, ["BRANCH_LEQ"], lambda t: [0, 1][: 1 + t % 2])
    x = np.zeros((1, 3), np.float32)
    node = load_model(model("TreeEnsembleRegressor", x, dict(nodes, n_targets=2, **weights(w, "target", False)))
                      .SerializeToString()).graph.nodes[0]
    c = classic(node, "target", 2)
    tabs, scalars = forest_tables(c.forest, 2, 0, False, node)
    t = tabs["nodes"]
    assert t.dtype == np.int32 and t.shape == (len(nodes["nodes_treeids"]), 4)  # 16 bytes a node
    leaf = (t[:, 0] & LEAF) != 0
    branch = np.flatnonzero(~leaf)
    np.testing.assert_array_equal(t[branch, 2], branch + 1)  # the true child follows its parent
    assert (t[leaf, 2] == np.flatnonzero(leaf)).all() and (t[leaf, 1] == np.arange(leaf.sum())).all()
    starts = np.r_[tabs["roots"], len(t)]
    assert (np.diff(starts) > 0).all()  # tree after tree
    # one or two weights a leaf: CSR over the leaves (that each leaf keeps its weights: the onnxruntime tests)
    assert scalars["layout"] == 2 and len(tabs["starts"]) == leaf.sum() + 1
    assert tabs["starts"][-1] == len(tabs["weights"]) == len(w["weights"])


def test_complete_trees_layout_and_fallback():
    """Complete trees (trees_layout.complete_tables): walking slot j to 2j + 1 / 2j + 2 reaches the leaf the
    node walk reaches, for trees of different depths with leaves above the bottom, NaN features and NaN
    thresholds; a tree deeper than COMPLETE_DEPTH keeps the node walk (no complete tables), with the
    same results as onnxruntime."""
    from onnxc.codegen.kernels.trees_classic import classic
    from onnxc.codegen.kernels.trees_layout import COMPLETE_DEPTH, LEAF, complete_tables, forest_tables
    from onnxc.frontend import load_model

    rng = np.random.default_rng(11)
    nodes, w = forest(rng, 12, 5, 4, ["BRANCH_LT"], lambda t: [0], nan_splits=True)
    x = inputs(rng, 50, 4, nans=True)
    node = load_model(model("TreeEnsembleRegressor", x, dict(nodes, n_targets=1, **weights(w, "target", False)))
                      .SerializeToString()).graph.nodes[0]
    tabs, _ = forest_tables(classic(node, "target", 1).forest, 1, 0, False, node)
    t, comp = tabs["nodes"], complete_tables(tabs["nodes"], tabs["roots"], tabs["depths"])
    split, csplit = t[:, 1].view(np.float32), comp["csplit"]
    for row in x:
        for tree, (root, depth) in enumerate(zip(tabs["roots"], tabs["depths"])):
            k = root
            while not t[k, 0] & LEAF:
                k = t[k, 2] if row[t[k, 0] & (LEAF - 1)] < split[k] else t[k, 3]
            j, base = 0, comp["cbase"][tree]
            for _ in range(depth):
                j = 2 * j + (1 if row[comp["cfeat"][base + j]] < csplit[base + j] else 2)
            assert comp["cleaf"][base + tree + j - (2 ** depth - 1)] == t[k, 1]
    b = COMPLETE_DEPTH + 1  # one tree: a chain of b branch nodes (even ids), each with a leaf (odd ids)
    branch = [k % 2 == 0 and k < 2 * b for k in range(2 * b + 1)]
    chain = dict(nodes_treeids=[0] * (2 * b + 1), nodes_nodeids=list(range(2 * b + 1)),
                 nodes_featureids=[k % 4 for k in range(2 * b + 1)],
                 nodes_modes=["BRANCH_LEQ" if br else "LEAF" for br in branch],
                 nodes_truenodeids=[k + 1 if br else 0 for k, br in enumerate(branch)],
                 nodes_falsenodeids=[k + 2 if br else 0 for k, br in enumerate(branch)],
                 nodes_values=[float(rng.choice(GRID)) for _ in branch], n_targets=1,
                 target_treeids=[0] * (b + 1), target_ids=[0] * (b + 1),
                 target_nodeids=[k for k, br in enumerate(branch) if not br],
                 target_weights=[float(k) for k in range(b + 1)])
    got = check(model("TreeEnsembleRegressor", x, chain), x)
    assert ".cbase = NULL" in got["compiled"].c_source
    for n in (1, 2):
        np.testing.assert_array_equal(got["compiled"].run({"x": x[:n]})["y"], got["y"][:n])
