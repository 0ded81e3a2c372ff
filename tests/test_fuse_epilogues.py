"""passes/fuse_epilogues.py: bias adds, residual adds and activations after Conv / Gemm / MatMul folded
into the product's epilogue. Each case checks the IR after the pipeline (what was fused, what was not),
that the intended kernel path ran, and the numbers against onnx.reference on small models, for every
kernel path: pointwise, rows (im2col from a padded copy), chunked im2col and depthwise Conv, blocked
Gemm / MatMul, batched MatMul and the GEMV path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

RNG = np.random.default_rng(11)
F = TensorProto.FLOAT

# a marker of each Conv path in the generated C (codegen/kernels/conv.py and its templates)
CONV_PATHS = {"pointwise": "X[n, g] is the B operand", "rows": "onnxc_sg_conv_rows(",
              "im2col": "onnxc_sg_im2col_packed(", "depthwise": "taps (kd, kh, kw)"}


def rand(*shape: int, dt=np.float32) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(dt)


def model(nodes: list, inputs: dict[str, list], consts: dict[str, np.ndarray], outputs=("y",), opset=21,
          elem=F) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, elem, s) for n, s in inputs.items()],
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
                          initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def fused_ir(m: onnx.ModelProto) -> list:
    """The nodes of ``m`` after the whole pipeline."""
    return list(optimize(load_model(m), check=True).graph.nodes)


def check(m: onnx.ModelProto, feeds: dict[str, np.ndarray], path: str | None = None, kernels: int | None = None,
          rtol=1e-4, atol=1e-5) -> onnxc.CompiledModel:
    """Compile, compare every output with onnx.reference; ``path``: a marker the C must hold; ``kernels``:
    how many kernels the model must have."""
    cm = onnxc.compile(m)
    if path is not None:
        assert path in cm.c_source
    if kernels is not None:
        assert cm.c_source.count("ONNXC_KERNEL int k") == kernels
    want = ReferenceEvaluator(m).run(None, feeds)
    got = cm.run(feeds)
    for o, w in zip(m.graph.output, want):
        np.testing.assert_allclose(got[o.name], w, rtol=rtol, atol=atol, err_msg=o.name)
    return cm


def feeds_for(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Random data for the (static) graph inputs of ``m``."""
    out = {}
    for i in m.graph.input:
        tt = i.type.tensor_type
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = [d.dim_value for d in tt.shape.dim]
        out[i.name] = RNG.integers(-5, 5, shape).astype(dt) if np.issubdtype(dt, np.integer) else rand(*shape, dt=dt)
    return out


def epilogue_of(nodes: list, op: str) -> dict:
    """The epilogue attributes of the one ``op`` node."""
    (n,) = [n for n in nodes if n.op_type == op]
    return {k: n.attr(k) for k in ("onnxc_activation", "onnxc_activation_params", "onnxc_residual")
            if n.attr(k) is not None} | {"inputs": len(n.inputs)}


