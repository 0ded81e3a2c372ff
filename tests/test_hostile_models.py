"""Malformed models give an OnnxcError subclass naming what was wrong, never an internal exception
(AttributeError, KeyError, TypeError, numpy MemoryError) or a silently wrong result (issue #15).

Each case is built with onnx.helper; a valid variant beside it still compiles and runs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.ir import InputError, ModelError, RuntimeFailure, ShapeError, UnsupportedOpError

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name: str, t: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17, value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _const_graph(name: str, value: float) -> onnx.GraphProto:
    out = f"{name}_out"
    return helper.make_graph([helper.make_node("Constant", [], [out], value=numpy_helper.from_array(
        np.array([value], np.float32)))], name, [], [_vi(out, FLOAT, [1])])


# -- control flow with a missing or mistyped body ------------------------------------------------------

def _loop_body() -> onnx.GraphProto:
    return helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Neg", ["v_in"], ["v_out"])],
                             "body", [_vi("i", INT64, []), _vi("c_in", BOOL, []), _vi("v_in", FLOAT, [1])],
                             [_vi("c_out", BOOL, []), _vi("v_out", FLOAT, [1])])


CONTROL_FLOW = {
    "If": (lambda **a: helper.make_node("If", ["c"], ["y"], **a), ("then_branch", "else_branch"),
           dict(then_branch=_const_graph("t", 1.0), else_branch=_const_graph("e", 2.0))),
    "Loop": (lambda **a: helper.make_node("Loop", ["n", "", "x"], ["y"], **a), ("body",), dict(body=_loop_body())),
    "Scan": (lambda **a: helper.make_node("Scan", ["x"], ["y"], num_scan_inputs=1, **a), ("body",),
             dict(body=helper.make_graph([helper.make_node("Neg", ["e"], ["o"])], "b", [_vi("e", FLOAT, [])],
                                         [_vi("o", FLOAT, [])]))),
}


def _control_flow_model(op: str, **attrs) -> onnx.ModelProto:
    make = CONTROL_FLOW[op][0]
    ins = {"If": [_vi("c", BOOL, [])], "Loop": [_vi("n", INT64, []), _vi("x", FLOAT, [1])],
           "Scan": [_vi("x", FLOAT, [3])]}[op]
    return _model([make(**attrs)], ins, [_vi("y")], opset=17 if op != "Scan" else 16)


@pytest.mark.parametrize("op", sorted(CONTROL_FLOW))
def test_control_flow_without_its_body_is_a_model_error(op: str) -> None:
    _, names, attrs = CONTROL_FLOW[op]
    missing = names[-1]
    with pytest.raises(ModelError, match=rf"{op}.*required attribute '{missing}'"):
        onnxc.compile(_control_flow_model(op, **{k: v for k, v in attrs.items() if k != missing}))


@pytest.mark.parametrize("op", sorted(CONTROL_FLOW))
def test_control_flow_with_a_body_of_the_wrong_kind_is_a_model_error(op: str) -> None:
    _, names, attrs = CONTROL_FLOW[op]
    bad = {**attrs, names[0]: 3}
    with pytest.raises(ModelError, match=rf"{op}.*attribute '{names[0]}' must be GRAPH, got INT"):
        onnxc.compile(_control_flow_model(op, **bad))


def test_control_flow_with_its_bodies_runs() -> None:
    assert onnxc.compile(_control_flow_model("If", **CONTROL_FLOW["If"][2])).run({"c": np.array(False)})["y"] == 2.0
    got = onnxc.compile(_control_flow_model("Loop", **CONTROL_FLOW["Loop"][2])).run(
        {"n": np.array(3, np.int64), "x": np.array([1.5], np.float32)})["y"]
    np.testing.assert_array_equal(got, [-1.5])
    got = onnxc.compile(_control_flow_model("Scan", **CONTROL_FLOW["Scan"][2])).run({"x": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(got["y"], -np.arange(3, dtype=np.float32))


def test_sequence_map_without_its_body_is_a_model_error() -> None:
    m = _model([helper.make_node("SequenceConstruct", ["x"], ["s"]), helper.make_node("SequenceMap", ["s"], ["y"])],
               [_vi("x", FLOAT, [1])], [helper.make_tensor_sequence_value_info("y", FLOAT, None)])
    with pytest.raises(ModelError, match=r"SequenceMap.*required attribute 'body'"):
        onnxc.compile(m)


def test_if_without_its_condition_is_a_model_error() -> None:
    node = helper.make_node("If", [], ["y"], then_branch=_const_graph("t", 1.0), else_branch=_const_graph("e", 2.0))
    with pytest.raises(ModelError, match=r"If.*input 0 \('cond'\) is required"):
        onnxc.compile(_model([node], [], [_vi("y")]))


@pytest.mark.parametrize("cond", [_vi("c", FLOAT, [1]), _vi("c", BOOL, [2])])
def test_if_condition_must_be_one_bool(cond) -> None:
    # a fuzzed If on a sequence condition used to generate C that did not compile
    node = helper.make_node("If", ["c"], ["y"], then_branch=_const_graph("t", 1.0), else_branch=_const_graph("e", 2.0))
    with pytest.raises(ShapeError, match=r"If.*condition \(input 0\) must"):
        onnxc.compile(_model([node], [cond], [_vi("y")]))


# -- empty input names, missing attributes ----------------------------------------------------------

def test_cast_with_an_empty_input_name_is_a_model_error() -> None:
    with pytest.raises(ModelError, match=r"Cast.*input 0 \('input'\) is required"):
        onnxc.compile(_model([helper.make_node("Cast", [""], ["y"], to=FLOAT)], [], [_vi("y")]))


def test_cast_without_to_is_a_model_error() -> None:
    with pytest.raises(ModelError, match=r"Cast.*required attribute 'to'"):
        onnxc.compile(_model([helper.make_node("Cast", ["x"], ["y"])], [_vi("x", INT64, [2])], [_vi("y")]))


# -- attributes of the wrong type -------------------------------------------------------------------

def _conv(**attrs) -> onnx.ModelProto:
    return _model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)],
                  [_vi("x", FLOAT, [1, 1, 5, 5]), _vi("w", FLOAT, [1, 1, 3, 3])], [_vi("y")])


def test_float_strides_are_a_model_error() -> None:
    with pytest.raises(ModelError, match=r"Conv.*attribute 'strides' must be INTS, got FLOATS \[1.5, 1.5\]"):
        onnxc.compile(_conv(strides=[1.5, 1.5]))


def test_integral_float_strides_are_a_model_error_too() -> None:
    with pytest.raises(ModelError, match=r"attribute 'strides' must be INTS, got FLOATS"):
        onnxc.compile(_conv(strides=[2.0, 2.0]))


def test_string_axis_is_a_model_error_not_a_python_comparison() -> None:
    m = _model([helper.make_node("Concat", ["x", "x"], ["y"], axis="1")], [_vi("x", FLOAT, [2, 2])], [_vi("y")])
    with pytest.raises(ModelError, match=r"Concat.*attribute 'axis' must be INT, got STRING '1'"):
        onnxc.compile(m)


def test_integer_for_a_float_attribute_is_accepted_as_that_float() -> None:
    """alpha=1 written by onnx.helper is an INT attribute; onnxc widens it (onnxruntime refuses it)."""
    m = _model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=2)], [_vi("x", FLOAT, [2])], [_vi("y")])
    np.testing.assert_array_equal(onnxc.compile(m)(np.array([-1, 3], np.float32)), [-2, 3])


def test_int_strides_run() -> None:
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    w = np.ones((1, 1, 3, 3), np.float32)
    got = onnxc.compile(_conv(strides=[2, 2])).run({"x": x, "w": w})["y"]
    want = np.array([[x[0, 0, i:i + 3, j:j + 3].sum() for j in (0, 2)] for i in (0, 2)], np.float32)
    np.testing.assert_array_equal(got[0, 0], want)


# -- types ------------------------------------------------------------------------------------------

def test_input_of_element_type_0_is_a_model_error() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, [1]), _vi("z", 0, [1])], [_vi("y")])
    with pytest.raises(ModelError, match=r"input 'z'.*element type 0"):
        onnxc.compile(m)


def test_output_declared_with_element_type_0_means_unknown() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, [2])], [_vi("y", 0, None)])
    np.testing.assert_array_equal(onnxc.compile(m)(np.array([-1, 2], np.float32)), [0, 2])


def test_declared_output_type_that_differs_from_the_computed_one_is_a_shape_error() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, [2])], [_vi("y", INT64, [2])])
    with pytest.raises(ShapeError, match=r"'y'.*declared int64.*computes float"):
        onnxc.compile(m)


def test_declared_value_info_type_that_differs_is_a_shape_error() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
               [_vi("x", FLOAT, [2])], [_vi("y", FLOAT, [2])], value_info=[_vi("t", INT64, [2])])
    with pytest.raises(ShapeError, match=r"'t'.*declared int64.*computes float"):
        onnxc.compile(m)


def test_declared_output_type_that_matches_runs() -> None:
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=INT64)], [_vi("x", FLOAT, [2])], [_vi("y", INT64, [2])])
    got = onnxc.compile(m)(np.array([1.9, -2.5], np.float32))
    assert got.dtype == np.int64 and list(got) == [1, -2]


# -- kernels ----------------------------------------------------------------------------------------

def test_conv_with_kernel_shape_and_an_unknown_weight_dim_is_unsupported() -> None:
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])],
               [_vi("x", FLOAT, [1, 1, 5, 5]), _vi("w", FLOAT, [1, 1, "K", 3])], [_vi("y")])
    with pytest.raises(UnsupportedOpError, match=r"Conv.*weight.*\[1, 1, K, 3\].*static"):
        onnxc.compile(m)


# -- inputs -----------------------------------------------------------------------------------------

def _relu_n() -> onnxc.CompiledModel:
    return onnxc.compile(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, ["N"])], [_vi("y", FLOAT, ["N"])]))


@pytest.mark.parametrize("call", ["positional", "run"])
@pytest.mark.parametrize("n,why", [(2**45, "out of memory"), (2**47, "more than the limit")])
def test_huge_broadcast_view_input_is_an_input_error(call: str, n: int, why: str) -> None:
    """A scalar broadcast to 2^45 floats takes no memory; its contiguous copy would take 2^47 bytes (more
    than a 47-bit address space holds, whatever the overcommit policy), 2^47 floats more than the limit."""
    cm = _relu_n()
    x = np.broadcast_to(np.float32(1), (n,))
    with pytest.raises(InputError, match=rf"input 'x'.*\[{n}\].*{4 * n} bytes.*{why}"):
        cm(x) if call == "positional" else cm.run({"x": x})


def test_small_broadcast_view_input_runs() -> None:
    x = np.broadcast_to(np.float32(-1), (1000,))
    np.testing.assert_array_equal(_relu_n()(x), np.zeros(1000, np.float32))


def test_output_too_large_for_memory_is_a_runtime_failure() -> None:
    """ConstantOfShape to 2^46 floats (2^48 bytes: the per-tensor limit, more than a 47-bit address space
    holds, whatever the overcommit policy): not folded at compile time; the output allocation fails
    cleanly."""
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([1.0], np.float32)))],
               [], [_vi("y")], [numpy_helper.from_array(np.array([2**23, 2**23], np.int64), "s")])
    cm = onnxc.compile(m)
    with pytest.raises(RuntimeFailure, match=rf"output 'y': out of memory for shape \[{2**23}, {2**23}\] \({2**48} bytes\)"):
        cm.run({})


# -- window attributes --------------------------------------------------------------------------------

def _pool(op: str, **attrs) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x"], ["y"], **attrs)], [_vi("x", FLOAT, [1, 1, 5, 5])], [_vi("y")])


def test_huge_kernel_with_same_padding_is_a_shape_error_at_once() -> None:
    """kernel_shape 2^62 with SAME_UPPER: the kernel generator used to build a list of k*k taps."""
    with pytest.raises(ShapeError, match=r"MaxPool.*kernel_shape \[4611686018427387904, 4611686018427387904\] "
                                         r"has a value beyond the limit of 2147483647"):
        onnxc.compile(_pool("MaxPool", kernel_shape=[2**62, 2**62], auto_pad="SAME_UPPER"))


@pytest.mark.parametrize("p", [0, -2])
def test_lp_pool_with_a_non_positive_p_is_a_shape_error(p: int) -> None:
    with pytest.raises(ShapeError, match=rf"LpPool.*attribute p must be positive, got {p}"):
        onnxc.compile(_pool("LpPool", kernel_shape=[2, 2], p=p))


def test_lp_pool_and_large_same_kernel_run() -> None:
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) / 10
    got = onnxc.compile(_pool("LpPool", kernel_shape=[2, 2], p=3)).run({"x": x})["y"]
    want = np.array([[(np.abs(x[0, 0, i:i + 2, j:j + 2]) ** 3).sum() ** (1 / 3) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(got[0, 0], want, rtol=1e-5)
    got = onnxc.compile(_pool("MaxPool", kernel_shape=[9, 9], auto_pad="SAME_UPPER")).run({"x": x})["y"]
    np.testing.assert_array_equal(got, np.full((1, 1, 5, 5), x.max(), np.float32))


# -- contrib ops and the last line of defence ------------------------------------------------------------

def test_contrib_tokenizer_attribute_of_the_wrong_type_is_a_model_error() -> None:
    """com.microsoft Tokenizer's mark given as INTS reached int() in its kernel check (a bare TypeError)."""
    node = helper.make_node("Tokenizer", ["x"], ["y"], domain="com.microsoft", mark=[1, 2], mincharnum=1, pad_value="#",
                            separators=[" "])
    g = helper.make_graph([node], "g", [_vi("x", TensorProto.STRING, [2])], [_vi("y", TensorProto.STRING)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(ModelError, match=r"Tokenizer.*attribute 'mark' must be INT, got INTS \[1, 2\]"):
        onnxc.compile(m)


def test_a_shape_rule_that_fails_gives_a_shape_error_naming_what_it_was_given(monkeypatch) -> None:
    """Whatever a rule trips on, the error names the node, its inputs and attributes, and keeps the
    Python exception as its cause (a bug in a rule stays visible in the traceback)."""
    import onnxc.passes.infer_shapes as infer

    class Broken:
        def infer(self, node):
            return node.attr("alpha").nothing

    monkeypatch.setattr(infer, "rule_for", lambda node: Broken())
    m = _model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5)], [_vi("x", FLOAT, [2])], [_vi("y")])
    with pytest.raises(ShapeError, match=r"LeakyRelu \(outputs 'y'\): shape inference failed \(AttributeError: .*nothing.*\); "
                                         r"inputs: 'x': float\[2\]; attributes: alpha=FLOAT 0.5") as e:
        onnxc.compile(m)
    assert isinstance(e.value.__cause__, AttributeError)


