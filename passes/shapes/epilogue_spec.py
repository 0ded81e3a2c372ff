"""The epilogue contract between the fusion passes and the product kernels, written once.

passes/fuse_epilogues.py and passes/fuse_depthwise_pointwise.py ask a Conv, Gemm, MatMul or
onnxc::DepthwisePointwise to finish its output tiles with ``act(y + bias + R)``; the kernels
(codegen/kernels/epilogue.py and the product kernels that call it) serve the request. The request
travels as node attributes that ONNX models never carry (so a model file may carry them too):

- ``ACT_ATTR`` (string): one of ``ACTIVATIONS``, applied last; ``Gelu:tanh`` is Gelu with
  ``approximate="tanh"``;
- ``PARAMS_ATTR`` (floats): the activation's parameters in ONNX order, ONNX defaults when left out
  (Clip ``[min, max]`` with -inf / inf for an absent bound, LeakyRelu ``[alpha]``, ...);
- ``RESIDUAL_ATTR`` (int, 1 = on): one more input R at ``RESIDUAL_INPUT[op]``, right after the op's
  own inputs (Conv and Gemm: input 3, with input 2 possibly absent; MatMul: 2; DepthwisePointwise: 5),
  of exactly the output's type, added before the activation;
- ``BIAS_ATTR`` (int, 1 = on; MatMul only): one more input at ``BIAS_INPUT[op]``, after the residual
  slot, a vector of the output's element type with one value per output column (``[N]`` or
  ``[1, ..., 1, N]``), added first;
- ``SCALE_ATTR`` (int, 1 = on; pointwise Conv only, passes/fuse_input_scale.py): one more input S at
  ``SCALE_INPUT``, after the residual slot, of shape ``[N or 1, C, 1, 1]``: the product reads
  ``X[n, c] * S[n, c]`` (a squeeze-excite scale), applied to the filter of each image instead;
- ``DW_ACT_ATTR`` / ``DW_PARAMS_ATTR``: DepthwisePointwise's second activation, the one of its
  depthwise half, spelled like ``ACT_ATTR`` / ``PARAMS_ATTR``; ``EX_ACT_ATTR`` / ``EX_PARAMS_ATTR``: the
  activation of its expanding pointwise Conv, when it has one (inputs ``EXPAND_INPUT``).

:func:`parse_epilogue` reads a node's request into an :class:`EpilogueRequest` (UnsupportedOpError
on one no kernel can serve); :func:`request_attrs` writes one. The C codes of the activations stay in
codegen (codegen/kernels/epilogue.py ``ACT_CODES``, runtime_c/onnxc_act.h).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onnxc.ir import Node, TensorType, UnsupportedOpError, Value
from onnxc.ir.graph import Attr

ACT_ATTR = "onnxc_activation"
PARAMS_ATTR = "onnxc_activation_params"
RESIDUAL_ATTR = "onnxc_residual"
BIAS_ATTR = "onnxc_bias"
SCALE_ATTR = "onnxc_input_scale"
DW_ACT_ATTR = "onnxc_dw_activation"
DW_PARAMS_ATTR = "onnxc_dw_activation_params"
EX_ACT_ATTR = "onnxc_ex_activation"
EX_PARAMS_ATTR = "onnxc_ex_activation_params"

DWPW_DOMAIN, DWPW_OP = "onnxc", "DepthwisePointwise"  # passes/fuse_depthwise_pointwise.py
EXPAND_INPUT = 6  # DepthwisePointwise's expanding pointwise filter (its bias at EXPAND_INPUT + 1)

# activation -> its parameters as (ONNX attribute name, default), in ONNX order
ACTIVATIONS: dict[str, tuple[tuple[str, float], ...]] = {
    "Relu": (),
    "Clip": (("min", -math.inf), ("max", math.inf)),
    "LeakyRelu": (("alpha", 0.01),),
    "Sigmoid": (),
    "HardSigmoid": (("alpha", 0.2), ("beta", 0.5)),
    "HardSwish": (),
    "Tanh": (),
    "Swish": (("alpha", 1.0),),
    "Gelu": (),
    "Gelu:tanh": (),
    "Mish": (),
}

# input index of the residual R per op: right after the op's own inputs
RESIDUAL_INPUT = {"Conv": 3, "Gemm": 3, "MatMul": 2, DWPW_OP: 5}
# input index of the per-column bias of the ops that take BIAS_ATTR (after the residual slot)
BIAS_INPUT = {"MatMul": 3}
# input index of the per-image, per-channel input scale of the ops that take SCALE_ATTR (after the residual slot)
SCALE_INPUT = {"Conv": 4}


@dataclass(frozen=True)
class ActivationKeys:
    """The attribute pair naming one activation of a node."""

    name: str
    params: str


PRODUCT_ACT = ActivationKeys(ACT_ATTR, PARAMS_ATTR)
DW_ACT = ActivationKeys(DW_ACT_ATTR, DW_PARAMS_ATTR)
EX_ACT = ActivationKeys(EX_ACT_ATTR, EX_PARAMS_ATTR)


@dataclass(frozen=True)
class Activation:
    """One requested activation: a name of ACTIVATIONS and all of its parameters (defaults filled in)."""

    name: str
    params: tuple[float, ...] = ()


@dataclass(frozen=True)
class EpilogueRequest:
    """What a node's output gets after the product: ``act(y + bias + R)``."""

    activation: Activation | None = None
    residual: int | None = None  # input index of R
    bias: int | None = None      # input index of the per-column bias

    @property
    def active(self) -> bool:
        return self.activation is not None or self.residual is not None or self.bias is not None


