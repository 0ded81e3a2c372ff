"""onnxruntime's quantization contrib ops (com.microsoft: the QOperator ops, QGemm, the dynamic
quantization ops, QAttention, MatMulNBits, GatherBlockQuantized) compared with onnxruntime.

Each test compiles one model with several nodes (types and attribute variants side by side), most
with a symbolic batch dim run at two sizes. Quantized outputs may differ by one step (atol=1) where
onnxruntime uses integer arithmetic (lookup tables, fixed-point requantization); DynamicQuantizeLSTM's
tolerance covers onnxruntime's per-step quantization of X and H. Error cases only run the passes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
import onnxc.passes.expansions.ms_nbits  # noqa: F401  (registered by passes/expansions/__init__.py too)
import onnxc.passes.expansions.ms_quant  # noqa: F401
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

MS = "com.microsoft"
RNG = np.random.default_rng(11)
U8, I8, F = TP.UINT8, TP.INT8, TP.FLOAT


def rand(*shape: int, scale: float = 1.0, dt=np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dt)


def ints(dt, *shape: int, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    info = np.iinfo(dt)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dt)


def f32(v) -> np.ndarray:
    return np.array(v, np.float32)


def model(nodes: list, inputs: dict[str, tuple[int, list]], consts: dict, outputs: list[str],
          opset: int = 21) -> onnx.ModelProto:
    """A model of ``nodes``; inputs: name -> (element type, shape with dim_params); consts: numpy arrays
    or TensorProtos (for int4 / float8 initializers)."""
    inits = [v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(v, n) for n, v in consts.items()]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                          [onnx.ValueInfoProto(name=o) for o in outputs], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def ms(op: str, inputs: list[str], out: str | list[str], **attrs):
    return helper.make_node(op, inputs, [out] if isinstance(out, str) else out, domain=MS, **attrs)


def check(m: onnx.ModelProto, feeds: list[dict], rtol=1e-5, atol=1e-5, int_atol=0,
          loose: dict[str, float] | None = None) -> onnxc.CompiledModel:
    """Compile ``m`` once; every feed's outputs must match onnxruntime's (integer outputs within
    ``int_atol`` steps; the outputs named in ``loose`` within that rtol and atol)."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(m)
    for feed in feeds:
        got = compiled.run(feed)
        for o, want in zip(sess.get_outputs(), sess.run(None, feed)):
            g = got[o.name]
            assert g.dtype == want.dtype and g.shape == want.shape, (o.name, g.dtype, g.shape, want.dtype, want.shape)
            if want.dtype.kind in "iu":
                diff = np.abs(g.astype(np.int64) - want.astype(np.int64))
                assert diff.max(initial=0) <= int_atol, (o.name, diff.max(), np.argwhere(diff > int_atol)[:5])
            else:
                tol = (loose or {}).get(o.name)
                np.testing.assert_allclose(g.astype(np.float64), want, rtol=tol or rtol, atol=tol or atol,
                                           err_msg=o.name)
    return compiled


def ir_ops(m: onnx.ModelProto) -> list[str]:
    """The op types of ``m``'s nodes after the whole pipeline (no C compile)."""
    return [n.op_type for n in optimize(load_model(m), check=True).graph.nodes]


def passes(m: onnx.ModelProto) -> None:
    optimize(load_model(m), check=True)


# -- QOperator ops --------------------------------------------------------------------------------
def _qparams(prefix: str, dt: np.dtype, scale: float, zp: int) -> dict:
    return {f"{prefix}s": f32(scale), f"{prefix}z": np.array(zp, dt)}


