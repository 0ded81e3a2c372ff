"""Lower QDQ groups to integer operators: QuantizeLinear/DequantizeLinear around an op become one op
on the quantized tensors, as onnxruntime's QDQ transformer does.

onnxruntime's quantization tools (``quantize_static`` in QDQ format) write every quantized op as
``DequantizeLinear`` of its inputs, the float op, and ``QuantizeLinear`` of its output. Executed as
written, that is float compute plus three conversions; the rewrites below compute on the 8-bit data:

- ``Q(Conv(DQ(x), DQ(w), bias))`` -> ``QLinearConv(x, w, bias')``: ``w`` a constant uint8/int8 weight
  with a per-tensor or per-output-channel (axis 0) scale; ``bias`` absent, ``DQ`` of a constant int32
  or a float constant, requantized once to int32 at the scale ``x_scale * w_scale`` (exact when its
  scale already is that, as the tools write it).
- ``Q(MatMul(DQ(a), DQ(b)))`` -> ``QLinearMatMul``: ``b`` a 2-D constant with a per-tensor or
  per-column (axis 1) scale, or a run-time tensor with a per-tensor one.
- With a ``Relu`` or ``Clip`` between the op and the ``Q``: the clamp moves after the integer op as
  ``Max(y, Q(0))`` / ``Clip(y, Q(lo), Q(hi))``: ``Q`` is monotone and saturating, so
  ``Q(relu(v)) = max(Q(v), Q(0))`` exactly.
- Without a single ``Q`` reader (a float output, or several readers): ``Conv`` -> ``ConvInteger``,
  ``MatMul`` / ``Gemm`` (alpha 1, transA 0, 2-D constant B) -> ``MatMulInteger``, each followed by
  ``Cast`` to float, ``Mul`` by ``x_scale * w_scale`` and ``Add`` of the bias: one fused elementwise
  loop after the integer product. A ``Q`` after such a ``Gemm`` stays and joins that loop.
- ``Q(op(DQ(x)))`` with the same constant scale and zero point on both sides, for ops that only move
  or select elements (MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, nearest
  Resize, Concat of such inputs) -> ``op(x)`` on the quantized tensor: exact.

The rewrites run before shape inference, whose constant folding would otherwise turn ``DQ(weight)``
into a float initializer; they read only constants and attributes. A group whose parameters do not
fit (float16 scales, blocked or per-axis activation scales, 4-bit weights, ...) stays as written and
runs in float. Results differ from the float graph by at most one quantization step per element: the
integer ops round once, the float graph rounds its products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxc.ir import Attr, DType, Graph, Model, Node, Value

from .base import PassResult, in_subgraphs

BYTES = (np.uint8, np.int8)
CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
MOVERS = frozenset({"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Resize",
                    "Concat"})


@dataclass
class DQ:
    """A DequantizeLinear's quantized input, its constant scale and zero point, and its axis."""

    node: Node
    q: Value
    scale: np.ndarray
    zp: np.ndarray
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1 and self.zp.size == 1

    def same(self, scale: np.ndarray, zp: np.ndarray) -> bool:
        return (self.per_tensor and scale.size == 1 and zp.size == 1 and zp.dtype == self.zp.dtype
                and float(scale.reshape(-1)[0]) == float(self.scale.reshape(-1)[0])
                and int(zp.reshape(-1)[0]) == int(self.zp.reshape(-1)[0]))


def _const(v: Value | None) -> np.ndarray | None:
    return v.const if v is not None and isinstance(v.const, np.ndarray) else None


def _std(n: Node | None, op: str) -> bool:
    return n is not None and n.op_type == op and n.domain in ("", "ai.onnx")


