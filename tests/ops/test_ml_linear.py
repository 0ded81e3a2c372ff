"""ai.onnx.ml LinearRegressor and LinearClassifier (expanded into MatMul/Add/ArgMax/Gather and the post
transform), compared with onnxruntime, and with onnx.reference where the two agree (see the docstring
of passes/expansions/ml_linear.py for where they do not). Many nodes with different attributes sit side
by side in one model (``SideBySide``, also used by the other ml test files), so the whole attribute grid
costs a few compiles; the batch dimension is symbolic and runs with 5 rows (one all zeros) and 1 row."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import ModelError, ShapeError, UnsupportedOpError
from onnxc.passes.pipeline import optimize

ML = "ai.onnx.ml"
POST = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


def assert_same(got, want, where: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Equal shapes and types; strings and integers exactly, floats to the tolerance."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{where}: shape {got.shape} vs {want.shape}"
    if want.dtype.kind in "OUS":
        assert got.tolist() == want.astype(object).tolist(), f"{where}: {got.tolist()} vs {want.tolist()}"
    else:
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} vs {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


class SideBySide:
    """Many ai.onnx.ml nodes in one model: onnxc compiles it once, onnxruntime runs a twin model in which
    a node may read other inputs (``twin_ins``: e.g. a float copy where onnxruntime has a float kernel
    only) or have other attributes (``twin_attrs``: e.g. the zero intercepts onnxc assumes); nodes marked
    ``reference`` are also checked against onnx.reference."""

    def __init__(self, ml_opset: int = 1):
        self.opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)]
        self.inputs: dict[str, onnx.ValueInfoProto] = {}
        self.nodes: list = []
        self.twins: list = []
        self.refs: list = []
        self.tols: dict[str, tuple[float, float, slice]] = {}
        self.hidden: set[str] = set()  # node outputs that are not graph outputs
        self.weights: list[onnx.TensorProto] = []

    def input(self, name: str, elem: int, shape: list) -> str:
        self.inputs[name] = helper.make_tensor_value_info(name, elem, shape)
        return name

    def initializer(self, name: str, value: np.ndarray) -> str:
        self.weights.append(onnx.numpy_helper.from_array(value, name))
        return name

    def map_input(self, name: str, key: int, value: int) -> str:
        """A graph input of type map(key, value)."""
        t = helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))
        self.inputs[name] = helper.make_value_info(name, t)
        return name

    def add(self, op: str, ins: list[str], n_out: int = 1, *, twin_ins: list[str] | None = None,
            twin_attrs: dict | None = None, reference: bool = False, rtol: float = 1e-5, atol: float = 1e-6,
            cols: slice = slice(None), ort: bool = True, domain: str = ML, **attrs) -> list[str]:
        """Add a node; returns its output names. ``cols``: the score columns compared; ``ort=False``: no
        onnxruntime twin (no kernel for the type; the caller checks the outputs)."""
        name = f"n{len(self.nodes)}_{op}"
        outs = [f"{name}_y{i}" for i in range(n_out)]
        node = helper.make_node(op, ins, outs, domain=domain, name=name, **attrs)
        self.nodes.append(node)
        if ort:
            self.twins.append(helper.make_node(op, twin_ins or ins, outs, domain=domain, name=name,
                                               **{**attrs, **(twin_attrs or {})}))
        if reference:
            self.refs.append(node)
        self.tols.update({o: (rtol, atol, cols) for o in outs})
        return outs

    def model(self, nodes: list) -> onnx.ModelProto:
        used = {i for n in nodes for i in n.input}
        outs = [onnx.ValueInfoProto(name=o) for n in nodes for o in n.output if o not in self.hidden]
        g = helper.make_graph(nodes, "side_by_side", [v for k, v in self.inputs.items() if k in used], outs,
                              [w for w in self.weights if w.name in used])
        return helper.make_model(g, opset_imports=self.opsets)

    def check(self, feeds: list[dict], **compile_kw) -> onnxc.CompiledModel:
        """Compile once; for each feed dict compare every output with onnxruntime (and onnx.reference)."""
        m = self.model(self.nodes)
        compiled = onnxc.compile(m, **compile_kw)
        twin = self.model(self.twins)
        sess = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in twin.graph.output]
        for f in feeds:
            got = self.run(compiled, f)
            want = sess.run(None, {i.name: f[i.name] for i in twin.graph.input})
            for o, w in zip(names, want):
                self._compare(got[o], w, o)
            if self.refs:
                ref = self.model(self.refs)
                outs = ReferenceEvaluator(ref).run(None, {i.name: f[i.name] for i in ref.graph.input})
                for o, w in zip([o.name for o in ref.graph.output], outs):  # the reference's float widths vary
                    g = np.asarray(got[o])
                    self._compare(g, w.astype(g.dtype) if w.dtype.kind == g.dtype.kind == "f" else w,
                                  f"{o} (reference)")
        return compiled

    @staticmethod
    def run(compiled: onnxc.CompiledModel, feeds: dict) -> dict:
        """Run with the feeds the compiled model takes (the twin may read more)."""
        return compiled.run({t.name: feeds[t.name] for t in compiled.inputs})

    def _compare(self, got, want, name: str) -> None:
        rtol, atol, cols = self.tols[name.split(" ")[0]]
        if isinstance(want, list):  # a sequence of maps: the same keys (types too) in the same order
            assert isinstance(got, list) and len(got) == len(want), f"{name}: {got} vs {want}"
            for g, w in zip(got, want):
                assert list(g) == list(w) and [type(k) for k in g] == [type(k) for k in w], f"{name}: {g} vs {w}"
                np.testing.assert_allclose(list(g.values()), list(w.values()), rtol=rtol, atol=atol, err_msg=name)
            return
        if np.asarray(want).ndim == 2 and np.asarray(want).dtype.kind == "f":
            got, want = np.asarray(got)[:, cols], np.asarray(want)[:, cols]
        assert_same(got, want, name, rtol, atol)


rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same numbers whatever ran before it (stable compile cache keys)."""
    global rng
    rng = np.random.default_rng(5)