def test_qoperator_elementwise():
    """QLinearAdd (broadcast), QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearWhere, QLinearConcat
    (scales differing per input) and QLinearSoftmax (opset 13 on an inner axis, opset 11 coercing to 2-D,
    axis -1 by default, x zero point omitted) in uint8 and int8; com.microsoft DequantizeLinear (uint16,
    per axis) and QuantizeLinear (int16). onnxruntime computes Add / Mul in fixed point and Softmax from
    an exp table: one step of difference is allowed (atol=1). (onnxruntime 1.32 refuses a QLinearAdd
    without its zero points: its type inference reads them.)"""
    nodes, consts = [], {}
    for t, dt in (("u", np.uint8), ("i", np.int8)):
        z0 = 128 if t == "u" else 0
        consts |= _qparams(f"{t}a", dt, 0.05, z0 + 3) | _qparams(f"{t}b", dt, 0.03, z0 - 5)
        consts |= _qparams(f"{t}c", dt, 0.08, z0 + 1) | _qparams(f"{t}m", dt, 0.02, z0 - 2)
        consts |= _qparams(f"{t}p", dt, 1 / 256, 0 if t == "u" else -128) | {f"{t}row": ints(dt, 7)}
        a, b, c = [f"{t}x", f"{t}as", f"{t}az"], [f"{t}y", f"{t}bs", f"{t}bz"], [f"{t}cs", f"{t}cz"]
        nodes += [ms("QLinearAdd", a + b + c, f"{t}add"),
                  ms("QLinearAdd", [*a, f"{t}row", f"{t}bs", f"{t}bz", *c], f"{t}add_bcast"),
                  ms("QLinearMul", a + b + [f"{t}ms", f"{t}mz"], f"{t}mul"),
                  ms("QLinearSigmoid", a + [f"{t}ps", f"{t}pz"], f"{t}sigmoid"),
                  ms("QLinearLeakyRelu", a + c, f"{t}leaky", alpha=0.2),
                  ms("QLinearLeakyRelu", a + c, f"{t}leaky_default"),
                  ms("QLinearWhere", ["cond", *a, *b, *c], f"{t}where"),
                  ms("QLinearConcat", c + a + b + a, f"{t}concat", axis=1),
                  ms("QLinearSoftmax", [f"{t}s", f"{t}ms", f"{t}mz", f"{t}ps", f"{t}pz"], f"{t}softmax13",
                     opset=13, axis=1),
                  ms("QLinearSoftmax", [f"{t}s", f"{t}ms", "", f"{t}ps", f"{t}pz"], f"{t}softmax11", opset=11, axis=1),
                  ms("QLinearSoftmax", [f"{t}s", f"{t}ms", "", f"{t}ps", f"{t}pz"], f"{t}softmax_last", opset=11)]
    consts |= {"s7": (RNG.random(7) * 0.01).astype(np.float32), "z7": ints(np.uint16, 7), "s16": f32(0.003),
               "z16": np.array(-40, np.int16)}
    nodes += [ms("DequantizeLinear", ["x16", "s7", "z7"], "ms_dq", axis=1), ms("QuantizeLinear", ["xf", "s16", "z16"], "ms_q")]
    qt = {"u": U8, "i": I8}
    inputs = {"cond": (TP.BOOL, ["N", 7]), "x16": (TP.UINT16, ["N", 7]), "xf": (F, ["N", 7])}
    for t in qt:
        inputs |= {f"{t}x": (qt[t], ["N", 7]), f"{t}y": (qt[t], ["N", 7]), f"{t}s": (qt[t], ["N", 5, 3])}
    m = model(nodes, inputs, consts, [n.output[0] for n in nodes])

    def feed(n: int) -> dict:
        f = {"cond": RNG.random((n, 7)) > 0.5, "x16": ints(np.uint16, n, 7), "xf": rand(n, 7, scale=50)}
        for t, dt in (("u", np.uint8), ("i", np.int8)):
            f |= {f"{t}x": ints(dt, n, 7), f"{t}y": ints(dt, n, 7)}
            # softmax inputs of a small range: no probability reaches 0.5 (onnxruntime's int8 kernel wraps there)
            lo = 100 if t == "u" else -30
            f[f"{t}s"] = ints(dt, n, 5, 3, lo=lo, hi=lo + 40)
        return f

    check(m, [feed(3), feed(1)], int_atol=1)


