"""Whole models built with onnx.helper the way exporters build them, for end-to-end tests.

- :func:`cnn`: a PyTorch-style convolutional network on ``input[N, 3, H, W]`` (Conv/BatchNorm/Relu,
  MaxPool, a residual block, a ``x.view(x.size(0), -1)`` flatten written as
  Shape -> Gather(0) -> Unsqueeze -> Concat([n, -1]) -> Reshape, GlobalAveragePool, Gemm).
- :func:`transformer`: a HuggingFace-style 2-layer encoder on ``input_ids[batch, seq]`` and
  ``attention_mask[batch, seq]`` (embeddings with positions from Shape -> Gather -> Range and token
  types from a Slice of a buffer, LayerNormalization and its decomposed form, multi-head attention
  with run-time computed Reshape shapes, the additive mask, Gelu through Erf, a pooler).
- :func:`functions_model`: model-local functions calling each other, with attribute references
  (``ref_attr_name``), default attribute values and an IR-10 ``overload``.

Weights are random with a fixed seed; every builder returns an ``onnx.ModelProto`` that passes
``onnx.checker``.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT64 = TensorProto.INT64
FLOAT = TensorProto.FLOAT


class _Builder:
    """Collects nodes and initializers; names are unique per kind (``Conv_0``, ``Conv_1``...)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n: dict[str, int] = {}

    def name(self, base: str) -> str:
        k = self._n.get(base, 0)
        self._n[base] = k + 1
        return f"{base}_{k}"

    def init(self, base: str, array: np.ndarray) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, base: str, shape: tuple, scale: float = 0.1) -> str:
        return self.init(base, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def const(self, array, dtype=None) -> str:
        """A ``Constant`` node (exporters emit small constants as nodes, not initializers)."""
        arr = np.asarray(array, dtype=dtype)
        out = self.name("Constant_out")
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.name("Constant"),
                                           value=numpy_helper.from_array(arr)))
        return out

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(f"{op_type}_out") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def dim(self, x: str, axis: int) -> str:
        """``x.size(axis)`` as a 1-element int64 tensor: Shape -> Gather(axis) -> Unsqueeze."""
        s = self.op("Shape", [x])
        d = self.op("Gather", [s, self.const(axis, np.int64)], axis=0)
        return self.op("Unsqueeze", [d, self.const([0], np.int64)])


# ----------------------------------------------------------------------------------------------- CNN

