"""The seed corpus of the fuzz test: small valid models built with onnx.helper, one per family of
frontend/pass/kernel code (elementwise chains, convolution, matrix products, shape arithmetic,
indexing, control flow, model-local functions). Each passes onnx.checker and compiles with onnxc;
mutations (tests/fuzz/mutations.py) start from these.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
OPSET = 18


def _vi(name: str, dtype: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits=(), functions=(), opset: int = OPSET, value_info=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "fuzz", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    imports = [helper.make_operatorsetid("", opset)] + (
        [helper.make_operatorsetid("local", 1)] if functions else [])
    m = helper.make_model(g, opset_imports=imports, functions=list(functions))
    m.ir_version = 8
    return m


def _w(rng: np.random.Generator, *shape) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def elementwise() -> onnx.ModelProto:
    """A broadcasting elementwise chain with a Where, over symbolic [N, 8]."""
    rng = np.random.default_rng(1)
    n = helper.make_node
    nodes = [n("Add", ["x", "b"], ["a"]), n("Mul", ["a", "y"], ["m"]), n("Relu", ["m"], ["r"]),
             n("Sigmoid", ["a"], ["s"]), n("Sub", ["r", "s"], ["d"]), n("Exp", ["d"], ["e"]),
             n("Greater", ["e", "y"], ["g"]), n("Where", ["g", "e", "a"], ["w"]), n("Tanh", ["w"], ["out"]),
             n("Clip", ["out", "lo", "hi"], ["c"])]
    return _model(nodes, [_vi("x", F, ["N", 8]), _vi("y", F, [8])], [_vi("out", F, ["N", 8]), _vi("c", F, ["N", 8])],
                  [_init("b", _w(rng, 8)), _init("lo", np.float32(-0.5)), _init("hi", np.float32(0.5))])


def conv() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> MaxPool -> GlobalAveragePool -> Flatten on [N, 3, H, W]."""
    rng = np.random.default_rng(2)
    n = helper.make_node
    nodes = [n("Conv", ["x", "W", "Bc"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1], kernel_shape=[3, 3]),
             n("BatchNormalization", ["c", "g", "bb", "mu", "var"], ["bn"], epsilon=1e-5),
             n("Relu", ["bn"], ["r"]), n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             n("AveragePool", ["p"], ["ap"], kernel_shape=[1, 1]),
             n("GlobalAveragePool", ["ap"], ["gp"]), n("Flatten", ["gp"], ["out"], axis=1)]
    inits = [_init("W", _w(rng, 4, 3, 3, 3)), _init("Bc", _w(rng, 4)), _init("g", np.abs(_w(rng, 4)) + 0.5),
             _init("bb", _w(rng, 4)), _init("mu", _w(rng, 4)), _init("var", np.abs(_w(rng, 4)) + 0.5)]
    return _model(nodes, [_vi("x", F, ["N", 3, "H", "W"])], [_vi("out", F, ["N", 4])], inits)


def matmul() -> onnx.ModelProto:
    """Gemm -> Relu -> MatMul -> Softmax, a batched MatMul and a reduction, on [N, 16]."""
    rng = np.random.default_rng(3)
    n = helper.make_node
    nodes = [n("Gemm", ["x", "W1", "b1"], ["h"], transB=1, alpha=1.0, beta=1.0), n("Relu", ["h"], ["r"]),
             n("MatMul", ["r", "W2"], ["z"]), n("Softmax", ["z"], ["out"], axis=-1),
             n("MatMul", ["t", "t2"], ["bm"]), n("ReduceMean", ["bm", "last"], ["red"], keepdims=0)]
    inits = [_init("W1", _w(rng, 8, 16)), _init("b1", _w(rng, 8)), _init("W2", _w(rng, 8, 4)),
             _init("last", np.array([-1], np.int64))]
    return _model(nodes, [_vi("x", F, ["N", 16]), _vi("t", F, [2, "M", 5]), _vi("t2", F, [5, 3])],
                  [_vi("out", F, ["N", 4]), _vi("red", F, [2, "M"])], inits)


