"""passes/shapes/epilogue_spec.py: a written epilogue request parses back to itself (every op and key
set), defaults fill in, a malformed request is an UnsupportedOpError naming the node and what was
wrong, and codegen has a C code for every activation the spec names. No compile: IR nodes only."""

from __future__ import annotations

import math

import pytest

from onnxc.codegen.kernels.epilogue import ACT_CODES
from onnxc.ir import DType, Node, TensorType, UnsupportedOpError, Value
from onnxc.ir.dims import sym
from onnxc.ir.graph import Attr
from onnxc.passes.shapes.epilogue_spec import (
    ACT_ATTR,
    ACTIVATIONS,
    BIAS_ATTR,
    BIAS_INPUT,
    DW_ACT,
    DWPW_OP,
    PARAMS_ATTR,
    RESIDUAL_ATTR,
    RESIDUAL_INPUT,
    Activation,
    EpilogueRequest,
    activation_attrs,
    make_activation,
    parse_activation,
    parse_epilogue,
    request_attrs,
)

F = DType.FLOAT
B = sym("B")  # a symbolic batch dim
OUT = (B, 6, 12)
N_OWN = {"Conv": 3, "Gemm": 3, "MatMul": 2, DWPW_OP: 5}  # each op's own input slots before the residual


def _v(name: str, shape: tuple | None = OUT, dt: DType = F) -> Value:
    return Value(name, TensorType(dt, shape))


def _node(op: str, req: EpilogueRequest, residual: Value | None = None, bias: Value | None = None,
          attrs: dict | None = None) -> Node:
    """``op`` with its own inputs, the residual / bias at their slots, and ``req``'s attributes."""
    ins: list[Value | None] = [_v(f"x{i}", (6, 8)) for i in range(N_OWN[op])]
    for slot, v in ((RESIDUAL_INPUT[op], residual), (BIAS_INPUT.get(op), bias)):
        if v is not None:
            ins += [None] * (slot + 1 - len(ins))
            ins[slot] = v
    domain = "onnxc" if op == DWPW_OP else ""
    return Node(op, ins, [_v("y")], request_attrs(req) | (attrs or {}), domain=domain, name="n")


@pytest.mark.parametrize("op,act,residual,bias", [
    ("MatMul", Activation("Gelu:tanh"), True, True),
    ("MatMul", None, False, True),
    ("Conv", Activation("LeakyRelu", (0.2,)), True, False),
    ("Gemm", Activation("Clip", (-math.inf, 6.0)), False, False),
    ("Gemm", Activation("HardSigmoid", (0.1, 0.6)), True, False),
    (DWPW_OP, Activation("Swish", (1.5,)), True, False),
    ("Conv", None, False, False),
])
def test_round_trip(op, act, residual, bias):
    req = EpilogueRequest(act, RESIDUAL_INPUT[op] if residual else None, BIAS_INPUT[op] if bias else None)
    node = _node(op, req, _v("r") if residual else None, _v("b", (1, 1, 12)) if bias else None)
    assert parse_epilogue(node) == req
    assert parse_epilogue(node).active == (act is not None or residual or bias)
    assert (PARAMS_ATTR in node.attrs) == bool(act and act.params)


def test_dw_keys_round_trip_and_stay_apart():
    """DepthwisePointwise carries two activations under two key pairs; each parses on its own."""
    dw, pw = Activation("Clip", (0.0, 6.0)), Activation("Relu")
    node = _node(DWPW_OP, EpilogueRequest(pw), attrs=activation_attrs(dw, DW_ACT))
    assert parse_activation(node, DW_ACT) == dw and parse_activation(node) == pw
    assert parse_epilogue(node) == EpilogueRequest(pw)


def test_defaults_fill_in_and_bytes_decode():
    node = _node("Conv", EpilogueRequest(), attrs={ACT_ATTR: Attr(ACT_ATTR, "STRING", b"HardSigmoid"),
                                                   PARAMS_ATTR: Attr(PARAMS_ATTR, "FLOATS", [0.3])})
    assert parse_activation(node) == Activation("HardSigmoid", (0.3, 0.5))
    assert make_activation(node, "Clip") == Activation("Clip", (-math.inf, math.inf))
    assert make_activation(node, "LeakyRelu").params == (0.01,)
    empty = _node("Conv", EpilogueRequest(), attrs={ACT_ATTR: Attr(ACT_ATTR, "STRING", "")})
    assert parse_epilogue(empty) == EpilogueRequest() and not parse_epilogue(empty).active


def test_codegen_codes_every_activation():
    assert set(ACT_CODES) == set(ACTIVATIONS)
    assert sorted(ACT_CODES.values()) == list(range(1, len(ACTIVATIONS) + 1))


def _flag(name: str) -> dict:
    return {name: Attr(name, "INT", 1)}


@pytest.mark.parametrize("make,match", [
    (lambda: _node("Conv", EpilogueRequest(), attrs={ACT_ATTR: Attr(ACT_ATTR, "STRING", "Softsign")}),
     r"Conv 'n'.*onnxc_activation='Softsign' is not one of Relu, Clip"),
    (lambda: _node("Gemm", EpilogueRequest(Activation("LeakyRelu", (0.1, 0.2)))),
     r"LeakyRelu takes 1 parameter\(s\), got onnxc_activation_params=\[0.1, 0.2\]"),
    (lambda: _node("Conv", EpilogueRequest(), attrs=_flag(RESIDUAL_ATTR)),
     "onnxc_residual=1 but input 3 .the residual. is missing"),
    (lambda: _node("MatMul", EpilogueRequest(residual=2), residual=_v("r", (B, 6, 11))),
     r"residual input 2 has type float\[B, 6, 11\]; it must match the output's float\[B, 6, 12\]"),
    (lambda: _node("MatMul", EpilogueRequest(residual=2), residual=_v("r", dt=DType.DOUBLE)),
     r"residual input 2 has type double\[B, 6, 12\]"),
    (lambda: _node("Conv", EpilogueRequest(), attrs=_flag(BIAS_ATTR)),
     "onnxc_bias is only supported on MatMul, not Conv"),
    (lambda: _node("MatMul", EpilogueRequest(bias=3), bias=_v("b", (2, 12))),
     r"bias input 3 has type float\[2, 12\]; it must be a vector of float with one value per output column \(12\)"),
    (lambda: _node("MatMul", EpilogueRequest(), attrs=_flag(BIAS_ATTR)),
     "onnxc_bias=1 but input 3 .the bias. is missing"),
])
def test_malformed_requests_name_node_and_problem(make, match):
    with pytest.raises(UnsupportedOpError, match=match) as err:
        parse_epilogue(make())
    assert err.value.ops and err.value.ops[0][1] in N_OWN


def test_residual_on_an_op_without_a_slot():
    node = Node("Relu", [_v("x")], [_v("y")], _flag(RESIDUAL_ATTR), name="r")
    with pytest.raises(UnsupportedOpError, match=r"Relu 'r'.*onnxc_residual is only supported on Conv, Gemm"):
        parse_epilogue(node)
