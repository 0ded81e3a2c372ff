"""onnxruntime's normalization contrib ops (passes/expansions/ms_norms.py), compared with onnxruntime:
SkipLayerNormalization and SkipSimplifiedLayerNormalization (optional beta / bias, every optional
output, skip broadcast as (1, S, H) and (S, H), 2-D tokens input, float32 / float16 / bfloat16),
SimplifiedLayerNormalization (default domain: axis, broadcast scale, inv_std_var, stash_type),
com.microsoft LayerNormalization (against the standard op: onnxruntime has no such op), and
EmbedLayerNormalization (segments, mask, position_ids, mask_index, embedding_sum, out-of-range ids);
that the expansions become the standard LayerNormalization with the adds in a MatMul's epilogue; and
the errors. Each model holds several nodes and runs at two sizes of its symbolic dims.
"""

from __future__ import annotations

import ml_dtypes
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
H = 8
BF16 = np.dtype(ml_dtypes.bfloat16)
TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-9, 1e-12),
       np.dtype(np.float16): (1e-3, 2e-3), np.dtype(np.int32): (0, 0)}


def model(nodes, inputs, inits=(), opset=17) -> onnx.ModelProto:
    """``inputs``: (name, elem type, shape); every named node output is a graph output."""
    outs = [helper.make_empty_tensor_value_info(o) for n in nodes for o in n.output if o]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(*i) for i in inputs], outs,
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    return m


def check(m: onnx.ModelProto, feeds: list[dict], want_model: onnx.ModelProto | None = None) -> None:
    """One compile of ``m``; per feed, every output equals onnxruntime's run of ``want_model`` (default
    ``m``) in dtype and shape, values within the tolerance of the element type."""
    sess = ort.InferenceSession((want_model or m).SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(m)
    for f in feeds:
        want = sess.run(None, f)
        got = compiled.run(f)
        for o, w in zip(sess.get_outputs(), want):
            g = got[o.name]
            assert g.dtype == w.dtype and g.shape == w.shape, (o.name, g.dtype, g.shape, w.dtype, w.shape)
            rtol, atol = TOL[w.dtype]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=o.name)


def ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain=MS, **attrs)


def rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# -- SkipLayerNormalization, SkipSimplifiedLayerNormalization ---------------------------------------
SKIP_NODES = [
    ms("SkipLayerNormalization", ["x", "s", "g", "be", "bi"], ["y1", "m1", "iv1", "sum1"], epsilon=1e-5),
    ms("SkipLayerNormalization", ["x", "s1", "g"], ["y2", "", "iv2"]),
    ms("SkipLayerNormalization", ["x", "s2", "g", "", "bi"], ["y3"]),
    ms("SkipLayerNormalization", ["t", "t2", "g", "be"], ["y4", "m4"]),
    ms("SkipSimplifiedLayerNormalization", ["x", "s", "g", "bi"], ["y5", "m5", "iv5", "sum5"], epsilon=1e-5),
    ms("SkipSimplifiedLayerNormalization", ["x", "s2", "g"], ["y6"]),
    ms("SkipSimplifiedLayerNormalization", ["t", "t2", "g"], ["y7", "", "", "sum7"]),
    # float16: summed and normalized in float32, rounded once
    ms("SkipLayerNormalization", ["xh", "sh", "gh", "beh", "bih"], ["y8", "m8", "iv8", "sum8"]),
    ms("SkipSimplifiedLayerNormalization", ["xh", "sh1", "gh", "bih"], ["y9", "m9", "iv9", "sum9"]),
]


def skip_feeds(rng, b, s, t):
    return dict(x=rand(rng, b, s, H), s=rand(rng, b, s, H), s1=rand(rng, 1, s, H), s2=rand(rng, s, H),
                t=rand(rng, t, H), t2=rand(rng, t, H), xh=rand(rng, b, s, H, dtype=np.float16),
                sh=rand(rng, b, s, H, dtype=np.float16), sh1=rand(rng, 1, s, H, dtype=np.float16))


def test_skip_layer_normalizations():
    rng = np.random.default_rng(0)
    f, h = TP.FLOAT, TP.FLOAT16
    ins = [("x", f, ["B", "S", H]), ("s", f, ["B", "S", H]), ("s1", f, [1, "S", H]), ("s2", f, ["S", H]),
           ("t", f, ["T", H]), ("t2", f, ["T", H]), ("xh", h, ["B", "S", H]), ("sh", h, ["B", "S", H]),
           ("sh1", h, [1, "S", H])]
    vec = {n: rand(rng, H) for n in ("g", "be", "bi")}
    inits = list(vec.items()) + [(n + "h", a.astype(np.float16)) for n, a in vec.items()]
    check(model(SKIP_NODES, ins, inits), [skip_feeds(rng, 2, 3, 5), skip_feeds(rng, 1, 7, 2)])


