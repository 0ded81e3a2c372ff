"""Fold the bias add, residual add and activation after a Conv, Gemm or MatMul into the product.

The float32 Conv, Gemm and MatMul kernels apply an epilogue to each output tile while it is in cache
(the request's attributes and input slots: passes/shapes/epilogue_spec.py; served by
codegen/kernels/epilogue.py); the GEMV path (codegen/kernels/gemv.py, :func:`gemv_dims`) does the same per
panel. This pass turns the ops after a product into those requests, so the output is written once
instead of being re-read by one more kernel per op. Rewrites, repeated along the chain while they
apply (``P`` is the product, ``t`` its output):

- ``Add(t, b)`` (either order; a two-input ``Sum`` is the same) where ``b`` is a broadcast bias and P
  has none yet: a float32 constant of shape ``[M, 1, ...]`` (up to leading 1s) into a Conv with ``M``
  output channels becomes its bias input B; any float32 value unidirectionally broadcastable to the
  ``[M, N]`` output of a Gemm (opset >= 11, where C is optional) becomes its C with ``beta = 1``; a
  MatMul of a 2-D A and a 2-D B becomes that Gemm; a float32 constant of shape ``[N]`` or
  ``[1, ..., 1, N]`` after a MatMul of an A of rank >= 3 (3-D activations of transformers, symbolic
  batch and sequence dims allowed) and a 2-D B becomes its bias input (``BIAS_ATTR``, input 3, after the
  residual slot). Only before any other epilogue;
- ``Add(t, R)`` (either order) with R of exactly t's type (no broadcasting): R becomes the residual
  input (Conv and Gemm: input 3, MatMul: input 2), added before the activation;
- ``Relu | Tanh | Sigmoid | HardSwish | Mish(t)`` -> the activation ``<op>``; ``LeakyRelu(alpha)``,
  ``HardSigmoid(alpha, beta)``, ``Swish(alpha)`` -> the same with their parameters; ``Gelu`` ->
  ``Gelu`` or ``Gelu:tanh`` (``approximate``); ``Clip`` with constant (or absent) bounds -> ``Clip``
  with ``[min, max]``. The activation ends the chain. Gated activations spelled out op by op
  (``t * Sigmoid(t)``, GELU's formulas, ...) are single nodes by then (passes/name_activations.py).

Conditions: P in the default domain, float32 output (every float32 path of the three kernels applies
the epilogue: pointwise, im2col/rows and depthwise Conv, GEMV, blocked and batched GEMM), no epilogue
requested yet; ``t`` read by exactly one node, in the same graph, and not a graph output. The last
op's output value (its name, its place among the graph outputs) is kept, now produced by P; an Add
must not broadcast t itself. When a new input of P is computed after P, P moves to just before the
Add, so that every input is defined before it.
Run after fold_batchnorm (which only folds into products without an epilogue) and before
fuse_elementwise (which would otherwise take the adds and activations).
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, TensorType, Value
from onnxc.ir.graph import Attr

from .base import PassResult
from .shapes.epilogue_spec import (
    ACT_ATTR,
    ACTIVATIONS,
    BIAS_ATTR,
    BIAS_INPUT,
    RESIDUAL_ATTR,
    RESIDUAL_INPUT,
    Activation,
    EpilogueRequest,
    activation_attrs,
    parse_epilogue,
    request_attrs,
)

PRODUCTS = ("Conv", "Gemm", "MatMul")  # the default-domain ops whose kernels serve an epilogue
GEMV_MMAX = 8  # largest row count of the GEMV path (ONNXC_GV_MMAX in runtime_c/onnxc_gemv.h)
FLT_MAX = float(np.finfo(np.float32).max)  # Clip-6's default bounds


def _static_shape(v: Value | None) -> tuple[int, ...] | None:
    t = None if v is None else v.type
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def gemv_dims(node: Node) -> tuple[int, int, int] | None:
    """(M, K, N) when ``node`` (Gemm or MatMul) runs on the GEMV path, else None: float32 output, B a
    2-D float32 constant, A's rows (all leading axes of a MatMul's A) static and at most GEMV_MMAX; a
    transposed A only when it is a single row. The kernel (codegen/kernels/gemv.py) uses the same test."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Gemm", "MatMul") or not node.outputs:
        return None
    a, b = node.input(0), node.input(1)
    out = node.outputs[0].type
    if not isinstance(out, TensorType) or out.dtype != DType.FLOAT or a is None or b is None:
        return None
    if b.const is None or b.dtype != DType.FLOAT:
        return None
    bs, as_ = _static_shape(b), _static_shape(a)
    if bs is None or len(bs) != 2 or as_ is None or not as_:
        return None
    if node.op_type == "Gemm":
        if len(as_) != 2:
            return None
        ta, tb = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
        m, k = (as_[1], as_[0]) if ta else as_
        if ta and m != 1:
            return None
        n = bs[0] if tb else bs[1]
    else:
        m, k, n = math.prod(as_[:-1]), as_[-1], bs[1]
    if not 1 <= m <= GEMV_MMAX or n < 1:
        return None
    return m, k, n


