"""onnxruntime's contrib op com.microsoft Tokenizer, compared with onnxruntime (which defines it):
token expressions, separators (several, overlapping, matching empty), character mode, mincharnum in
UTF-8 characters, marks and padding, [C] and [N, C] inputs, empty inputs; the attribute errors; and a
text pipeline StringNormalizer -> Tokenizer -> TfIdfVectorizer as skl2onnx exports it.

Each attribute set compiles one model with symbolic input dims that runs all of its inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc

MS = "com.microsoft"
PLAIN = dict(mark=0, mincharnum=1, pad_value="#")
MARK = dict(mark=1, mincharnum=1, pad_value="#")


def strs(items, shape=None) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a.reshape(shape if shape is not None else (len(items),))


def tokenizer_model(*shapes: list, dtype: int = TP.STRING, **attrs) -> onnx.ModelProto:
    """One Tokenizer node per input shape: inputs x0, x1, ..., outputs y0, y1, ..."""
    nodes = [helper.make_node("Tokenizer", [f"x{i}"], [f"y{i}"], domain=MS, **attrs) for i in range(len(shapes))]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(f"x{i}", dtype, s) for i, s in enumerate(shapes)],
                              [helper.make_tensor_value_info(f"y{i}", TP.STRING, None) for i in range(len(shapes))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def check_against_ort(model: onnx.ModelProto, feeds: list) -> None:
    """Every feed (an array for the single input, or a tuple of arrays for all inputs) gives onnxruntime's
    outputs exactly: shapes and strings."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    compiled = onnxc.compile(model)
    for x in feeds:
        feed = dict(zip(names, x if isinstance(x, tuple) else (x,)))
        want = sess.run(None, feed)
        got = compiled.run(feed)
        for w, o in zip(want, sess.get_outputs()):
            g = got[o.name]
            inp = [v.tolist() for v in feed.values()]
            assert g.shape == w.shape, (inp, g.shape, w.shape)
            assert g.tolist() == w.tolist(), (inp, g.tolist(), w.tolist())


TEXTS = ["the cat ran", "a", "", "  héllo,  wörld;;x ", "日本語 テキスト", "no-match 123", "tab\tand\nnewline"]

