"""Fold the float epilogue of a dynamically quantized convolution into its integer product.

onnxruntime's dynamic quantization writes each Conv as ``DynamicQuantizeLinear(x) -> ConvInteger ->
Cast(float) -> Mul(x_scale * w_scale) [-> Add(bias)]``, then the float ops after it (Relu, Clip...).
Executed as written, the int32 accumulators are written, read back by the Cast, written again as float
and read again by the multiply-add. One rewrite, along the chain while it applies:

- ``Cast(to=FLOAT)(ConvInteger(x, w, zx, zw))``, then ``Mul(., s)`` (either order), then optionally
  ``Add(., b)`` (either order), then optionally an activation (``fuse_epilogues.activation``: Relu,
  Clip with constant bounds, ...) -> ``onnxc::ConvIntegerToFloat(x, w, zx, zw, s, b)`` with the
  ConvInteger's attributes and the activation request of epilogue_spec (``ACT_ATTR``, ``PARAMS_ATTR``):
  ``y = act(float(acc) * s[m] + b[m])`` per output channel m.
  ``s``: float32, one value (computed at run time, as the product of the dynamic scale and the weight
  scale is) or a constant with one value per output channel; ``b``: a float32 constant of one value or
  one per output channel, stored as a vector of M values (0 when there is no Add).

Conditions: every intermediate value read by exactly one node and not a graph output; the Cast is the
ConvInteger output's only reader; a 2-D ConvInteger with a constant uint8/int8 weight, static channel
counts, and a group layout the integer kernels run (codegen/kernels/qconv_fast.py): at least
``MIN_GROUP_ROWS`` output channels per group and a constant (or absent) weight zero point (the integer
GEMM), or depthwise (one input and one output channel per group, at most ``MAX_DW_TAPS`` taps). The arithmetic is the graph's: ``float(acc) * s``
then ``+ b`` in float32 (the compiler may contract the two into one fused multiply-add: one rounding
fewer). Run after constant folding (the bias is a Reshape of a constant before it) and before
fuse_elementwise, which would otherwise take the Cast, Mul and Add.
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType, Value

from .base import PassResult, in_subgraphs
from .fuse_epilogues import activation
from .shapes.dynamic_quant import CONV_TO_FLOAT
from .shapes.epilogue_spec import activation_attrs

DOMAIN, OP = CONV_TO_FLOAT
MIN_GROUP_ROWS = 4  # codegen/kernels/qconv_fast.py
MAX_DW_TAPS = 256


def _std(n: Node | None, op: str) -> bool:
    return n is not None and n.op_type == op and n.domain in ("", "ai.onnx")


def _only_reader(v: Value, public: set[int]) -> tuple[Node, int] | None:
    uses = v.uses()
    if len(uses) != 1 or v.id in public:
        return None
    return uses[0]


def _f32(v: Value | None) -> bool:
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DType.FLOAT and v.shape is not None


def kernel_runs(conv: Node) -> bool:
    """Whether the integer kernels take ``conv`` (a ConvInteger) with a float epilogue (see the docstring)."""
    w = conv.input(1)
    wc = w.const if w is not None else None
    if not isinstance(wc, np.ndarray) or wc.dtype not in (np.uint8, np.int8) or wc.ndim != 4:
        return False
    x = conv.input(0)
    if x is None or x.shape is None or len(x.shape) != 4 or not isinstance(x.shape[1], int):
        return False
    group = int(conv.attr("group", 1))
    m, cg, kh, kw = wc.shape
    if group < 1 or m % group:
        return False
    if cg == 1 and m == group:
        return kh * kw <= MAX_DW_TAPS
    zw = conv.input(3)  # the GEMM packs the weights' zero points at compile time
    return m // group >= MIN_GROUP_ROWS and (zw is None or isinstance(zw.const, np.ndarray))


def _channel_values(v: Value, m: int, out_rank: int, const: bool) -> np.ndarray | None:
    """``v`` as one value (shape [1]) or M values along the output's channel axis, without broadcasting
    the output itself; None when it is neither (or, with ``const``, not a constant)."""
    if not _f32(v) or len(v.shape) > out_rank or not all(isinstance(d, int) for d in v.shape):
        return None
    shape = (1,) * (out_rank - len(v.shape)) + tuple(v.shape)
    c = v.const if isinstance(v.const, np.ndarray) else None
    if math.prod(shape) == 1:
        if const and c is None:
            return None
        return np.zeros(1, np.float32) if c is None else c.reshape(1).astype(np.float32)
    if c is None or shape[1] != m or math.prod(shape) != m:
        return None
    return c.reshape(m).astype(np.float32)


def _other(n: Node, idx: int) -> Value | None:
    return n.input(1 - idx) if len(n.inputs) == 2 and idx in (0, 1) else None


def _place_before(g: Graph, node: Node, user: Node, v: Value) -> None:
    """Move ``node`` right before ``user`` when ``v`` (about to become its input) is computed after it."""
    p = v.producer
    if p is not None and p.graph is g and g.nodes.index(p) > g.nodes.index(node):
        g.nodes.remove(node)
        g.nodes.insert(g.nodes.index(user), node)


def _set_input(node: Node, i: int, v: Value | None) -> None:
    while len(node.inputs) <= i:
        node.add_input(None)
    node.set_input(i, v)


def _fuse(g: Graph, conv: Node, public: set[int]) -> bool:
    m = conv.input(1).const.shape[0]
    r = _only_reader(conv.outputs[0], public)
    if r is None or not _std(r[0], "Cast") or int(r[0].attr("to", 0)) != DType.FLOAT.value:
        return False
    cast = r[0]
    y = cast.outputs[0]
    rank = len(y.shape) if y.shape is not None else 0
    r = _only_reader(y, public)
    if r is None or not _std(r[0], "Mul") or rank != 4:
        return False
    mul, idx = r
    s = _other(mul, idx)
    sv = _channel_values(s, m, rank, const=False) if s is not None else None
    if sv is None or mul.outputs[0].shape != y.shape:
        return False
    chain, end = [cast, mul], mul.outputs[0]
    bias = np.zeros(m, np.float32)
    r = _only_reader(end, public)
    if r is not None and _std(r[0], "Add") and r[0].outputs[0].shape == y.shape:
        b = _other(r[0], r[1])
        bv = _channel_values(b, m, rank, const=True) if b is not None else None
        if bv is not None:
            bias = np.broadcast_to(bv, (m,)).astype(np.float32)
            chain.append(r[0])
            end = r[0].outputs[0]
            r = _only_reader(end, public)
    act = activation(r[0]) if r is not None and r[1] == 0 and r[0].outputs[0].shape == y.shape else None
    if act is not None:
        chain.append(r[0])
        end = r[0].outputs[0]
    if sv.size > 1:  # a constant per channel, stored as a vector of M values
        s = g.constant(sv, g.fresh_name("dq_scale"))
    _place_before(g, conv, mul, s)
    for n in chain:
        g.remove(n)
    conv.op_type, conv.domain, conv.version = OP, DOMAIN, 1
    _set_input(conv, 4, s)
    _set_input(conv, 5, g.constant(bias, g.fresh_name("dq_bias")))
    conv.attrs.update(activation_attrs(act))
    conv.outputs[0] = end
    end.producer = conv
    return True


def _graph(g: Graph) -> bool:
    public = {v.id for v in g.outputs}
    changed = False
    for n in list(g.nodes):
        if n.graph is g and _std(n, "ConvInteger") and len(n.outputs) == 1 and kernel_runs(n):
            changed |= _fuse(g, n, public)
    return in_subgraphs(g, _graph) or changed


def fuse_integer_dequant(model: Model) -> PassResult:
    return PassResult(model, _graph(model.graph))