CONVS = {  # path -> (x shape, w shape, attributes)
    "pointwise": ([2, 8, 5, 7], [12, 8, 1, 1], {}),
    "rows": ([1, 6, 9, 8], [10, 6, 3, 3], {"pads": [1, 1, 1, 1]}),
    "im2col": ([1, 4, 13, 13], [6, 4, 3, 3], {"strides": [3, 3], "pads": [1, 1, 1, 1]}),
    "depthwise": ([1, 6, 9, 8], [6, 1, 3, 3], {"group": 6, "pads": [1, 1, 1, 1]}),
}
ACTS = [("Relu", {}), ("Clip", {}), ("LeakyRelu", {"alpha": 0.3}), ("Sigmoid", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Tanh", {})]


def _act_node(act: str, attrs: dict, x: str, y: str, consts: dict) -> onnx.NodeProto:
    if act == "Clip":  # MobileNet's ReLU6, bounds as constant inputs
        consts.update(lo=np.array(0.0, np.float32), hi=np.array(0.5, np.float32))
        return helper.make_node("Clip", [x, "lo", "hi"], [y])
    return helper.make_node(act, [x], [y], **attrs)


def _conv_ys(path: str) -> list[int]:
    xs, ws, attrs = CONVS[path]
    p, s = attrs.get("pads", [0] * 4), attrs.get("strides", [1, 1])
    return [xs[0], ws[0]] + [(xs[2 + i] + p[i] + p[i + 2] - ws[2 + i]) // s[i] + 1 for i in range(2)]


@pytest.mark.parametrize("path", list(CONVS))
@pytest.mark.parametrize("act,attrs", ACTS, ids=[a for a, _ in ACTS])
def test_conv_activation(path, act, attrs):
    xs, ws, cattrs = CONVS[path]
    consts = {"w": rand(*ws), "b": rand(ws[0])}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], **cattrs), _act_node(act, attrs, "t", "y", consts)]
    m = model(nodes, {"x": xs}, consts)
    ep = epilogue_of(fused_ir(m), "Conv")
    assert ep["onnxc_activation"] == act and "onnxc_residual" not in ep
    check(m, {"x": rand(*xs)}, CONV_PATHS[path], kernels=1)


@pytest.mark.parametrize("path", list(CONVS))
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_residual_relu(path, swap, bias):
    """ResNet's Conv -> Add(R) -> Relu, R in either Add operand, with and without a Conv bias."""
    xs, ws, cattrs = CONVS[path]
    ys = _conv_ys(path)
    consts = {"w": rand(*ws)} | ({"b": rand(ws[0])} if bias else {})
    add = ["r", "t"] if swap else ["t", "r"]
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["t"], **cattrs),
             helper.make_node("Add", add, ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, {"x": xs, "r": ys}, consts)
    ep = epilogue_of(fused_ir(m), "Conv")
    assert ep == {"onnxc_activation": "Relu", "onnxc_residual": 1, "inputs": 4}
    check(m, {"x": rand(*xs), "r": rand(*ys)}, CONV_PATHS[path], kernels=1)


def test_conv_sum_residual_computed_later_and_symbolic_batch():
    """R = a Sum operand computed by a Conv listed after this one: the fused Conv moves after it; the
    batch is symbolic and runs at two sizes."""
    consts = {"w1": rand(8, 4, 3, 3), "w2": rand(8, 4, 1, 1), "b2": rand(8)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["t"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["r"]),
             helper.make_node("Sum", ["r", "t"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, {"x": ["N", 4, 6, 6]}, consts)
    ir = fused_ir(m)
    assert [n.op_type for n in ir] == ["Conv", "Conv"]
    assert ir[1].attr("onnxc_residual") == 1 and ir[1].inputs[3] is ir[0].outputs[0]
    for n in (1, 3):
        check(m, {"x": rand(n, 4, 6, 6)}, kernels=2)


@pytest.mark.parametrize("bshape", [[5, 1, 1], [1, 5, 1, 1], [5, 1]])
def test_broadcast_add_becomes_conv_bias(bshape):
    """Conv (no bias) -> Add([M, 1, 1] constant) -> Add(R) -> Clip: bias, residual and activation."""
    consts = {"w": rand(5, 3, 3, 3), "c": rand(*bshape)}
    ys = [2, 5, 6, 6] if len(bshape) != 2 else None
    if ys is None:  # [5, 1] broadcasts over the last two axes of a 3-D (1-D conv) output
        consts["w"] = rand(5, 3, 3)
        ys, xs, pads = [2, 5, 6], [2, 3, 8], [0, 0]
    else:
        xs, pads = [2, 3, 8, 8], [0, 0, 0, 0]
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"], pads=pads), helper.make_node("Add", ["c", "t"], ["u"]),
             helper.make_node("Add", ["u", "r"], ["s"]), helper.make_node("Clip", ["s", "lo"], ["y"])]
    consts["lo"] = np.array(-0.2, np.float32)
    m = model(nodes, {"x": xs, "r": ys}, consts)
    ir = fused_ir(m)
    assert [n.op_type for n in ir] == ["Conv"]
    assert ir[0].inputs[2].const.shape == (5,) and ir[0].attr("onnxc_residual") == 1
    assert ir[0].attr("onnxc_activation_params") == [float(np.float32(-0.2)), np.inf]
    check(m, {"x": rand(*xs), "r": rand(*ys)}, kernels=1)


def test_conv3d_residual_leakyrelu():
    consts = {"w": rand(4, 2, 2, 3, 3), "b": rand(4)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[0, 1, 1, 0, 1, 1]),
             helper.make_node("Add", ["t", "r"], ["s"]), helper.make_node("LeakyRelu", ["s"], ["y"], alpha=0.1)]
    m = model(nodes, {"x": [1, 2, 4, 5, 5], "r": [1, 4, 3, 5, 5]}, consts)
    check(m, {"x": rand(1, 2, 4, 5, 5), "r": rand(1, 4, 3, 5, 5)}, kernels=1)