def cnn(seed: int = 0, opset: int = 13, dims: tuple = ("N", "H", "W")) -> onnx.ModelProto:
    """PyTorch-style CNN: input [N, 3, H, W] -> logits [N, 10].

    ``dims`` names the dynamic dims of the input; None leaves a dim unnamed (neither dim_param nor
    dim_value), other exporters' names such as "p2o.DynamicDimension.0" or "unk__3" work too."""
    b = _Builder(seed)

    def conv_bn(x: str, cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True) -> str:
        w = b.weight("conv.weight", (cout, cin, k, k), scale=1.0 / math.sqrt(cin * k * k))
        y = b.op("Conv", [x, w], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride],
                 dilations=[1, 1], group=1)
        scale = b.init("bn.weight", (1 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        bias = b.init("bn.bias", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        mean = b.init("bn.running_mean", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        var = b.init("bn.running_var", (0.5 + b.rng.random(cout)).astype(np.float32))
        y = b.op("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)
        return b.op("Relu", [y]) if relu else y

    x = conv_bn("input", 3, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=0)
    # residual block
    h = conv_bn(x, 8, 8)
    h = conv_bn(h, 8, 8, relu=False)
    x = b.op("Relu", [b.op("Add", [h, x])])
    # strided stage with a 1x1 projection shortcut
    h = conv_bn(x, 8, 16, stride=2)
    h = conv_bn(h, 16, 16, relu=False)
    sc = conv_bn(x, 8, 16, k=1, stride=2, relu=False)
    x = b.op("Relu", [b.op("Add", [h, sc])])
    # head: GlobalAveragePool, then x.view(x.size(0), -1) as exported by torch.onnx
    p = b.op("GlobalAveragePool", [x])
    n = b.dim(p, 0)
    flat_shape = b.op("Concat", [n, b.const([-1], np.int64)], axis=0)
    f = b.op("Reshape", [p, flat_shape])
    # a second head: x.view(n, c, -1).mean(-1) (Reshape with -1 over symbolic spatial dims)
    c = b.dim(x, 1)
    v = b.op("Reshape", [x, b.op("Concat", [b.dim(x, 0), c, b.const([-1], np.int64)], axis=0)])
    m = b.op("ReduceMean", [v], axes=[-1], keepdims=0)
    f = b.op("Add", [f, m])
    w = b.weight("fc.weight", (10, 16), scale=0.25)
    bias = b.weight("fc.bias", (10,))
    b.nodes.append(helper.make_node("Gemm", [f, w, bias], ["logits"], name="Gemm_fc", alpha=1.0, beta=1.0,
                                    transB=1))
    n_dim, h_dim, w_dim = dims
    graph = helper.make_graph(
        b.nodes, "cnn", [helper.make_tensor_value_info("input", FLOAT, [n_dim, 3, h_dim, w_dim])],
        [helper.make_tensor_value_info("logits", FLOAT, [n_dim, 10])], initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.1.0")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# --------------------------------------------------------------------------------------- transformer

VOCAB, MAX_POS, HIDDEN, HEADS, FFN, LAYERS = 50, 64, 32, 4, 64, 2


def _layer_norm(b: _Builder, x: str, decomposed: bool) -> str:
    gamma = b.init("LayerNorm.weight", (1 + 0.1 * b.rng.standard_normal(HIDDEN)).astype(np.float32))
    beta = b.init("LayerNorm.bias", (0.1 * b.rng.standard_normal(HIDDEN)).astype(np.float32))
    if not decomposed:
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)
    # the form older exporters produce: (x - mean) / sqrt(var + eps) * gamma + beta
    mean = b.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = b.op("Sub", [x, mean])
    var = b.op("ReduceMean", [b.op("Pow", [d, b.const(2.0, np.float32)])], axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const(1e-12, np.float32)])])
    y = b.op("Div", [d, std])
    return b.op("Add", [b.op("Mul", [y, gamma]), beta])


def _linear(b: _Builder, x: str, n_in: int, n_out: int) -> str:
    w = b.weight("dense.weight", (n_in, n_out), scale=1.0 / math.sqrt(n_in))
    bias = b.weight("dense.bias", (n_out,), scale=0.05)
    return b.op("Add", [bias, b.op("MatMul", [x, w])])


def _split_heads(b: _Builder, x: str, perm: list[int], style: str) -> str:
    """[batch, seq, hidden] -> [batch, seq, heads, head_dim] (shape computed at run time) -> perm.

    ``style`` is how the exporter computed the shape: "bert" x.size(0), x.size(1) with constants;
    "div" head_dim = x.size(2) // heads (integer Div on the shape); "gpt2" x.size()[:-1] + (heads, hd)
    (a Slice of the Shape)."""
    heads = b.const([HEADS], np.int64)
    if style == "bert":
        parts = [b.dim(x, 0), b.dim(x, 1), heads, b.const([HIDDEN // HEADS], np.int64)]
    elif style == "div":
        hd = b.op("Div", [b.dim(x, 2), b.const(HEADS, np.int64)])
        parts = [b.dim(x, 0), b.dim(x, 1), heads, hd]
    else:
        prefix = b.op("Slice", [b.op("Shape", [x]), b.const([0], np.int64), b.const([-1], np.int64)])
        parts = [prefix, heads, b.const([HIDDEN // HEADS], np.int64)]
    shape = b.op("Concat", parts, axis=0)
    return b.op("Transpose", [b.op("Reshape", [x, shape])], perm=perm)


def _attention(b: _Builder, x: str, mask: str) -> str:
    q = _split_heads(b, _linear(b, x, HIDDEN, HIDDEN), [0, 2, 1, 3], "bert")
    k = _split_heads(b, _linear(b, x, HIDDEN, HIDDEN), [0, 2, 3, 1], "div")
    v = _split_heads(b, _linear(b, x, HIDDEN, HIDDEN), [0, 2, 1, 3], "gpt2")
    s = b.op("Div", [b.op("MatMul", [q, k]), b.const(math.sqrt(HIDDEN // HEADS), np.float32)])
    p = b.op("Softmax", [b.op("Add", [s, mask])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    shape = b.op("Concat", [b.dim(ctx, 0), b.dim(ctx, 1), b.const([HIDDEN], np.int64)], axis=0)
    return _linear(b, b.op("Reshape", [ctx, shape]), HIDDEN, HIDDEN)


def _gelu(b: _Builder, x: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))) in the order transformers' exports compute it."""
    e = b.op("Erf", [b.op("Div", [x, b.const(1.4142135381698608, np.float32)])])
    h = b.op("Mul", [x, b.op("Add", [e, b.const(1.0, np.float32)])])
    return b.op("Mul", [h, b.const(0.5, np.float32)])


def transformer(seed: int = 0, opset: int = 17) -> onnx.ModelProto:
    """HF-style encoder: input_ids, attention_mask [batch, seq] -> last_hidden_state, pooler_output."""
    b = _Builder(seed)
    ids = "input_ids"
    # embeddings: words + positions (Range over seq) + token types (a sliced, expanded zero buffer)
    words = b.op("Gather", [b.weight("word_embeddings", (VOCAB, HIDDEN), 0.5), ids], axis=0)
    seq = b.op("Gather", [b.op("Shape", [ids]), b.const(1, np.int64)], axis=0)
    pos_ids = b.op("Unsqueeze", [b.op("Range", [b.const(0, np.int64), seq, b.const(1, np.int64)]),
                                 b.const([0], np.int64)])
    pos = b.op("Gather", [b.weight("position_embeddings", (MAX_POS, HIDDEN), 0.5), pos_ids], axis=0)
    buf = b.init("token_type_ids", np.zeros((1, MAX_POS), np.int64))
    seq1 = b.op("Unsqueeze", [seq, b.const([0], np.int64)])
    tt = b.op("Slice", [buf, b.const([0], np.int64), seq1, b.const([1], np.int64), b.const([1], np.int64)])
    tt = b.op("Expand", [tt, b.op("Concat", [b.dim(ids, 0), seq1], axis=0)])
    types = b.op("Gather", [b.weight("token_type_embeddings", (2, HIDDEN), 0.5), tt], axis=0)
    h = b.op("Add", [b.op("Add", [words, types]), pos])
    h = _layer_norm(b, h, decomposed=False)
    # extended attention mask: (1 - mask[:, None, None, :]) * -10000
    m = b.op("Cast", [b.op("Unsqueeze", [b.op("Unsqueeze", ["attention_mask", b.const([1], np.int64)]),
                                         b.const([2], np.int64)])], to=FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.const(1.0, np.float32), m]), b.const(-10000.0, np.float32)])
    for layer in range(LAYERS):
        h = _layer_norm(b, b.op("Add", [_attention(b, h, mask), h]), decomposed=layer == 1)
        f = _linear(b, _gelu(b, _linear(b, h, HIDDEN, FFN)), FFN, HIDDEN)
        h = _layer_norm(b, b.op("Add", [f, h]), decomposed=layer == 1)
    b.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="Identity_out"))
    first = b.op("Gather", ["last_hidden_state", b.const(0, np.int64)], axis=1)
    pw = b.weight("pooler.weight", (HIDDEN, HIDDEN), 1.0 / math.sqrt(HIDDEN))
    pb = b.weight("pooler.bias", (HIDDEN,), 0.05)
    b.nodes.append(helper.make_node("Gemm", [first, pw, pb], ["pooled"], name="Gemm_pool", transB=1))
    b.nodes.append(helper.make_node("Tanh", ["pooled"], ["pooler_output"], name="Tanh_pool"))
    graph = helper.make_graph(
        b.nodes, "encoder",
        [helper.make_tensor_value_info("input_ids", INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", FLOAT, ["batch", "seq", HIDDEN]),
         helper.make_tensor_value_info("pooler_output", FLOAT, ["batch", HIDDEN])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.1.0")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# -------------------------------------------------------------------------------- local functions

def _ref(name: str, ref: str, kind: int) -> onnx.AttributeProto:
    a = onnx.AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def functions_model(seed: int = 0, opset: int = 18, overload: bool = True) -> onnx.ModelProto:
    """x[N, 8] -> y[N, 8] through nested local functions.

    ``local.Dense(x, w, b; alpha=0.2 default, transB)``: Gemm(transB=@transB) -> LeakyRelu(alpha=@alpha).
    ``local.Block(x, w1, b1, w2, b2; alpha)``: Dense(alpha=@alpha) -> Dense(default alpha) + x.
    ``local.Scale`` exists twice, told apart by ``overload`` ("double" and "half"); y = double(h) - half(h).
    Without ``overload`` the model ends at the second Block (IR version 8).
    """
    rng = np.random.default_rng(seed)
    dense = helper.make_function(
        "local", "Dense", ["x", "w", "b"], ["y"],
        [helper.make_node("Gemm", ["x", "w", "b"], ["t"]),
         helper.make_node("LeakyRelu", ["t"], ["y"])],
        [helper.make_opsetid("", opset)], attributes=["transB"])
    dense.node[0].attribute.append(_ref("transB", "transB", onnx.AttributeProto.INT))
    dense.node[1].attribute.append(_ref("alpha", "alpha", onnx.AttributeProto.FLOAT))
    dense.attribute_proto.append(helper.make_attribute("alpha", 0.2))
    block = helper.make_function(
        "local", "Block", ["x", "w1", "b1", "w2", "b2"], ["y"],
        [helper.make_node("Dense", ["x", "w1", "b1"], ["h"], domain="local", transB=1),
         helper.make_node("Dense", ["h", "w2", "b2"], ["g"], domain="local", transB=0),
         helper.make_node("Add", ["g", "x"], ["y"])],
        [helper.make_opsetid("", opset), helper.make_opsetid("local", 1)], attributes=["alpha"])
    block.node[0].attribute.append(_ref("alpha", "alpha", onnx.AttributeProto.FLOAT))
    functions = [dense, block]
    nodes = [helper.make_node("Block", ["x", "w1", "b1", "w2", "b2"], ["h1"], domain="local", alpha=0.05),
             helper.make_node("Block", ["h1", "w2t", "b2", "w1t", "b1"], ["h2"], domain="local")]
    if overload:
        for name, factor in (("double", 2.0), ("half", 0.5)):
            f = helper.make_function(
                "local", "Scale", ["x"], ["y"],
                [helper.make_node("Constant", [], ["k"], value_float=factor),
                 helper.make_node("Mul", ["x", "k"], ["y"])],
                [helper.make_opsetid("", opset)])
            f.overload = name
            functions.append(f)
        nodes += [helper.make_node("Scale", ["h2"], ["s1"], domain="local"),
                  helper.make_node("Scale", ["h2"], ["s2"], domain="local"),
                  helper.make_node("Sub", ["s1", "s2"], ["y"])]
        nodes[-3].overload, nodes[-2].overload = "double", "half"
    else:
        nodes[-1].output[0] = "y"
    w1 = (rng.standard_normal((8, 8)) * 0.4).astype(np.float32)  # used as [out, in] (transB=1)
    w2 = (rng.standard_normal((8, 8)) * 0.4).astype(np.float32)  # used as [in, out]
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("w1", w1), ("b1", (rng.standard_normal(8) * 0.1).astype(np.float32)), ("w2", w2),
              ("b2", (rng.standard_normal(8) * 0.1).astype(np.float32)), ("w1t", np.ascontiguousarray(w1.T)),
              ("w2t", np.ascontiguousarray(w2.T)))]
    graph = helper.make_graph(nodes, "functions", [helper.make_tensor_value_info("x", FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", FLOAT, ["N", 8])], initializer=inits)
    model = helper.make_model(graph, functions=functions,
                              opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("local", 1)])
    model.ir_version = 10 if overload else 8
    onnx.checker.check_model(model)
    return model
