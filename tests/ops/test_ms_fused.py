"""onnxruntime's fused forms (com.microsoft FusedConv, NhwcFusedConv, NhwcConv, FusedGemm, FusedMatMul,
TransposeMatMul) and Inverse, compared with onnxruntime; the IR after the passes shows that each fused
form became a product with its epilogue again. The last test saves a small CNN + MLP through an
onnxruntime session at the extended optimization level (how users get these ops) and compiles that.

Each test compiles one model with several nodes (attribute variants side by side) and symbolic batch
dims, run at two sizes. Error cases only run the passes (no C compile).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

MS = "com.microsoft"
RNG = np.random.default_rng(7)
F, D, H = TP.FLOAT, TP.DOUBLE, TP.FLOAT16


def rand(*shape: int, dt=np.float32, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dt)


def graph_model(nodes: list, inputs: dict[str, tuple[int, list]], consts: dict[str, np.ndarray],
                outputs: list[str]) -> onnx.ModelProto:
    """A model of ``nodes``; inputs: name -> (element type, shape with dim_params)."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                          [onnx.ValueInfoProto(name=o) for o in outputs],
                          initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def ir(m: onnx.ModelProto) -> list:
    """The nodes of ``m`` after the whole pipeline (no C compile)."""
    return list(optimize(load_model(m), check=True).graph.nodes)


