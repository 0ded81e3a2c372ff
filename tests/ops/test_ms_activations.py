"""onnxruntime's activation contrib ops (passes/expansions/ms_activations.py): Gelu, FastGelu (with and
without bias), BiasGelu and QuickGelu (alpha) compared with onnxruntime in float32, float16 and double;
BiasAdd and BiasSplitGelu (CUDA-only in onnxruntime) and the double Gelu / BiasGelu (onnxruntime's CPU
has no double Erf) compared with numpy; that after a MatMul the bias and the activation fold into its
epilogue; and the errors. Each model holds several nodes and runs at two sizes of its symbolic dims.
"""

from __future__ import annotations

import math

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
H = 16
# double: onnxruntime's kernels round some steps through float32 (QuickGelu: ~1e-7 relative)
TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-6, 1e-9), np.dtype(np.float16): (2e-3, 2e-3)}
_erf = np.vectorize(math.erf)


def model(nodes, inputs, inits=(), outputs=None) -> onnx.ModelProto:
    """``inputs``: (name, elem type, shape); the graph outputs are ``outputs`` (default: every node output)."""
    outs = outputs or [o for n in nodes for o in n.output]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_empty_tensor_value_info(o) for o in outs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    return m


def ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain=MS, **attrs)


def rand(rng, *shape, dtype=np.float32, scale=2.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def compare(got: np.ndarray, want: np.ndarray, name: str, tol: tuple | None = None) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
    rtol, atol = tol or TOL[want.dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


def gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


# -- against onnxruntime ----------------------------------------------------------------------------
def _nodes(sfx: str, double: bool = False) -> list:
    x, b = "x" + sfx, "b" + sfx
    nodes = [ms("FastGelu", [x, b], ["fgb" + sfx]), ms("FastGelu", [x], ["fg" + sfx]),
             ms("QuickGelu", [x], ["qg" + sfx]), ms("QuickGelu", [x], ["qga" + sfx], alpha=-0.5)]
    if not double:  # onnxruntime's CPU has no double Erf
        nodes += [ms("Gelu", [x], ["g" + sfx]), ms("BiasGelu", [x, b], ["bg" + sfx])]
    return nodes


def test_activations_against_onnxruntime():
    rng = np.random.default_rng(0)
    nodes = _nodes("") + _nodes("h") + _nodes("d", double=True) + [ms("Gelu", ["v"], ["gv"]),
                                                                   ms("QuickGelu", ["v"], ["qgv"], alpha=1.0)]
    types = {"": (TP.FLOAT, np.float32), "h": (TP.FLOAT16, np.float16), "d": (TP.DOUBLE, np.float64)}
    ins = [("x" + s, t, ["B", "S", H]) for s, (t, _) in types.items()] + [("v", TP.FLOAT, ["N"])]
    bias = rand(rng, H)
    m = model(nodes, ins, [("b" + s, bias.astype(d)) for s, (_, d) in types.items()])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(m)
    for b, s in ((2, 3), (1, 5)):
        x = rand(rng, b, s, H)
        feeds = {"x" + k: x.astype(d) for k, (_, d) in types.items()} | {"v": rand(rng, 7 * b)}
        got = compiled.run(feeds)
        for o, w in zip(sess.get_outputs(), sess.run(None, feeds)):
            # onnxruntime's double FastGelu uses its documented 6-digit constants (0.797885, 0.035677)
            compare(got[o.name], w, o.name, (2e-4, 1e-6) if o.name in ("fgd", "fgbd") else None)


# -- against numpy ----------------------------------------------------------------------------------
def test_bias_add_bias_split_gelu_and_double_gelu():
    rng = np.random.default_rng(1)
    nodes = [ms("BiasAdd", ["x", "b", "s"], ["ba"]), ms("BiasAdd", ["xh", "bh", "sh"], ["bah"]),
             ms("BiasSplitGelu", ["x", "b"], ["bsg"]), ms("BiasSplitGelu", ["xh", "bh"], ["bsgh"]),
             ms("Gelu", ["xd"], ["gd"]), ms("BiasGelu", ["xd", "bd"], ["bgd"])]
    ins = [("x", TP.FLOAT, ["N", "S", H]), ("s", TP.FLOAT, ["N", "S", H]), ("xh", TP.FLOAT16, ["N", "S", H]),
           ("sh", TP.FLOAT16, ["N", "S", H]), ("xd", TP.DOUBLE, ["N", "S", H])]
    b = rand(rng, H)
    inits = [("b", b), ("bh", b.astype(np.float16)), ("bd", b.astype(np.float64))]
    compiled = onnxc.compile(model(nodes, ins, inits))
    for n, s in ((2, 3), (3, 1)):
        x, sk, xd = rand(rng, n, s, H), rand(rng, n, s, H), rand(rng, n, s, H, dtype=np.float64)
        xh, skh = x.astype(np.float16), sk.astype(np.float16)
        got = compiled.run(dict(x=x, s=sk, xh=xh, sh=skh, xd=xd))
        bh = b.astype(np.float16).astype(np.float32)

        def split_gelu(v, bias):
            t = v.astype(np.float64) + bias
            return t[..., :H // 2] * gelu(t[..., H // 2:])
        want = dict(ba=x + b + sk, bah=(xh.astype(np.float32) + bh + skh).astype(np.float16),
                    bsg=split_gelu(x, b).astype(np.float32), bsgh=split_gelu(xh, bh).astype(np.float16),
                    gd=gelu(xd), bgd=gelu(xd + b.astype(np.float64)))
        for k, w in want.items():
            compare(got[k], w, k, (1e-12, 1e-14) if w.dtype == np.float64 else None)


# -- fusion -----------------------------------------------------------------------------------------
def test_bias_and_activation_fold_into_matmul():
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m1"]), ms("FastGelu", ["m1", "b"], ["a1"]),
             helper.make_node("MatMul", ["a1", "w"], ["m2"]), ms("BiasGelu", ["m2", "b"], ["a2"]),
             helper.make_node("MatMul", ["a2", "w"], ["m3"]), ms("QuickGelu", ["m3"], ["a3"]),
             helper.make_node("MatMul", ["a3", "w"], ["m4"]), ms("Gelu", ["m4"], ["a4"])]
    m = model(nodes, [("x", TP.FLOAT, ["B", "S", H])], [("w", rand(rng, H, H)), ("b", rand(rng, H))], ["a4"])
    got = [(n.op_type, n.attr("onnxc_bias"), n.attr("onnxc_activation")) for n in optimize(load_model(m)).graph.nodes]
    assert got == [("MatMul", 1, "Gelu:tanh"), ("MatMul", 1, "Gelu"), ("MatMul", None, "Swish"),
                   ("MatMul", None, "Gelu")], got


# -- errors -----------------------------------------------------------------------------------------
F = TP.FLOAT


@pytest.mark.parametrize("node, ins, match", [
    (ms("FastGelu", ["x", "b5"], ["y"]), [("x", F, [2, H])], r"bias must be 1-D of the size of the input's last axis"),
    (ms("BiasGelu", ["x", "b2d"], ["y"]), [("x", F, [2, H])], r"B must be 1-D .* got shape \[2, 16\]"),
    (ms("Gelu", ["x"], ["y"]), [("x", F, [])], "the input must have rank >= 1"),
    (ms("QuickGelu", ["x"], ["y"]), [("x", TP.INT32, [2])], "int32 tensors are not supported"),
    (ms("Gelu", ["x"], ["y"]), [("x", TP.BFLOAT16, [2])], "bfloat16 tensors are not supported"),
    (ms("BiasAdd", ["x", "b", "s"], ["y"]), [("x", F, [2, H]), ("s", F, [2, H])], r"X must be 3-D \(N, S, C\)"),
    (ms("BiasAdd", ["x", "b", "s"], ["y"]), [("x", F, [2, 3, H]), ("s", F, [1, 3, H])], "skip must have the shape of X"),
    (ms("BiasAdd", ["x", "b", "s"], ["y"]), [("x", TP.DOUBLE, [2, 3, H]), ("s", TP.DOUBLE, [2, 3, H])],
     "double tensors are not supported"),
    (ms("BiasSplitGelu", ["x", "b5"], ["y"]), [("x", F, [2, 3, 5])], "the hidden size D must be even, got 5"),
    (ms("BiasSplitGelu", ["x", "b"], ["y"]), [("x", F, [2, 3, "D"])], "the hidden size D must be static"),
    (ms("BiasSplitGelu", ["x", "b"], ["y"]), [("x", F, [3, H])], r"X must be 3-D \(N, S, D\)"),
    (ms("BiasGelu", ["x", "b"], ["y"]), [("x", TP.FLOAT16, [2, H])], "input 1 has element type float, but input 0"),
])
def test_errors(node, ins, match):
    rng = np.random.default_rng(3)
    inits = [(n, a) for n, a in (("b", rand(rng, H)), ("b5", rand(rng, 5)), ("b2d", rand(rng, 2, H)))
             if n in node.input]
    with pytest.raises(onnxc.OnnxcError, match=match):
        onnxc.compile(model([node], ins, inits))
