"""onnxruntime's contrib ops com.microsoft Attention and MultiHeadAttention, compared with onnxruntime: every key
mask format, causal masks with and without past, attention_bias, qkv_hidden_sizes, scale, present outputs,
the cross-attention forms of MultiHeadAttention and its qk output; each model has several nodes and symbolic
dims and runs at two sizes. Then a BERT-like encoder as PyTorch exports it, optimized by onnxruntime's
transformer optimizer (which fuses its attention into com.microsoft Attention), and the error cases.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

MS = "com.microsoft"
D, N = 16, 2  # hidden size, heads
H = D // N


def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    """A model of ``nodes``; inputs/outputs as (name, elem type, shape) triples (outputs: name only)."""
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def fused(m: onnx.ModelProto) -> int:
    """How many onnxc::FusedAttention nodes the optimized IR of ``m`` has."""
    return [n.op_type for n in optimize(load_model(m)).graph.nodes].count("FusedAttention")


def check(m: onnx.ModelProto, feeds: list[dict], rtol=1e-4, atol=1e-5) -> None:
    """onnxc (one compile) gives onnxruntime's outputs for every feed."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    compiled = onnxc.compile(m)
    for feed in feeds:
        want = sess.run(None, feed)
        got = compiled.run(feed)
        for name, w in zip(names, want):
            assert got[name].shape == w.shape, (name, got[name].shape, w.shape)
            np.testing.assert_allclose(got[name], w, rtol=rtol, atol=atol, err_msg=name)


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ms_node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain=MS, **attrs)


def test_attention_masks_and_attributes():
    """Attention with every mask format, unidirectional, attention_bias, qkv_hidden_sizes, scale and present."""
    rng = np.random.default_rng(0)
    w = rand(rng, D, 3 * D, scale=0.3)
    w2 = rand(rng, D, 2 * D + 24, scale=0.3)  # v hidden size 24 (head 12)
    bias, bias2 = rand(rng, 3 * D), rand(rng, 2 * D + 24)
    nodes = [
        ms_node("Attention", ["x", "w"], ["y0"], num_heads=N),
        ms_node("Attention", ["x", "w", "b", "m2"], ["y1"], num_heads=N, unidirectional=1, mask_filter_value=-5.0),
        ms_node("Attention", ["x", "w", "b", "len"], ["y2"], num_heads=N),
        helper.make_node("Concat", ["len", "start"], ["end_start"], axis=0),
        ms_node("Attention", ["x", "w", "b", "end_start"], ["y3"], num_heads=N, unidirectional=1),
        ms_node("Attention", ["x", "w", "b", "m3", "", "ab"], ["y4"], num_heads=N, mask_filter_value=-30.0),
        ms_node("Attention", ["x", "w2", "b2", "dummy"], ["y5"], num_heads=N, qkv_hidden_sizes=[D, D, 24],
                scale=0.2),
        ms_node("Attention", ["x", "w", "b", "mk", "", "ab"], ["y6", "present"], num_heads=N, unidirectional=1),
    ]
    ins = [("x", TP.FLOAT, ["B", "S", D]), ("m2", TP.INT32, ["B", "S"]), ("len", TP.INT32, ["B"]),
           ("start", TP.INT32, ["B"]), ("m3", TP.INT32, ["B", "S", "S"]), ("ab", TP.FLOAT, [1, N, "S", "S"]),
           ("dummy", TP.INT32, ["B", 1]), ("mk", TP.INT32, ["B", "S"])]
    m = model(nodes, ins, [f"y{i}" for i in range(7)] + ["present"],
              [("w", w), ("b", bias), ("w2", w2), ("b2", bias2)])
    feeds = []
    for batch, seq in ((2, 5), (3, 8)):
        feeds.append(dict(
            x=rand(rng, batch, seq, D), m2=(rng.random((batch, seq)) > 0.3).astype(np.int32),
            len=rng.integers(1, seq + 1, batch).astype(np.int32), start=rng.integers(0, 3, batch).astype(np.int32),
            m3=(rng.random((batch, seq, seq)) > 0.3).astype(np.int32), ab=rand(rng, 1, N, seq, seq),
            dummy=np.zeros((batch, 1), np.int32), mk=(rng.random((batch, seq)) > 0.3).astype(np.int32)))
        # y1: query 0 sees only masked keys under the causal mask (all at mask_filter_value). Elsewhere key 0 is
        # kept: a row of only masked keys is a softmax of values near -10000, where float32 rounding differs.
        feeds[-1]["m2"][0, 0] = 0
        feeds[-1]["mk"][:, 0] = 1
    check(m, feeds)