def check(m: onnx.ModelProto, feeds: list[dict], oracle: onnx.ModelProto | None = None, rtol=1e-4, atol=1e-5,
          skip: tuple[str, ...] = ()) -> onnxc.CompiledModel:
    """Compile ``m`` once; every feed gives onnxruntime's outputs of ``oracle`` (default: ``m``) but ``skip``."""
    sess = ort.InferenceSession((oracle or m).SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(m)
    for feed in feeds:
        got = compiled.run(feed)
        for o, want in zip(sess.get_outputs(), sess.run(None, feed)):
            if o.name in skip:
                continue
            assert got[o.name].dtype == want.dtype and got[o.name].shape == want.shape, o.name
            np.testing.assert_allclose(got[o.name].astype(np.float64), want, rtol=rtol, atol=atol, err_msg=o.name)
    return compiled


def products(nodes: list) -> dict[str, dict]:
    """Output name -> epilogue of every Conv / Gemm / MatMul in the IR."""
    keys = ("onnxc_activation", "onnxc_activation_params", "onnxc_residual")
    return {n.outputs[0].name: {k: n.attr(k) for k in keys if n.attr(k) is not None}
            for n in nodes if n.op_type in ("Conv", "Gemm", "MatMul") and not n.domain}


def fused_conv(i: int, inputs: list[str], **attrs):
    return helper.make_node("FusedConv", inputs, [f"y{i}"], domain=MS, **attrs)


CONV_CASES = [  # (inputs, attributes); x [N, 4, 7, 7], w* [6, 4, 3, 3] (w5: [6, 2, 3, 3], group 2)
    (["x", "w0", "b", "z"], dict(activation="Relu", pads=[1, 1, 1, 1])),
    (["x", "w1", "b"], dict(activation="LeakyRelu", activation_params=[0.1], pads=[1, 1, 1, 1])),
    (["x", "w2"], dict(activation="Clip", activation_params=[-0.5, 0.7], strides=[2, 2])),
    (["x", "w3", "b"], dict(activation="HardSigmoid", activation_params=[0.3, 0.4], auto_pad="SAME_UPPER")),
    (["x", "w4", "b"], dict(activation="Tanh", dilations=[2, 2])),
    (["x", "w5", "b"], dict(activation="Sigmoid", group=2, pads=[0, 1, 2, 1])),
    (["x", "w6", "", "z"], dict(pads=[1, 1, 1, 1])),  # no activation: Conv + Z
    (["x", "w7", "b"], dict(activation="Silu", pads=[1, 1, 1, 1])),
]


def test_fused_conv():
    """Every activation onnxruntime's FusedConv takes, bias and Z optional; each becomes one Conv with
    its epilogue. Silu is newer than onnxruntime 1.32: its oracle is Conv -> Sigmoid -> Mul."""
    consts = {f"w{i}": rand(6, 2 if i == 5 else 4, 3, 3, scale=0.4) for i in range(8)} | {"b": rand(6)}
    consts |= {"wd": rand(6, 4, 3, 3, dt=np.float64), "bd": rand(6, dt=np.float64)}
    nodes = [fused_conv(i, ins, **a) for i, (ins, a) in enumerate(CONV_CASES)]
    nodes.append(fused_conv(8, ["xd", "wd", "bd", "zd"], activation="Relu", pads=[1, 1, 1, 1]))
    inputs = {"x": (F, ["N", 4, 7, 7]), "z": (F, ["N", 6, 7, 7]), "xd": (D, ["N", 4, 7, 7]), "zd": (D, ["N", 6, 7, 7])}
    outs = [f"y{i}" for i in range(len(nodes))]
    m = graph_model(nodes, inputs, consts, outs)
    silu = [helper.make_node("Conv", ["x", "w7", "b"], ["c7"], pads=[1, 1, 1, 1]),
            helper.make_node("Sigmoid", ["c7"], ["s7"]), helper.make_node("Mul", ["c7", "s7"], ["y7"])]
    oracle = graph_model(nodes[:-2] + silu, inputs, consts, outs[:-1])
    double = [helper.make_node("Conv", ["xd", "wd", "bd"], ["c8"], pads=[1, 1, 1, 1]),  # onnxruntime has no
              helper.make_node("Add", ["c8", "zd"], ["a8"]), helper.make_node("Relu", ["a8"], ["y8"])]  # float64 Conv
    double = ReferenceEvaluator(graph_model(double, {k: inputs[k] for k in ("xd", "zd")}, consts, ["y8"]))
    eps = products(ir(m))
    assert all(eps.get(o) for o in outs[:-1]), eps  # float32: nothing left outside the Convs
    assert eps["y0"] == {"onnxc_activation": "Relu", "onnxc_residual": 1}
    assert eps["y7"]["onnxc_activation"] == "Swish"
    feeds = [{"x": rand(n, 4, 7, 7), "z": rand(n, 6, 7, 7), "xd": rand(n, 4, 7, 7, dt=np.float64),
              "zd": rand(n, 6, 7, 7, dt=np.float64)} for n in (2, 1)]
    compiled = check(m, feeds, oracle)
    for f in feeds:
        want = double.run(None, {"xd": f["xd"], "zd": f["zd"]})[0]
        np.testing.assert_allclose(compiled.run(f)["y8"], want, rtol=1e-12, atol=1e-12)


def test_nhwc_conv():
    """NhwcConv and NhwcFusedConv: channels-last X, Z, Y and W [M, k.., C/group]; the oracle is Conv /
    FusedConv between the transposes (weights transposed by [0, 2, 3, 1], as fusion_nhwc_conv.py does)."""
    w = {f"w{i}": rand(6, 2 if i == 1 else 4, 3, 3, scale=0.4) for i in range(4)}
    consts = {f"{k}_nhwc": v.transpose(0, 2, 3, 1).copy() for k, v in w.items()} | {"b": rand(6)}
    cases = [("NhwcConv", ["x", "w0_nhwc", "b"], dict(pads=[1, 1, 1, 1])),
             ("NhwcConv", ["x", "w1_nhwc"], dict(group=2, strides=[2, 1])),
             ("NhwcFusedConv", ["x", "w2_nhwc", "b", "z"], dict(activation="Relu", pads=[1, 1, 1, 1])),
             ("NhwcFusedConv", ["x", "w3_nhwc", "b"], dict(activation="LeakyRelu", activation_params=[0.2]))]
    nodes = [helper.make_node(op, ins, [f"y{i}"], domain=MS, **a) for i, (op, ins, a) in enumerate(cases)]
    reference = [helper.make_node("Transpose", ["x"], ["x_nchw"], perm=[0, 3, 1, 2]),
                 helper.make_node("Transpose", ["z"], ["z_nchw"], perm=[0, 3, 1, 2])]
    for i, (op, ins, a) in enumerate(cases):
        ins = ["x_nchw", ins[1][:2], *ins[2:3], *(["z_nchw"] if len(ins) > 3 else [])]
        conv = "Conv" if op == "NhwcConv" else "FusedConv"
        reference += [helper.make_node(conv, ins, [f"c{i}"], domain=None if op == "NhwcConv" else MS, **a),
                      helper.make_node("Transpose", [f"c{i}"], [f"y{i}"], perm=[0, 2, 3, 1])]
    inputs = {"x": (F, ["N", "H", 7, 4]), "z": (F, ["N", "H", 7, 6])}
    outs = [f"y{i}" for i in range(len(nodes))]
    m = graph_model(nodes, inputs, consts, outs)
    nodes_ir = ir(m)
    assert not any(n.op_type == "Transpose" and n.inputs[0].const is not None for n in nodes_ir)  # weights folded
    eps = [e for e in products(nodes_ir).values() if e]
    assert {"onnxc_activation": "Relu", "onnxc_residual": 1} in eps
    check(m, [{"x": rand(n, h, 7, 4), "z": rand(n, h, 7, 6)} for n, h in ((2, 5), (1, 8))],
          graph_model(reference, inputs, w | {"b": consts["b"]}, outs))


GEMM_ACTIVATIONS = [
    ("Elu", dict(activation_alpha=0.7)), ("HardSigmoid", dict(activation_alpha=0.3, activation_beta=0.45)),
    ("LeakyRelu", dict(activation_alpha=0.2)), ("Relu", {}), ("Selu", dict(activation_alpha=1.6, activation_gamma=1.05)),
    ("Sigmoid", {}), ("Softplus", {}), ("Softsign", {}), ("Tanh", {}), ("ThresholdedRelu", dict(activation_alpha=0.3)),
    ("ParametricSoftplus", dict(activation_alpha=0.8, activation_beta=1.7)),
    ("ScaledTanh", dict(activation_alpha=1.3, activation_beta=0.6))]


def test_fused_gemm():
    """Every activation of onnxruntime's FusedGemm, with alpha, beta, C (broadcast row), transA/transB."""
    consts = {f"bt{i}": rand(6, 5) for i in range(len(GEMM_ACTIVATIONS))} | {"c": rand(6)}
    nodes = [helper.make_node("FusedGemm", ["a", f"bt{i}", "c"], [f"y{i}"], domain=MS, activation=act, transB=1,
                              alpha=0.9, beta=0.5, **p) for i, (act, p) in enumerate(GEMM_ACTIVATIONS)]
    k = len(nodes)
    nodes += [helper.make_node("FusedGemm", ["at", "b2"], [f"y{k}"], domain=MS, activation="Relu", transA=1),
              helper.make_node("FusedGemm", ["a", "bt0", "c2"], [f"y{k + 1}"], domain=MS, activation="Tanh",
                               transB=1)]
    nodes.append(helper.make_node("FusedGemm", ["ad", "bd"], [f"y{k + 2}"], domain=MS, activation="LeakyRelu",
                                  activation_alpha=0.1, alpha=2.0))
    double = [helper.make_node("Gemm", ["ad", "bd"], ["gd"], alpha=2.0),  # no float64 FusedGemm in onnxruntime
              helper.make_node("LeakyRelu", ["gd"], [f"y{k + 2}"], alpha=0.1)]
    inputs = {"a": (F, ["M", 5]), "at": (F, [5, "M"]), "b2": (F, [5, 3]), "c2": (F, ["M", 6]), "ad": (D, ["M", 5]),
              "bd": (D, [5, 4])}
    outs = [f"y{i}" for i in range(len(nodes))]
    m = graph_model(nodes, inputs, consts, outs)
    oracle = graph_model(nodes[:-1] + double, inputs, consts, outs)
    eps = products(ir(m))
    for i, (act, _) in enumerate(GEMM_ACTIVATIONS):
        if act in ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid"):
            assert eps[f"y{i}"]["onnxc_activation"] == act
    check(m, [{"a": rand(n, 5), "at": rand(5, n), "b2": rand(5, 3), "c2": rand(n, 6), "ad": rand(n, 5, dt=np.float64),
               "bd": rand(5, 4, dt=np.float64)} for n in (4, 1)], oracle)


MATMUL_CASES = [  # A shape, B shape, transA, transB, transBatchA, transBatchB
    (["S", 4], [4, 5], 0, 0, 0, 0), ([4, "S"], [4, 5], 1, 0, 0, 0), (["S", 4], [5, 4], 0, 1, 0, 0),
    ([4, "S"], [5, 4], 1, 1, 0, 0), ([2, "S", 4], [5, 4], 0, 1, 0, 0), ([2, 4, "S"], [2, 5, 4], 1, 1, 0, 0),
    ([2, 1, "S", 4], [5, 2, 4], 0, 1, 0, 0), ([4], [5, 4], 1, 1, 0, 0), (["S", 4], [4], 0, 1, 0, 0),
    ([4], [4], 1, 1, 0, 0), ([4], [2, 5, 4], 0, 1, 0, 0),
    (["S", 2, 4], [2, 4, 5], 0, 0, 1, 0), ([4, 2, "S"], [2, 4, 5], 1, 0, 1, 0), (["S", 2, 4], [4, 2, 5], 0, 0, 1, 1),
    (["S", 2, 4], [5, 2, 4], 0, 1, 1, 1), ([2, "S", 4], [4, 2, 5], 0, 0, 0, 1), (["S", 2, 6, 4], [2, 6, 4, 5], 0, 0, 1, 0),
    (["S", 1, 4], [4, 2, 5], 0, 0, 1, 1), (["S", 2, 1, 4], [4, 2, 6, 5], 0, 0, 1, 1),
]


def _sized(shape: list, s: int) -> tuple[int, ...]:
    return tuple(s if d == "S" else d for d in shape)


def test_fused_matmul():
    """onnxruntime's transposes (trans on the last two axes, transBatch moving axis 0 behind the batch,
    vectors ignoring trans), broadcasting, alpha; TransposeMatMul; float64; and a scaled, transposed
    constant B whose Transpose and scale fold into the weight at compile time."""
    nodes, inputs = [], {}
    for i, (sa, sb, ta, tb, tba, tbb) in enumerate(MATMUL_CASES):
        inputs |= {f"a{i}": (F, sa), f"b{i}": (F, sb)}
        nodes.append(helper.make_node("FusedMatMul", [f"a{i}", f"b{i}"], [f"y{i}"], domain=MS, alpha=0.5 if i % 2 else 1.0,
                                      transA=ta, transB=tb, transBatchA=tba, transBatchB=tbb))
    k = len(nodes)
    inputs |= {"ad": (D, ["S", 3, 4]), "bd": (D, [3, 5, 4]), "ax": (F, ["S", 3, 4])}
    nodes += [helper.make_node("TransposeMatMul", ["a0", "b2"], [f"y{k}"], domain=MS, transB=1, alpha=2.0),
              helper.make_node("FusedMatMul", ["ad", "bd"], [f"y{k + 1}"], domain=MS, transB=1, alpha=0.25),
              helper.make_node("FusedMatMul", ["ax", "wt"], [f"y{k + 2}"], domain=MS, transB=1, alpha=0.125)]
    m = graph_model(nodes, inputs, {"wt": rand(6, 4)}, [f"y{i}" for i in range(len(nodes))])
    last = next(n for n in ir(m) if n.outputs[0].name == f"y{k + 2}")
    assert last.op_type == "MatMul" and last.inputs[1].const is not None  # no Transpose or Mul left
    feeds = []
    for s in (3, 1):
        f = {f"a{i}": rand(*_sized(c[0], s)) for i, c in enumerate(MATMUL_CASES)}
        f |= {f"b{i}": rand(*_sized(c[1], s)) for i, c in enumerate(MATMUL_CASES)}
        feeds.append(f | {"ad": rand(s, 3, 4, dt=np.float64), "bd": rand(3, 5, 4, dt=np.float64), "ax": rand(s, 3, 4)})
    check(m, feeds)


INVERSE_CASES = [  # (element type, shape): n = 1, two batch axes, n = 33, symbolic n, no batch, float16
    (F, ["B", 1, 1]), (F, ["B", 2, 3, 3]), (F, ["B", 33, 33]), (D, ["B", 4, 4]), (D, ["B", "n", "n"]),
    (F, ["n", "n"]), (H, ["B", 7, 7]), (H, ["B", "n", "n"])]


def _invertible(shape: tuple, dt) -> np.ndarray:
    """Random matrices made well conditioned by a diagonal shift (inverses good to float32)."""
    n = shape[-1]
    return (rand(*shape, dt=np.float64) + (2 + np.sqrt(n)) * np.eye(n)).astype(dt)


def test_inverse():
    """Inverse is a kernel of its own (one node in the IR): float32/float64 against onnxruntime for
    n = 1, two batch axes, n = 33, a symbolic n and a rank-2 input, run at two sizes; float64 also
    against numpy.linalg.inv; float16 against the exact inverse rounded once (onnxc inverts in double),
    and loosely against onnxruntime, which inverts in half precision."""
    nodes = [helper.make_node("Inverse", [f"x{i}"], [f"y{i}"], domain=MS) for i in range(len(INVERSE_CASES))]
    m = graph_model(nodes, {f"x{i}": c for i, c in enumerate(INVERSE_CASES)}, {}, [f"y{i}" for i in range(len(nodes))])
    assert [(n.domain, n.op_type) for n in ir(m)] == [(MS, "Inverse")] * len(nodes)
    halves = tuple(f"y{i}" for i, (t, _) in enumerate(INVERSE_CASES) if t == H)
    dts = {F: np.float32, D: np.float64, H: np.float16}
    feeds = [{f"x{i}": _invertible(tuple({"B": b, "n": n}.get(d, d) for d in s), dts[t])
              for i, (t, s) in enumerate(INVERSE_CASES)} for b, n in ((3, 5), (1, 12))]
    compiled = check(m, feeds, skip=halves)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in feeds:
        got, theirs = compiled.run(feed), dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        for i, (t, _) in enumerate(INVERSE_CASES):
            exact = np.linalg.inv(feed[f"x{i}"].astype(np.float64))
            if t == D:
                np.testing.assert_allclose(got[f"y{i}"], exact, rtol=1e-12, atol=1e-14)
            if t == H:
                assert got[f"y{i}"].dtype == np.float16
                np.testing.assert_allclose(got[f"y{i}"].astype(np.float64), exact.astype(np.float16).astype(np.float64),
                                           rtol=1e-3, atol=1e-7)  # within one float16 rounding step
                np.testing.assert_allclose(got[f"y{i}"], theirs[f"y{i}"], rtol=0, atol=3e-2)


def test_inverse_singular():
    """A singular matrix is no error: as in onnxruntime, its inverse holds infinities and NaNs (the
    divisions by an exactly zero pivot). The non-finite elements are the ones onnxruntime gives and the
    finite ones agree with it (a zero column leaves some rows of the inverse finite), for n = 1 to 8 in
    each type, including n <= 4 where Eigen uses cofactors rather than LU. Square matrices whose size
    is two symbols are checked at run time."""
    nodes = [helper.make_node("Inverse", [f"x{i}"], [f"y{i}"], domain=MS) for i in range(4)]
    inputs = {"x0": (F, ["B", "n", "n"]), "x1": (D, ["B", "n", "n"]), "x2": (H, ["B", "n", "n"]), "x3": (D, ["p", "q"])}
    m = graph_model(nodes, inputs, {}, [f"y{i}" for i in range(4)])
    compiled = onnxc.compile(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 2, 3, 5, 8):
        dup, zero_col = RNG.integers(-3, 4, (2, n, n)).astype(np.float64)
        dup[-1], zero_col[:, n // 2] = dup[0], 0
        x = np.stack([np.zeros((n, n)), dup, zero_col])
        feed = {"x0": x.astype(np.float32), "x1": x, "x2": x.astype(np.float16), "x3": _invertible((n, n), np.float64)}
        got, singular = compiled.run(feed), [True, n > 1, True]  # a 1x1 "duplicated row" is any number
        for name, want in zip([o.name for o in sess.get_outputs()], sess.run(None, feed)):
            finite = np.isfinite(want)
            assert (np.isfinite(got[name]) == finite).all(), (name, n)
            if name != "y3":
                assert [not f.all() for f in finite] == singular, (name, n)
            rtol = 2e-2 if name == "y2" else 1e-4  # onnxruntime's float16 LU runs in half precision
            np.testing.assert_allclose(got[name][finite].astype(np.float64), want[finite], rtol=rtol, atol=1e-5,
                                       err_msg=name)
    with pytest.raises(onnxc.InputError, match="Inverse"):
        compiled.run(feed | {"x3": np.ones((3, 4))})


def test_float16():
    """float16 FusedConv (with Z and a Clip at float32's extremes), FusedGemm, FusedMatMul against
    onnxruntime (its float16 kernels round differently: a looser tolerance). Inverse: test_inverse."""
    consts = {"w": rand(4, 3, 3, 3, dt=np.float16, scale=0.3), "b": rand(4, dt=np.float16),
              "g": rand(5, 6, dt=np.float16, scale=0.4)}
    nodes = [helper.make_node("FusedConv", ["x", "w", "b", "z"], ["y0"], domain=MS, activation="Clip",
                              activation_params=[-3.4028234663852886e38, 1.5], pads=[1, 1, 1, 1]),
             helper.make_node("FusedGemm", ["a", "g"], ["y1"], domain=MS, activation="Relu", alpha=0.5),
             helper.make_node("FusedMatMul", ["x3", "a"], ["y2"], domain=MS, transA=1, alpha=0.5)]
    inputs = {"x": (H, ["N", 3, 5, 5]), "z": (H, ["N", 4, 5, 5]), "a": (H, ["N", 5]), "x3": (H, ["N", 2])}
    m = graph_model(nodes, inputs, consts, ["y0", "y1", "y2"])
    feeds = [{"x": rand(n, 3, 5, 5, dt=np.float16), "z": rand(n, 4, 5, 5, dt=np.float16), "a": rand(n, 5, dt=np.float16),
              "x3": rand(n, 2, dt=np.float16)} for n in (3, 1)]
    check(m, feeds, rtol=2e-3, atol=4e-3)


def _cnn_mlp() -> onnx.ModelProto:
    """Conv+Relu, Conv+Add+Relu (residual), Conv+LeakyRelu, Gemm+Relu, and an MLP MatMul + scale."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a2"]), helper.make_node("Relu", ["a2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["c3"], strides=[2, 2]),
             helper.make_node("LeakyRelu", ["c3"], ["l3"], alpha=0.05),
             helper.make_node("Flatten", ["l3"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["gr"]),
             helper.make_node("MatMul", ["gr", "wm"], ["mm"]), helper.make_node("Mul", ["mm", "s"], ["h"]),
             helper.make_node("Tanh", ["h"], ["y"])]
    consts = {"w1": rand(4, 3, 3, 3, scale=0.3), "b1": rand(4), "w2": rand(4, 4, 3, 3, scale=0.3), "b2": rand(4),
              "w3": rand(4, 4, 3, 3, scale=0.3), "wg": rand(8, 16, scale=0.3), "bg": rand(8),
              "wm": rand(8, 5, scale=0.3), "s": np.array(0.25, np.float32)}
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", F, ["N", 3, 6, 6])],
                          [helper.make_tensor_value_info("y", F, ["N", 5])],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_onnxruntime_extended_model(tmp_path):
    """A model saved by an onnxruntime session at ORT_ENABLE_EXTENDED holds FusedConv, FusedGemm and
    FusedMatMul; onnxc compiles it to Convs / Gemm / MatMul with epilogues and matches onnxruntime."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(_cnn_mlp().SerializeToString(), so, providers=["CPUExecutionProvider"])
    saved = onnx.load(so.optimized_model_filepath)
    ops = {(n.domain, n.op_type) for n in saved.graph.node}
    assert {(MS, "FusedConv"), (MS, "FusedGemm"), (MS, "FusedMatMul")} <= ops
    nodes = ir(saved)
    assert [n.op_type for n in nodes] == ["Conv", "Conv", "Conv", "Flatten", "Gemm", "MatMul"]
    eps = products(nodes)
    assert eps["r2"] == {"onnxc_activation": "Relu", "onnxc_residual": 1}
    assert eps["y"]["onnxc_activation"] == "Tanh"
    check(saved, [{"x": rand(n, 3, 6, 6)} for n in (2, 1)])


def _errors():
    x, w = (F, [1, 2, 5, 5]), np.ones((3, 2, 3, 3), np.float32)
    conv = {"x": x, "z": (F, [1, 3, 1, 1])}
    gemm = {"a": (F, [2, 3]), "b": (F, [3, 4])}
    return [
        (helper.make_node("FusedConv", ["x", "w"], ["y"], domain=MS, activation="Gelu"), conv,
         onnxc.UnsupportedOpError, "FusedConv.*activation 'Gelu' is not supported"),
        (helper.make_node("FusedConv", ["x", "w"], ["y"], domain=MS, activation="LeakyRelu"), conv,
         onnxc.ShapeError, r"LeakyRelu needs activation_params \[alpha\]"),
        (helper.make_node("FusedConv", ["x", "w", "", "z"], ["y"], domain=MS, pads=[1, 1, 1, 1]), conv,
         onnxc.ShapeError, r"Z must have the output's shape \[1, 3, 5, 5\], got \[1, 3, 1, 1\]"),
        (helper.make_node("FusedGemm", ["a", "b"], ["y"], domain=MS), gemm,
         onnxc.ShapeError, "FusedGemm.*attribute 'activation' is required"),
        (helper.make_node("FusedGemm", ["a", "b"], ["y"], domain=MS, activation="Selu", activation_alpha=1.0), gemm,
         onnxc.ShapeError, "Selu needs the attribute 'activation_gamma'"),
        (helper.make_node("FusedGemm", ["a", "b"], ["y"], domain=MS, activation="Gelu"), gemm,
         onnxc.UnsupportedOpError, "activation 'Gelu' is not supported"),
        (helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transBatchA=1), gemm,
         onnxc.ShapeError, "transBatchA/transBatchB need A and B of one rank >= 3"),
        (helper.make_node("FusedMatMul", ["a", "v"], ["y"], domain=MS, transA=1), {"a": (F, [3, 2]), "v": (F, [3])},
         onnxc.UnsupportedOpError, "transA=1 with a 1-D B is not supported"),
        (helper.make_node("Inverse", ["a"], ["y"], domain=MS), {"a": (F, [2, 3])},
         onnxc.ShapeError, r"Inverse.*axis 0 is 2 vs axis 1 is 3 \(square matrices\)"),
        (helper.make_node("Inverse", ["a"], ["y"], domain=MS), {"a": (F, [4])},
         onnxc.ShapeError, r"Inverse.*X must have shape \[\.\.\., n, n\] \(rank >= 2\), got \[4\]"),
        (helper.make_node("Inverse", ["a"], ["y"], domain=MS), {"a": (TP.INT32, [2, 2])},
         onnxc.ShapeError, "Inverse.*X must be a float32, float64 or float16 tensor, got int32"),
        (helper.make_node("FusedGemm", ["a", "b"], ["y"], domain=MS, activation="Relu"),
         {"a": (TP.INT32, [2, 3]), "b": (TP.INT32, [3, 4])}, onnxc.UnsupportedOpError, "int32 tensors are not supported"),
    ], w


@pytest.mark.parametrize("case", range(12))
def test_errors(case):
    """Invalid models (ShapeError) and combinations onnxc leaves out (UnsupportedOpError) name the node."""
    cases, w = _errors()
    node, inputs, err, match = cases[case]
    consts = {"w": w} if "w" in node.input else {}
    with pytest.raises(err, match=match):
        ir(graph_model([node], {k: v for k, v in inputs.items() if k in node.input}, consts, ["y"]))