def _scalar(v: Value | None) -> float | None:
    if v is None:
        return None
    if v.const is None or np.size(v.const) != 1:
        raise ValueError("bound computed at run time")
    return float(np.asarray(v.const).reshape(-1)[0])


def activation(node: Node) -> Activation | None:
    """The epilogue activation that computes ``node`` on float32, or None when it cannot be one."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1 or not _is_f32(node.input(0)) \
            or not _is_f32(node.outputs[0]):
        return None
    op = node.op_type
    if op == "Gelu":
        approx = node.attr("approximate", "none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        return {"none": Activation("Gelu"), "tanh": Activation("Gelu:tanh")}.get(approx)
    if op == "Clip":
        bounds = _clip_bounds(node)
        return None if bounds is None else Activation(op, bounds)
    if op in ACTIVATIONS:  # an ONNX op whose attributes are the parameters, with the same defaults
        return Activation(op, tuple(float(node.attr(name, dflt)) for name, dflt in ACTIVATIONS[op]))
    return None


def _clip_bounds(node: Node) -> tuple[float, float] | None:
    """Clip's (min, max), +-inf for an absent bound; None when a bound is computed at run time."""
    if node.version < 11:  # bounds as attributes; Clip-6 defaults to the float range, Clip-1 to none
        dflt = FLT_MAX if node.version >= 6 else math.inf
        lo, hi = node.attr("min", -dflt), node.attr("max", dflt)
    else:
        try:
            lo, hi = _scalar(node.input(1)), _scalar(node.input(2))
        except ValueError:
            return None
    return -math.inf if lo is None else float(lo), math.inf if hi is None else float(hi)


def _is_f32(v: Value | None) -> bool:
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DType.FLOAT


def _has_epilogue(node: Node) -> bool:
    """Whether ``node`` already asks for an activation or a residual (UnsupportedOpError when its request
    is malformed: the attributes may come from a model file)."""
    req = parse_epilogue(node)
    return req.activation is not None or req.residual is not None


def is_product(node: Node) -> bool:
    """Whether ``node`` is a Conv / Gemm / MatMul whose kernel applies a requested epilogue (float32)."""
    return (node.domain in ("", "ai.onnx") and node.op_type in PRODUCTS and len(node.outputs) == 1
            and _is_f32(node.outputs[0]) and _is_f32(node.input(0)) and _is_f32(node.input(1))
            and all(v.shape is not None for v in (node.outputs[0], node.input(0), node.input(1))))


def _reader(t: Value, g: Graph, public: set[int]) -> tuple[Node, int] | None:
    """The one (node, input index) reading ``t`` when t is private to that node in graph ``g``."""
    uses = t.uses()
    if len(uses) != 1 or t.id in public:
        return None
    node, idx = uses[0]
    return (node, idx) if node.graph is g else None


def _add_operand(add: Node, idx: int) -> Value | None:
    """The other operand of a float32 two-input Add (or Sum) whose input ``idx`` is the product's output."""
    if add.op_type not in ("Add", "Sum") or add.domain not in ("", "ai.onnx") or len(add.inputs) != 2 \
            or len(add.outputs) != 1 or not _is_f32(add.outputs[0]):
        return None
    other = add.inputs[1 - idx]
    return other if _is_f32(other) else None


def _conv_bias(node: Node, t: Value, other: Value) -> np.ndarray | None:
    """``other`` as the [M] bias of a bias-less Conv, when it is a constant of shape [M, 1, ...]."""
    if node.op_type != "Conv" or node.input(2) is not None or other.const is None:
        return None
    shape = tuple(np.shape(other.const))
    m, rank = t.shape[1], len(t.shape)
    if not isinstance(m, int) or len(shape) > rank:
        return None
    full = (1,) * (rank - len(shape)) + shape
    if full[1] != m or any(d != 1 for i, d in enumerate(full) if i != 1):
        return None
    return np.asarray(other.const, dtype=np.float32).reshape(m)


def _gemm_c(node: Node, t: Value, other: Value) -> bool:
    """Whether ``other`` can be the C of this bias-less Gemm (or of a 2-D MatMul made a Gemm):
    unidirectionally broadcastable to the [M, N] output."""
    if node.op_type not in ("Gemm", "MatMul") or node.version < 11 or node.input(2) is not None:
        return False
    if node.op_type == "MatMul":
        a, b = node.input(0), node.input(1)
        if len(a.shape) != 2 or len(b.shape) != 2:
            return False
    shape = tuple(other.shape)
    if len(shape) > 2:
        return False
    full = (1,) * (2 - len(shape)) + shape
    return all(d == 1 or d == o for d, o in zip(full, t.shape))