def test_attention_gpt2_past():
    """GPT-2 style: past (2, B, N, P, H) and present, a (B, P + S) mask, unidirectional; at two past lengths."""
    rng = np.random.default_rng(1)
    inits = [("w", rand(rng, D, 3 * D, scale=0.3)), ("b", rand(rng, 3 * D)), ("w2", rand(rng, D, 3 * D, scale=0.3))]
    nodes = [ms_node("Attention", ["x", "w", "b", "mask", "past"], ["y", "present"], num_heads=N, unidirectional=1),
             ms_node("Attention", ["x", "w2", "", "", "past"], ["y2", "present2"], num_heads=N)]
    ins = [("x", TP.FLOAT, ["B", "S", D]), ("mask", TP.INT32, ["B", "T"]), ("past", TP.FLOAT, [2, "B", N, "P", H])]
    m = model(nodes, ins, ["y", "present", "y2", "present2"], inits)
    assert fused(m) == 2  # the mask's own total length T is reshaped to P + S, so the scores keep their dims
    feeds = []
    for batch, seq, past in ((2, 3, 4), (3, 1, 6), (1, 4, 0)):
        mask = np.ones((batch, past + seq), np.int32)
        mask[0, :2] = 0
        feeds.append(dict(x=rand(rng, batch, seq, D), mask=mask, past=rand(rng, 2, batch, N, past, H)))
    check(m, feeds)


def test_multihead_attention():
    """MultiHeadAttention: cross attention with bias, a (B, L) mask and the qk output; self attention with past
    and present, causal; per-head (B, N, L, H) key/value with attention_bias; (B) and (B, S, T) masks; causal
    cross attention (L != S: onnxruntime leaves the last query row unmasked)."""
    rng = np.random.default_rng(2)
    nodes = [
        ms_node("MultiHeadAttention", ["q", "kx", "vx", "bias", "mkx"], ["y0", "", "", "qk0"], num_heads=N),
        ms_node("MultiHeadAttention", ["q", "k", "v", "", "mt", "", "pk", "pv"], ["y1", "pko", "pvo"],
                num_heads=N, unidirectional=1, mask_filter_value=-50.0),
        ms_node("MultiHeadAttention", ["q", "k4", "v4", "", "", "ab"], ["y2", "k4o", "v4o"], num_heads=N, scale=0.3),
        ms_node("MultiHeadAttention", ["q", "kx", "vx", "", "lens"], ["y3"], num_heads=N),
        ms_node("MultiHeadAttention", ["q", "k", "v", "bias", "m3"], ["y4"], num_heads=N, unidirectional=1),
        ms_node("MultiHeadAttention", ["q", "kx", "vx"], ["y5", "", "", "qk5"], num_heads=N, unidirectional=1),
    ]
    ins = [("q", TP.FLOAT, ["B", "S", D]), ("k", TP.FLOAT, ["B", "S", D]), ("v", TP.FLOAT, ["B", "S", D]),
           ("kx", TP.FLOAT, ["B", "L", D]), ("vx", TP.FLOAT, ["B", "L", D]), ("mkx", TP.INT32, ["B", "L"]),
           ("mt", TP.INT32, ["B", "T"]), ("pk", TP.FLOAT, ["B", N, "P", H]), ("pv", TP.FLOAT, ["B", N, "P", H]),
           ("k4", TP.FLOAT, ["B", N, "L", H]), ("v4", TP.FLOAT, ["B", N, "L", H]),
           ("ab", TP.FLOAT, ["B", N, "S", "L"]), ("lens", TP.INT32, ["B"]), ("m3", TP.INT32, ["B", "S", "S"])]
    outs = ["y0", "qk0", "y1", "pko", "pvo", "y2", "k4o", "v4o", "y3", "y4", "y5", "qk5"]
    m = model(nodes, ins, outs, [("bias", rand(rng, 3 * D))])
    feeds = []
    for batch, seq, kv, past in ((2, 3, 5, 2), (1, 4, 2, 0)):
        f = dict(q=rand(rng, batch, seq, D), k=rand(rng, batch, seq, D), v=rand(rng, batch, seq, D),
                 kx=rand(rng, batch, kv, D), vx=rand(rng, batch, kv, D),
                 mkx=(rng.random((batch, kv)) > 0.3).astype(np.int32),
                 mt=(rng.random((batch, past + seq)) > 0.3).astype(np.int32),
                 pk=rand(rng, batch, N, past, H), pv=rand(rng, batch, N, past, H),
                 k4=rand(rng, batch, N, kv, H), v4=rand(rng, batch, N, kv, H), ab=rand(rng, batch, N, seq, kv),
                 lens=rng.integers(1, kv + 1, batch).astype(np.int32),
                 m3=(rng.random((batch, seq, seq)) > 0.3).astype(np.int32))
        feeds.append(f)
    check(m, feeds)