def _params(n: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """A Q/DQ node's constant float32 scale and 8-bit zero point, or None."""
    scale, zp = _const(n.input(1)), _const(n.input(2))
    if scale is None or zp is None or scale.dtype != np.float32 or zp.dtype not in BYTES:
        return None
    if int(n.attr("block_size", 0) or 0) or scale.shape != zp.shape or scale.ndim > 1:
        return None
    return scale, zp


def dq_of(v: Value | None) -> DQ | None:
    """The DequantizeLinear producing ``v`` when its parameters are constant 8-bit ones."""
    n = v.producer if v is not None else None
    if not _std(n, "DequantizeLinear"):
        return None
    p = _params(n)
    if p is None:
        return None
    return DQ(n, n.inputs[0], p[0], p[1], int(n.attr("axis", 1)))


def _only_reader(v: Value) -> Node | None:
    uses = v.uses()
    g = v.graph
    if len(uses) != 1 or (g is not None and v in g.outputs):
        return None
    return uses[0][0]


@dataclass
class Tail:
    """What follows an op up to its single QuantizeLinear: an optional clamp, then the Q."""

    q: Node
    scale: np.ndarray
    zp: np.ndarray
    clamp: Node | None


def _tail(y: Value) -> Tail | None:
    n = _only_reader(y)
    clamp = None
    if n is not None and (_std(n, "Relu") or _std(n, "Clip")):
        clamp, n = n, _only_reader(n.outputs[0])
    if not _std(n, "QuantizeLinear") or n.input(0) is not (clamp.outputs[0] if clamp else y):
        return None
    p = _params(n)
    if p is None or p[0].size != 1 or n.attr("output_dtype", 0):
        return None
    if clamp is not None and _clip_bounds(clamp) is None:
        return None
    return Tail(n, p[0], p[1], clamp)


def _clip_bounds(n: Node) -> tuple[float, float] | None:
    if n.op_type == "Relu":
        return 0.0, float("inf")
    if n.version < 11:
        return float(n.attr("min", -3.4028234663852886e38)), float(n.attr("max", 3.4028234663852886e38))
    lo, hi = (_const(n.input(i)) if n.input(i) is not None else np.float32(np.inf * (i * 2 - 3))
              for i in (1, 2))
    if lo is None or hi is None:
        return None
    return float(np.asarray(lo).reshape(-1)[0]), float(np.asarray(hi).reshape(-1)[0])


def quantize_value(v: float, scale: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """QuantizeLinear of one float: saturate(rint(v / scale) + zp), as an array of zp's type."""
    info = np.iinfo(zp.dtype)
    r = np.clip(np.rint(np.float64(v) / np.float64(scale.reshape(-1)[0])) + int(zp.reshape(-1)[0]),
                info.min, info.max)
    return np.asarray(r, dtype=zp.dtype)


class Emitter:
    """New nodes inserted before an anchor node, at the anchor's opset version."""

    def __init__(self, anchor: Node):
        self.anchor, self.g = anchor, anchor.graph
        self.version = max(anchor.version or 0, 13)

    def const(self, a: np.ndarray, base: str) -> Value:
        return self.g.constant(np.ascontiguousarray(a), self.g.fresh_name(base))

    def op(self, op: str, ins: list[Value | None], base: str, out: Value | None = None,
           attrs: dict[str, Attr] | None = None, version: int | None = None) -> Value:
        y = out if out is not None else Value(self.g.fresh_name(base))
        self.g.insert_before(self.anchor, Node(op, ins, [y], attrs, name=self.g.fresh_name(base),
                                               version=version or self.version))
        return y


def _qlinear_inputs(a: DQ, b: DQ, t: Tail) -> list[Value | None]:
    """QLinearConv / QLinearMatMul's first eight inputs: each operand with its scale and zero point, then
    the output's."""
    return [a.q, a.node.input(1), a.node.input(2), b.q, b.node.input(1), b.node.input(2), t.q.input(1), t.q.input(2)]


def _emit_quantized(e: Emitter, t: Tail, op: str, ins: list[Value | None], attrs: dict[str, Attr]) -> None:
    """The integer op writing the tail's Q output, through the tail's clamp in the quantized domain:
    ``Max(y, Q(0))`` for Relu, ``Clip(y, Q(lo), Q(hi))`` for Clip."""
    out = t.q.outputs[0]
    y = e.op(op, ins, "qdq_" + op, out=None if t.clamp else out, attrs=attrs, version=max(e.version, 10))
    if t.clamp is not None:
        lo, hi = _clip_bounds(t.clamp)
        qlo = e.const(quantize_value(lo, t.scale, t.zp), "qdq_lo")
        if hi == float("inf"):
            e.op("Max", [y, qlo], "qdq_relu", out=out)
        else:
            e.op("Clip", [y, qlo, e.const(quantize_value(hi, t.scale, t.zp), "qdq_hi")], "qdq_clip", out=out)
    _detach_q(t)


def _detach_q(t: Tail) -> None:
    """Remove the tail's Q (and clamp) nodes once their output has its new producer."""
    _drop(t.q)
    if t.clamp is not None:
        _drop(t.clamp)


def _drop(n: Node) -> None:
    """Remove ``n`` from its graph; its outputs get new producers or die with it."""
    n.graph.remove(n)
    n.graph, n.outputs = None, []


def _bias_real(v: Value | None, channels: int) -> np.ndarray | None:
    """The float64 values of a bias input: a float constant, or DQ of a constant int32 tensor; None
    when it is neither (the group then stays float). An absent bias is zeros."""
    if v is None:
        return np.zeros(channels)
    c = _const(v)
    if c is not None and c.dtype in (np.float32, np.float64) and c.size == channels:
        return c.reshape(-1).astype(np.float64)
    n = v.producer
    if not _std(n, "DequantizeLinear") or int(n.attr("block_size", 0) or 0):
        return None
    q, s = _const(n.input(0)), _const(n.input(1))
    z = _const(n.input(2)) if n.input(2) is not None else np.zeros(1, np.int32)
    if q is None or s is None or z is None or q.dtype != np.int32 or q.size != channels:
        return None
    if s.dtype != np.float32 or s.size not in (1, channels) or z.size not in (1, channels) or np.any(z != 0):
        return None
    return q.reshape(-1).astype(np.float64) * s.reshape(-1).astype(np.float64)


def _bias_int32(real: np.ndarray, acc_scale: np.ndarray) -> np.ndarray:
    """The bias at the accumulator's scale (x_scale * w_scale per channel), rounded once."""
    info = np.iinfo(np.int32)
    return np.clip(np.rint(real / acc_scale.astype(np.float64)), info.min, info.max).astype(np.int32)


def _acc_scale(x: DQ, w: DQ, channels: int) -> np.ndarray:
    """x_scale * w_scale per output channel, in float32 as the tools compute the bias scale."""
    return np.broadcast_to(x.scale.reshape(-1)[0] * w.scale.reshape(-1), (channels,)).astype(np.float32)


def _weight_ok(w: DQ | None, channels: int, axis: int, rank: int) -> bool:
    if w is None or _const(w.q) is None or w.q.const.dtype not in BYTES or w.q.const.ndim != rank:
        return False
    if w.per_tensor:
        return True
    return w.scale.size == channels and w.axis in (axis, axis - rank)


def _lower_conv(conv: Node) -> bool:
    x, w = dq_of(conv.input(0)), dq_of(conv.input(1))
    if x is None or not x.per_tensor or w is None or _const(w.q) is None:
        return False
    wq = w.q.const
    channels = wq.shape[0] if wq.ndim >= 3 else 0
    if not channels or not _weight_ok(w, channels, 0, wq.ndim) or set(conv.attrs) - set(CONV_ATTRS):
        return False
    real = _bias_real(conv.input(2), channels)
    if real is None:
        return False
    acc = _acc_scale(x, w, channels)
    attrs = {k: conv.attrs[k] for k in CONV_ATTRS if k in conv.attrs}
    y = conv.outputs[0]
    t = _tail(y)
    if t is not None:
        e = Emitter(t.q)
        ins = _qlinear_inputs(x, w, t)
        if conv.input(2) is not None:
            ins.append(e.const(_bias_int32(real, acc), "qdq_bias"))
        _emit_quantized(e, t, "QLinearConv", ins, attrs)
        _drop(conv)
        return True
    e = Emitter(conv)
    shape = (1, channels) + (1,) * (wq.ndim - 2)
    acc_y = e.op("ConvInteger", [x.q, w.q, x.node.input(2), w.node.input(2)], "qdq_conv", attrs=attrs,
                 version=max(e.version, 10))
    _dequantize_into(e, acc_y, acc.reshape(shape), real.reshape(shape), conv.input(2) is not None, y)
    _drop(conv)
    return True


def _dequantize_into(e: Emitter, acc_y: Value, scale: np.ndarray, bias: np.ndarray, has_bias: bool,
                     out: Value) -> None:
    """out = float(acc_y) * scale (+ bias): the float result of an integer product."""
    f = e.op("Cast", [acc_y], "qdq_float", attrs={"to": Attr("to", "INT", DType.FLOAT.value)})
    if not has_bias:
        e.op("Mul", [f, e.const(scale.astype(np.float32), "qdq_scale")], "qdq_dq", out=out)
        return
    m = e.op("Mul", [f, e.const(scale.astype(np.float32), "qdq_scale")], "qdq_dq")
    e.op("Add", [m, e.const(bias.astype(np.float32), "qdq_bias")], "qdq_bias_add", out=out)


def _lower_matmul(mm: Node) -> bool:
    a, b = dq_of(mm.input(0)), dq_of(mm.input(1))
    if a is None or not a.per_tensor or b is None:
        return False
    bq = _const(b.q)
    if bq is None:
        if not b.per_tensor:
            return False
        channels = 1
    else:
        if bq.ndim != 2 or bq.dtype not in BYTES:
            return False
        channels = bq.shape[1]
        if not _weight_ok(b, channels, 1, 2):
            return False
    y = mm.outputs[0]
    t = _tail(y)
    if t is not None:
        _emit_quantized(Emitter(t.q), t, "QLinearMatMul", _qlinear_inputs(a, b, t), {})
        _drop(mm)
        return True
    if bq is None:
        return False  # two run-time operands with a float result: stays float
    e = Emitter(mm)
    acc_y = e.op("MatMulInteger", [a.q, b.q, a.node.input(2), b.node.input(2)], "qdq_matmul",
                 version=max(e.version, 10))
    _dequantize_into(e, acc_y, _acc_scale(a, b, channels), np.zeros(channels), False, y)
    _drop(mm)
    return True


def _lower_gemm(gemm: Node) -> bool:
    """Gemm(DQ(a), DQ(B const)[, C]) with alpha 1, transA 0 -> MatMulInteger and a float epilogue."""
    if float(gemm.attr("alpha", 1.0)) != 1.0 or int(gemm.attr("transA", 0)):
        return False
    a, b = dq_of(gemm.input(0)), dq_of(gemm.input(1))
    if a is None or not a.per_tensor or b is None or _const(b.q) is None or b.q.const.ndim != 2:
        return False
    trans = int(gemm.attr("transB", 0))
    bq = b.q.const.T if trans else b.q.const
    channels = bq.shape[1]
    if bq.dtype not in BYTES or not _weight_ok(b, channels, 0 if trans else 1, 2):
        return False
    c = gemm.input(2)
    real = _bias_real(c, channels) if c is not None else np.zeros(channels)
    if real is None or (c is not None and float(gemm.attr("beta", 1.0)) != 1.0):
        return False
    e = Emitter(gemm)
    wq = e.const(np.ascontiguousarray(bq), "qdq_weight")
    zp = b.zp.reshape(-1) if b.zp.size > 1 else b.zp
    acc_y = e.op("MatMulInteger", [a.q, wq, a.node.input(2), e.const(zp, "qdq_wzp")], "qdq_gemm",
                 version=max(e.version, 10))
    _dequantize_into(e, acc_y, _acc_scale(a, b, channels), real, c is not None, gemm.outputs[0])
    _drop(gemm)
    return True


def _lower_mover(n: Node) -> bool:
    """Q(op(DQ(x))) with equal parameters on both sides -> op(x), for element-moving ops."""
    if n.op_type not in MOVERS or n.domain not in ("", "ai.onnx") or not n.outputs:
        return False
    if n.op_type == "Resize" and n.attr("mode", b"nearest") not in ("nearest", b"nearest"):
        return False
    if n.op_type == "MaxPool" and (len(n.outputs) > 1 and n.outputs[1].uses()):
        return False
    data = range(len(n.inputs)) if n.op_type == "Concat" else (0,)
    dqs = [dq_of(n.input(i)) for i in data]
    q = _only_reader(n.outputs[0])
    if not _std(q, "QuantizeLinear") or any(d is None for d in dqs) or q.attr("output_dtype", 0):
        return False
    p = _params(q)
    if p is None or not all(d.same(*p) for d in dqs):
        return False
    for i, d in zip(data, dqs):
        n.set_input(i, d.q)
    out = q.outputs[0]
    _drop(q)
    old = n.outputs[0]
    n.outputs[0] = out
    out.producer = n
    old.producer = None
    return True


def _graph(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        if n.graph is not g or n.domain not in ("", "ai.onnx"):
            continue
        rule = {"Conv": _lower_conv, "MatMul": _lower_matmul, "Gemm": _lower_gemm}.get(n.op_type, _lower_mover)
        changed |= rule(n)
    return in_subgraphs(g, _graph) or changed


def lower_qdq(model: Model) -> PassResult:
    changed = _graph(model.graph)
    return PassResult(model, changed)
