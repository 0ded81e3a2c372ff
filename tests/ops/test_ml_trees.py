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
           leaf_ids, missing: bool = False) -> tuple[dict, dict]:
    """Node attributes of random trees (node ids shuffled, root first) and leaf weights: ``leaf_ids(tree)``
    gives the target/class ids of one leaf; weights are multiples of 1/8 (sums exact in float)."""
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
            nodes["values"].append(0.0 if leaf else float(rng.choice(GRID)))
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
    rng = np.random.default_rng(7)
    nodes, w = forest(rng, 20, 4, 5, MODES, lambda t: [t % 2], missing=True)
    attrs = dict(nodes, n_targets=2, aggregate_function="AVERAGE", **weights(w, "target", False))
    x = inputs(rng, 300, 5, nans=True)
    # not onnx.reference: it sends NaN by the missing flag alone, onnxruntime by the comparison too (NaN != t)
    got = check(model("TreeEnsembleRegressor", x, attrs), x, threads=2)
    assert "onnxc_parallel(" in got["compiled"].c_source and "onnxc_forest_leaves" not in got["compiled"].c_source


@pytest.mark.parametrize("mode", MODES[:4])
@pytest.mark.parametrize("n, threads", [(1, 1), (18, 1), (37, 1), (300, 2)])
def test_block_walk_single_mode_forests(mode, n, threads):
    """Float inputs of forests with one comparison mode and no missing-value tracking walk 16 rows through a
    tree at a time (runtime_c/onnxc_forest.h): row counts that are not multiples of 16, NaN features (the
    false branch), deep and one-leaf trees, on one and two threads, agree with onnxruntime; fewer than 4 rows
    (batch 1, a block's tail) walk row by row."""
    rng = np.random.default_rng(seed(mode, n, threads))
    nodes, w = forest(rng, 40, 6, 5, [mode], lambda t: [t % 3])
    attrs = dict(nodes, n_targets=3, aggregate_function="SUM", **weights(w, "target", False))
    x = inputs(rng, n, 5, nans=True)
    got = check(model("TreeEnsembleRegressor", x, attrs), x, threads=threads)
    assert "onnxc_forest_leaves" in got["compiled"].c_source
    if threads > 1:
        assert "onnxc_parallel(" in got["compiled"].c_source
        one = onnxc.compile(model("TreeEnsembleRegressor", x, attrs), threads=1).run({"x": x})["y"]
        np.testing.assert_array_equal(got["y"], one)


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