def _compile_error(nodes, ins, inits=(), outs=("y",)):
    onnxc.compile(model(nodes, ins, list(outs), inits))


X = ("x", TP.FLOAT, ["B", "S", D])


@pytest.mark.parametrize("attrs, extra, match", [
    (dict(do_rotary=1), [], "do_rotary=1 is not supported"),
    (dict(past_present_share_buffer=1), [], "past_present_share_buffer=1 is not supported"),
    (dict(qkv_hidden_sizes=[D, 8, D + 8]), [], "Q and K hidden sizes must be equal"),
    (dict(qkv_hidden_sizes=[D, D]), [], "qkv_hidden_sizes must have 3 elements"),
    (dict(num_heads=3), [], "not a positive multiple of num_heads 3"),
    (dict(), [("m", TP.INT32, ["B", 2, 3, 3])], "4-D \\(Megatron\\) masks are not supported"),
    (dict(), [("m", TP.INT32, ["C"])], "cannot tell the 1-D mask"),
    (dict(), [("m", TP.INT64, ["B", "S"])], "int64 tensors are not supported"),
])
def test_attention_errors(attrs, extra, match):
    rng = np.random.default_rng(3)
    a = dict(num_heads=N) | attrs
    ins = ["x", "w", "b"] + ([extra[0][0]] if extra else [])
    with pytest.raises(onnxc.OnnxcError, match=match):
        _compile_error([ms_node("Attention", ins, ["y"], **a)], [X] + extra,
                       [("w", rand(rng, D, 3 * D)), ("b", rand(rng, 3 * D))])


@pytest.mark.parametrize("ins, shapes, match", [
    (["q"], [], "packed QKV \\(key and value absent\\) is not supported"),
    (["q", "kv"], [("kv", TP.FLOAT, ["B", "L", N, 2, H])], "packed KV \\(a 5-D key\\) is not supported"),
    (["q", "k", "v", "", "", "", "", "", "psl"], [("psl", TP.INT32, [1])], "past_sequence_length .* not supported"),
    (["q", "k", "v", "", "m"], [("m", TP.INT32, [3 * 2 + 2])], "3 \\* batch_size \\+ 2\\) key mask"),
    (["q", "k4", "v"], [("k4", TP.FLOAT, ["B", N, "L", H])], "key and value must both be 3-D"),
    (["q", "k", "v", "", "", "", "pk"], [("pk", TP.FLOAT, ["B", N, "P", H])], "past_key and past_value"),
])
def test_multihead_attention_errors(ins, shapes, match):
    base = [("q", TP.FLOAT, [2, 3, D]), ("k", TP.FLOAT, [2, 3, D]), ("v", TP.FLOAT, [2, 3, D])]
    used = [i for i in base if i[0] in ins] + shapes
    with pytest.raises(onnxc.OnnxcError, match=match):
        _compile_error([ms_node("MultiHeadAttention", ins, ["y"], num_heads=N)], used)


