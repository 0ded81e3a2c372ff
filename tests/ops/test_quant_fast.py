"""The fast integer paths of codegen/kernels/qconv_fast.py (the 8-bit GEMM for convolutions and
products with constant weights, the depthwise kernel) give the reference's integers exactly: one model
holds many nodes of different shapes, types and attributes, compared with onnx.reference bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

RNG = np.random.default_rng(11)


def q8(dt, *shape) -> np.ndarray:
    info = np.iinfo(dt)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dt)


class Model:
    def __init__(self):
        self.nodes, self.inits, self.inputs, self.outputs, self.feeds = [], [], [], [], {}

    def const(self, name: str, a: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def input(self, name: str, a: np.ndarray, shape=None) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                         shape or list(a.shape)))
        self.feeds[name] = a
        return name

    def node(self, op: str, ins: list[str], **attrs) -> None:
        out = f"y{len(self.outputs)}"
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        self.outputs.append(onnx.ValueInfoProto(name=out))

    def proto(self) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "fast", self.inputs, self.outputs, initializer=self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])


def qconv(m: Model, k: int, tx, tw, ty, xs, ws, per_channel: bool, bias: bool, sym: bool = False, **attrs):
    ch = (ws[0],) if per_channel else ()
    x = m.input(f"x{k}", q8(tx, *xs), ["N", *xs[1:]] if sym else None)
    ins = [x, m.const(f"xs{k}", np.float32(0.02)), m.const(f"xz{k}", q8(tx)), m.const(f"w{k}", q8(tw, *ws)),
           m.const(f"ws{k}", (RNG.random(ch) * 0.02 + 0.001).astype(np.float32)), m.const(f"wz{k}", q8(tw, *ch)),
           m.const(f"ys{k}", np.float32(0.3)), m.const(f"yz{k}", q8(ty))]
    if bias:
        ins.append(m.const(f"b{k}", RNG.integers(-5000, 5000, ws[0]).astype(np.int32)))
    m.node("QLinearConv", ins, **attrs)


CONVS = [  # (x type, w type, y type, x shape, w shape, per channel, bias, attributes)
    (np.uint8, np.int8, np.uint8, (1, 8, 9, 9), (16, 8, 3, 3), True, True, {"pads": [1, 1, 1, 1]}),
    (np.int8, np.int8, np.int8, (2, 6, 8, 7), (12, 3, 3, 3), True, False, {"group": 2, "strides": [2, 2],
                                                                          "pads": [0, 1, 1, 0]}),
    (np.uint8, np.uint8, np.int8, (1, 5, 6, 6), (7, 5, 1, 1), False, True, {}),
    (np.int8, np.uint8, np.uint8, (1, 4, 20), (8, 4, 3), False, True, {"dilations": [2]}),  # 1-D: per tensor (the
    # reference evaluator broadcasts per-channel scales of a 1-D convolution to a 4-D result)
    (np.uint8, np.int8, np.uint8, (1, 8, 10, 10), (8, 1, 3, 3), True, True, {"group": 8, "pads": [1, 1, 1, 1]}),
    (np.int8, np.int8, np.int8, (1, 6, 11, 9), (6, 1, 3, 3), False, True, {"group": 6, "strides": [2, 2],
                                                                          "pads": [1, 0, 0, 2], "dilations": [1, 2]}),
    (np.uint8, np.uint8, np.uint8, (2, 3, 13, 12), (3, 1, 5, 5), True, False, {"group": 3, "strides": [2, 1],
                                                                              "pads": [2, 2, 2, 2]}),
    (np.uint8, np.int8, np.int8, (1, 4, 20), (4, 1, 5), False, True, {"group": 4, "pads": [2, 2]}),
    # stride-1 depthwise over flattened plane rows (narrow maps): dilated 5x5 with uneven pads, 7x7, no padding
    (np.uint8, np.int8, np.uint8, (1, 5, 17, 15), (5, 1, 5, 5), True, True, {"group": 5, "pads": [4, 1, 2, 3],
                                                                            "dilations": [2, 2]}),
    (np.int8, np.int8, np.int8, (2, 6, 14, 14), (6, 1, 7, 7), False, False, {"group": 6, "pads": [3, 3, 3, 3]}),
    (np.uint8, np.uint8, np.uint8, (1, 3, 9, 31), (3, 1, 3, 3), True, True, {"group": 3}),
]


def test_qlinear_conv_fast_paths_exact():
    m = Model()
    for k, (tx, tw, ty, xs, ws, per, bias, attrs) in enumerate(CONVS):
        qconv(m, k, tx, tw, ty, xs, ws, per, bias, sym=k in (1, 6), **attrs)
    model = m.proto()
    compiled = onnxc.compile(model)
    src = compiled.c_source
    # the GEMM path for the four grouped-or-dense ones: by bytes (3 or 5 channels a group), by words (4 or 8)
    assert src.count("onnxc_ig_im2col_packed(") >= 2 and src.count("onnxc_ig_im2col_q4(") >= 2
    assert src.count("phase") >= 1  # the depthwise kernel for the others
    assert "kw * DW / SW of phase plane" in src  # ... over flattened phase-plane rows for the narrow ones
    for n in (1, 2):
        feeds = dict(m.feeds)
        for k in (1, 6):
            x = feeds[f"x{k}"]
            feeds[f"x{k}"] = q8(x.dtype, n, *x.shape[1:])
        want = ReferenceEvaluator(model).run(None, feeds)
        got = compiled.run(feeds)
        for i, w in enumerate(want):
            np.testing.assert_array_equal(got[f"y{i}"], w, err_msg=f"node {i}: {CONVS[i][3:]}")


Q4_CONVS = [  # the im2col by words of 4 channels: (x type, w type, y type, x shape, w shape, attributes)
    (np.uint8, np.int8, np.uint8, (1, 64, 30, 28), (24, 64, 3, 3), {"pads": [1, 1, 1, 1]}),  # chunks of rows
    (np.int8, np.int8, np.int8, (1, 8, 13, 11), (12, 8, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 0]}),
    (np.uint8, np.uint8, np.int8, (1, 12, 9, 10), (8, 12, 2, 3), {"strides": [1, 3], "dilations": [2, 1],
                                                                  "pads": [1, 2, 0, 1]}),
    (np.int8, np.uint8, np.uint8, (1, 16, 7, 7), (40, 16, 1, 2), {"pads": [0, 1, 0, 0]}),  # many short rows
    (np.uint8, np.int8, np.uint8, (1, 8, 5, 3), (16, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    (np.uint8, np.int8, np.int8, (1, 8, 37), (8, 8, 5), {"strides": [2], "pads": [3, 1]}),  # 1-D
    (np.int8, np.int8, np.uint8, (1, 4, 6, 40), (8, 4, 3, 3), {"strides": [2, 2], "pads": [2, 2, 2, 2],
                                                                "dilations": [2, 2]}),
]


def test_q4_im2col_exact_and_as_the_byte_path():
    """Groups of a multiple of 4 input channels take onnxc_igemm_q4.c (the filter's k permuted at compile time):
    the reference's integers at 1 and 2 threads, per-tensor and per-channel weight zero points (then the GEMM's
    column sums of B), strides 1, 2 and 3, dilations, uneven pads, 1-D, chunks of output rows."""
    m = Model()
    for k, (tx, tw, ty, xs, ws, attrs) in enumerate(Q4_CONVS):
        qconv(m, k, tx, tw, ty, xs, ws, k % 2 == 0, k % 3 != 1, **attrs)
    x = m.input("xi", q8(np.uint8, 1, 8, 9, 9))
    m.node("ConvInteger", [x, m.const("wi", q8(np.int8, 16, 8, 3, 3)), m.const("xzi", np.uint8(77)),
                           m.const("wzi", q8(np.int8, 16))], pads=[1, 0, 1, 0])
    model = m.proto()
    want = ReferenceEvaluator(model).run(None, m.feeds)
    for threads in (1, 2):
        compiled = onnxc.compile(model, threads=threads)
        assert compiled.c_source.count("onnxc_ig_im2col_q4(") >= len(Q4_CONVS) + 1  # (split and whole images)
        got = compiled.run(m.feeds)
        for i, w in enumerate(want):
            np.testing.assert_array_equal(got[f"y{i}"], w, err_msg=f"node {i}, {threads} thread(s)")


def test_pointwise_im2col_reads_the_planes_exact():
    """1x1 convolutions at stride 1 without padding interleave the input planes in place (onnxc_ig_im2col_planes):
    K not a multiple of 4, more columns than one block of panels and a partial last panel, groups, both input
    types, 1 and 2 threads; a trailing pad (the output larger than the input) keeps the general im2col."""
    m = Model()
    qconv(m, 0, np.int8, np.int8, np.uint8, (1, 6, 23, 29), (10, 6, 1, 1), True, True)
    qconv(m, 1, np.uint8, np.int8, np.int8, (2, 8, 5, 5), (6, 4, 1, 1), False, False, group=2)
    qconv(m, 2, np.uint8, np.uint8, np.uint8, (1, 12, 7, 9), (8, 12, 1, 1), True, True, pads=[0, 0, 1, 1])
    model = m.proto()
    want = ReferenceEvaluator(model).run(None, m.feeds)
    for threads in (1, 2):
        got = onnxc.compile(model, threads=threads).run(m.feeds)
        for i, w in enumerate(want):
            np.testing.assert_array_equal(got[f"y{i}"], w, err_msg=f"node {i}, {threads} thread(s)")


def test_q4_switch_keeps_the_byte_path(monkeypatch):
    monkeypatch.setenv("ONNXC_IG_Q4", "0")
    m = Model()
    qconv(m, 0, *Q4_CONVS[1][:5], True, True, **Q4_CONVS[1][5])
    compiled = onnxc.compile(m.proto())
    assert "onnxc_ig_im2col_q4(" not in compiled.c_source and "onnxc_ig_im2col_packed(" in compiled.c_source
    np.testing.assert_array_equal(compiled.run(m.feeds)["y0"], ReferenceEvaluator(m.proto()).run(None, m.feeds)[0])


def test_integer_products_with_constant_weights_exact():
    m = Model()
    a = m.input("a", q8(np.uint8, 2, 5, 16), ["B", 5, 16])
    m.node("QLinearMatMul", [a, m.const("as", np.float32(0.01)), m.const("az", np.uint8(130)),
                             m.const("b", q8(np.int8, 16, 40)), m.const("bs", (RNG.random(40) * 0.01).astype(np.float32)),
                             m.const("bz", np.zeros(40, np.int8)), m.const("ys", np.float32(0.05)),
                             m.const("yz", np.uint8(120))])
    a2 = m.input("a2", q8(np.int8, 7, 33))
    m.node("QLinearMatMul", [a2, m.const("as2", np.float32(0.02)), m.const("az2", np.int8(-3)),
                             m.const("b2", q8(np.uint8, 33, 9)), m.const("bs2", np.float32(0.003)),
                             m.const("bz2", np.uint8(128)), m.const("ys2", np.float32(0.04)),
                             m.const("yz2", np.int8(5))])
    m.node("MatMulInteger", [a, m.const("b3", q8(np.int8, 16, 9)), m.const("az3", np.uint8(7)),
                             m.const("bz3", q8(np.int8, 9))])
    x = m.input("x", q8(np.uint8, 1, 4, 7, 7))
    m.node("ConvInteger", [x, m.const("w4", q8(np.int8, 8, 4, 3, 3)), m.const("xz4", np.uint8(100)),
                           m.const("wz4", q8(np.int8, 8))], pads=[1, 1, 1, 1])
    m.node("ConvInteger", [x, m.const("w5", q8(np.uint8, 4, 1, 3, 3)), m.const("xz5", np.uint8(100))],
           group=4, strides=[2, 2])
    model = m.proto()
    compiled = onnxc.compile(model)
    assert compiled.c_source.count("onnxc_igemm(") >= 4
    for b in (2, 3):
        feeds = dict(m.feeds, a=q8(np.uint8, b, 5, 16))
        want = ReferenceEvaluator(model).run(None, feeds)
        got = compiled.run(feeds)
        for i, w in enumerate(want):
            np.testing.assert_array_equal(got[f"y{i}"], w, err_msg=f"node {i}")


def test_fast_paths_two_threads_match_one():
    """Two threads give the reference's integers: one image split among them, and (the third node, batch 4)
    whole images per thread (templates/conv_images.c.j2)."""
    m = Model()
    qconv(m, 0, np.uint8, np.int8, np.uint8, (1, 32, 40, 40), (64, 32, 3, 3), True, True, pads=[1, 1, 1, 1])
    qconv(m, 1, np.uint8, np.int8, np.uint8, (1, 64, 40, 40), (64, 1, 3, 3), True, True, group=64,
          pads=[1, 1, 1, 1])
    qconv(m, 2, np.uint8, np.int8, np.int8, (4, 16, 20, 20), (32, 16, 3, 3), True, True, strides=[2, 1],
          pads=[1, 1, 1, 1])
    model = m.proto()
    one = onnxc.compile(model, threads=1).run(m.feeds)
    two_model = onnxc.compile(model, threads=2)
    assert "onnxc_by_image(" in two_model.c_source
    two = two_model.run(m.feeds)
    want = ReferenceEvaluator(model).run(None, m.feeds)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(one[f"y{i}"], w)
        np.testing.assert_array_equal(two[f"y{i}"], w)


def test_requantization_ties_and_wide_accumulators():
    """onnxc_requant_row computes in float where that is exact: multipliers of 1/2 and 1/4 put many
    results on ties k + 1/2 (rounded to even in double), and biases near 2^25 make accumulators float
    cannot hold; both must come out as the reference's double formula gives them."""
    m = Model()
    for k, (mult_w, bias) in enumerate(((1 / 64, 3), (1 / 128, -7), (0.5, (1 << 25) + 1), (1.0, -(1 << 25) - 3))):
        for group, ws in ((1, (16, 8, 3, 3)), (8, (8, 1, 3, 3))):
            j = 2 * k + (group > 1)
            x = m.input(f"x{j}", q8(np.uint8, 1, 8, 9, 9))
            m.node("QLinearConv", [x, m.const(f"xs{j}", np.float32(1.0)), m.const(f"xz{j}", np.uint8(128)),
                                   m.const(f"w{j}", RNG.integers(-3, 4, ws).astype(np.int8)),
                                   m.const(f"ws{j}", np.float32(mult_w)),
                                   m.const(f"wz{j}", np.int8(0)), m.const(f"ys{j}", np.float32(1.0 if k < 2 else 1 << 19)),
                                   m.const(f"yz{j}", np.uint8(100)), m.const(f"b{j}", np.full(ws[0], bias, np.int32))],
                   group=group, pads=[1, 1, 1, 1])
    model = m.proto()
    want = ReferenceEvaluator(model).run(None, m.feeds)
    got = onnxc.compile(model).run(m.feeds)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(got[f"y{i}"], w, err_msg=f"node {i}")
    # the first node really has ties in the unsaturated range
    x = np.pad(m.feeds["x0"].astype(np.int64) - 128, ((0, 0), (0, 0), (1, 1), (1, 1)))
    w0 = numpy_helper.to_array(next(i for i in m.inits if i.name == "w0")).astype(np.int64)
    acc = sum(np.einsum("nchw,mc->nmhw", x[:, :, a:a + 9, b:b + 9], w0[:, :, a, b]) for a in range(3) for b in range(3))
    exact = (acc + 3) / 64 + 100
    assert np.count_nonzero((exact % 1 == 0.5) & (exact > 0) & (exact < 255)) >= 5
