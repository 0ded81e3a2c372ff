"""passes/name_activations.py: gated activations spelled out op by op become one activation node (the IR
right after the pass), the graph is left alone when the gate's input has other readers or is public, and
the whole pipeline still computes what onnxruntime computes when no product precedes."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize, steps

RNG = np.random.default_rng(7)
F = TensorProto.FLOAT


def _c(consts: dict, v: float, dt=np.float32) -> str:
    name = f"c{len(consts)}"
    consts[name] = np.array(v, dt)
    return name


def gated(form: str, t: str, y: str, consts: dict, dt=np.float32) -> list[onnx.NodeProto]:
    """The nodes computing activation ``form`` of ``t`` into ``y`` the way exporters spell it."""
    n = helper.make_node
    c = lambda v: _c(consts, v, dt)  # noqa: E731
    if form == "silu":
        return [n("Sigmoid", [t], ["g_s"]), n("Mul", [t, "g_s"], [y])]
    if form == "silu_swapped":
        return [n("Sigmoid", [t], ["g_s"]), n("Mul", ["g_s", t], [y])]
    if form == "quickgelu":
        return [n("Mul", [c(1.702), t], ["g_a"]), n("Sigmoid", ["g_a"], ["g_s"]), n("Mul", [t, "g_s"], [y])]
    if form == "gelu_erf":
        return [n("Div", [t, c(math.sqrt(2))], ["g_d"]), n("Erf", ["g_d"], ["g_e"]),
                n("Add", ["g_e", c(1.0)], ["g_a"]), n("Mul", [t, "g_a"], ["g_m"]), n("Mul", ["g_m", c(0.5)], [y])]
    if form == "gelu_erf_half_first":
        return [n("Mul", [t, c(1 / math.sqrt(2))], ["g_d"]), n("Erf", ["g_d"], ["g_e"]),
                n("Add", [c(1.0), "g_e"], ["g_a"]), n("Mul", [c(0.5), t], ["g_h"]), n("Mul", ["g_h", "g_a"], [y])]
    if form == "gelu_tanh":
        return [n("Pow", [t, c(3.0)], ["g_p"]), n("Mul", ["g_p", c(0.044715)], ["g_k"]),
                n("Add", [t, "g_k"], ["g_i"]), n("Mul", ["g_i", c(math.sqrt(2 / math.pi))], ["g_j"]),
                n("Tanh", ["g_j"], ["g_t"]), n("Add", ["g_t", c(1.0)], ["g_a"]),
                n("Mul", [t, c(0.5)], ["g_h"]), n("Mul", ["g_h", "g_a"], [y])]
    if form == "hardswish":
        return [n("HardSigmoid", [t], ["g_s"], alpha=1 / 6, beta=0.5), n("Mul", [t, "g_s"], [y])]
    if form == "hardswish_clip":
        return [n("Add", [t, c(3.0)], ["g_a"]), n("Clip", ["g_a", c(0.0), c(6.0)], ["g_c"]),
                n("Mul", [t, "g_c"], ["g_m"]), n("Div", ["g_m", c(6.0)], [y])]
    if form == "mish":
        return [n("Softplus", [t], ["g_p"]), n("Tanh", ["g_p"], ["g_t"]), n("Mul", ["g_t", t], [y])]
    raise KeyError(form)


# form -> (op, attributes of the named node)
NAMED = {"silu": ("Swish", {}), "silu_swapped": ("Swish", {}), "quickgelu": ("Swish", {"alpha": 1.702}),
         "gelu_erf": ("Gelu", {}), "gelu_erf_half_first": ("Gelu", {}),
         "gelu_tanh": ("Gelu", {"approximate": "tanh"}), "hardswish": ("HardSwish", {}),
         "hardswish_clip": ("HardSwish", {}), "mish": ("Mish", {})}


def model(nodes, inputs: dict, consts: dict, outputs=("y",), elem=F, opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, elem, s) for k, s in inputs.items()],
                          [helper.make_tensor_value_info(o, elem, None) for o in outputs],
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def after_pass(m: onnx.ModelProto) -> list:
    """The nodes right after name_activations (the pipeline's steps up to it)."""
    ir = load_model(m)
    for name, fn in steps():
        ir = fn(ir).model
        if name == "name_activations":
            return list(ir.graph.nodes)
    raise AssertionError("name_activations is not in the pipeline")


def _attrs(node) -> dict:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in
            ((a.name, a.value) for a in node.attrs.values())}


