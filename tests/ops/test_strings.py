"""String tensors end to end (inputs, constants, outputs, data movement) and the string ops:
Equal, StringConcat, RegexFullMatch, StringSplit, StringNormalizer.

Compared with onnx.reference where its semantics are the spec's; StringNormalizer's reference splits
elements into words and strips accents (the spec does neither), so those cases state the expected
values, and so do the cases of RE2 semantics Python's ``re`` does not share.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from tests.ops.util import check_node, node_model, reference


def strs(*items, shape=None) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a.reshape(shape if shape is not None else (len(items),))


def run(model: onnx.ModelProto, feeds: dict) -> dict:
    return onnxc.compile(model).run(feeds)


def assert_strings(got: np.ndarray, want) -> None:
    want = np.asarray(want, dtype=object)
    assert got.dtype == object and got.shape == want.shape, (got, want)
    assert got.tolist() == want.tolist(), (got, want)


def check_strings(op: str, inputs: dict, expected: list | None = None, n_outputs: int = 1, opset: int = 20,
                  input_shapes: dict | None = None, const_inputs: tuple = (), **attrs) -> dict:
    """Compile a one-node model and compare every output (strings exactly) with the reference."""
    model = node_model(op, inputs, n_outputs, opset, input_shapes=input_shapes, const_inputs=const_inputs, **attrs)
    feeds = {k: v for k, v in inputs.items() if k not in const_inputs}
    want = expected if expected is not None else reference(model, feeds)
    got = run(model, feeds)
    for i, w in enumerate(want):
        g, w = got[f"y{i}"], np.asarray(w)
        if w.dtype.kind in "OUS":
            assert_strings(g, w.astype(object))
        else:
            assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
            np.testing.assert_array_equal(g, w)
    return got


# -- string tensors through the API and data-movement ops -----------------------------------------

UNICODE = strs("", "a", "été", "的的", "mixed ascii ü", "tab\tnew\nline", "\U0001F600")


@pytest.mark.parametrize("as_type", [object, str])
def test_identity_round_trip(as_type):
    x = UNICODE.astype(as_type)
    got = run(node_model("Identity", {"x": x}, input_shapes={"x": ["N"]}), {"x": x})["y0"]
    assert_strings(got, UNICODE)


def test_bytes_input_and_errors():
    model = node_model("Identity", {"x": strs("a")}, input_shapes={"x": ["N"]})
    m = onnxc.compile(model)
    assert_strings(m.run({"x": np.array([b"ab", b"\xc3\xa9"])})["y0"], ["ab", "é"])
    with pytest.raises(onnxc.InputError, match="expected strings"):
        m.run({"x": np.zeros(2, np.float32)})
    with pytest.raises(onnxc.InputError, match="NUL"):
        m.run({"x": strs("a\0b")})
    with pytest.raises(onnxc.InputError, match="expected strings"):
        m.run({"x": strs("a", 3)})


def test_string_constants_and_pool():
    """An initializer, a Constant node and run-time strings meet in one graph; outputs are copies."""
    c = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TP.STRING, [2], [b"k\xc3\xa9", b""]))
    nodes = [c, helper.make_node("StringConcat", ["x", "c"], ["y"]), helper.make_node("Identity", ["w"], ["z"]),
             helper.make_node("Identity", ["c"], ["k"])]
    w = onnx.numpy_helper.from_array(strs("w0", "w1\"\\?"), "w")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.STRING, [2])],
                          [helper.make_tensor_value_info(n, TP.STRING, None) for n in ("y", "z", "k")], [w])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]))
    out = m.run({"x": strs("a", "b")})
    assert_strings(out["y"], ["aké", "b"])
    assert_strings(out["z"], ["w0", "w1\"\\?"])
    assert_strings(out["k"], ["ké", ""])


@pytest.mark.parametrize("op,inputs,attrs", [
    ("Transpose", {"x": UNICODE[:6].reshape(2, 3)}, {"perm": [1, 0]}),
    ("Concat", {"x": UNICODE[:4].reshape(2, 2), "z": UNICODE[3:7].reshape(2, 2)}, {"axis": 1}),
    ("Gather", {"x": UNICODE, "i": np.array([[6, 0], [-1, 2]], np.int64)}, {"axis": 0}),
    ("GatherElements", {"x": UNICODE[:6].reshape(2, 3), "i": np.array([[2, 0], [1, 1]], np.int64)}, {"axis": 1}),
    ("Slice", {"x": UNICODE, "s": np.array([5], np.int64), "e": np.array([0], np.int64),
               "a": np.array([0], np.int64), "k": np.array([-2], np.int64)}, {}),
    ("Expand", {"x": UNICODE[:3].reshape(3, 1), "s": np.array([2, 3, 2], np.int64)}, {}),
    ("Tile", {"x": UNICODE[:2].reshape(1, 2), "r": np.array([2, 2], np.int64)}, {}),
    ("Reshape", {"x": UNICODE[:6], "s": np.array([3, -1], np.int64)}, {}),
    ("Compress", {"x": UNICODE[:4].reshape(2, 2), "c": np.array([False, True])}, {"axis": 1}),
])
def test_data_movement(op, inputs, attrs):
    consts = tuple(k for k in inputs if k not in ("x", "z"))
    check_strings(op, inputs, opset=18, const_inputs=consts, **attrs)


def test_split_strings_multiple_outputs():
    check_strings("Split", {"x": UNICODE[:6].reshape(3, 2), "s": np.array([1, 2], np.int64)}, n_outputs=2,
                  opset=18, const_inputs=("s",), axis=0)


def test_unsupported_string_ops_are_rejected():
    model = node_model("Pad", {"x": strs("a", "b"), "p": np.array([1, 1], np.int64)}, opset=18, const_inputs=("p",))
    with pytest.raises(onnxc.UnsupportedOpError, match="string"):
        onnxc.compile(model)


# -- Equal, StringConcat --------------------------------------------------------------------------

def test_equal_broadcast_symbolic():
    x = strs("a", "", "é", "b", "a", "的", shape=(2, 3))
    y = strs("a", "", "的", shape=(1, 3))
    check_strings("Equal", {"x": x, "z": y}, opset=19, input_shapes={"x": ["N", 3], "z": ["M", 3]})
    check_strings("Equal", {"x": x, "z": strs("é")}, opset=19)


def test_equal_constant_folds():
    x, y = strs("a", "b"), strs("a", "c")
    model = node_model("Equal", {"x": x, "z": y}, opset=19, const_inputs=("x", "z"))
    m = onnxc.compile(model)
    assert not m.ir.graph.nodes
    np.testing.assert_array_equal(m.run({})["y0"], [True, False])


@pytest.mark.parametrize("xs,ys,shapes", [
    (strs("ab", "", "é"), strs("的", "x", ""), None),
    (strs("a", "b", "c", "d", shape=(2, 2)), strs("1", "2", shape=(2, 1)), {"x": ["N", 2], "z": ["N", 1]}),
    (strs("cat", shape=()), strs("s", "es"), None),
    (np.empty((0, 3), dtype=object), strs("s", "t", "u"), {"x": ["N", 3]}),
])
def test_string_concat(xs, ys, shapes):
    check_strings("StringConcat", {"x": xs, "z": ys}, input_shapes=shapes)


def test_string_concat_constant_folds_and_chains():
    model = node_model("StringConcat", {"x": strs("a", "b"), "z": strs("1", "2")}, opset=20, const_inputs=("x", "z"))
    m = onnxc.compile(model)
    assert not m.ir.graph.nodes
    assert_strings(m.run({})["y0"], ["a1", "b2"])


def test_pool_spans_many_chunks():
    """Strings made at run time outgrow one pool chunk, and some are larger than a chunk."""
    n = 20000
    x = strs(*[f"item{i:06d}" for i in range(n)] + ["x" * 100000, "y" * 300000])
    g = helper.make_graph([helper.make_node("StringConcat", ["x", "s"], ["t"]),
                           helper.make_node("StringConcat", ["t", "x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TP.STRING, ["N"]),
                           helper.make_tensor_value_info("s", TP.STRING, [])],
                          [helper.make_tensor_value_info("y", TP.STRING, None)])
    got = run(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), {"x": x, "s": strs("-", shape=())})["y"]
    assert got.shape == (n + 2,)
    assert got[0] == "item000000-item000000" and got[n - 1] == f"item{n - 1:06d}-item{n - 1:06d}"
    assert got[n] == "x" * 100000 + "-" + "x" * 100000 and got[n + 1] == "y" * 300000 + "-" + "y" * 300000


# -- RegexFullMatch -------------------------------------------------------------------------------

TEXTS = strs("abc", "ABC", "a1b2", "123", "", "a.b", "a\nb", "hello world", "foo@bar.com", "x-y_z", "aaa",
             "www.example.com", "{}", "^$")


@pytest.mark.parametrize("pattern", [
    r"abc", r"[a-c]+", r"\d+", r"\D*", r"\w+", r"\W", r"\s", r"\S+\s\S+", r"a.b", r"(a|b|c)*", r"a{2,3}",
    r"a{3}", r"(?:ab)c", r"(?P<x>a)bc", r"a+?", r"[^a-z]*", r"[\w.-]+@\w+\.com", r"x[\-_]y[_-]z",
    r"\{\}", r"\^\$", r"www\.\w+\.\bcom\b", r"(\W|^)\w+(\W|$)", r"", r"a|",
])
def test_regex_matches_python_re(pattern):
    check_strings("RegexFullMatch", {"x": TEXTS}, pattern=pattern, input_shapes={"x": ["N"]})


@pytest.mark.parametrize("pattern,want", [
    (r"(?i)abc", [True, True, False]),             # flag group at the start: REG_ICASE
    (r"(?s)a.b", [False, False, True]),            # dot matches newline
    (r"\w+", [True, False, False]),                # RE2's \w is ASCII (Python's re is Unicode)
    (r"a.b", [False, True, False]),                # '.' is one UTF-8 character
    (r"\Q{a}\E", [False, False, True]),            # quoted literal
    (r"[[:digit:]x]+", [True, False, False]),      # POSIX class inside a bracket
])
def test_regex_re2_semantics(pattern, want):
    second = {"(?i)abc": "ABC", "a.b": "a的b"}.get(pattern, "é")
    third = {r"\Q{a}\E": "{a}"}.get(pattern, "a\nb")
    x = strs("abc" if "digit" not in pattern else "12x", second, third)
    check_strings("RegexFullMatch", {"x": x}, expected=[np.array(want)], pattern=pattern)


@pytest.mark.parametrize("pattern", [r"\pL+", r"(?=a)", r"a(?i)b", r"[\W]"])
def test_regex_unsupported(pattern):
    with pytest.raises(onnxc.UnsupportedOpError, match="pattern"):
        onnxc.compile(node_model("RegexFullMatch", {"x": strs("a")}, opset=20, pattern=pattern))


# -- StringSplit ----------------------------------------------------------------------------------

SPLIT_TEXTS = strs("a b  c ", "  lead", "", "one", "x\u3000y\u2029z\tw\x1c", "é,的,,", "a--b--c", "--")


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ""}, {"delimiter": ","}, {"delimiter": "--"},
                                   {"maxsplit": 1}, {"maxsplit": 0}, {"delimiter": ",", "maxsplit": 1},
                                   {"delimiter": "--", "maxsplit": 0}])
def test_string_split_matches_python(attrs):
    check_strings("StringSplit", {"x": SPLIT_TEXTS.reshape(2, 4)}, n_outputs=2, input_shapes={"x": ["N", 4]},
                  **attrs)


def test_string_split_empty_and_constant():
    check_strings("StringSplit", {"x": np.empty((0, 2), dtype=object)}, n_outputs=2, input_shapes={"x": ["N", 2]})
    model = node_model("StringSplit", {"x": strs("a b", "c")}, 2, 20, const_inputs=("x",))
    m = onnxc.compile(model)
    out = m.run({})
    assert_strings(out["y0"], [["a", "b"], ["c", ""]])
    np.testing.assert_array_equal(out["y1"], [2, 1])


# -- StringNormalizer -----------------------------------------------------------------------------

WEEK = strs("monday", "tuesday", "wednesday", "Monday", "MONDAY", "friday")


@pytest.mark.parametrize("attrs", [
    {}, {"case_change_action": "UPPER"}, {"case_change_action": "LOWER", "stopwords": ["friday"]},
    {"stopwords": ["monday", "tuesday"], "is_case_sensitive": 1},
    {"stopwords": ["Monday"], "is_case_sensitive": 0, "case_change_action": "UPPER"},
    {"stopwords": ["monday"], "is_case_sensitive": 0, "case_change_action": "LOWER"},
])
@pytest.mark.parametrize("two_dim", [False, True])
def test_normalizer_matches_reference(attrs, two_dim):
    x = WEEK.reshape(1, 6) if two_dim else WEEK
    shapes = {"x": [1, "C"] if two_dim else ["C"]}
    check_strings("StringNormalizer", {"x": x}, opset=10, input_shapes=shapes, **attrs)


def test_normalizer_all_dropped():
    got = check_strings("StringNormalizer", {"x": strs("a", "A")}, expected=[strs("")], opset=10,
                        stopwords=["a"])
    assert got["y0"].shape == (1,)
    check_strings("StringNormalizer", {"x": strs("a", "A", shape=(1, 2))}, expected=[strs("", shape=(1, 1))],
                  opset=10, stopwords=["a"], input_shapes={"x": [1, "C"]})


def test_normalizer_unicode():
    """Unicode case mapping and case-insensitive stopwords; elements are kept whole (no word split,
    no accent stripping, both of which onnx.reference does)."""
    x = strs("Été", "ÉTÉ chaud", "Ωμέγα", "straße", "", "été")
    check_strings("StringNormalizer", {"x": x}, expected=[strs("ÉTÉ CHAUD", "ΩΜΈΓΑ", "STRAßE", "")], opset=10,
                  case_change_action="UPPER", stopwords=["été"], input_shapes={"x": ["C"]})
    check_strings("StringNormalizer", {"x": x}, expected=[strs("été", "été chaud", "ωμέγα", "straße", "", "été")],
                  opset=10, case_change_action="LOWER", locale="en_US")


def test_normalizer_rejects_many_rows():
    x = strs("a", "b", shape=(2, 1))
    m = onnxc.compile(node_model("StringNormalizer", {"x": x}, opset=10, input_shapes={"x": ["N", 1]},
                                 stopwords=["a"]))
    with pytest.raises(onnxc.RuntimeFailure, match=r"\[C\] or \[1, C\]"):
        m.run({"x": x})
    with pytest.raises(onnxc.ShapeError, match=r"\[C\] or \[1, C\]"):
        onnxc.compile(node_model("StringNormalizer", {"x": x}, opset=10))


def test_normalizer_feeds_other_string_ops():
    """Pool strings made by one op are inputs of the next, then packed into the output."""
    g = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["n"], case_change_action="UPPER",
                                            stopwords=["skip"]),
                           helper.make_node("StringConcat", ["n", "x2"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TP.STRING, ["C"]),
                           helper.make_tensor_value_info("x2", TP.STRING, [1])],
                          [helper.make_tensor_value_info("y", TP.STRING, None)])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]))
    assert_strings(m.run({"x": strs("skip", "a", "b"), "x2": strs("!")})["y"], ["A!", "B!"])


def test_check_node_with_strings():
    """The shared op-test helper also handles string outputs."""
    check_node("Identity", {"x": UNICODE}, expected=[UNICODE])