# -- found by the fuzzer (tests/fuzz): attribute references, stray graphs, text that is not UTF-8 ------------

def _function_model(alpha_attr: onnx.AttributeProto) -> onnx.ModelProto:
    """A model calling local::Leaky(x) <alpha>, whose body is LeakyRelu <alpha = @alpha>."""
    ref = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    body = helper.make_node("LeakyRelu", ["a"], ["o"])
    body.attribute.append(ref)
    fn = helper.make_function("local", "Leaky", ["a"], ["o"], [body], [helper.make_opsetid("", 17)], ["alpha"])
    call = helper.make_node("Leaky", ["x"], ["y"], domain="local")
    call.attribute.append(alpha_attr)
    g = helper.make_graph([call], "g", [_vi("x", FLOAT, [3])], [_vi("y", FLOAT, [3])])
    return helper.make_model(g, functions=[fn], opset_imports=[helper.make_opsetid("", 17),
                                                               helper.make_opsetid("local", 1)])


def test_attribute_reference_bound_to_a_value_of_the_wrong_type_is_a_model_error() -> None:
    """LeakyRelu's alpha = @alpha given as INTS by the caller reached float() in the kernel (TypeError)."""
    m = _function_model(helper.make_attribute("alpha", [1, 2]))
    with pytest.raises(ModelError, match=r"local::Leaky: node LeakyRelu called by Leaky.*'alpha' must be FLOAT, got INTS"):
        onnxc.compile(m)