def test_qoperator_pooling():
    """QLinearGlobalAveragePool (NCHW and channels_last) and QLinearAveragePool (pads, strides,
    count_include_pad, ceil_mode, SAME_UPPER, channels_last, 1-D) in uint8 and int8."""
    pools = [dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
             dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1),
             dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 1]),
             dict(kernel_shape=[2, 2], strides=[2, 2], channels_last=1)]
    nodes, consts = [], {}
    for t, dt in (("u", np.uint8), ("i", np.int8)):
        consts |= _qparams(f"{t}x", dt, 0.1, 7) | _qparams(f"{t}y", dt, 0.07, -3 if t == "i" else 9)
        q = [f"{t}xs", f"{t}xz", f"{t}ys", f"{t}yz"]
        nodes += [ms("QLinearGlobalAveragePool", [f"{t}x", *q], f"{t}gap"),
                  ms("QLinearGlobalAveragePool", [f"{t}xl", *q], f"{t}gap_last", channels_last=1),
                  ms("QLinearAveragePool", [f"{t}x1", *q], f"{t}pool1d", kernel_shape=[3], pads=[1, 0])]
        for i, p in enumerate(pools):
            nodes.append(ms("QLinearAveragePool", [f"{t}xl" if p.get("channels_last") else f"{t}x", *q],
                            f"{t}pool{i}", **p))
    qt = {"u": U8, "i": I8}
    inputs = {}
    for t in qt:
        inputs |= {f"{t}x": (qt[t], ["N", 3, 7, 6]), f"{t}xl": (qt[t], ["N", 7, 6, 3]), f"{t}x1": (qt[t], ["N", 2, 9])}
    m = model(nodes, inputs, consts, [n.output[0] for n in nodes])
    assert "QuantizeLinear" in ir_ops(m)

    def feed(n: int) -> dict:
        f = {}
        for t, dt in (("u", np.uint8), ("i", np.int8)):
            f |= {f"{t}x": ints(dt, n, 3, 7, 6), f"{t}xl": ints(dt, n, 7, 6, 3), f"{t}x1": ints(dt, n, 2, 9)}
        return f

    check(m, [feed(2), feed(1)], int_atol=1)


def test_qgemm():
    """QGemm: uint8 x uint8 / uint8 x int8 per column / int8 x int8; transA, transB; C of shape (N),
    (M, 1) and scalar; alpha; float32 and quantized outputs."""
    consts = {"as": f32(0.04), "az": np.uint8(120), "azi": np.int8(-3), "ys": f32(0.3), "yz": np.uint8(100),
              "yzi": np.int8(5), "bu": ints(np.uint8, 6, 5), "bus": f32(0.02), "buz": np.uint8(128),
              "bi": ints(np.int8, 5, 6), "bis": (RNG.random(5) * 0.02 + 0.01).astype(np.float32),
              "biz": np.zeros(5, np.int8), "bt": ints(np.int8, 5, 6), "bts": f32(0.015), "btz": np.int8(2),
              "c5": RNG.integers(-5000, 5000, 5).astype(np.int32), "cm": RNG.integers(-5000, 5000, (1, 1)).astype(np.int32),
              "bcol": ints(np.uint8, 6, 5), "bcs": (RNG.random(5) * 0.02 + 0.01).astype(np.float32),
              "bcz": ints(np.uint8, 5)}
    a, ai = ["au", "as", "az"], ["ai", "as", "azi"]
    nodes = [ms("QGemm", [*a, "bu", "bus", "buz", "c5", "ys", "yz"], "y0"),
             ms("QGemm", [*a, "bi", "bis", "biz", "c5"], "y1", transB=1, alpha=0.5),
             ms("QGemm", ["aut", "as", "az", "bi", "bis", "biz", "", "ys", "yz"], "y2", transA=1, transB=1),
             ms("QGemm", [*ai, "bt", "bts", "btz", "cm", "ys", "yzi"], "y3", transB=1, alpha=2.0),
             ms("QGemm", [*ai, "bt", "bts", "btz"], "y4", transB=1),
             ms("QGemm", [*a, "bcol", "bcs", "bcz", "cmn"], "y5")]
    inputs = {"au": (U8, ["M", 6]), "aut": (U8, [6, "M"]), "ai": (I8, ["M", 6]), "cmn": (TP.INT32, ["M", 1])}
    m = model(nodes, inputs, consts, [f"y{i}" for i in range(len(nodes))])
    assert "Gemm" in ir_ops(m)
    feeds = [{"au": ints(np.uint8, n, 6), "aut": ints(np.uint8, 6, n), "ai": ints(np.int8, n, 6),
              "cmn": RNG.integers(-5000, 5000, (n, 1)).astype(np.int32)} for n in (4, 1)]
    check(m, feeds, rtol=1e-5, atol=1e-4, int_atol=1)


