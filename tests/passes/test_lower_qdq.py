"""passes/lower_qdq.py: QDQ groups become integer ops; results within one quantization step of the
graph as written (onnxruntime with its graph optimizations off: its own QDQ fusions round a Gemm's
bias differently from the graph's float semantics)."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.lower_qdq import lower_qdq
from onnxc.passes.pipeline import steps

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _own_data(request):
    """Each test its own seeded data: with the module's one generator, a test's data depended on the tests its
    pytest-xdist worker ran before (a float output compared with onnxruntime flaked on one such draw)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))


class G:
    """A QDQ graph under construction: nodes, initializers and names."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def const(self, a, base="c") -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def node(self, op: str, ins: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def q(self, x: str, scale: float, zp) -> str:
        return self.node("QuantizeLinear", [x, self.const(np.float32(scale)), self.const(zp)])

    def dq(self, x: str, scale, zp, axis: int | None = None) -> str:
        attrs = {} if axis is None else {"axis": axis}
        return self.node("DequantizeLinear", [x, self.const(scale), self.const(zp)], **attrs)

    def qdq(self, x: str, scale: float, zp) -> str:
        return self.dq(self.q(x, scale, zp), np.float32(scale), zp)

    def weight(self, shape, dt, axis: int, per_channel: bool) -> str:
        info = np.iinfo(dt)
        wq = RNG.integers(info.min, info.max + 1, size=shape).astype(dt)
        n = shape[axis] if per_channel else 1
        scale = (RNG.random(n) * 0.02 + 0.005).astype(np.float32)
        zp = np.zeros(n, dt) if dt == np.int8 else RNG.integers(100, 156, size=n).astype(dt)
        if not per_channel:
            scale, zp = scale[0], zp[0]
        return self.dq(self.const(wq, "w"), scale, zp, axis if per_channel else None)

    def model(self, inputs, outputs) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "qdq", inputs,
                              [onnx.ValueInfoProto(name=o) for o in outputs],
                              initializer=self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _ops_after(model: onnx.ModelProto) -> Counter:
    m = load_model(model)
    for _name, fn in steps():
        m = fn(m).model
    return Counter(n.op_type for n in m.graph.nodes)


def _compare(model: onnx.ModelProto, feeds: dict[str, np.ndarray], scales: dict[int, float]) -> None:
    cm = onnxc.compile(model)
    got = list(cm.run(feeds).values())
    so = ort.SessionOptions()  # the graph as written: onnxruntime's own QDQ fusions round differently
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype in (np.uint8, np.int8):
            diff = np.abs(g.astype(np.int32) - w.astype(np.int32))
            assert diff.max() <= 1, f"output {i}: {diff.max()} steps apart"
            assert (diff > 0).mean() < 0.02, f"output {i}: {(diff > 0).mean():.1%} of elements differ"
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=scales.get(i, 1e-5))


def _conv_model(act_dt, wdt):
    g = G()
    zx = act_dt(128 if act_dt == np.uint8 else 3)
    x = g.qdq("x", 0.02, zx)
    c = 4
    bias = RNG.integers(-500, 500, size=8).astype(np.int32)
    w1 = g.weight((8, c, 3, 3), wdt, 0, True)
    b1 = g.dq(g.const(bias), np.float32(0.02) * np.ones(8, np.float32) * 0.01, np.zeros(8, np.int32), 0)
    y1 = g.node("Conv", [x, w1, b1], pads=[1, 1, 1, 1])
    r1 = g.node("Relu", [y1])
    q1 = g.q(r1, 0.05, act_dt(0 if act_dt == np.uint8 else -128))
    d1 = g.dq(q1, np.float32(0.05), act_dt(0 if act_dt == np.uint8 else -128))
    p = g.node("MaxPool", [d1], kernel_shape=[2, 2], strides=[2, 2])
    qp = g.q(p, 0.05, act_dt(0 if act_dt == np.uint8 else -128))  # mover: MaxPool on the 8-bit tensor
    dp = g.dq(qp, np.float32(0.05), act_dt(0 if act_dt == np.uint8 else -128))
    w2 = g.weight((6, 8, 1, 1), wdt, 0, False)
    y2 = g.node("Conv", [dp, w2, g.const(RNG.standard_normal(6).astype(np.float32))], strides=[1, 1])
    w3 = g.weight((8, 2, 3, 3), wdt, 0, True)  # grouped, clipped to [0, 6]
    y3 = g.node("Conv", [x, w3], group=2, pads=[0, 1, 0, 1])
    cl = g.node("Clip", [y3, g.const(np.float32(0)), g.const(np.float32(0.5))])
    q3 = g.q(cl, 0.004, act_dt(0 if act_dt == np.uint8 else -128))
    model = g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 9, 9])], [q1, qp, y2, q3])
    return model


@pytest.mark.parametrize("act_dt,wdt", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
def test_conv_groups(act_dt, wdt):
    model = _conv_model(act_dt, wdt)
    ops = _ops_after(model)
    # the float-output Conv: ConvInteger -> Cast -> Mul -> Add, then folded by fuse_integer_dequant
    assert ops["QLinearConv"] == 2 and ops["ConvIntegerToFloat"] == 1 and "Conv" not in ops
    assert "Relu" not in ops and ops["Max"] == 1  # the Relu became a clamp at Q(0)
    for n in (1, 3):
        _compare(model, {"x": RNG.standard_normal((n, 4, 9, 9)).astype(np.float32)}, {2: 1e-4})


def _matmul_model():
    g = G()
    a = g.qdq("a", 0.03, np.int8(-5))
    w = g.weight((16, 8), np.int8, 1, True)
    y1 = g.node("MatMul", [a, w])
    q1 = g.q(y1, 0.1, np.int8(2))
    y2 = g.node("MatMul", [a, g.weight((16, 5), np.uint8, 1, False)])  # float result
    b = g.qdq("b", 0.05, np.int8(0))
    y3 = g.node("MatMul", [a, b])  # two run-time operands
    q3 = g.q(y3, 0.2, np.int8(0))
    a2 = g.qdq("a2", 0.03, np.uint8(120))
    bias = g.dq(g.const(RNG.integers(-300, 300, size=7).astype(np.int32)), np.float32(3e-4), np.int32(0))
    y4 = g.node("Gemm", [a2, g.weight((7, 16), np.int8, 0, True), bias], transB=1)
    return g.model([helper.make_tensor_value_info("a", TensorProto.FLOAT, ["B", "S", 16]),
                    helper.make_tensor_value_info("b", TensorProto.FLOAT, ["B", 16, "T"]),
                    helper.make_tensor_value_info("a2", TensorProto.FLOAT, ["B", 16])], [q1, y2, q3, y4])


def test_matmul_and_gemm_groups():
    model = _matmul_model()
    ops = _ops_after(model)
    assert ops["QLinearMatMul"] == 2 and ops["MatMulInteger"] == 2
    assert "MatMul" not in ops and "Gemm" not in ops
    for b, s, t in ((1, 3, 4), (2, 5, 2)):
        feeds = {"a": RNG.standard_normal((b, s, 16)).astype(np.float32),
                 "b": RNG.standard_normal((b, 16, t)).astype(np.float32),
                 "a2": RNG.standard_normal((b, 16)).astype(np.float32)}
        _compare(model, feeds, {1: 1e-4, 3: 1e-4})


def test_groups_that_do_not_fit_stay_float():
    g = G()
    x = g.qdq("x", 0.02, np.uint8(128))
    w = g.dq(g.const(RNG.integers(-8, 8, size=(4, 3)).astype(np.int8)), np.full(4, 0.1, np.float32),
             np.zeros(4, np.int8), 0)  # scales along K (axis 0), not per output column
    y = g.node("MatMul", [x, w])
    model = g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])], [y])
    m = load_model(model)
    for name, fn in steps():
        if name == "lower_qdq":
            assert not fn(m).changed
            break
        m = fn(m).model
    _compare(model, {"x": RNG.standard_normal((2, 4)).astype(np.float32)}, {0: 1e-6})


def test_mover_needs_equal_parameters():
    g = G()
    x = g.qdq("x", 0.02, np.uint8(128))
    r = g.node("Reshape", [x, g.const(np.array([-1], np.int64))])
    q = g.q(r, 0.03, np.uint8(128))  # another scale: a requantization, not a move
    model = g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [q])
    m = load_model(model)
    assert not lower_qdq(m).changed