@pytest.mark.parametrize("form", list(NAMED))
def test_named_after_a_product(form):
    consts = {"w": RNG.uniform(-1, 1, (5, 3, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"])] + gated(form, "t", "y", consts)
    m = model(nodes, {"x": ["N", 3, 4, 4]}, consts)
    conv, act = after_pass(m)
    op, attrs = NAMED[form]
    assert conv.op_type == "Conv" and act.op_type == op and act.inputs == [conv.outputs[0]]
    assert _attrs(act) == attrs and act.outputs[0].name == "y"
    # the whole pipeline folds it into the Conv
    (fused,) = optimize(load_model(m), check=True).graph.nodes
    assert fused.attr("onnxc_activation") == (op + ":tanh" if attrs.get("approximate") == "tanh" else op)


def test_gelu_of_an_elementwise_value_keeps_that_value():
    """t computed by an Add (elementwise itself): the named node reads the Add's output."""
    consts = {}
    nodes = [helper.make_node("Add", ["a", "b"], ["t"])] + gated("gelu_erf", "t", "y", consts)
    (add, act) = after_pass(model(nodes, {"a": [2, 7], "b": [2, 7]}, consts))
    assert (add.op_type, act.op_type) == ("Add", "Gelu") and act.inputs[0] is add.outputs[0]


NOT_NAMED = {  # case -> (extra nodes after the gate, outputs)
    "t read elsewhere": ([helper.make_node("Relu", ["t"], ["r"])], ("y", "r")),
    "t is a graph output": ([], ("y", "t")),
    "the sigmoid is a graph output": ([], ("y", "g_s")),
    "the sigmoid read elsewhere": ([helper.make_node("Neg", ["g_s"], ["r"])], ("y", "r")),
}


@pytest.mark.parametrize("case", list(NOT_NAMED))
def test_left_alone(case):
    extra, outs = NOT_NAMED[case]
    consts = {"w": RNG.uniform(-1, 1, (5, 3, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"])] + gated("silu", "t", "y", consts) + extra
    m = model(nodes, {"x": [1, 3, 4, 4]}, consts, outputs=outs)
    ops = [n.op_type for n in after_pass(m)]
    assert "Swish" not in ops and "Sigmoid" in ops and "Mul" in ops
    compare(m)


def test_other_gates_left_alone():
    """x * Sigmoid(u) with u another value, x * HardSigmoid(x) with ONNX's default slope 0.2, and a
    float16 SiLU are not named."""
    n = helper.make_node
    nodes = [n("Sigmoid", ["u"], ["s"]), n("Mul", ["x", "s"], ["y0"]),
             n("HardSigmoid", ["x"], ["h"]), n("Mul", ["x", "h"], ["y1"])]
    m = model(nodes, {"x": [3, 5], "u": [3, 5]}, {}, outputs=("y0", "y1"))
    assert sorted(nd.op_type for nd in after_pass(m)) == ["HardSigmoid", "Mul", "Mul", "Sigmoid"]
    compare(m)
    h = model(gated("silu", "x", "y", {}), {"x": [3, 5]}, {}, elem=TensorProto.FLOAT16)
    assert [nd.op_type for nd in after_pass(h)] == ["Sigmoid", "Mul"]


def test_broadcast_gate_left_alone():
    """Mul(t, Sigmoid(t)) broadcast against a bigger shape through a literal of higher rank is not the
    activation of t (the output has another shape)."""
    consts = {"k": np.ones((2, 1, 1), np.float32)}
    n = helper.make_node
    nodes = [n("Sigmoid", ["t"], ["s"]), n("Mul", ["t", "k"], ["tk"]), n("Mul", ["tk", "s"], ["y"])]
    m = model(nodes, {"t": [3, 4]}, consts)
    assert "Swish" not in [nd.op_type for nd in after_pass(m)]
    compare(m)


_ERF = np.vectorize(math.erf)
EXACT = {  # form -> the activation in float64
    "silu": lambda x: x / (1 + np.exp(-x)), "quickgelu": lambda x: x / (1 + np.exp(-1.702 * x)),
    "gelu_erf": lambda x: 0.5 * x * (1 + _ERF(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "hardswish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1), "mish": lambda x: x * np.tanh(np.log1p(np.exp(x)))}
EXACT |= {"silu_swapped": EXACT["silu"], "gelu_erf_half_first": EXACT["gelu_erf"],
          "hardswish_clip": EXACT["hardswish"]}


def compare(m: onnx.ModelProto, rtol=1e-5, atol=1e-6, exact=None) -> None:
    """onnxc against onnxruntime, or against ``exact`` (a function of the feeds) when given."""
    feeds = {}
    for i in m.graph.input:
        dt = helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        shape = [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = RNG.uniform(-6, 6, shape).astype(dt)
    if exact is not None:  # onnxruntime has no double Erf, Softplus...; onnx.reference's Erf is float32
        want = [exact(feeds)]
    else:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxc.compile(m).run(feeds)
    for o, w in zip(m.graph.output, want):
        np.testing.assert_allclose(got[o.name], w, rtol=rtol, atol=atol, err_msg=o.name)


@pytest.mark.parametrize("form", list(NAMED))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_standalone_after_add(form, dt):
    """No product before the gate (an Add, symbolic batch, odd width): fuse_elementwise still runs the
    named activation, float and double."""
    consts: dict = {}
    nodes = [helper.make_node("Add", ["a", "b"], ["t"])] + gated(form, "t", "y", consts, dt)
    elem = TensorProto.FLOAT if dt == np.float32 else TensorProto.DOUBLE
    m = model(nodes, {"a": ["N", 37], "b": ["N", 37]}, consts, elem=elem)
    ir = optimize(load_model(m), check=True).graph.nodes
    assert len(ir) == 1  # one fused loop
    if dt == np.float32:
        compare(m)
    else:  # HardSigmoid's alpha attribute is a float32 1/6; the named HardSwish divides by 6 exactly
        compare(m, rtol=1e-7 if form == "hardswish" else 1e-12, atol=1e-15,
                exact=lambda f: EXACT[form](f["a"] + f["b"]))
