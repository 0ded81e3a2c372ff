"""Weight-only dequantization (passes/fold_weight_dequant.py): the IR before and after the pass, the
optimized IR of compiled models (Gathers read the narrow tables, no full-table conversion runs per call,
weights of MatMul/Gemm/Conv folded) and the numbers against onnxruntime; the QDQ cases left intact.

Tables are just above fold_constants' cap (2^20 float32 elements), so only this pass can act on them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import DType, Model
from onnxc.ir.checker import check_model
from onnxc.passes import pipeline
from onnxc.passes.fold_weight_dequant import find_chain, fold_weight_dequant
from onnxc.passes.infer_shapes import infer_graph

V, H = 4100, 256  # 1,049,600 elements: 4.2 MB as float32, above the 4 MiB fold cap
F32, F16, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64
rng = np.random.default_rng(21)


class _B:
    """Tiny ONNX graph builder: named initializers and nodes."""

    def __init__(self):
        self.nodes, self.inits, self.outs = [], [], []

    def c(self, name: str, a) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def op(self, op: str, ins: list[str], out: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, ins, [out], name=f"n_{out}", **attrs))
        return out

    def out(self, name: str, elem: int = F32) -> None:
        self.outs.append(helper.make_tensor_value_info(name, elem, None))

    def model(self, inputs: list) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "t", inputs, self.outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return m


def _ints(dt, shape, lo=None, hi=None):
    info = np.iinfo(dt)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dt)


def _scales(shape, dt=np.float32):
    return rng.uniform(0.005, 0.05, shape).astype(dt)


def _until(model, last: str, skip: tuple = ()) -> Model:
    """The IR after the pipeline's steps up to ``last`` (inclusive), leaving out ``skip``; the IR checker
    runs after each step."""
    m, typed = load_model(model), False
    for name, fn in pipeline.steps():
        if name not in skip:
            m = fn(m).model
            typed |= name == "infer_shapes"
            check_model(m, typed=typed)
        if name == last:
            return m
    raise AssertionError(last)


def _readers(m: Model, name: str) -> list[str]:
    return [n.op_type for n in m.graph.walk() for v in n.inputs if v is not None and v.name == name]


def _ort(model: onnx.ModelProto, feeds: dict) -> dict:
    """onnxruntime's results with its basic graph optimizations: the extended level turns
    DequantizeLinear(int4 blocked) -> MatMul into MatMulNBits, which rounds the activations to 8 bits
    (errors of 2% of the output range on these weights), no longer the op-by-op semantics."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _compare(compiled, model: onnx.ModelProto, feeds: dict, rtol=1e-6, atol=1e-6) -> None:
    got, want = compiled.run(feeds), _ort(model, feeds)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
        # float32 sums of thousands of terms in another order: the absolute error scales with the outputs'
        # magnitude (a 512-channel 3x3 Conv: outputs near 270, cancellations near 0.4 off by 8e-4)
        scale = float(np.abs(w.astype(np.float32)).max(initial=0.0))
        np.testing.assert_allclose(got[name].astype(np.float32), w.astype(np.float32), rtol=rtol,
                                   atol=max(atol, 1e-5 * scale), err_msg=name)


# -- Gather on dequantized tables --------------------------------------------------------------------