def bert_encoder(rng, layers: int = 2, vocab: int = 30, max_len: int = 16) -> onnx.ModelProto:
    """A BERT-like encoder in the form PyTorch exports it: word + position embeddings, LayerNormalization, then
    per layer Q/K/V Linear (MatMul, Add), split heads (Reshape, Transpose), MatMul, Div by sqrt(H), Add of the
    (1 - mask) * -10000 bias, Softmax, MatMul, merge heads, output Linear, residual Add, LayerNormalization, and
    the feed-forward block with the Erf form of Gelu."""
    nodes, inits = [], []

    def const(name, a):
        inits.append((name, np.asarray(a)))
        return name

    def op(op_type, ins, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op_type, ins, [out], **attrs))
        return out

    def linear(x, n_in, n_out, tag):
        w = const(f"{tag}_w", rand(rng, n_in, n_out, scale=n_in ** -0.5))
        return op("Add", [const(f"{tag}_b", rand(rng, n_out, scale=0.1)), op("MatMul", [x, w])])

    def layer_norm(x, tag):
        return op("LayerNormalization", [x, const(f"{tag}_g", 1 + rand(rng, D, scale=0.1)),
                                         const(f"{tag}_beta", rand(rng, D, scale=0.1))], axis=-1, epsilon=1e-12)

    seq = op("Gather", [op("Shape", ["input_ids"]), const("one", np.array(1, np.int64))], axis=0)
    pos = op("Slice", [const("pos_table", rand(rng, max_len, D)), const("zero1", np.array([0], np.int64)),
                       op("Unsqueeze", [seq, const("axis0", np.array([0], np.int64))])])
    words = op("Gather", [const("word_table", rand(rng, vocab, D)), "input_ids"], axis=0)
    x = layer_norm(op("Add", [words, pos]), "emb")
    mask = op("Cast", [op("Unsqueeze", [op("Unsqueeze", ["attention_mask", const("a1", np.array([1], np.int64))]),
                                        const("a2", np.array([2], np.int64))])], to=TP.FLOAT)
    mask = op("Mul", [op("Sub", [const("fone", np.array(1.0, np.float32)), mask]),
                      const("neg", np.array(-10000.0, np.float32))])
    heads = const("heads_shape", np.array([0, 0, N, H], np.int64))
    merged = const("merged_shape", np.array([0, 0, D], np.int64))
    for i in range(layers):
        q = op("Transpose", [op("Reshape", [linear(x, D, D, f"l{i}q"), heads])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(x, D, D, f"l{i}k"), heads])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(x, D, D, f"l{i}v"), heads])], perm=[0, 2, 1, 3])
        s = op("Div", [op("MatMul", [q, k]), const(f"l{i}sqrt", np.array(np.sqrt(H), np.float32))])
        p = op("Softmax", [op("Add", [s, mask])], axis=-1)
        ctx = op("Reshape", [op("Transpose", [op("MatMul", [p, v])], perm=[0, 2, 1, 3]), merged])
        x = layer_norm(op("Add", [linear(ctx, D, D, f"l{i}o"), x]), f"l{i}ln1")
        h = linear(x, D, 4 * D, f"l{i}ff1")
        erf = op("Erf", [op("Div", [h, const(f"l{i}r2", np.array(np.sqrt(2), np.float32))])])
        gelu = op("Mul", [op("Mul", [h, op("Add", [erf, const(f"l{i}e1", np.array(1.0, np.float32))])]),
                          const(f"l{i}half", np.array(0.5, np.float32))])
        x = layer_norm(op("Add", [linear(gelu, 4 * D, D, f"l{i}ff2"), x]), f"l{i}ln2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ins = [("input_ids", TP.INT64, ["batch", "seq"]), ("attention_mask", TP.INT64, ["batch", "seq"])]
    return model(nodes, ins, ["last_hidden_state"], inits)


@pytest.mark.parametrize("raw_mask", [False, True])
def test_bert_optimized_by_onnxruntime(tmp_path, raw_mask):
    """onnxruntime.transformers.optimizer fuses each layer's attention into com.microsoft Attention; onnxc compiles
    that into fused attention kernels and matches onnxruntime. By default (the optimizer's own options) the mask
    becomes (B) key lengths (a ReduceSum) and SkipLayerNormalization and BiasGelu appear too (expanded by
    ms_norms.py and ms_activations.py); with ``use_raw_attention_mask`` the mask stays the int32 (B, S) one, and
    here only the attention is fused."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    rng = np.random.default_rng(4)
    path = tmp_path / "bert.onnx"
    onnx.save(bert_encoder(rng), path)
    options = None
    if raw_mask:
        options = FusionOptions("bert")
        for flag in ("enable_skip_layer_norm", "enable_embed_layer_norm", "enable_bias_skip_layer_norm",
                     "enable_gelu", "enable_bias_gelu", "enable_layer_norm"):
            setattr(options, flag, False)
        options.use_raw_attention_mask(True)
    opt = optimize_model(str(path), model_type="bert", num_heads=N, hidden_size=D, opt_level=0,
                         optimization_options=options).model
    attention = [n for n in opt.graph.node if n.op_type == "Attention" and n.domain == MS]
    assert len(attention) == 2, [n.op_type for n in opt.graph.node]
    assert any(n.op_type == "ReduceSum" for n in opt.graph.node) != raw_mask
    assert fused(opt) == 2
    feeds = []
    for batch, seq in ((2, 7), (3, 12)):
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq - 3:] = 0
        feeds.append(dict(input_ids=rng.integers(0, 30, (batch, seq)).astype(np.int64), attention_mask=mask))
    sess_in = {i.name: i.type.tensor_type.elem_type for i in opt.graph.input}
    for f in feeds:  # the optimizer may have turned the mask input into int32
        f["attention_mask"] = f["attention_mask"].astype(helper.tensor_dtype_to_np_dtype(sess_in["attention_mask"]))
    check(opt, feeds)