def test_dynamic_matmul():
    """MatMulIntegerToFloat (uint8/int8 operands, per-column B scale and zero point, bias, batched A,
    float16) and DynamicQuantizeMatMul (per-tensor and per-column B, bias, batched B)."""
    consts = {"b": ints(np.int8, 8, 5), "bu": ints(np.uint8, 8, 5), "sa": f32(0.05), "sb": f32(0.02),
              "sbc": (RNG.random(5) * 0.02 + 0.01).astype(np.float32), "za": np.uint8(130), "zai": np.int8(-7),
              "zbc": ints(np.int8, 5, lo=-4, hi=4), "zbu": np.uint8(125), "bias": rand(5),
              "sa16": np.array(0.05, np.float16), "sb16": np.array(0.02, np.float16), "bias16": rand(5, dt=np.float16),
              "b3": ints(np.int8, 2, 8, 5), "zb": np.int8(3)}
    nodes = [ms("MatMulIntegerToFloat", ["au", "b", "sa", "sbc", "za", "zbc", "bias"], "y0"),
             ms("MatMulIntegerToFloat", ["ai", "b", "sa", "sb", "zai", "zb"], "y1"),
             ms("MatMulIntegerToFloat", ["au3", "b", "sa", "sb"], "y2"),
             ms("MatMulIntegerToFloat", ["au", "b", "sa16", "sb16", "za", "", "bias16"], "y3"),
             ms("DynamicQuantizeMatMul", ["af", "b", "sb", "zb", "bias"], "y4"),
             ms("DynamicQuantizeMatMul", ["af", "bu", "sbc", "zbu"], "y5"),
             ms("DynamicQuantizeMatMul", ["af3", "b3", "sb"], "y6")]
    inputs = {"au": (U8, ["M", 8]), "ai": (I8, ["M", 8]), "au3": (U8, [2, "M", 8]), "af": (F, ["M", 8]),
              "af3": (F, [2, "M", 8])}
    m = model(nodes, inputs, consts, [f"y{i}" for i in range(len(nodes))])
    ops = ir_ops(m)
    assert "MatMulInteger" in ops and "MatMul" not in ops
    feeds = [{"au": ints(np.uint8, n, 8), "ai": ints(np.int8, n, 8), "au3": ints(np.uint8, 2, n, 8),
              "af": rand(n, 8), "af3": rand(2, n, 8)} for n in (3, 1)]
    check(m, feeds, rtol=2e-3, atol=2e-3)


def test_dynamic_quantize_lstm():
    """DynamicQuantizeLSTM: forward with per-direction uint8 weights, bias and initial state;
    bidirectional with per-column int8 weights, sequence lengths and peepholes. onnxruntime quantizes X
    and H at every step, this computes in float32: tolerance 3e-2."""
    h, i = 4, 3

    def weights(d: int, rows: int, dt, per_col: bool) -> tuple:
        w = ints(dt, d, rows, 4 * h, lo=-60 if dt == np.int8 else 70, hi=60 if dt == np.int8 else 190)
        shape = (d, 4 * h) if per_col else (d,)
        s = (RNG.random(shape) * 0.01 + 0.01).astype(np.float32)
        z = np.zeros(shape, dt) if dt == np.int8 else np.full(shape, 128, dt)
        return w, s, z

    consts = {}
    for name, d, dt, col in (("f", 1, np.uint8, False), ("b", 2, np.int8, True)):
        for part, rows in (("w", i), ("r", h)):
            w, s, z = weights(d, rows, dt, col)
            consts |= {f"{name}{part}": w, f"{name}{part}s": s, f"{name}{part}z": z}
        consts[f"{name}bias"] = rand(d, 8 * h, scale=0.1)
    consts |= {"p": rand(2, 3 * h, scale=0.1), "h0": rand(1, 2, h), "c0": rand(1, 2, h)}
    q = lambda n: [f"{n}ws", f"{n}wz", f"{n}rs", f"{n}rz"]  # noqa: E731
    fw = ms("DynamicQuantizeLSTM", ["x", "fw", "fr", "fbias", "", "h0", "c0", "", *q("f")], ["y0", "y1", "y2"],
            hidden_size=h)
    bw = ms("DynamicQuantizeLSTM", ["xb", "bw", "br", "bbias", "lens", "", "", "p", *q("b")], ["y3", "", "y5"],
            hidden_size=h, direction="bidirectional")
    inputs = {"x": (F, ["T", 2, i]), "xb": (F, [5, 3, i]), "lens": (TP.INT32, [3])}
    m = model([fw, bw], inputs, consts, ["y0", "y1", "y2", "y3", "y5"])
    feeds = [{"x": rand(t, 2, i), "xb": rand(5, 3, i), "lens": np.array(lens, np.int32)}
             for t, lens in ((5, [5, 3, 1]), (2, [2, 5, 4]))]
    check(m, feeds, rtol=3e-2, atol=3e-2)


