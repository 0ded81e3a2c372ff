"""Elementwise fusion (passes/fuse_elementwise.py, fuse_patterns.py, the onnxc::ElementwiseChain shape
and fold rules and kernel): the IR after the pipeline and the numbers against onnx.reference."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import DType, Node, Value
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.pipeline import optimize
from onnxc.passes.shapes.fused import In, Lit, chain_attrs, op

rng = np.random.default_rng(5)
T = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
     np.int32: TensorProto.INT32, np.bool_: TensorProto.BOOL}


class _G:
    """Builds a model node by node: ``g.op("Add", a, b)`` returns the output name; scalars become
    0-d initializers of the graph's float type."""

    def __init__(self, dt=np.float32):
        self.dt, self.nodes, self.inits, self.k = dt, [], [], 0

    def c(self, v, dt=None) -> str:
        self.k += 1
        self.inits.append(numpy_helper.from_array(np.asarray(v, dtype=dt or self.dt), f"c{self.k}"))
        return f"c{self.k}"

    def op(self, op_type: str, *ins, **attrs) -> str:
        self.k += 1
        ins = [self.c(a) if isinstance(a, (int, float)) else a for a in ins]
        self.nodes.append(helper.make_node(op_type, list(ins), [f"t{self.k}"], **attrs))
        return f"t{self.k}"

    def model(self, inputs: dict, outs: list[str], opset: int = 18) -> onnx.ModelProto:
        for i, o in enumerate(outs):  # graph outputs get public names y0, y1, ...
            prod = [n for n in self.nodes if o in n.output]
            if not prod:
                self.nodes.append(helper.make_node("Identity", [o], [f"y{i}"]))
                continue
            for n in self.nodes:
                n.output[:] = [f"y{i}" if x == o else x for x in n.output]
                n.input[:] = [f"y{i}" if x == o else x for x in n.input]
        g = helper.make_graph(
            self.nodes, "t",
            [helper.make_tensor_value_info(n, T[d], s) for n, (d, s) in inputs.items()],
            [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(len(outs))],
            self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _fused(model) -> list:
    """The optimized graph's nodes."""
    return optimize(load_model(model)).graph.nodes


def _named(n) -> str:
    """The activation one optimized node computes: a fused chain's tree, or the node that
    passes/name_activations.py put in place of the formula, written as that tree."""
    if n.op_type == "ElementwiseChain":
        return repr(n.attr("expr"))
    return repr(op(n.op_type, In(0), **{a.name: a.value for a in n.attrs.values()}))


def _check(model, feeds, rtol=1e-5, atol=1e-6, expected=None) -> None:
    want = expected if expected is not None else ReferenceEvaluator(model).run(None, feeds)
    got = onnxc.compile(model).run(feeds)
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _x(*shape, dt=np.float32):
    return rng.standard_normal(shape).astype(dt)


def test_chain_becomes_one_node():
    g = _G()
    t = g.op("Sigmoid", g.op("Add", g.op("Mul", "x", 0.5), 0.25))
    y = g.op("Relu", g.op("Erf", g.op("Mul", t, "x")))
    m = g.model({"x": (np.float32, ["N", 7])}, [y])
    (n,) = _fused(m)
    assert (n.domain, n.op_type) == ("onnxc", "ElementwiseChain")
    assert [v.name for v in n.inputs] == ["x"] and n.outputs[0].name == "y0"
    assert repr(n.attr("expr")) == "Relu(Erf(Mul(Sigmoid(Add(Mul(%0, 0.5), 0.25)), %0)))"
    _check(m, {"x": _x(3, 7)})
    _check(m, {"x": _x(1, 7)})


@pytest.mark.parametrize("form", ["bert", "torch", "mul_recip", "half_last"])
def test_gelu_erf_forms(form):
    g = _G()
    if form == "bert":      # x * (erf(x / sqrt2) + 1) * 0.5
        y = g.op("Mul", g.op("Mul", "x", g.op("Add", g.op("Erf", g.op("Div", "x", math.sqrt(2))), 1.0)), 0.5)
    elif form == "torch":   # (x * 0.5) * (1 + erf(x / sqrt2))
        y = g.op("Mul", g.op("Mul", "x", 0.5), g.op("Add", 1.0, g.op("Erf", g.op("Div", "x", math.sqrt(2)))))
    elif form == "mul_recip":
        y = g.op("Mul", "x", g.op("Mul", 0.5, g.op("Add", g.op("Erf", g.op("Mul", "x", 1 / math.sqrt(2))), 1.0)))
    else:                   # (x * (1 + erf)) / 2
        y = g.op("Div", g.op("Mul", "x", g.op("Add", 1.0, g.op("Erf", g.op("Div", "x", math.sqrt(2))))), 2.0)
    m = g.model({"x": (np.float32, [4, 33])}, [y])
    (n,) = _fused(m)
    assert _named(n) == "Gelu(%0)"
    x = _x(4, 33) * 3
    x[0, :5] = [0.0, -0.0, 10.0, -10.0, np.nan]
    _check(m, {"x": x})


@pytest.mark.parametrize("cube", ["pow", "muls", "x_pow2"])
def test_gelu_tanh_form(cube):
    g = _G()
    x3 = {"pow": lambda: g.op("Pow", "x", 3.0), "muls": lambda: g.op("Mul", g.op("Mul", "x", "x"), "x"),
          "x_pow2": lambda: g.op("Mul", "x", g.op("Pow", "x", 2.0))}[cube]()
    inner = g.op("Mul", math.sqrt(2 / math.pi), g.op("Add", "x", g.op("Mul", 0.044715, x3)))
    y = g.op("Mul", g.op("Mul", 0.5, "x"), g.op("Add", 1.0, g.op("Tanh", inner)))
    m = g.model({"x": (np.float32, [50])}, [y])
    (n,) = _fused(m)
    assert _named(n) == "Gelu(%0, approximate='tanh')"
    _check(m, {"x": _x(50) * 3}, atol=1e-5)


def test_silu_and_swish():
    g = _G()
    a = g.op("Mul", "x", g.op("Sigmoid", "x"))
    b = g.op("Mul", g.op("Sigmoid", g.op("Mul", "x", 1.702)), "x")
    m = g.model({"x": (np.float32, [64])}, [a, b])
    exprs = sorted(repr(n.attr("expr")) for n in _fused(m))
    assert exprs == ["Swish(%0)", "Swish(%0, alpha=1.7020000219345093)"]
    _check(m, {"x": _x(64) * 4})


def test_hardswish_forms():
    g = _G()
    a = g.op("Mul", "x", g.op("HardSigmoid", "x", alpha=1 / 6, beta=0.5))
    b = g.op("Div", g.op("Mul", "x", g.op("Clip", g.op("Add", "x", 3.0), 0.0, 6.0)), 6.0)
    m = g.model({"x": (np.float32, [64])}, [a, b])
    assert [repr(n.attr("expr")) for n in _fused(m)] == ["HardSwish(%0)"] * 2
    _check(m, {"x": _x(64) * 4})


def test_broadcast_leaves_and_symbolic_dims():
    g = _G()
    bias = g.c(_x(5))
    y = g.op("Tanh", g.op("Add", g.op("Mul", "x", "s"), bias))
    m = g.model({"x": (np.float32, ["N", 4, 5]), "s": (np.float32, ["N", 4, 1])}, [y])
    (n,) = _fused(m)
    assert [v.name for v in n.inputs] == ["x", "s", bias]
    assert [str(d) for d in n.outputs[0].type.shape] == ["N", "4", "5"]
    for batch in (1, 3):
        _check(m, {"x": _x(batch, 4, 5), "s": _x(batch, 4, 1)})


def test_rank_raising_scalar_constant():
    g = _G()
    y = g.op("Relu", g.op("Mul", "x", g.c(np.full((1, 1, 1), 2.0))))
    m = g.model({"x": (np.float32, [3])}, [y])
    (n,) = _fused(m)
    assert n.outputs[0].type.shape == (1, 1, 3)
    _check(m, {"x": _x(3)})


def test_values_with_other_readers_stay():
    g = _G()
    e = g.op("Exp", "x")
    a, b = g.op("Add", e, 1.0), g.op("Mul", e, 2.0)
    m = g.model({"x": (np.float32, [8])}, [a, b])
    assert [n.op_type for n in _fused(m)] == ["Exp", "Add", "Mul"]
    _check(m, {"x": _x(8)})


def test_graph_output_intermediate_stays():
    g = _G()
    e = g.op("Exp", "x")
    m = g.model({"x": (np.float32, [8])}, [e, g.op("Neg", e)])
    assert [n.op_type for n in _fused(m)] == ["Exp", "Neg"]


def test_broadcast_expanding_intermediate_stays():
    """Exp of a [5] vector added to a [4, 5] tensor: fused, the Exp would run 4 times per value."""
    g = _G()
    y = g.op("Relu", g.op("Add", g.op("Exp", "v"), "x"))
    m = g.model({"x": (np.float32, [4, 5]), "v": (np.float32, [5])}, [y])
    nodes = _fused(m)
    assert [n.op_type for n in nodes] == ["Exp", "ElementwiseChain"]
    assert repr(nodes[1].attr("expr")) == "Relu(Add(%0, %1))"
    _check(m, {"x": _x(4, 5), "v": _x(5)})


def test_shared_value_inside_the_group():
    """Bias add feeding the three reads of GELU: one node, the sum computed once per element."""
    g = _G()
    bias = g.c(_x(16))
    h = g.op("Add", "x", bias)
    y = g.op("Mul", g.op("Mul", h, g.op("Add", g.op("Erf", g.op("Div", h, math.sqrt(2))), 1.0)), 0.5)
    m = g.model({"x": (np.float32, ["B", 16])}, [y])
    (n,) = _fused(m)
    assert repr(n.attr("expr")) == "Gelu(Add(%0, %1))"
    _check(m, {"x": _x(3, 16)})


def test_deep_sharing_falls_back_to_a_tree():
    g = _G()
    t = "x"
    for _ in range(12):  # t = t * t: spelled out as a tree, 4095 multiplications
        t = g.op("Mul", g.op("Add", t, 0.0), g.op("Add", t, 0.0))
    m = g.model({"x": (np.float32, [6])}, [t])
    assert all(n.attr("expr") is None or len(repr(n.attr("expr"))) < 4000 for n in _fused(m))
    _check(m, {"x": rng.uniform(0.99, 1.01, 6).astype(np.float32)}, rtol=1e-4)


def test_where_with_comparison_and_constants():
    g = _G()
    y = g.op("Where", g.op("Less", "x", 0.0), g.op("Mul", "x", 0.1), g.op("Exp", "x"))
    z = g.op("Where", "mask", g.op("Add", "x", 1.0), -math.inf)
    m = g.model({"x": (np.float32, [20]), "mask": (np.bool_, [20])}, [y, z])
    exprs = [repr(n.attr("expr")) for n in _fused(m)]
    assert exprs == ["Where(Less(%0, 0.0), Mul(%0, 0.10000000149011612), Exp(%0))",
                     "Where(%0, Add(%1, 1.0), -inf)"]
    _check(m, {"x": _x(20), "mask": rng.random(20) > 0.5})


def test_comparison_root_gives_bool():
    g = _G()
    y = g.op("Greater", g.op("Abs", "x"), 1.0)
    m = g.model({"x": (np.float32, [9])}, [y])
    (n,) = _fused(m)
    assert n.outputs[0].type.dtype == DType.BOOL
    _check(m, {"x": _x(9)})


@pytest.mark.parametrize("opset", [6, 13])
def test_clip_bounds(opset):
    g = _G()
    if opset < 11:
        y = g.op("Clip", g.op("Mul", "x", 3.0), min=-1.0, max=2.0)
    else:
        y = g.op("Clip", g.op("Mul", "x", 3.0), -1.0, 2.0)
    m = g.model({"x": (np.float32, [30])}, [g.op("Neg", y)], opset=opset)
    (n,) = _fused(m)
    assert repr(n.attr("expr")) == "Neg(Clip(Mul(%0, 3.0), max=2.0, min=-1.0))"
    _check(m, {"x": _x(30)})


def test_clip_with_runtime_bound_stays():
    g = _G()
    y = g.op("Neg", g.op("Clip", g.op("Mul", "x", 3.0), "lo"))
    m = g.model({"x": (np.float32, [30]), "lo": (np.float32, [])}, [y])
    assert [n.op_type for n in _fused(m)] == ["Mul", "Clip", "Neg"]


def test_double_chain_with_pow_and_variadic():
    g = _G(np.float64)
    y = g.op("Mean", g.op("Pow", "x", 2.0), g.op("Pow", g.op("Abs", "x"), "e"), g.op("Max", "x", 0.5, "e"))
    m = g.model({"x": (np.float64, [2, 10]), "e": (np.float64, [10])}, [g.op("Sqrt", y)])
    (n,) = _fused(m)
    assert n.attr("dtype") == int(DType.DOUBLE)
    _check(m, {"x": _x(2, 10, dt=np.float64), "e": rng.uniform(0.5, 2, 10)}, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", [np.int32, np.float16])
def test_integer_and_half_chains_are_not_fused(dt):
    g = _G(dt)
    y = g.op("Mul", g.op("Add", "x", 3), 2)
    m = g.model({"x": (dt, [10])}, [y])
    assert [n.op_type for n in _fused(m)] == ["Add", "Mul"]
    x = rng.integers(-50, 50, 10).astype(dt) if dt == np.int32 else _x(10, dt=dt)
    _check(m, {"x": x}, rtol=1e-3)


def test_legacy_broadcast_attribute_is_not_fused():
    g = _G()
    y = g.op("Relu", g.op("Add", "x", "b", broadcast=1, axis=1))
    m = g.model({"x": (np.float32, [2, 3, 4]), "b": (np.float32, [3])}, [y], opset=6)
    assert [n.op_type for n in _fused(m)] == ["Add", "Relu"]
    x, b = _x(2, 3, 4), _x(3)  # onnx.reference lacks the opset-6 broadcast attribute
    _check(m, {"x": x, "b": b}, expected=[np.maximum(x + b[:, None], 0)])


def test_selu_opset1_defaults_carried():
    g = _G()
    y = g.op("Neg", g.op("Selu", "x"))
    m = g.model({"x": (np.float32, [12])}, [y], opset=5)
    (n,) = _fused(m)
    assert n.attr("expr").args[0].attr("alpha") == pytest.approx(1.6732)
    x = _x(12)  # onnx.reference applies the opset-6 defaults to every version: numpy with Selu-1's
    want = -np.where(x > 0, x, np.float32(1.6732) * np.expm1(x)) * np.float32(1.0507)
    _check(m, {"x": x}, expected=[want.astype(np.float32)])


def test_shape_and_fold_rules():
    """A chain node alone: shape inference over symbolic dims and folding of constant inputs."""
    g = _G()
    m = load_model(g.model({"x": (np.float32, ["N", 1, 3])}, ["x"]))
    graph = m.graph
    x = graph.inputs[0]
    c = graph.constant(np.array([1.0, -2.0, 3.0], np.float32))
    expr = op("Relu", op("Add", In(0), op("Mul", In(1), Lit(2.0, (1, 1, 1, 1)))))
    y, z = Value("y"), Value("z")
    graph.nodes.insert(0, Node("ElementwiseChain", [x, c], [y], chain_attrs(expr, DType.FLOAT), domain="onnxc"))
    graph.nodes.insert(1, Node("ElementwiseChain", [c, c], [z], chain_attrs(expr, DType.FLOAT), domain="onnxc"))
    for n in graph.nodes:
        n.graph = graph
    graph.outputs = [y, z]
    infer_shapes(m)
    assert [str(d) for d in y.type.shape] == ["1", "N", "1", "3"]
    np.testing.assert_array_equal(z.const, np.array([[[[3.0, 0.0, 9.0]]]], np.float32))