def test_attribute_reference_bound_to_a_float_runs() -> None:
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    y = onnxc.compile(_function_model(helper.make_attribute("alpha", 0.25))).run({"x": x})["y"]
    np.testing.assert_array_equal(y, np.where(x < 0, 0.25 * x, x))


def test_attribute_reference_outside_a_function_is_a_model_error() -> None:
    """A graph node whose beta refers to an attribute reached float(None) in Gemm's kernel (TypeError)."""
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    beta = helper.make_attribute_ref("beta", onnx.AttributeProto.FLOAT)
    beta.ref_attr_name = "missing"
    node.attribute.append(beta)
    m = _model([node], [_vi("a", FLOAT, [2, 2]), _vi("b", FLOAT, [2, 2])], [_vi("y")])
    with pytest.raises(ModelError, match=r"Gemm.*'beta' refers to attribute 'missing': only the nodes of a function body"):
        onnxc.compile(m)


def test_graph_attribute_the_op_does_not_have_is_a_model_error() -> None:
    """A stray else_branch on Relu that reads an outer value made lowering look up a buffer (KeyError)."""
    stray = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "stray", [], [_vi("n", FLOAT, [2])])
    m = _model([helper.make_node("Relu", ["x"], ["y"], else_branch=stray)], [_vi("x", FLOAT, [2])], [_vi("y")])
    with pytest.raises(ModelError, match=r"Relu.*attribute 'else_branch' is a graph, but Relu has no graph attribute"):
        onnxc.compile(m)