def _unsupported(node: Node, msg: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{node.describe()}: {msg}", [(node.domain or "ai.onnx", node.op_type, node.version)])


def make_activation(node: Node, name: str, params: list[float] | tuple[float, ...] = (),
                    what: str = PARAMS_ATTR) -> Activation:
    """``name`` with ``params`` completed by the defaults; UnsupportedOpError when there are too many."""
    spec = ACTIVATIONS[name]
    given = [float(p) for p in params]
    if len(given) > len(spec):
        raise _unsupported(node, f"{name} takes {len(spec)} parameter(s), got {what}={given}")
    return Activation(name, tuple(given) + tuple(d for _, d in spec[len(given):]))


def parse_activation(node: Node, keys: ActivationKeys = PRODUCT_ACT) -> Activation | None:
    """The activation ``node`` requests under ``keys``, or None; UnsupportedOpError on one no kernel has."""
    name = node.attr(keys.name, None)
    if isinstance(name, bytes):
        name = name.decode()
    if not name:
        return None
    if name not in ACTIVATIONS:
        raise _unsupported(node, f"{keys.name}={name!r} is not one of {', '.join(ACTIVATIONS)}")
    return make_activation(node, name, node.attr(keys.params, None) or (), keys.params)


def _same_type(v: Value, y: Value) -> bool:
    return isinstance(v.type, TensorType) and isinstance(y.type, TensorType) and v.dtype == y.dtype \
        and v.shape is not None and y.shape is not None and tuple(v.shape) == tuple(y.shape)


def _residual(node: Node) -> int | None:
    if not int(node.attr(RESIDUAL_ATTR, 0) or 0):
        return None
    if node.op_type not in RESIDUAL_INPUT:
        raise _unsupported(node, f"{RESIDUAL_ATTR} is only supported on {', '.join(RESIDUAL_INPUT)}")
    i = RESIDUAL_INPUT[node.op_type]
    r, y = node.input(i), node.outputs[0]
    if r is None:
        raise _unsupported(node, f"{RESIDUAL_ATTR}=1 but input {i} (the residual) is missing")
    if not _same_type(r, y):
        raise _unsupported(node, f"the residual input {i} has type {r.type}; it must match the output's {y.type}")
    return i


def _is_column_vector(b: Value, y: Value) -> bool:
    """Whether ``b`` holds one value per column of ``y``: shape [N] or [1, ..., 1, N], y's element type."""
    bs, ys = b.shape, y.shape
    if b.dtype != y.dtype or not bs or not ys or len(bs) > len(ys):
        return False
    return all(d == 1 for d in bs[:-1]) and bs[-1] == ys[-1]


def _bias(node: Node) -> int | None:
    if not int(node.attr(BIAS_ATTR, 0) or 0):
        return None
    if node.op_type not in BIAS_INPUT:
        raise _unsupported(node, f"{BIAS_ATTR} is only supported on {', '.join(BIAS_INPUT)}, not {node.op_type}")
    i = BIAS_INPUT[node.op_type]
    b, y = node.input(i), node.outputs[0]
    if b is None:
        raise _unsupported(node, f"{BIAS_ATTR}=1 but input {i} (the bias) is missing")
    if not _is_column_vector(b, y):
        n = y.shape[-1] if y.shape else 1
        raise _unsupported(node, f"the bias input {i} has type {b.type}; it must be a vector of {y.dtype.short} "
                                 f"with one value per output column ({n})")
    return i


def parse_epilogue(node: Node) -> EpilogueRequest:
    """The epilogue ``node`` requests (see the module doc); UnsupportedOpError naming the node on a
    malformed request (an unknown activation, too many parameters, a missing or mistyped input)."""
    return EpilogueRequest(parse_activation(node), _residual(node), _bias(node))


def activation_attrs(act: Activation | None, keys: ActivationKeys = PRODUCT_ACT) -> dict[str, Attr]:
    """The attributes requesting ``act`` under ``keys`` (none for None; no parameter list when it has none)."""
    if act is None:
        return {}
    out = {keys.name: Attr(keys.name, "STRING", act.name)}
    if act.params:
        out[keys.params] = Attr(keys.params, "FLOATS", list(act.params))
    return out


def request_attrs(req: EpilogueRequest) -> dict[str, Attr]:
    """The attributes requesting ``req`` (its inputs go at RESIDUAL_INPUT / BIAS_INPUT of the op)."""
    out = activation_attrs(req.activation)
    for flag, on in ((RESIDUAL_ATTR, req.residual), (BIAS_ATTR, req.bias)):
        if on is not None:
            out[flag] = Attr(flag, "INT", 1)
    return out


def is_pointwise_conv(node: Node) -> bool:
    """Whether Conv ``node`` is 1x1 of group 1 with unit strides and dilations and no padding (a 4-D filter)."""
    ws = node.input(1).shape if node.input(1) is not None else None
    if ws is None or len(ws) != 4 or tuple(ws[2:]) != (1, 1) or int(node.attr("group", 1)) != 1:
        return False
    return (node.attr("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET")
            and all(int(v) == 1 for v in node.attr("strides", None) or [1, 1])
            and all(int(v) == 1 for v in node.attr("dilations", None) or [1, 1])
            and all(int(v) == 0 for v in node.attr("pads", None) or [0, 0, 0, 0]))


def input_scale(node: Node) -> int | None:
    """The input index of the scale S ``node`` requests (SCALE_ATTR), or None; UnsupportedOpError when the node
    is not a pointwise group-1 Conv or S is not ``[N or 1, C, 1, 1]`` of X's element type."""
    if not int(node.attr(SCALE_ATTR, 0) or 0):
        return None
    if node.op_type not in SCALE_INPUT:
        raise _unsupported(node, f"{SCALE_ATTR} is only supported on {', '.join(SCALE_INPUT)}")
    i = SCALE_INPUT[node.op_type]
    sv, x = node.input(i), node.input(0)
    if sv is None:
        raise _unsupported(node, f"{SCALE_ATTR}=1 but input {i} (the scale) is missing")
    if not is_pointwise_conv(node):
        raise _unsupported(node, f"{SCALE_ATTR} needs a 1x1 Conv of group 1, unit strides and no padding")
    ss, xs = sv.shape, x.shape if x is not None else None
    if (ss is None or xs is None or len(ss) != 4 or sv.dtype != x.dtype or tuple(ss[2:]) != (1, 1)
            or ss[1] != xs[1] or not (ss[0] == xs[0] or ss[0] == 1)):
        raise _unsupported(node, f"the scale input {i} has type {sv.type}; it must be [N or 1, C, 1, 1] for X {x.type}")
    return i