# (id, attributes, input strings): one model each, run on TEXTS too
CASES = [
    ("tokenexp_words", dict(PLAIN, tokenexp="[a-zA-Z0-9_]+"), ["Hello, world!", "x1_y2 z"]),
    ("tokenexp_longest", dict(PLAIN, tokenexp="a|ab|abc"), ["abcab", "cba"]),
    ("tokenexp_longest_groups", dict(PLAIN, tokenexp="(a|ab)(c|bcd)"), ["abcd", "xabcdab"]),
    ("tokenexp_empty_matches", dict(PLAIN, tokenexp="b*"), ["abxc", "bbb", ""]),
    ("tokenexp_empty_or_char", dict(PLAIN, tokenexp="x*|c"), ["abxc", "éc"]),
    ("tokenexp_end_anchor", dict(PLAIN, tokenexp="b|$"), ["abc", "ab"]),
    ("tokenexp_utf8_class", dict(PLAIN, tokenexp="[^a ]"), ["añb", "日本"]),
    ("tokenexp_dot_newline", dict(PLAIN, tokenexp=".+"), ["a\nb", "x"]),
    ("tokenexp_perl_class", dict(PLAIN, tokenexp="\\w+"), ["añb c_d", "1 2"]),
    ("tokenexp_case_flag", dict(PLAIN, tokenexp="(?i)ab+"), ["xABbab", "AB"]),
    ("tokenexp_mincharnum", dict(PLAIN, tokenexp="[^ ]+", mincharnum=2), ["é ab 日本 c", "x y"]),
    ("tokenexp_mark_pad", dict(mark=1, mincharnum=1, pad_value="PAD", tokenexp="[a-z]{2}"), ["ab", "abcd", "zz1"]),
    ("tokenexp_no_tokens_mark", dict(MARK, tokenexp="[a-b]+"), ["zz1", "99", ""]),
    ("separator_space", dict(PLAIN, separators=[" "]), ["  a  b ", "abc"]),
    ("separators_several", dict(PLAIN, separators=[" ", ",", ";"]), ["hello world", "a,b;;c", "a, b"]),
    ("separators_order", dict(PLAIN, separators=["bc", "ab"]), ["xabcy", "abab"]),
    ("separators_order_swapped", dict(PLAIN, separators=["ab", "bc"]), ["xabcy", "abab"]),
    ("separator_overlapping_matches", dict(PLAIN, separators=["aa"]), ["aaa", "aaaaa", "xaay"]),
    ("separator_longest", dict(PLAIN, separators=["a|ab"]), ["abc", "xaby"]),
    ("separator_regex", dict(PLAIN, separators=["[0-9]+"]), ["a1b22c", "123"]),
    ("separator_empty_match", dict(PLAIN, separators=["x*"]), ["abxc", "xab", ""]),
    ("separator_start_anchor", dict(PLAIN, separators=["^"]), ["abc", "éab"]),
    ("separator_end_anchor", dict(PLAIN, separators=["$"]), ["ab", "ab\ncd"]),
    ("separators_anchor_in_piece", dict(PLAIN, separators=["b", "^"]), ["ab cd", "abc"]),
    ("separators_with_empty", dict(PLAIN, separators=["", " "]), ["ab", "a b"]),
    ("separator_case_flag", dict(PLAIN, separators=["(?i)x"]), ["aXbxc"]),
    ("separators_mincharnum_utf8", dict(PLAIN, separators=[" ", "x"], mincharnum=2), ["日本 語x", "é ab"]),
    ("separator_mark_pad_utf8", dict(mark=1, mincharnum=1, pad_value="é", separators=[" "]), ["a b", "c", ""]),
    ("separator_no_tokens_mark", dict(MARK, separators=[" "]), ["  ", ""]),
    ("chars", dict(PLAIN, separators=[""]), ["héllo wörld", "日本語", ""]),
    ("chars_mark", dict(MARK, separators=[""]), ["héllo", "\U0001F600x", ""]),
]