def _gather_model() -> onnx.ModelProto:
    b = _B()
    cast = b.op("Cast", [b.c("t1", _ints(np.int8, (V, H)))], "t1f", to=F32)
    b.op("Gather", [b.op("Mul", [cast, b.c("s1", np.float32(0.02))], "t1d"), "ids"], "y1")
    cast = b.op("Cast", [b.c("t2", _ints(np.uint8, (V, H)))], "t2f", to=F32)
    sub = b.op("Sub", [cast, b.c("z2", _ints(np.uint8, H, 120, 136).astype(np.float32))], "t2z")
    b.op("Gather", [b.op("Mul", [b.c("s2", _scales(H)), sub], "t2d"), "ids"], "y2")  # scale first
    cast = b.op("Cast", [b.c("t3", _ints(np.uint8, (V, H)))], "t3f", to=F32)
    sub = b.op("Sub", [cast, b.c("z3", _ints(np.uint8, (V, 1), 120, 136).astype(np.float32))], "t3z")
    b.op("Gather", [b.op("Mul", [sub, b.c("s3", _scales((V, 1)))], "t3d"), "ids"], "y3")
    cast = b.op("Cast", [b.c("t4", _ints(np.int8, (V, H)))], "t4f", to=F32)
    b.op("Gather", [b.op("Mul", [cast, b.c("s4", _scales((1, H)))], "t4d"), "ids"], "y4")
    dq = b.op("DequantizeLinear", [b.c("t5", _ints(np.uint8, (V, H))), b.c("s5", _scales(1)),
                                   b.c("z5", np.array([131], np.uint8))], "t5d")
    b.op("Gather", [dq, "ids"], "y5")
    dq = b.op("DequantizeLinear", [b.c("t6", _ints(np.uint8, (V, H))), b.c("s6", _scales(H)),
                                   b.c("z6", _ints(np.uint8, H, 120, 136))], "t6d", axis=1)
    b.op("Gather", [dq, "ids"], "y6")
    dq = b.op("DequantizeLinear", [b.c("t7", _ints(np.int8, (V, H))), b.c("s7", _scales(V)),
                                   b.c("z7", _ints(np.int8, V, -4, 4))], "t7d", axis=0)
    b.op("Gather", [dq, "ids"], "y7")
    b.op("Gather", [dq, "tok"], "y7s")  # a second Gather, scalar index: the axis disappears
    dq = b.op("DequantizeLinear", [b.c("t8", _ints(np.int8, (V, H))), b.c("s8", _scales((V, H // 32)))], "t8d",
              axis=1, block_size=32)
    b.op("Gather", [dq, "ids"], "y8")
    dq = b.op("DequantizeLinear", [b.c("t9", _ints(np.int8, (V, H), -8, 7).astype(ml_dtypes.int4)),
                                   b.c("s9", _scales((V // 50, H)))], "t9d", axis=0, block_size=50)
    b.op("Gather", [dq, "ids"], "y9")  # blocked along the gathered axis: folded instead
    cast = b.op("Cast", [b.c("t10", _ints(np.int8, (64, 16400)))], "t10f", to=F32)
    b.op("Gather", [b.op("Mul", [cast, b.c("s10", _scales((64, 1)))], "t10d"), "cols"], "y10", axis=-1)
    dq = b.op("DequantizeLinear", [b.c("t11", _ints(np.int8, (2 * V, H))), b.c("s11", _scales(2 * V, np.float16)),
                                   b.c("z11", _ints(np.int8, 2 * V, -4, 4))], "t11d", axis=0)
    b.op("Gather", [dq, "ids"], "y11")
    for o in ("y1", "y2", "y3", "y4", "y5", "y6", "y7", "y7s", "y8", "y9", "y10"):
        b.out(o)
    b.out("y11", F16)
    return b.model([helper.make_tensor_value_info("ids", I64, ["N", "S"]),
                    helper.make_tensor_value_info("tok", I64, []),
                    helper.make_tensor_value_info("cols", I64, ["K"])])


@pytest.fixture(scope="module")
def gather_model() -> onnx.ModelProto:
    return _gather_model()


def test_gather_ir_before_after(gather_model):
    before = _until(gather_model, "fold_constants")
    assert _readers(before, "t1") == ["Cast"] and _readers(before, "t7") == ["DequantizeLinear"]
    after = fold_weight_dequant(before).model
    check_model(after, typed=True)
    ops = {n.outputs[0].name: repr(n) for n in after.graph.nodes}
    assert [n.op_type for n in after.graph.nodes if n.outputs[0].name.split("_")[0] == "y1"] == \
        ["Gather", "Cast", "Mul"]
    assert ops["y1"] == "%y1 = Mul(%y1_cast_0, %s1)"
    assert "Gather(%t1, %ids) {axis=0}" in ops["y1_gather_0"]
    assert "Gather(%s2, %ids)" not in str(after.graph) and ops["y2"].startswith("%y2 = Mul(%s2, ")
    assert "Gather(%z3, %ids)" in str(after.graph) and "Gather(%s3, %ids)" in str(after.graph)
    nodes = {n.outputs[0].name: n for n in after.graph.nodes}
    assert nodes["y4"].inputs[1].shape == (1, 1, H)  # [1, H] reshaped for the gathered rank
    assert ops["y5"] == "%y5 = DequantizeLinear(%y5_gather_0, %s5, %z5)"
    assert ops["y6"] == "%y6 = DequantizeLinear(%y6_gather_0, %s6, %z6) {axis=2}"
    assert ops["y7"].startswith("%y7 = Mul(%y7_sub_0, ") and ops["y7s"].startswith("%y7s = Mul(")
    assert "Gather(%s8, %ids) {axis=0}" in str(after.graph) and ops["y8"].endswith("{axis=2, block_size=32}")
    assert _readers(after, "t10") == ["Gather"] and ops["y10_gather_0"].endswith("{axis=1}")
    for t in ("t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t11"):
        assert _readers(after, t) == ["Gather"] * (2 if t == "t7" else 1), t
        assert after.graph.initializers[t].dtype in (DType.INT8, DType.UINT8)
    y9 = nodes["y9"]
    assert y9.op_type == "Gather" and y9.inputs[0].const is not None and y9.inputs[0].const.dtype == np.float32
    assert not any(n.op_type in ("Cast", "DequantizeLinear") and n.inputs[0].name.startswith("t")
                   for n in after.graph.nodes)


def test_gather_numbers_and_optimized_ir(gather_model):
    compiled = onnxc.compile(gather_model)
    g = compiled.ir.graph
    full = V * H // 4
    for n in g.nodes:  # nothing the size of a table is computed per call
        for o in n.outputs:
            assert not (o.type.is_static and np.prod(o.type.shape) >= full), repr(n)
    for t in ("t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t10", "t11"):
        assert set(_readers(compiled.ir, t)) == {"Gather"}, t
    for ids, tok, cols in [(rng.integers(0, V, (1, 128)), 7, [0, 16399, 5]),
                           (np.array([[0, V - 1, -1, -V], [3, 3, 2, 1]]), -2, [-1]),
                           (np.zeros((3, 0), np.int64), V - 1, [])]:
        feeds = {"ids": np.asarray(ids, np.int64), "tok": np.array(tok, np.int64), "cols": np.array(cols, np.int64)}
        _compare(compiled, gather_model, feeds)
    with pytest.raises(Exception, match=r"index 4100 is out of range for an axis of size 4100"):
        compiled.run({"ids": np.array([[1, V]], np.int64), "tok": np.array(0, np.int64),
                      "cols": np.zeros(1, np.int64)})


# -- MatMul / Gemm / Conv weights: folded once ---------------------------------------------------------

def _fold_model() -> onnx.ModelProto:
    b = _B()
    w1 = _ints(np.int8, (1024, 1100), -8, 7).astype(ml_dtypes.int4)
    dq = b.op("DequantizeLinear", [b.c("w1", w1), b.c("s1", _scales((32, 1100)))], "w1d", axis=0, block_size=32)
    b.op("MatMul", ["x", dq], "y1")
    w0 = _ints(np.int8, (1024, 48), -8, 7).astype(ml_dtypes.int4)  # small: shape inference must not fold it
    dq = b.op("DequantizeLinear", [b.c("w0", w0), b.c("s0", _scales((32, 48)))], "w0d", axis=0, block_size=32)
    b.op("MatMul", ["x", dq], "y0")
    dq = b.op("DequantizeLinear", [b.c("w1u", _ints(np.uint8, (1024, 1100), 0, 15).astype(ml_dtypes.uint4)),
                                   b.c("s1u", _scales((1024, 35))),
                                   b.c("z1u", _ints(np.uint8, (1024, 35), 7, 8).astype(ml_dtypes.uint4))],
              "w1ud", axis=1, block_size=32)
    b.op("MatMul", ["x", dq], "y1u")
    cast = b.op("Cast", [b.c("w2", _ints(np.int8, (1100, 1024)))], "w2f", to=F32)
    sub = b.op("Sub", [cast, b.c("z2", np.float32(3))], "w2z")
    b.op("Gemm", ["x", b.op("Mul", [sub, b.c("s2", _scales((1100, 1)))], "w2d"), b.c("bias2", _scales(1100))],
         "y2", transB=1)
    dq = b.op("DequantizeLinear", [b.c("w3", _ints(np.int8, (256, 512, 3, 3))), b.c("s3", _scales(256))],
              "w3d", axis=0)
    b.op("Conv", ["img", dq], "y3", pads=[1, 1, 1, 1])
    dq = b.op("DequantizeLinear", [b.c("t4", _ints(np.uint8, (V, 1024))), b.c("s4", _scales(1)),
                                   b.c("z4", np.array([128], np.uint8))], "t4d")
    b.op("Gather", [dq, "ids"], "y4")  # tied embedding: the table also feeds the output projection
    b.op("MatMul", ["x", b.op("Transpose", [dq], "t4t", perm=[1, 0])], "y5")
    for o in ("y1", "y0", "y1u", "y2", "y3", "y4", "y5"):
        b.out(o)
    return b.model([helper.make_tensor_value_info("x", F32, ["M", 1024]),
                    helper.make_tensor_value_info("img", F32, [1, 512, 6, 5]),
                    helper.make_tensor_value_info("ids", I64, ["S"])])


def test_weights_fold_once_and_numbers():
    model = _fold_model()
    after = _until(model, "fold_weight_dequant")
    # y1 and the small y0 (int4 blocked along K) keep their weights 4-bit: onnxc::MatMulNBits (case 0)
    assert [n.op_type for n in after.graph.nodes] == ["MatMulNBits", "MatMulNBits", "MatMul", "Gemm", "Conv",
                                                      "Gather", "MatMul"]
    assert [v.dtype for v in after.graph.nodes[0].inputs[1:]] == [DType.UINT4, DType.FLOAT]
    for n in after.graph.nodes[2:]:
        w = n.inputs[0] if n.op_type == "Gather" else n.inputs[1]
        assert w.const is not None and w.const.dtype == np.float32, repr(n)
    assert after.graph.nodes[-1].inputs[1].const.shape == (1024, V)  # the Transpose folded too
    compiled = onnxc.compile(model)
    assert not any(n.op_type in ("DequantizeLinear", "Cast", "Transpose") for n in compiled.ir.graph.nodes)
    for m in (1, 5):
        feeds = {"x": rng.standard_normal((m, 1024)).astype(np.float32),
                 "img": rng.standard_normal((1, 512, 6, 5)).astype(np.float32),
                 "ids": rng.integers(-V, V, 9).astype(np.int64)}
        _compare(compiled, model, feeds, rtol=2e-4, atol=2e-4)


# -- left alone ----------------------------------------------------------------------------------------

def _qdq_model() -> onnx.ModelProto:
    """MatMul(DQ(Q(x)), DQ(w int4 blocked)): a QDQ group; and a Cast->Mul weight requantized by a Q."""
    b = _B()
    q = b.op("QuantizeLinear", ["x", b.c("xs", np.float32(0.05)), b.c("xz", np.uint8(128))], "xq")
    xd = b.op("DequantizeLinear", [q, "xs", "xz"], "xd")
    w = _ints(np.int8, (1024, 1100), -8, 7).astype(ml_dtypes.int4)
    wd = b.op("DequantizeLinear", [b.c("w", w), b.c("ws", _scales((32, 1100)))], "wd", axis=0, block_size=32)
    b.op("MatMul", [xd, wd], "y")
    cast = b.op("Cast", [b.c("v", _ints(np.int8, (1100, 1024)))], "vf", to=F32)
    mul = b.op("Mul", [cast, b.c("vs", np.float32(0.01))], "vd")
    b.op("QuantizeLinear", [mul, b.c("qs", np.float32(0.02)), b.c("qz", np.int8(0))], "vq")
    b.out("y")
    b.out("vq", TensorProto.INT8)
    return b.model([helper.make_tensor_value_info("x", F32, ["M", 1024])])


def test_qdq_group_and_requantize_left_intact():
    model = _qdq_model()
    before = _until(model, "fold_constants", skip=("lower_qdq",))
    text = str(before.graph)
    result = fold_weight_dequant(before)
    assert not result.changed and str(result.model.graph) == text
    assert _readers(before, "w") == ["DequantizeLinear"] and _readers(before, "v") == ["Cast"]
    compiled = onnxc.compile(model)
    _compare(compiled, model, {"x": rng.standard_normal((3, 1024)).astype(np.float32)}, rtol=1e-4, atol=1e-3)


def test_chain_shapes():
    """Only Cast [-> Sub(x, c)] [-> Mul] of a narrow integer initializer to a float type is a chain."""
    b = _B()
    b.op("Sub", [b.c("zp", np.float32(1)), b.op("Cast", [b.c("a", _ints(np.int8, (4, 4)))], "af", to=F32)], "ya")
    b.op("Cast", [b.c("c", _ints(np.int8, (4, 4)))], "yc", to=TensorProto.INT32)
    b.op("Cast", [b.c("d", rng.standard_normal((4, 4)).astype(np.float16))], "yd", to=F32)
    b.op("Mul", [b.op("Cast", [b.c("e", _ints(np.uint8, (4, 4)))], "ef", to=F32), b.c("es", _scales((2, 4, 4)))],
         "ye")
    for o, t in (("ya", F32), ("yc", TensorProto.INT32), ("yd", F32), ("ye", F32)):
        b.out(o, t)
    m = load_model(b.model([]))
    infer_graph(m.graph, fold=False)
    heads = {n.inputs[0].name: n for n in m.graph.nodes if n.op_type == "Cast"}
    assert [n.op_type for n in find_chain(heads["a"]).nodes] == ["Cast"]  # Sub(zp, x) is no zero point
    assert find_chain(heads["c"]) is None and find_chain(heads["d"]) is None
    assert [n.op_type for n in find_chain(heads["e"]).nodes] == ["Cast"]  # the Mul grows the tensor