def shape_chain() -> onnx.ModelProto:
    """The exporter flatten idiom and friends: Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
    Transpose, Slice, Expand, ConstantOfShape, Squeeze."""
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]), n("Gather", ["s", "zero"], ["d0"], axis=0),
             n("Unsqueeze", ["d0", "ax0"], ["d0u"]), n("Concat", ["d0u", "minus1"], ["shp"], axis=0),
             n("Reshape", ["x", "shp"], ["flat"]), n("Transpose", ["x"], ["tr"], perm=[0, 2, 1]),
             n("Slice", ["tr", "starts", "ends", "axes"], ["sl"]), n("Expand", ["sl", "eshape"], ["ex"]),
             n("ConstantOfShape", ["s"], ["zeros"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
             n("Add", ["zeros", "x"], ["za"]), n("ReduceSum", ["za", "ax0"], ["rs"], keepdims=1),
             n("Squeeze", ["rs", "ax0"], ["out"])]
    inits = [_init("zero", np.int64(0)), _init("ax0", np.array([0], np.int64)),
             _init("minus1", np.array([-1], np.int64)), _init("starts", np.array([1], np.int64)),
             _init("ends", np.array([3], np.int64)), _init("axes", np.array([1], np.int64)),
             _init("eshape", np.array([2, 1, 1, 1], np.int64))]
    return _model(nodes, [_vi("x", F, ["N", "C", 4])],
                  [_vi("flat", F, ["N", "F"]), _vi("ex", F, [2, "N", 2, "C"]), _vi("out", F, ["C", 4])], inits)


def indexing() -> onnx.ModelProto:
    """Gather with run-time indices, TopK, Concat, Split, Cast, ArgMax, ScatterElements."""
    n = helper.make_node
    nodes = [n("Gather", ["x", "idx"], ["g"], axis=1), n("TopK", ["x", "k"], ["tv", "ti"], axis=1),
             n("Concat", ["g", "tv"], ["cat"], axis=1), n("Split", ["cat", "split"], ["p0", "p1"], axis=1),
             n("Cast", ["ti"], ["tf"], to=F), n("Add", ["p0", "tf"], ["s"]), n("ArgMax", ["s"], ["am"], axis=1),
             n("ScatterElements", ["x", "ti", "tv"], ["sc"], axis=1)]
    inits = [_init("k", np.array([2], np.int64)), _init("split", np.array([2, 2], np.int64))]
    return _model(nodes, [_vi("x", F, ["N", 6]), _vi("idx", I64, [2])],
                  [_vi("p1", F, ["N", 2]), _vi("am", I64, ["N", 1]), _vi("sc", F, ["N", 6])], inits)


def control_flow() -> onnx.ModelProto:
    """An If on a data-dependent condition (branches read an outer value) and a Loop with a carried
    value and a scan output."""
    n = helper.make_node
    then_g = helper.make_graph([n("Add", ["x", "x"], ["t"])], "then", [], [_vi("t", F, ["N", 4])])
    else_g = helper.make_graph([n("Mul", ["x", "x"], ["e"])], "else", [], [_vi("e", F, ["N", 4])])
    body = helper.make_graph(
        [n("Add", ["acc", "x"], ["acc2"]), n("Identity", ["cond_in"], ["cond_out"]),
         n("ReduceSum", ["acc2"], ["scan"], keepdims=0)],
        "body", [_vi("i", I64, []), _vi("cond_in", B, []), _vi("acc", F, ["N", 4])],
        [_vi("cond_out", B, []), _vi("acc2", F, ["N", 4]), _vi("scan", F, [])])
    nodes = [n("ReduceSum", ["x"], ["sum"], keepdims=0), n("Greater", ["sum", "zero"], ["cond"]),
             n("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
             n("Loop", ["trip", "true", "y"], ["acc_out", "scans"], body=body)]
    inits = [_init("zero", np.float32(0)), _init("true", np.array(True)), _init("trip", np.int64(3))]
    return _model(nodes, [_vi("x", F, ["N", 4])], [_vi("acc_out", F, ["N", 4]), _vi("scans", F, [3])], inits)


def function() -> onnx.ModelProto:
    """A model-local function with an attribute reference and a default, called twice, calling
    another function."""
    n = helper.make_node
    alpha = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    leaky = n("LeakyRelu", ["a"], ["l"])
    leaky.attribute.append(alpha)
    inner = helper.make_function("local", "Inner", ["a", "b"], ["o"], [leaky, n("Add", ["l", "b"], ["o"])],
                                 [helper.make_operatorsetid("", OPSET)], attributes=["alpha"])
    outer = helper.make_function(
        "local", "Outer", ["p"], ["q"],
        [n("Inner", ["p", "p"], ["t"], domain="local", alpha=0.25), n("Sigmoid", ["t"], ["q"])],
        [helper.make_operatorsetid("", OPSET), helper.make_operatorsetid("local", 1)])
    nodes = [n("Inner", ["x", "x"], ["f1"], domain="local", alpha=0.1), n("Outer", ["f1"], ["f2"], domain="local"),
             n("Add", ["f1", "f2"], ["out"])]
    return _model(nodes, [_vi("x", F, ["N", 5])], [_vi("out", F, ["N", 5])], functions=[inner, outer])


BUILDERS = {f.__name__: f for f in (elementwise, conv, matmul, shape_chain, indexing, control_flow, function)}


@functools.cache
def seed_bytes(name: str) -> bytes:
    """The serialized seed model ``name`` (deterministic)."""
    m = BUILDERS[name]()
    onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString(deterministic=True)


def seed_model(name: str) -> onnx.ModelProto:
    """A fresh copy of the seed model ``name``."""
    m = onnx.ModelProto()
    m.ParseFromString(seed_bytes(name))
    return m