@pytest.mark.parametrize("attrs,texts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_onnxruntime(attrs, texts):
    """[C] and [N, C] inputs (one model), each run on several batches."""
    model = tokenizer_model(["C"], ["N", "M"], **attrs)
    check_against_ort(model, [(strs(texts + TEXTS[:len(texts)]), strs((texts + TEXTS)[:6], (2, 3))),
                              (strs(texts), strs(texts, (len(texts), 1))), (strs(TEXTS), strs(TEXTS, (1, -1))),
                              (strs(["", ""]), strs(["", ""], (2, 1)))])


def test_no_tokens_anywhere_gives_zero_width():
    """onnxruntime: D is 0 when no string has a token, with or without mark."""
    for attrs in (PLAIN, MARK):
        check_against_ort(tokenizer_model(["N", "C"], tokenexp="[a-b]+", **attrs),
                          [strs(["zz", "1", "9", ""], (2, 2)), strs(["x"], (1, 1))])


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_empty_inputs(shape):
    """A static empty input: [0] -> [0], [N, 0] and [0, C] -> [N, 0], as onnxruntime."""
    check_against_ort(tokenizer_model(list(shape), tokenexp="[a-z]+", **MARK), [strs([], shape)])


def test_invalid_utf8_does_not_fail():
    """Bytes that are not UTF-8 (surrogate-escaped in Python) are one character each, never a crash."""
    model = tokenizer_model(["C"], separators=[" "], mark=0, mincharnum=2, pad_value="#")
    x = strs(["a\udcff b\udcc3\udca9c", "\udce9", "\udcf0\udc9f x"])
    got = onnxc.compile(model).run({"x0": x})["y0"]
    assert got.tolist() == [["a\udcff", "béc"], ["#", "#"], ["\udcf0\udc9f", "#"]]
    chars = onnxc.compile(tokenizer_model(["C"], separators=[""], **PLAIN)).run({"x0": strs(["\udcffé\udcc3"])})["y0"]
    assert chars.tolist() == [["\udcff", "é", "\udcc3"]]


# -- compile-time errors --------------------------------------------------------------------------

@pytest.mark.parametrize("attrs,match", [
    (dict(PLAIN), "one of the attributes 'separators' and 'tokenexp' is required"),
    (dict(PLAIN, separators=[" "], tokenexp="a"), "only one of the attributes 'separators' and 'tokenexp'"),
    (dict(PLAIN, tokenexp=""), "'tokenexp' must not be empty"),
    (dict(mark=0, mincharnum=0, pad_value="#", separators=[" "]), "'mincharnum' must be positive"),
    (dict(mark=0, mincharnum=2, pad_value="#", separators=[""]), "'mincharnum' is 2"),
    (dict(mark=0, mincharnum=1, separators=[" "]), "required attribute 'pad_value' is missing"),  # op_schema.py
    (dict(mincharnum=1, pad_value="#", separators=[" "]), "required attribute 'mark' is missing"),
])
def test_attribute_errors(attrs, match):
    with pytest.raises(onnxc.OnnxcError, match=match) as e:
        onnxc.compile(tokenizer_model(["C"], **attrs))
    assert "Tokenizer" in str(e.value)


def test_input_errors():
    with pytest.raises(onnxc.UnsupportedOpError, match="Tokenizer.*element type float is not supported"):
        onnxc.compile(tokenizer_model(["C"], dtype=TP.FLOAT, tokenexp="a", **PLAIN))
    with pytest.raises(onnxc.OnnxcError, match=r"Tokenizer.*\[C\] or \[N, C\]"):
        onnxc.compile(tokenizer_model(["A", "B", "C"], tokenexp="a", **PLAIN))


# \b: glibc's word characters include non-ASCII letters, RE2's do not ("hé" splits differently)
@pytest.mark.parametrize("pattern,construct", [("\\pL+", "\\\\p"), ("a(?=b)", "look-around"), ("[a", "missing"),
                                               ("\\bx", "word boundaries")])
def test_untranslatable_patterns(pattern, construct):
    for attrs in (dict(PLAIN, tokenexp=pattern), dict(PLAIN, separators=[" ", pattern])):
        with pytest.raises(onnxc.UnsupportedOpError, match=f"Tokenizer.*{construct}"):
            onnxc.compile(tokenizer_model(["C"], **attrs))


# -- a text pipeline as skl2onnx exports it ----------------------------------------------------------

VOCAB = ["the", "cat", "ran", "dogs", "sat", "été", "end", "the cat", "cat ran", "dogs sat"]


def text_pipeline() -> onnx.ModelProto:
    """X [N, 1] -> Reshape [-1] -> StringNormalizer (lower) -> Tokenizer -> Flatten -> TfIdfVectorizer."""
    n_uni = 7
    nodes = [
        helper.make_node("Reshape", ["X", "shape"], ["flat"]),
        helper.make_node("StringNormalizer", ["flat"], ["norm"], case_change_action="LOWER", is_case_sensitive=0,
                         locale="C.UTF-8"),
        helper.make_node("Tokenizer", ["norm"], ["tok"], domain=MS, mark=0, mincharnum=1, pad_value="#",
                         tokenexp="[a-zA-Z0-9_\u00e0-\u00ff]+"),
        helper.make_node("Flatten", ["tok"], ["tok2"]),
        helper.make_node("TfIdfVectorizer", ["tok2"], ["y"], mode="TF", min_gram_length=1, max_gram_length=2,
                         max_skip_count=0, ngram_counts=[0, n_uni], ngram_indexes=list(range(len(VOCAB))),
                         pool_strings=[w for v in VOCAB for w in v.split()], weights=[1.0] * len(VOCAB)),
    ]
    graph = helper.make_graph(nodes, "text", [helper.make_tensor_value_info("X", TP.STRING, ["N", 1])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              initializer=[onnx.numpy_helper.from_array(np.array([-1], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def test_text_pipeline():
    x = strs(["The cat ran", "dogs SAT far", "zzz", "a the end, CAT", "Été: the cat ran; the cat", ""], (6, 1))
    check_against_ort(text_pipeline(), [x, x[:1], x[2:3]])