def rows(dt, *shape) -> np.ndarray:
    if np.dtype(dt).kind == "i":
        return rng.integers(-5, 6, shape).astype(dt)
    return (rng.standard_normal(shape) * 2).astype(dt)


def batches(dt, c: int) -> list[np.ndarray]:
    """A 5-row batch (its last row all zeros: ties, and 0/0 for SOFTMAX_ZERO avoided by intercepts) and one row."""
    x = rows(dt, 5, c)
    x[-1] = 0
    return [x, rows(dt, 1, c)]


def coefs(n: int, scale: float = 0.5) -> list[float]:
    return (rows(np.float32, n) * scale).tolist()


LABELS = {"ints": {"classlabels_ints": [10, -3, 7, 2, 9]},
          "strings": {"classlabels_strings": ["cat", "dog", "é", "", "yak"]}}
FLOAT = onnx.TensorProto.FLOAT


# -- LinearClassifier ---------------------------------------------------------------------------

def test_linear_classifier_grid():
    """Every post transform x int/string labels x 2/4 classes x one score with two labels, no labels,
    extra labels, extra coefficients, omitted intercepts (onnxruntime's twin: zeros)."""
    c = 3
    s = SideBySide()
    x = s.input("x", FLOAT, ["N", c])
    for post in POST:
        tol = dict(atol=5e-5 if post == "PROBIT" else 1e-5)  # PROBIT: onnxruntime's float rounding near p = 0.5
        for lab in LABELS.values():
            for k in (2, 4):
                s.add("LinearClassifier", [x], 2, coefficients=coefs(k * c), intercepts=coefs(k, 0.1),
                      post_transform=post, multi_class=k % 3, reference=post in ("NONE", "LOGISTIC", "SOFTMAX"),
                      **{a: v[:k] for a, v in lab.items()}, **tol)
            # one class score and two labels: Z is [1 - s, s] (PROBIT refused, see test_linear_errors)
            if post != "PROBIT":
                s.add("LinearClassifier", [x], 2, coefficients=coefs(c), intercepts=[0.05], post_transform=post,
                      **{a: v[:2] for a, v in lab.items()}, **tol)
            # more labels than classes: the extra ones are never chosen
            s.add("LinearClassifier", [x], 2, coefficients=coefs(2 * c), intercepts=coefs(2, 0.1),
                  post_transform=post, **lab, **tol)
        # one score without labels: labels 0/1, Z the raw score (PROBIT applied)
        s.add("LinearClassifier", [x], 2, coefficients=coefs(c, 0.05), intercepts=[0.3], post_transform=post, **tol)
        # logreg_iris.onnx's form: coefficients for more features than X has (the first K x C are used)
        s.add("LinearClassifier", [x], 2, coefficients=coefs(3 * 2 * c), intercepts=coefs(3, 0.1),
              post_transform=post, classlabels_ints=[0, 1, 2], **tol)
        # no intercepts (onnxruntime requires them): the class count comes from the labels
        s.add("LinearClassifier", [x], 2, coefficients=coefs(3 * c), post_transform=post, classlabels_ints=[4, 5, 6],
              twin_attrs={"intercepts": [0.0] * 3}, **tol)
    xs = batches(np.float32, c)
    s.check([{"x": a} for a in xs] + [{"x": np.abs(xs[0]) * 0.1}])  # the last: scores in (0, 1) for PROBIT