def _matmul_bias(node: Node, t: Value, other: Value) -> np.ndarray | None:
    """``other`` as the [N] bias (``BIAS_ATTR``) of a MatMul of A (rank >= 3; a 2-D MatMul becomes a Gemm
    instead, from opset 11 on) and a 2-D B, when it is a constant of shape [N] or [1, ..., 1, N] (N the
    output's last dim, not broadcast from 1)."""
    if node.op_type != "MatMul" or other.const is None or node.attr(BIAS_ATTR, 0):
        return None
    a, b = node.input(0), node.input(1)
    if len(a.shape) < 3 or len(b.shape) != 2:
        return None
    shape = tuple(np.shape(other.const))
    n = t.shape[-1]
    if not shape or len(shape) > len(t.shape) or any(d != 1 for d in shape[:-1]) or shape[-1] != n:
        return None
    return np.asarray(other.const, dtype=np.float32).reshape(shape[-1])


def _place_before(g: Graph, node: Node, user: Node, v: Value) -> None:
    """Move ``node`` right before ``user`` when ``v`` (about to become an input of node) is computed
    after node; node's own inputs are all computed before its old place, hence before ``user``."""
    p = v.producer
    if p is not None and p.graph is g and g.nodes.index(p) > g.nodes.index(node):
        g.nodes.remove(node)
        g.nodes.insert(g.nodes.index(user), node)


def _set_input(node: Node, i: int, v: Value) -> None:
    while len(node.inputs) <= i:
        node.add_input(None)
    node.set_input(i, v)


def _fold_add(g: Graph, node: Node, t: Value, user: Node, other: Value) -> bool:
    """Fold ``user`` = Add(t, other) into ``node`` as its residual, bias or C; False when it cannot be."""
    if other.shape is None:
        return False
    residual = other.shape == t.shape
    if residual:
        if node.attr(RESIDUAL_ATTR, 0):
            return False
        slot, value = RESIDUAL_INPUT[node.op_type], other
    elif _has_epilogue(node):  # a bias is added before the residual and the activation
        return False
    elif (bias := _conv_bias(node, t, other)) is not None:
        slot, value = 2, other if other.shape == (bias.shape[0],) else g.constant(bias)
    elif _gemm_c(node, t, other):
        slot, value = 2, other
        node.op_type = "Gemm"  # a MatMul of two matrices is the Gemm with alpha = 1, no transposes
        node.attrs["beta"] = Attr("beta", "FLOAT", 1.0)
    elif (bias := _matmul_bias(node, t, other)) is not None:
        slot, value = BIAS_INPUT["MatMul"], other if other.shape == (bias.shape[0],) else g.constant(bias)
        node.attrs.update(request_attrs(EpilogueRequest(bias=BIAS_INPUT["MatMul"])))
    else:
        return False
    _place_before(g, node, user, value)
    g.remove(user)
    _set_input(node, slot, value)
    if residual:
        node.attrs.update(request_attrs(EpilogueRequest(residual=slot)))
    return True


def _fold_activation(g: Graph, node: Node, user: Node) -> bool:
    act = activation(user)
    if act is None:
        return False
    g.remove(user)
    node.attrs.update(activation_attrs(act))
    return True


def _fuse_one(g: Graph, node: Node, public: set[int]) -> bool:
    """Fold the ops after ``node`` into it, one at a time; True when anything was folded."""
    changed = False
    while not node.attr(ACT_ATTR, None):  # the activation ends the chain
        t = node.outputs[0]
        read = _reader(t, g, public)
        if read is None:
            break
        user, idx = read
        if len(user.outputs) != 1 or user.outputs[0].shape != t.shape:
            break
        y = user.outputs[0]
        other = _add_operand(user, idx)
        if other is not None:
            folded = _fold_add(g, node, t, user, other)
        else:
            folded = idx == 0 and _fold_activation(g, node, user)
        if not folded:
            break
        node.outputs[0] = y
        y.producer = node
        changed = True
    return changed


def fuse_graph(g: Graph) -> bool:
    """Fuse epilogues into every product of ``g`` (subgraph bodies are optimized when they are lowered)."""
    public = {v.id for v in g.outputs}
    changed = False
    for node in list(g.nodes):
        if node.graph is g and is_product(node) and not _has_epilogue(node):
            changed |= _fuse_one(g, node, public)
    return changed


def fuse_epilogues(model: Model) -> PassResult:
    return PassResult(model, fuse_graph(model.graph))