# ---- Gemm / MatMul ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("m_rows", [3, 40])  # GEMV path / blocked GEMM
@pytest.mark.parametrize("const_b", [True, False])
@pytest.mark.parametrize("with_c", [True, False])
def test_gemm_residual_activation(m_rows, const_b, with_c):
    k, n = 37, 70
    consts = {"B": rand(n, k)} | ({"C": rand(n)} if with_c else {})
    ins = {"A": [m_rows, k], "R": [m_rows, n]} | ({} if const_b else {"B": [n, k]})
    if not const_b:
        consts.pop("B")
    nodes = [helper.make_node("Gemm", ["A", "B"] + (["C"] if with_c else []), ["t"], transB=1, alpha=0.5,
                              beta=2.0),
             helper.make_node("Add", ["R", "t"], ["s"]), helper.make_node("Sigmoid", ["s"], ["y"])]
    m = model(nodes, ins, consts)
    ep = epilogue_of(fused_ir(m), "Gemm")
    assert ep == {"onnxc_activation": "Sigmoid", "onnxc_residual": 1, "inputs": 4}
    feeds = {"A": rand(m_rows, k), "R": rand(m_rows, n)} | ({} if const_b else {"B": rand(n, k)})
    gemv = m_rows <= 8 and const_b
    check(m, feeds, "onnxc_gemv(" if gemv else "onnxc_sgemm_ex(", kernels=1)


C_FORMS = {"[N]": lambda m: [50], "[1, N]": lambda m: [1, 50], "[M, 1]": lambda m: [m, 1], "[1]": lambda m: [1]}