def test_linear_classifier_input_types_1d_and_label_only_outputs():
    s = SideBySide()
    for dt in (np.float64, np.int64, np.int32):
        x = s.input(f"x_{np.dtype(dt).name}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), ["N", 4])
        s.add("LinearClassifier", [x], 2, coefficients=coefs(12), intercepts=coefs(3, 0.1), post_transform="SOFTMAX",
              classlabels_ints=[0, 1, 2], atol=1e-5)
        s.add("LinearClassifier", [x], 2, coefficients=coefs(4), intercepts=[0.1], classlabels_strings=["n", "y"])
    x1 = s.input("x1", FLOAT, [3])
    s.add("LinearClassifier", [x1], 2, coefficients=[1.0, 0.0, -1.0, 0.5, 0.5, 0.5], intercepts=[0.0, 0.1],
          classlabels_ints=[4, 5], post_transform="LOGISTIC")
    s.add("LinearRegressor", [x1], coefficients=[1.0, -2.0, 0.5, 3.0, 0.0, 1.0], targets=2)
    # only Y is an output: Z's transform is not built (the binary PROBIT would be refused)
    xf = s.input("xf", FLOAT, ["M", 2])
    y, z = s.add("LinearClassifier", [xf], 2, coefficients=[1.0, -1.0], intercepts=[0.0],
                 classlabels_strings=["no", "yes"], post_transform="PROBIT")
    s.hidden.add(z)
    feeds = []
    for n in (5, 1):
        f = {f"x_{np.dtype(dt).name}": rows(dt, n, 4) for dt in (np.float64, np.int64, np.int32)}
        feeds.append({**f, "x1": rows(np.float32, 3), "xf": np.array([[1.0, 0.0], [0.0, 1.0]] * n, np.float32)})
    compiled = s.check(feeds)
    assert s.run(compiled, feeds[1])[y].tolist() == ["yes", "no"]


def test_linear_classifier_ties_pick_the_first_class():
    s = SideBySide()
    x = s.input("x", FLOAT, ["N", 2])
    (y, _) = s.add("LinearClassifier", [x], 2, coefficients=[1.0, 0.0, 1.0, 0.0, 0.0, 1.0], intercepts=[0.0] * 3,
                   classlabels_strings=["a", "b", "c"], reference=True)
    xv = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 2.0]], np.float32)
    assert s.check([{"x": xv}]).run({"x": xv})[y].tolist() == ["a", "a", "a", "c"]


# -- LinearRegressor, and a pipeline ------------------------------------------------------------