def test_skip_layer_normalization_bfloat16():
    """bfloat16 (onnxruntime's Python API takes no bfloat16 arrays): against the float32 ops."""
    rng = np.random.default_rng(1)
    nodes = [ms("SkipLayerNormalization", ["x", "s", "g", "be"], ["y", "", "", "sum"]),
             ms("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["z"]),
             helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["r"])]
    ins = [("x", TP.BFLOAT16, ["B", 4, H]), ("s", TP.BFLOAT16, [4, H])]
    vec = [("g", rand(rng, H)), ("be", rand(rng, H))]
    feeds = dict(x=rand(rng, 3, 4, H).astype(BF16), s=rand(rng, 4, H).astype(BF16))
    got = onnxc.compile(model(nodes, ins, [(n, a.astype(BF16)) for n, a in vec])).run(feeds)
    ref = model(nodes, [("x", TP.FLOAT, ["B", 4, H]), ("s", TP.FLOAT, [4, H])],
                [(n, a.astype(BF16).astype(np.float32)) for n, a in vec])
    want = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {k: v.astype(np.float32) for k, v in feeds.items()})
    for name, w in zip(("y", "sum", "z", "r"), want):
        assert got[name].dtype == BF16
        np.testing.assert_allclose(got[name].astype(np.float32), w, rtol=1e-2, atol=1e-2, err_msg=name)