@pytest.mark.parametrize("form", list(C_FORMS))
@pytest.mark.parametrize("op", ["Gemm", "MatMul"])
@pytest.mark.parametrize("rows", [6, 40])  # GEMV path / blocked GEMM (C as the epilogue's bias)
def test_broadcast_add_becomes_gemm_c(rows, op, form):
    """Gemm (no C) or MatMul of two matrices -> Add(broadcast) -> Relu: one Gemm with C, beta = 1."""
    consts = {"B": rand(30, 50), "c": rand(*C_FORMS[form](rows))}
    attrs = {"beta": 0.25} if op == "Gemm" else {}
    nodes = [helper.make_node(op, ["A", "B"], ["t"], **attrs), helper.make_node("Add", ["t", "c"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, {"A": [rows, 30]}, consts)
    (g,) = fused_ir(m)
    assert g.op_type == "Gemm" and g.attr("beta") == 1.0 and g.inputs[2] is not None
    assert g.attr("onnxc_activation") == "Relu"
    cm = check(m, feeds_for(m), "onnxc_gemv(" if rows <= 8 else "onnxc_sgemm_ex(", kernels=1)
    if rows > 8:  # a vector C is the GEMM epilogue's bias; Y is not filled with C first
        assert ("csi" in cm.c_source) == (form == "[1]")


@pytest.mark.parametrize("a_shape,b_shape", [([2, 9, 30], [30, 20]),        # batch folded into rows, const B
                                             ([2, 9, 30], [2, 30, 20]),     # batched B: per-matrix GEMMs
                                             ([3, 30], [30, 20]),           # GEMV
                                             ([30], [30, 20]),              # 1-D A: GEMV, one row
                                             ([4, 0], [0, 20])])            # K = 0: y = act(R)
@pytest.mark.parametrize("act", ["Tanh", "HardSwish"])
def test_matmul_residual_activation(a_shape, b_shape, act):
    const = len(b_shape) == 2
    ys = list(np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape)
    consts = {"B": rand(*b_shape)} if const else {}
    ins = {"A": a_shape, "R": ys} | ({} if const else {"B": b_shape})
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Add", ["t", "R"], ["s"]),
             helper.make_node(act, ["s"], ["y"])]
    m = model(nodes, ins, consts)
    ep = epilogue_of(fused_ir(m), "MatMul")
    assert ep == {"onnxc_activation": act, "onnxc_residual": 1, "inputs": 3}
    check(m, feeds_for(m), kernels=1)


def test_matmul_symbolic_rows_residual():
    consts = {"B": rand(24, 40)}
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Add", ["t", "R"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, {"A": ["N", 24], "R": ["N", 40]}, consts)
    for rows in (1, 17, 0):
        check(m, {"A": rand(rows, 24), "R": rand(rows, 40)}, kernels=1)


# ---- the GEMV activations (formerly passes/fuse_gemv_epilogue.py) -----------------------------------------

GEMV_ACTS = [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {"alpha": 0.2}),
             ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Clip", {"min": -0.5, "max": 0.7})]


@pytest.mark.parametrize("act,attrs", GEMV_ACTS, ids=[a for a, _ in GEMV_ACTS])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemv_activation(act, attrs, threads):
    m_rows, k, n = 2, 300, 1000
    opset = 6 if act == "Clip" else 21  # Clip's bounds as attributes (opset < 11)
    consts = {"B": rand(n, k), "C": rand(n)}
    gattrs = {"broadcast": 1} if opset < 7 else {}
    nodes = [helper.make_node("Gemm", ["A", "B", "C"], ["t"], transB=1, **gattrs),
             helper.make_node(act, ["t"], ["y"], **attrs)]
    m = model(nodes, {"A": [m_rows, k]}, consts, opset=opset)
    cm = onnxc.compile(m, threads=threads)
    assert "onnxc_gemv(rt->threads" in cm.c_source and cm.c_source.count("ONNXC_KERNEL int k") == 1
    a = rand(m_rows, k)
    np.testing.assert_allclose(cm.run({"A": a})["y"], ReferenceEvaluator(m).run(None, {"A": a})[0], rtol=1e-4,
                               atol=1e-4)


def test_clip6_default_bounds_are_the_float_range():
    """Clip-6 without attributes clamps to +-FLT_MAX (inf in, FLT_MAX out); Clip-1 does not clamp."""
    for opset, want in ((6, np.finfo(np.float32).max), (1, np.inf)):
        nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Clip", ["t"], ["y"])]
        m = model(nodes, {"A": [1, 2]}, {"B": np.ones((2, 3), np.float32)}, opset=opset)
        (g,) = fused_ir(m)
        assert g.attr("onnxc_activation_params") == [-float(want), float(want)]


def test_clip_bounds_as_inputs_keep_the_output_name():
    consts = {"B": rand(64, 80), "lo": np.array(-0.1, np.float32)}
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Clip", ["t", "lo", ""], ["out"])]
    m = model(nodes, {"A": [1, 64]}, consts, outputs=("out",), opset=17)
    check(m, {"A": rand(1, 64)}, "onnxc_gemv(", kernels=1)


# ---- what must not fuse -----------------------------------------------------------------------------------

def _conv_chain(second: list, outputs=("y",), r_shape=(1, 4, 5, 5), elem=F, dt=np.float32) -> onnx.ModelProto:
    consts = {"w": rand(4, 3, 3, 3, dt=dt), "b": rand(4, dt=dt)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1])] + second
    return model(nodes, {"x": [1, 3, 5, 5], "r": list(r_shape)}, consts, outputs, elem=elem)