def test_linear_regressor_grid_and_pipeline():
    """Post transforms x 1/3 targets, every input type (onnxruntime's twin reads X as float: it has a
    float kernel only), extra coefficients and intercepts of the wrong length (ignored, as onnxruntime
    does), and the Scaler -> LinearClassifier -> Normalizer pipeline skl2onnx writes."""
    c = 3
    s = SideBySide()
    x = s.input("x", FLOAT, ["N", c])
    for post in POST:
        for t in (1, 3):
            s.add("LinearRegressor", [x], coefficients=coefs(t * c, 0.2), intercepts=[0.5] * t, targets=t,
                  post_transform=post, atol=5e-5 if post == "PROBIT" else 1e-5, reference=post == "NONE")
    s.add("LinearRegressor", [x], coefficients=coefs(2 * c + 2), intercepts=[1.0], targets=2)
    s.add("LinearRegressor", [x], coefficients=coefs(c))
    for dt in (np.float64, np.int64, np.int32):
        xt = s.input(f"x_{np.dtype(dt).name}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), ["N", c])
        s.add("LinearRegressor", [xt], twin_ins=["x_int"], coefficients=coefs(2 * c), intercepts=[0.1, 0.2], targets=2)
    s.input("x_int", FLOAT, ["N", c])
    scaled = s.add("Scaler", [x], offset=coefs(c), scale=(np.abs(rows(np.float32, c)) + 0.5).tolist())
    _, scores = s.add("LinearClassifier", scaled, 2, coefficients=coefs(3 * c), intercepts=coefs(3),
                      classlabels_ints=[0, 1, 2], multi_class=1, post_transform="SOFTMAX")
    s.add("Normalizer", [scores], norm="L1")
    feeds = []
    for xv in batches(np.float32, c):
        xi = np.round(xv)
        feeds.append({"x": xv * 0.5, "x_int": xi.astype(np.float32),
                      **{f"x_{np.dtype(dt).name}": xi.astype(dt) for dt in (np.float64, np.int64, np.int32)}})
    s.check(feeds)


def test_linear_ops_expand_into_primitives():
    s = SideBySide()
    x = s.input("x", FLOAT, ["N", 3])
    s.add("LinearClassifier", [x], 2, coefficients=coefs(12), intercepts=coefs(4), **LABELS["strings"])
    s.add("LinearRegressor", [x], coefficients=[1.0, 2.0, 3.0], intercepts=[1.0])
    ops = [n.op_type for n in optimize(load_model(s.model(s.nodes))).graph.nodes]
    assert "LinearClassifier" not in ops and "LinearRegressor" not in ops, ops
    assert "ArgMax" in ops and "Gather" in ops, ops


# -- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,shape,attrs,err,match", [
    ("LinearClassifier", ["N", 3], dict(coefficients=[1.0] * 7, intercepts=[0.0, 0.0], classlabels_ints=[0, 1]),
     ShapeError, "coefficients has 7 values, expected 2 classes x 3 features of X = 6 or a larger multiple of 2"),
    ("LinearClassifier", ["N", 3], dict(coefficients=[1.0] * 2, intercepts=[0.0, 0.0], classlabels_ints=[0, 1]),
     ShapeError, r"coefficients has 2 values, expected 2 classes x 3 features of X = 6$"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 6, intercepts=[0.0] * 3, classlabels_ints=[0, 1]),
     ShapeError, "classlabels_ints has 2 labels but intercepts define 3 classes"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 4, classlabels_ints=[0, 1], post_transform="SIGMOID"),
     ShapeError, "post_transform: unknown value 'SIGMOID'"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 4, classlabels_ints=[0, 1], classlabels_strings=["a", "b"]),
     ShapeError, "only one of the attributes classlabels_ints and classlabels_strings"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 2, intercepts=[0.0], classlabels_strings=["a", "b", "c"]),
     ShapeError, "classlabels_strings has 3 labels; one class score"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 5, classlabels_ints=[0, 1]),
     ShapeError, "coefficients has 5 values, expected 2 classes x 2 features of X = 4 or a larger multiple"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 6, intercepts=[0.0] * 2),
     ShapeError, r"classlabels_ints or classlabels_strings is required \(2 classes\)"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 5),
     ShapeError, "coefficients has 5 values, not a multiple of the 2 features"),
    ("LinearClassifier", ["N", 2], dict(coefficients=[1.0] * 2, intercepts=[0.0], classlabels_ints=[0, 1],
                                        post_transform="PROBIT"),
     UnsupportedOpError, "PROBIT with one class score and two class labels"),
    ("LinearClassifier", ["N", 2], dict(classlabels_ints=[0, 1]), ModelError,
     "required attribute 'coefficients' is missing"),  # the schema check (frontend/op_schema.py)
    ("LinearClassifier", ["N", 2, 2], dict(coefficients=[1.0] * 2), ShapeError, r"\[N, C\] or \[C\], got rank 3"),
    ("LinearClassifier", ["N", "C"], dict(coefficients=[1.0] * 2), UnsupportedOpError, "feature count of X"),
    ("LinearRegressor", ["N", 3], dict(coefficients=[1.0] * 4, targets=2), ShapeError,
     "coefficients has 4 values, expected at least 2 targets x 3 features of X = 6"),
    ("LinearRegressor", ["N", 2], dict(coefficients=[1.0] * 2, targets=0), ShapeError, "targets must be >= 1"),
    ("LinearRegressor", ["N", 2], dict(coefficients=[1.0] * 2, post_transform="softmax"), ShapeError,
     "post_transform: unknown value 'softmax'"),
])
def test_linear_errors_name_node_and_attribute(op, shape, attrs, err, match):
    node = helper.make_node(op, ["x"], ["y", "z"][:2 if op == "LinearClassifier" else 1], domain=ML, name="bad_node",
                            **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", FLOAT, shape)],
                          [onnx.ValueInfoProto(name=o) for o in node.output])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    with pytest.raises(err, match=match) as e:
        onnxc.compile(m)
    assert f"{op} 'bad_node'" in str(e.value)