def test_qattention():
    """QAttention with per-tensor and per-column int8 weights, a key-length mask, unidirectional with
    past and present; uint8 input with and without a zero point."""
    b_, d, heads = 2, 8, 2
    consts = {"w": ints(np.int8, d, 3 * d), "ws": f32(0.02), "wz": np.int8(0), "bias": rand(3 * d, scale=0.1),
              "wcs": (RNG.random(3 * d) * 0.02 + 0.01).astype(np.float32), "wcz": np.zeros(3 * d, np.int8),
              "xs": f32(0.03), "xz": np.uint8(128)}
    nodes = [ms("QAttention", ["x", "w", "bias", "xs", "ws", "mask", "xz", "wz"], "y0", num_heads=heads),
             ms("QAttention", ["x", "w", "bias", "xs", "wcs", "", "", "wcz", "past"], ["y1", "y2"], num_heads=heads,
                unidirectional=1)]
    inputs = {"x": (U8, [b_, "S", d]), "mask": (TP.INT32, [b_]), "past": (F, [2, b_, heads, 3, d // heads])}
    m = model(nodes, inputs, consts, ["y0", "y1", "y2"])
    feeds = [{"x": ints(np.uint8, b_, s, d), "mask": np.array([s, max(s - 2, 1)], np.int32),
              "past": rand(2, b_, heads, 3, d // heads)} for s in (4, 1)]
    check(m, feeds, rtol=1e-4, atol=1e-4)


# -- block-quantized weights ---------------------------------------------------------------------
def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """The inverse of onnxruntime's packing: ``bits``-wide values along the last axis, low-order first."""
    per = 8 // bits
    v = values.astype(np.uint8).reshape(*values.shape[:-1], -1, per)
    return np.bitwise_or.reduce(v << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def nbits_weights(n: int, k: int, bs: int, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(B [N, nb, blob], scales [N, nb], packed uint8 zero points, float zero points) of random weights."""
    nb = -(-k // bs)
    q = RNG.integers(0, 1 << bits, (n, nb * bs))
    zp = RNG.integers(0, 1 << bits, (n, nb))
    zpad = -(-nb * bits // 8) * 8 // bits
    packed_zp = pack_bits(np.pad(zp, ((0, 0), (0, zpad - nb))), bits)
    scales = (RNG.random((n, nb)) * 0.05 + 0.01).astype(np.float32)
    return pack_bits(q, bits).reshape(n, nb, bs * bits // 8), scales, packed_zp, (zp + RNG.random((n, nb))).astype(
        np.float32)


def test_matmul_nbits():
    """MatMulNBits: 4 bits (packed, default and float zero points), 8 and 2 bits, K not a multiple of the
    block size, bias, flat scales, a trivial g_idx, float16, batched A; accuracy_level 4 is ignored here,
    while onnxruntime then quantizes A to int8 (tolerance 5e-2 on that output)."""
    consts, nodes = {}, []
    cases = [(4, 64, 32, "packed"), (4, 40, 16, "default"), (4, 48, 16, "float"), (8, 64, 32, "packed"),
             (2, 64, 16, "packed"), (8, 40, 16, "default")]
    n = 6
    for j, (bits, k, bs, zkind) in enumerate(cases):
        bq, s, zp, zf = nbits_weights(n, k, bs, bits)
        consts |= {f"b{j}": bq, f"s{j}": s.reshape(-1) if j == 1 else s, f"z{j}": zp if zkind == "packed" else zf}
        ins = [f"a{k}", f"b{j}", f"s{j}"] + ([f"z{j}"] if zkind != "default" else [])
        attrs = dict(K=k, N=n, bits=bits, block_size=bs)
        nodes.append(ms("MatMulNBits", ins, f"y{j}", **attrs))
    consts |= {"bias": rand(n), "g": (np.arange(64) // 32).astype(np.int32)}
    # onnxruntime reads packed zero points as 8 when g_idx is given: no zero points beside g_idx here
    nodes.append(ms("MatMulNBits", ["a64", "b0", "s0", "", "g", "bias"], "y6", K=64, N=n, block_size=32))
    consts |= {"s16": consts["s1"].astype(np.float16), "bias16": rand(n, dt=np.float16)}
    nodes.append(ms("MatMulNBits", ["a16", "b1", "s16", "", "", "bias16"], "y7", K=40, N=n, block_size=16))
    nodes.append(ms("MatMulNBits", ["a64", "b0", "s0", "z0"], "y8", K=64, N=n, block_size=32, accuracy_level=4))
    inputs = {"a64": (F, ["M", 64]), "a40": (F, [2, "M", 40]), "a48": (F, ["M", 48]), "a16": (TP.FLOAT16, ["M", 40])}
    m = model(nodes, inputs, consts, [f"y{i}" for i in range(len(nodes))])
    # the 4-bit float32 nodes (y0 y1 y2 y6 y8) keep their weights 4-bit (onnxc::MatMulNBits, tested in
    # tests/ops/test_matmul_nbits.py); 8 / 2 bits and float16 are expanded
    ops = [(n.domain, n.op_type) for n in optimize(load_model(m), check=True).graph.nodes]
    assert ops.count(("onnxc", "MatMulNBits")) == 5 and (MS, "MatMulNBits") not in ops
    feeds = [{"a64": rand(t, 64), "a40": rand(2, t, 40), "a48": rand(t, 48), "a16": rand(t, 40, dt=np.float16)}
             for t in (3, 1)]
    check(m, feeds, rtol=1e-3, atol=2e-3, loose={"y7": 1e-2, "y8": 5e-2})  # float16; A quantized by onnxruntime


def test_gather_block_quantized():
    """GatherBlockQuantized: int4 and uint4 (zero points) data, uint8 data with 4 / 2 / 8 bits (packed
    and default zero points), float8 with broadcast scales and block_size 0, gather_axis == quantize_axis,
    int32 / int64 indices of rank 2 and 0, negative and out-of-range indices (zeros), float16 scales."""
    v, d, bs = 10, 32, 16
    i4 = RNG.integers(-8, 8, (v, d))
    u4 = RNG.integers(0, 16, (v, d))
    consts = {"i4": helper.make_tensor("i4", TP.INT4, [v, d], i4.reshape(-1).tolist()),
              "u4": helper.make_tensor("u4", TP.UINT4, [v, d], u4.reshape(-1).tolist()),
              "u4z": helper.make_tensor("u4z", TP.UINT4, [v, 2], RNG.integers(0, 16, v * 2).tolist()),
              "f8": helper.make_tensor("f8", TP.FLOAT8E4M3FN, [v, d], rand(v * d).tolist()),
              "s": (RNG.random((v, 2)) * 0.1 + 0.01).astype(np.float32), "s1": f32([[0.5]]),
              "sq": (RNG.random((1, d // bs)) * 0.1).astype(np.float32)}
    consts["s16"] = consts["s"].astype(np.float16)
    for bits in (4, 2, 8):
        per = 8 // bits
        consts[f"u8b{bits}"] = pack_bits(RNG.integers(0, 1 << bits, (v, d)), bits)
        consts[f"u8s{bits}"] = consts["s"]
        nb = d // bs
        zpad = -(-nb // per) * per
        consts[f"u8z{bits}"] = pack_bits(np.pad(RNG.integers(0, 1 << bits, (v, nb)), ((0, 0), (0, zpad - nb))), bits)
    nodes = [ms("GatherBlockQuantized", ["i4", "idx", "s"], "y0", block_size=bs),
             ms("GatherBlockQuantized", ["u4", "idx32", "s16", "u4z"], "y1", block_size=bs),
             ms("GatherBlockQuantized", ["u8b4", "idx", "u8s4", "u8z4"], "y2", block_size=bs),
             ms("GatherBlockQuantized", ["u8b2", "idx", "u8s2", "u8z2"], "y3", bits=2, block_size=bs),
             ms("GatherBlockQuantized", ["u8b8", "idx0", "u8s8"], "y4", bits=8, block_size=bs),
             ms("GatherBlockQuantized", ["u8b4", "idx", "u8s4"], "y5", block_size=bs),
             ms("GatherBlockQuantized", ["f8", "idx", "s1"], "y6", block_size=0),
             ms("GatherBlockQuantized", ["f8", "idx", "sq"], "y7", block_size=bs),
             ms("GatherBlockQuantized", ["i4", "idxc", "s"], "y8", block_size=bs, gather_axis=1, quantize_axis=1),
             ms("GatherBlockQuantized", ["u4", "idx", "s", "u4z"], "y9", block_size=bs, gather_axis=-2,
                quantize_axis=-1)]
    inputs = {"idx": (TP.INT64, ["N", 3]), "idx32": (TP.INT32, ["N", 3]), "idx0": (TP.INT64, []),
              "idxc": (TP.INT64, ["C"])}
    m = model(nodes, inputs, consts, [n.output[0] for n in nodes])
    ops = ir_ops(m)
    assert "GatherBlockQuantized" not in ops and "DequantizeLinear" in ops
    feeds = [{"idx": np.array(ix, np.int64).reshape(-1, 3), "idx32": np.array(ix, np.int32).reshape(-1, 3),
              "idx0": np.array(ix[0], np.int64), "idxc": np.array(ixc, np.int64)}
             for ix, ixc in (([0, 9, -1, 3, -10, 12], [31, -32, 5, 40]), ([7, -11, 2], [1]))]
    check(m, feeds, rtol=1e-3, atol=1e-3)


# -- errors ---------------------------------------------------------------------------------------
def _one(op: str, ins: dict, consts: dict, order: list[str] | None = None, **attrs) -> onnx.ModelProto:
    """One ``op`` node reading graph inputs ``ins`` and initializers ``consts`` (in that order, or ``order``)."""
    inputs = {k: (helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in ins.items()}
    return model([ms(op, order or [*ins, *consts], "y", **attrs)], inputs, consts, ["y"])


def test_errors():
    u8 = np.zeros((2, 3), np.uint8)
    cases = [
        (_one("QLinearAdd", {"a": u8}, {"as": f32([0.1, 0.2]), "az": np.uint8(0), "b": u8, "bs": f32(0.1),
                                        "bz": np.uint8(0), "cs": f32(0.1)}),
         r"QLinearAdd.*input 1 \('as'\) must be a scalar or a 1-element tensor"),
        (_one("QLinearSigmoid", {"x": u8}, {"xs": f32(0.1), "xz": np.int8(0), "ys": f32(0.1)}),
         "input 2 has element type int8, but input 0 has uint8"),
        (_one("QLinearSigmoid", {"x": u8.astype(np.int32)}, {"xs": f32(0.1)}), r"input 0: int32 tensors are not supported \(supported: uint8, int8\)"),
        (_one("QLinearSoftmax", {"x": u8}, {"xs": f32(0.1), "xz": np.uint8(0), "ys": f32(0.1),
                                            "yz": np.uint8(0)}), "required attribute 'opset' is missing"),
        (_one("QLinearConcat", {"a": u8}, {"ys": f32(0.1), "yz": np.uint8(0), "s": f32(0.1)}, axis=0),
         "triple per input, got 4 inputs"),
        (_one("QGemm", {"a": u8}, {"as": f32(0.1), "az": np.uint8(0), "b": np.zeros((3, 4), np.uint8),
                                   "bs": f32([0.1, 0.2]), "bz": np.uint8(0)}),
         r"input 4 \('bs'\) must be a scalar or 1-D with one value per column \(4\)"),
        (_one("MatMulNBits", {"a": np.zeros((2, 32), np.float32)},
              {"b": np.zeros((4, 2, 4), np.uint8), "s": np.ones((4, 2), np.float32)}, K=32, N=4, block_size=16),
         r"B must have shape \[4, 2, 8\]"),
        (_one("MatMulNBits", {"a": np.zeros((2, 32), np.float32)},
              {"b": np.zeros((4, 2, 8), np.uint8), "s": np.ones((4, 2), np.float32)}, K=32, N=4, block_size=24),
         "block_size must be a power of 2 and >= 16, got 24"),
        (_one("MatMulNBits", {"a": np.zeros((2, 32), np.float32), "b": np.zeros((4, 2, 8), np.uint8)},
              {"s": np.ones((4, 2), np.float32)}, K=32, N=4, block_size=16, bits=4),
         r"B \(input 1, 'b'\) must be a constant"),
        (_one("MatMulNBits", {"a": np.zeros((2, 32), np.float32)},
              {"b": np.zeros((4, 2, 8), np.uint8), "s": np.ones((4, 2), np.float32),
               "z": np.zeros((4, 1), np.uint8), "g": np.arange(32, dtype=np.int32) % 2}, K=32, N=4, block_size=16),
         "g_idx other than k // block_size"),
        (_one("GatherBlockQuantized", {"i": np.zeros(2, np.int64)},
              {"d": np.zeros((4, 16), np.uint8), "s": np.ones((4, 1), np.float32)}, ["d", "i", "s"], gather_axis=1, quantize_axis=0,
              block_size=16), "uint8 data needs gather_axis 0 and quantize_axis the last"),
        (_one("GatherBlockQuantized", {"i": np.zeros(2, np.int64)},
              {"d": np.zeros((4, 16), np.uint8), "s": np.ones((4, 3), np.float32)}, ["d", "i", "s"], block_size=16),
         r"scales shape \[4, 3\] does not match data \[4, 32\]"),
        (_one("GatherBlockQuantized", {"i": np.zeros(2, np.int64)},
              {"d": helper.make_tensor("d", TP.FLOAT8E4M3FN, [4, 16], [0.0] * 64), "s": np.ones((4, 1), np.float32),
               "z": np.zeros((4, 1), np.uint8)}, ["d", "i", "s", "z"], block_size=16),
         "zero_points must not be given for float8e4m3fn data"),
        (_one("QAttention", {"x": np.zeros((1, 2, 3), np.int8)}, {"w": np.zeros((3, 6), np.int8), "b": np.zeros(6, np.float32),
                                                                  "s": f32(0.1), "ws": f32(0.1)}, num_heads=1),
         "int8 input is not supported"),
        (_one("QGemm", {"a": u8}, {"as": f32(0.1), "az": np.uint8(0), "b": np.zeros((3, 4), np.uint8), "bs": f32(0.1),
                                   "bz": np.uint8(0), "c": np.zeros(4, np.int32), "ys": f32(0.1)}),
         "y_scale without y_zero_point is not supported"),
        (_one("DynamicQuantizeLSTM", {"x": np.zeros((2, 1, 3), np.float32)},
              {"w": np.zeros((1, 3, 8), np.uint8), "r": np.zeros((1, 2, 8), np.uint8), "ws": np.ones((1, 8, 1), np.float32),
               "wz": np.zeros(1, np.uint8), "rs": np.ones(1, np.float32), "rz": np.zeros(1, np.uint8)},
              ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"], hidden_size=2),
         r"W's scale and zero point must be \[num_directions\] or \[num_directions, 4 \* hidden_size\]"),
    ]
    for m, match in cases:
        with pytest.raises(onnxc.OnnxcError, match=match):
            passes(m)