NEGATIVE = {
    "two readers": _conv_chain([helper.make_node("Add", ["t", "r"], ["s"]), helper.make_node("Relu", ["t"], ["u"]),
                                helper.make_node("Mul", ["s", "u"], ["y"])]),
    "graph output": _conv_chain([helper.make_node("Add", ["t", "r"], ["y"])], outputs=("y", "t")),
    "broadcasting add": _conv_chain([helper.make_node("Add", ["t", "r"], ["y"])], r_shape=(1, 1, 5, 5)),
    "add growing the output": _conv_chain([helper.make_node("Add", ["t", "r"], ["y"])], r_shape=(2, 4, 5, 5)),
    "runtime clip bound": _conv_chain([helper.make_node("Clip", ["t", "lo"], ["y"])]),
    "double": _conv_chain([helper.make_node("Add", ["t", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                          elem=TensorProto.DOUBLE, dt=np.float64),
}


@pytest.mark.parametrize("case", list(NEGATIVE))
def test_not_fused(case):
    m = NEGATIVE[case]
    if case == "runtime clip bound":  # the bound is a graph input: computed at run time
        m.graph.input.append(helper.make_tensor_value_info("lo", F, []))
        m.graph.input.remove(m.graph.input[1])  # r is not read
    assert epilogue_of(fused_ir(m), "Conv") == {"inputs": 3}
    check(m, feeds_for(m))


def test_integer_matmul_add_not_fused():
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Add", ["t", "R"], ["y"])]
    m = model(nodes, {"A": [3, 4], "B": [4, 5], "R": [3, 5]}, {}, elem=TensorProto.INT32)
    assert [n.op_type for n in fused_ir(m)] == ["MatMul", "Add"]
    check(m, feeds_for(m))


def test_gemv_product_read_twice_keeps_its_activation():
    """The product's output is also a graph output: the activation stays a node of its own."""
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Relu", ["t"], ["r"])]
    m = model(nodes, {"A": [1, 32]}, {"B": rand(32, 48)}, outputs=("t", "r"), opset=17)
    assert [n.op_type for n in fused_ir(m)] == ["MatMul", "Relu"]
    check(m, {"A": rand(1, 32)})


def test_second_residual_stays_an_add():
    """Conv -> Add(R1) -> Add(R2): the first Add is the residual, the second stays (one residual input)."""
    m = _conv_chain([helper.make_node("Add", ["t", "r"], ["s"]), helper.make_node("Add", ["s", "r2"], ["y"])])
    m.graph.input.append(helper.make_tensor_value_info("r2", F, [1, 4, 5, 5]))
    ir = fused_ir(m)
    assert [n.op_type for n in ir] == ["Conv", "Add"] and ir[0].attr("onnxc_residual") == 1
    check(m, feeds_for(m))


def test_matmul_bias_before_opset_11_stays_an_add():
    """Gemm's C is optional from opset 11 on; below it a MatMul + Add keeps both nodes."""
    nodes = [helper.make_node("MatMul", ["A", "B"], ["t"]), helper.make_node("Add", ["t", "c"], ["y"])]
    m = model(nodes, {"A": [12, 8]}, {"B": rand(8, 5), "c": rand(5)}, opset=9)
    assert [n.op_type for n in fused_ir(m)] == ["MatMul", "Add"]
    check(m, feeds_for(m))