def test_text_field_that_is_not_utf8_is_a_model_error() -> None:
    """A function domain of invalid UTF-8 came out of protobuf as bytes (TypeError: can't concat str to bytes)."""
    m = _function_model(helper.make_attribute("alpha", 0.5))
    data = m.SerializeToString().replace(b"R\x05local", b"R\x05\xdbocal")  # FunctionProto.domain (field 10)
    assert data != m.SerializeToString()
    with pytest.raises(ModelError, match=r"ModelProto.functions\[0\].domain is not valid UTF-8 text: b'\\xdbocal'"):
        onnxc.compile(data)


def test_constant_if_whose_taken_branch_returns_too_few_values_is_a_shape_error() -> None:
    """Folding an If on a constant condition moved a branch with no outputs in and left the If's output
    undefined (IRCheckError from the checker, a pass bug)."""
    empty = helper.make_graph([], "t", [], [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=empty, else_branch=_const_graph("e", 2.0))
    c = numpy_helper.from_array(np.array(True), "c")
    m = _model([node], [], [_vi("y", FLOAT, [1])], inits=[c])
    with pytest.raises(ShapeError, match=r"If \(outputs 'y'\): its then_branch returns 0 values, the node has 1 outputs"):
        onnxc.compile(m)


def test_stray_graph_attribute_is_refused_at_any_opset_version() -> None:
    stray = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "stray", [], [_vi("n", FLOAT, [2])])
    m = _model([helper.make_node("Relu", ["x"], ["y"], body=stray)], [_vi("x", FLOAT, [2])], [_vi("y")], opset=0)
    with pytest.raises(ModelError, match=r"attribute 'body' is a graph, but Relu has no graph attribute"):
        onnxc.compile(m)