def test_skip_layer_normalization_folds_into_matmul():
    """MatMul -> SkipLayerNormalization(bias, sum output) is one MatMul (bias and residual in its
    epilogue) and the standard LayerNormalization."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             ms("SkipLayerNormalization", ["mm", "x", "g", "be", "bi"], ["y", "", "", "sum"])]
    m = model(nodes, [("x", TP.FLOAT, ["B", "S", H])],
              [("w", rand(rng, H, H)), ("g", rand(rng, H)), ("be", rand(rng, H)), ("bi", rand(rng, H))])
    m.graph.output.remove(m.graph.output[0])  # mm
    ops = [(n.op_type, n.attr("onnxc_bias"), n.attr("onnxc_residual")) for n in optimize(load_model(m)).graph.nodes]
    assert ops == [("MatMul", 1, 1), ("LayerNormalization", None, None)], ops


def _encoder_layer(rng) -> onnx.ModelProto:
    """A transformer encoder layer spelled out op by op (opset 13), as exporters write it."""
    nodes, inits = [], []

    def op(op_type, ins, **attrs):
        out = f"v{len(nodes)}"
        nodes.append(helper.make_node(op_type, ins, [out], **attrs))
        return out

    def const(a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), f"c{len(inits)}"))
        return inits[-1].name

    def layer_norm(x):
        d = op("Sub", [x, op("ReduceMean", [x], axes=[-1])])
        var = op("ReduceMean", [op("Pow", [d, const(2)])], axes=[-1])
        q = op("Div", [d, op("Sqrt", [op("Add", [var, const(1e-12)])])])
        return op("Add", [op("Mul", [q, const(rand(rng, H))]), const(rand(rng, H))])

    def dense(x, k, n):
        return op("Add", [op("MatMul", [x, const(rand(rng, k, n) / np.sqrt(k))]), const(rand(rng, n))])

    x0 = layer_norm("x")
    x1 = layer_norm(op("Add", [dense(x0, H, H), x0]))
    f = dense(x1, H, 4 * H)
    erf = op("Erf", [op("Div", [f, const(np.sqrt(2))])])
    gelu = op("Mul", [op("Mul", [f, op("Add", [erf, const(1)])]), const(0.5)])
    y = layer_norm(op("Add", [dense(gelu, 4 * H, H), x1]))
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TP.FLOAT, ["B", "S", H])],
                          [helper.make_tensor_value_info(y, TP.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_onnxruntime_optimized_encoder_layer(tmp_path):
    """Issue #18: the model onnxruntime saves after its extended optimizations (LayerNormalization of
    the default domain at opset 13, SkipLayerNormalization, BiasGelu) compiles to three LayerNorms and
    three MatMuls with bias, residual and Gelu in their epilogues, and computes the same numbers."""
    rng = np.random.default_rng(7)
    m = _encoder_layer(rng)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    opt = onnx.load(so.optimized_model_filepath)
    assert {(n.domain, n.op_type) for n in opt.graph.node} >= {(MS, "SkipLayerNormalization"), (MS, "BiasGelu")}
    ops = [n.op_type for n in optimize(load_model(opt)).graph.nodes]
    assert ops == ["LayerNormalization", "MatMul"] * 2 + ["MatMul", "LayerNormalization"], ops
    check(opt, [dict(x=rand(rng, b, s, H)) for b, s in ((2, 5), (1, 3))], want_model=m)


# -- SimplifiedLayerNormalization, com.microsoft LayerNormalization ---------------------------------
def test_simplified_layer_normalization():
    rng = np.random.default_rng(3)
    sln = "SimplifiedLayerNormalization"
    nodes = [helper.make_node(sln, ["x", "g"], ["y1", "iv1"], epsilon=1e-3),
             helper.make_node(sln, ["x", "g2"], ["y2", "iv2"], axis=1),
             helper.make_node(sln, ["x", "g1"], ["y3"], axis=-2),
             helper.make_node(sln, ["xh", "gh"], ["y4", "iv4"]),
             helper.make_node(sln, ["xh", "gh"], ["y5"]),
             helper.make_node(sln, ["xd", "gd"], ["y6"], stash_type=11),  # onnxruntime: no double inv_std_var
             helper.make_node(sln, ["xd", "gd"], ["y7", "iv7"])]
    ins = [("x", TP.FLOAT, ["B", 3, H]), ("xh", TP.FLOAT16, ["B", 3, H]), ("xd", TP.DOUBLE, ["B", 3, H])]
    g = rand(rng, H)
    inits = [("g", g), ("g2", rand(rng, 3, H)), ("g1", rand(rng, 1, H)), ("gh", g.astype(np.float16)),
             ("gd", g.astype(np.float64))]
    feeds = [dict(x=rand(rng, b, 3, H), xh=rand(rng, b, 3, H, dtype=np.float16),
                  xd=rand(rng, b, 3, H, dtype=np.float64)) for b in (2, 5)]
    check(model(nodes, ins, inits), feeds)


def test_com_microsoft_layer_normalization():
    """The same numbers as the standard LayerNormalization (run by onnxruntime, which lacks this one)."""
    rng = np.random.default_rng(4)

    def nodes(domain):
        return [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y1", "m1", "iv1"], domain=domain),
                helper.make_node("LayerNormalization", ["x", "g2"], ["y2", "", "iv2"], axis=1, epsilon=1e-3,
                                 domain=domain)]
    ins = [("x", TP.FLOAT, ["B", 3, H])]
    inits = [("g", rand(rng, H)), ("b", rand(rng, H)), ("g2", rand(rng, 3, H))]
    feeds = [dict(x=rand(rng, b, 3, H)) for b in (1, 4)]
    check(model(nodes(MS), ins, inits), feeds, want_model=model(nodes(""), ins, inits))


# -- EmbedLayerNormalization ------------------------------------------------------------------------
V, P, G = 11, 9, 3
EMBED = ["ids", "seg", "we", "pe", "se", "gamma", "beta", "mask", "pos"]


def embed(ins, outs, rename=None, **attrs):
    """An EmbedLayerNormalization reading the inputs ``ins`` (names of EMBED) in their slots, the
    value of a slot renamed by ``rename``."""
    slots = [n if n in ins else "" for n in EMBED[:EMBED.index(ins[-1]) + 1]]
    return ms("EmbedLayerNormalization", [(rename or {}).get(n, n) for n in slots], outs, **attrs)


def embed_feeds(rng, b, s, bad=None):
    f = dict(ids=rng.integers(0, V, (b, s)).astype(np.int32), seg=rng.integers(0, G, (b, s)).astype(np.int32),
             mask=rng.integers(0, 3, (b, s)).astype(np.int32), pos1=rng.integers(0, P, (1, s)).astype(np.int32),
             posb=rng.integers(0, P, (b, s)).astype(np.int32))
    if bad is not None:
        f["ids"][-1, -1] = bad
    return f


def test_embed_layer_normalization():
    rng = np.random.default_rng(5)
    nodes = [embed(EMBED[:8], ["y1", "mi1", "sum1"], epsilon=1e-5),
             embed(["ids", "we", "pe", "gamma", "beta"], ["y2", "mi2"]),
             embed(["ids", "we", "pe", "gamma", "beta", "mask", "pos"], ["y3", "", "sum3"], {"pos": "pos1"},
                   mask_index_type=0),
             embed(["ids", "we", "pe", "gamma", "beta", "pos"], ["y4"], {"pos": "posb"}, mask_index_type=0)]
    i32 = TP.INT32
    ins = [("ids", i32, ["B", "S"]), ("seg", i32, ["B", "S"]), ("mask", i32, ["B", "S"]), ("pos1", i32, [1, "S"]),
           ("posb", i32, ["B", "S"])]
    inits = [("we", rand(rng, V, H)), ("pe", rand(rng, P, H)), ("se", rand(rng, G, H)), ("gamma", rand(rng, H)),
             ("beta", rand(rng, H))]
    m = model(nodes, ins, inits)
    check(m, [embed_feeds(rng, 2, 5), embed_feeds(rng, 3, 9)])
    compiled = onnxc.compile(m)  # cached: the same C
    for bad in (-1, V):
        with pytest.raises(onnxc.OnnxcError, match=f"index {-(2**31) if bad < 0 else V} is out of range"):
            compiled.run(embed_feeds(rng, 2, 4, bad))
    with pytest.raises(onnxc.OnnxcError, match=f"index {P} is out of range"):
        compiled.run(embed_feeds(rng, 2, P + 1))  # more positions than position_embedding has


# -- errors -----------------------------------------------------------------------------------------
F = TP.FLOAT


@pytest.mark.parametrize("node, ins, match", [
    (ms("SkipLayerNormalization", ["x", "s", "g"], ["y"]), [("x", F, [2, 3, 4, H]), ("s", F, [2, 3, 4, H])],
     "input must be 3-D .* or 2-D"),
    (ms("SkipLayerNormalization", ["x", "s", "g"], ["y"]), [("x", F, [2, 3, H]), ("s", F, [H])],
     r"skip must have the input's shape \[2, 3, 8\], or \(1, S, H\) or \(S, H\)"),
    (ms("SkipLayerNormalization", ["x", "s", "g"], ["y"]), [("x", F, [2, 3, H]), ("s", F, [3, 3, H])],
     "skip must have the input's shape"),
    (ms("SkipLayerNormalization", ["x", "s", "g"], ["y"]), [("x", F, [6, H]), ("s", F, [1, 6, H])],
     "skip must have the input's shape"),
    (ms("SkipLayerNormalization", ["x", "x", "g5"], ["y"]), [("x", F, [2, 3, H])], r"gamma must be 1-D of size 8"),
    (ms("SkipSimplifiedLayerNormalization", ["x", "x", "g", "g5"], ["y"]), [("x", F, [2, 3, H])],
     r"bias must be 1-D of size 8"),
    (ms("SkipLayerNormalization", ["x", "x", "g"], ["y"]), [("x", TP.DOUBLE, [2, 3, H])], "double tensors are not"),
    (ms("SkipLayerNormalization", ["x", "x", "g"], ["y"]), [("x", TP.FLOAT16, [2, 3, H])],
     "input 2 has element type float, but input 0 has float16"),
    (helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], axis=3), [("x", F, [2, 3, H])],
     "axis 3 is out of range for rank 3"),
    (helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], stash_type=11), [("x", F, [2, 3, H])],
     "stash_type 11 is not supported"),
    (helper.make_node("SimplifiedLayerNormalization", ["x", "g5"], ["y"]), [("x", F, [2, 3, H])],
     r"scale of shape \[5\] does not broadcast"),
    (helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"]), [("x", TP.FLOAT16, [2, 3, H])],
     "mixed types are not supported"),
    (embed(["ids", "we", "pe", "gamma", "beta"], ["y"]), [("ids", TP.INT64, [2, 3])], "input_ids must be int32"),
    (embed(["ids", "we", "pe", "gamma", "beta"], ["y"]), [("ids", TP.INT32, [6])], "input_ids must be 2-D"),
    (embed(["ids", "seg", "we", "pe", "gamma", "beta"], ["y"]), [("ids", TP.INT32, [2, 3]), ("seg", TP.INT32, [2, 3])],
     "segment_ids and segment_embedding must be given together"),
    (embed(["ids", "we", "pe", "gamma", "beta", "mask"], ["y"]), [("ids", TP.INT32, [2, 3]), ("mask", TP.INT32, [2, 4])],
     r"mask must have the shape of input_ids \[2, 3\]"),
    (embed(["ids", "we", "pe", "gamma", "beta"], ["y"], {"beta": "g5"}), [("ids", TP.INT32, [2, 3])],
     "beta must be 1-D of size 8"),
    (embed(["ids", "we", "pe", "gamma", "beta"], ["y"], {"pe": "g"}), [("ids", TP.INT32, [2, 3])],
     r"position_embedding must be 2-D \(rows, 8\)"),
])
def test_errors(node, ins, match):
    rng = np.random.default_rng(6)
    inits = [("g", rand(rng, H)), ("g5", rand(rng, 5)), ("we", rand(rng, V, H)), ("pe", rand(rng, P, H)),
             ("gamma", rand(rng, H)), ("beta", rand(rng, H))]
    inits = [(n, a) for n, a in inits if n in node.input]
    with pytest.raises(onnxc.OnnxcError, match=match):
        onnxc.compile(model([node], ins, inits))


def test_missing_required_input():
    node = embed(["ids", "we", "pe", "gamma"], ["y"])
    with pytest.raises(onnxc.OnnxcError, match=r"input 6 \(beta\) is required"):
        onnxc.compile(model([node], [("ids", TP.INT32, [2, 3])], [("we", np.ones((V, H), np.float32)),
                                                                  ("pe", np.ones((P, H), np.float32)),
                                                                  ("gamma", np.ones(H, np.float32))]))
