"""Fold a squeeze-excite scale into the pointwise Conv that reads the scaled tensor.

Squeeze-excite blocks (EfficientNet, MobileNetV3) end with ``t = Mul(x, s)``, x ``[N, C, H, W]`` and s
``[N, C, 1, 1]`` (the gate computed from x's global average), and the block's 1x1 projection Conv reads t.
Run as written, the Mul reads and writes a whole activation (32 channels at 112x112: 0.1 ms) only for the
Conv to read it again. Since ``W (x * s) = (W diag(s)) x``, the Conv can read x and scale its filter per image
instead: M x C multiplies against C x H x W.

Rewrite: the Conv takes x as its input 0 and s as its input SCALE_INPUT with SCALE_ATTR (the request's
contract: passes/shapes/epilogue_spec.py; served by codegen/kernels/conv.py), and the Mul goes. Conditions:
the Mul in the default domain, one operand of t's exact shape and the other ``[N or 1, C, 1, 1]``; t read
only by that Conv (as its X), in the same graph, not a graph output; the Conv a float32 product
(fuse_epilogues.is_product) with a constant 1x1 filter of group 1, unit strides and dilations, no padding and
no scale yet; a static map of at least as many positions as output channels (below, scaling the filter costs
more than the Mul). Run after fuse_depthwise_pointwise (whose pairs must not see a scaled reader) and
fuse_epilogues (which may have given the Conv a residual and an activation: both still apply, after the
product). ``ONNXC_INPUT_SCALE=0`` at compile time leaves every Mul (an A/B knob, keyed in the model cache).
"""

from __future__ import annotations

import os

from onnxc.ir import Graph, Model, Node, Value
from onnxc.ir.dims import is_static
from onnxc.ir.graph import Attr

from .base import PassResult
from .fuse_epilogues import is_product
from .shapes.epilogue_spec import SCALE_ATTR, SCALE_INPUT, is_pointwise_conv

ENV_SWITCH = "ONNXC_INPUT_SCALE"


def _operands(mul: Node, t: Value) -> tuple[Value, Value] | None:
    """(x, s) of ``t = Mul(x, s)`` in either order: x of t's shape, s ``[N or 1, C, 1, 1]``."""
    if mul.op_type != "Mul" or mul.domain not in ("", "ai.onnx") or len(mul.inputs) != 2 or len(mul.outputs) != 1:
        return None
    ts = t.shape
    if ts is None or len(ts) != 4:
        return None
    for x, s in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
        if x is None or s is None or x.shape is None or s.shape is None or x.dtype != t.dtype or s.dtype != t.dtype:
            continue
        xs, ss = tuple(x.shape), tuple(s.shape)
        if xs == tuple(ts) and len(ss) == 4 and ss[2:] == (1, 1) and ss[1] == xs[1] and (ss[0] == xs[0] or ss[0] == 1):
            return x, s
    return None


def _fold(g: Graph, mul: Node, public: set[int]) -> bool:
    t = mul.outputs[0] if len(mul.outputs) == 1 else None
    if t is None or t.id in public:
        return False
    uses = t.uses()
    if len(uses) != 1:
        return False
    conv, idx = uses[0]
    if conv.graph is not g or idx != 0 or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx"):
        return False
    if not is_product(conv) or int(conv.attr(SCALE_ATTR, 0) or 0) or not is_pointwise_conv(conv) or conv.input(1).const is None:
        return False
    ops = _operands(mul, t)
    if ops is None:
        return False
    x, s = ops
    hw = t.shape[2:]
    if not all(is_static(d) for d in hw) or int(hw[0]) * int(hw[1]) < int(conv.input(1).shape[0]):
        return False
    conv.set_input(0, x)
    while len(conv.inputs) <= SCALE_INPUT["Conv"]:
        conv.add_input(None)
    conv.set_input(SCALE_INPUT["Conv"], s)
    conv.attrs[SCALE_ATTR] = Attr(SCALE_ATTR, "INT", 1)
    g.remove(mul)
    return True


def fuse_graph(g: Graph) -> bool:
    """Fold every such Mul of ``g`` (control-flow bodies are optimized when they are lowered)."""
    public = {v.id for v in g.outputs}
    changed = False
    for node in list(g.nodes):
        if node.graph is g and node.op_type == "Mul":
            changed |= _fold(g, node, public)
    return changed


def fuse_input_scale(model: Model) -> PassResult:
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return PassResult(model, False)
    return PassResult(model, fuse_graph(model.graph))
