"""Fuse a depthwise Conv and the pointwise (1x1) Conv reading it into one onnxc::DepthwisePointwise node
(codegen/kernels/conv_dwpw.py).

MobileNet-style blocks end with ``depthwise 3x3 -> activation -> pointwise 1x1 (-> + residual)``. Run
apart, the depthwise output (the block's widest tensor: 96 channels at 112x112 in MobileNetV2, 4.8 MB
per image) goes to memory and comes back for the pointwise GEMM; both kernels are bound by that traffic.
The fused kernel computes the depthwise output for a band of rows into a per-thread buffer that stays
in cache and runs the pointwise GEMM on the band at once.

Matched (after fuse_epilogues, whose requests both convs may carry):

- D: a float32 2-D Conv with one input and one output channel per group (``group == C == M``), a
  constant filter of at most MAX_TAPS taps, constant bias or none, any strides, pads and dilations,
  an activation request or none, no residual;
- P: a float32 Conv reading D's output as its only reader, 1x1 kernel, unit strides and dilations, no
  padding, group 1, a constant filter, constant bias or none, any epilogue request (activation,
  residual);
- D's output is not a graph output and its map is static, at least MIN_ELEMENTS per image and
  MIN_POSITIONS positions (smaller maps stay in cache between the two kernels anyway, and give too few
  bands to share among threads). Measured on MobileNetV2 (1 thread, batch 4) against the pair apart:
  112x112 0.58x, 56x56 0.74-0.88x, 28x28 and 14x14 0.9-1.0x, 7x7 1.05-1.09x.

Inverted-residual blocks put a pointwise Conv E before D that expands the channels (``1x1 -> activation
-> depthwise -> activation -> 1x1``): E's output is then the block's widest tensor, and run apart E
writes it to memory and D reads it back. E joins the node when it is a float32 1x1 Conv as P is (unit
strides, no padding, group 1, constant filter and bias), with an activation request or none and no
residual, D is its output's only reader, that output is not a graph output, and it holds at least
MIN_EXPAND_ELEMENTS per image (below, it stays in the cache between E and D anyway). The kernel then
computes E for the input rows each band of D reads, into the band's buffer. E and D fuse the same way
when D's output goes elsewhere (a squeeze-excite block pools and scales it): the node then has no P and
writes D's rows straight into its output (from MIN_EXPAND_ONLY_ELEMENTS).

The node: inputs ``(x, w_dw, b_dw, w_pw, b_pw, R, w_ex, b_ex)`` (absent ones empty; ``x`` is E's input
when E joined); D's geometry as ``kernel_shape``, ``strides``, ``pads``, ``dilations``; D's activation
under ``DW_ACT_ATTR`` / ``DW_PARAMS_ATTR``, E's under ``EX_ACT_ATTR`` / ``EX_PARAMS_ATTR`` and P's
epilogue request under the usual names (passes/shapes/epilogue_spec.py; the residual is input 5, E's
filter input EXPAND_INPUT).

``ONNXC_DWPW=0`` at compile time leaves every pair apart, ``ONNXC_DWPW_EXPAND=0`` every E (debug knobs
for A/B measurements; the model cache keys on them, codegen/model_cache.py CODEGEN_ENV).
"""

from __future__ import annotations

import math
import os

from onnxc.ir import DType, Graph, Model, Node, TensorType, Value
from onnxc.ir.graph import Attr

from .base import PassResult, in_subgraphs
from .shapes.epilogue_spec import (
    DW_ACT,
    DWPW_DOMAIN,
    DWPW_OP,
    EX_ACT,
    EXPAND_INPUT,
    RESIDUAL_INPUT,
    EpilogueRequest,
    activation_attrs,
    parse_epilogue,
    request_attrs,
)

DOMAIN, OP = DWPW_DOMAIN, DWPW_OP
MAX_TAPS = 49  # largest depthwise kernel (7x7)
MIN_ELEMENTS = 1 << 15  # depthwise output elements per image below which the pair stays apart
MIN_POSITIONS = 196  # ... and output positions (MobileNetV2 at 7x7: one band per image, 1.05-1.09x apart)
MIN_EXPAND_ELEMENTS = 1 << 16  # E's output elements per image below which E stays apart
# ... without a P: E's output must be larger (EfficientNet b1, 1 thread, E and D apart -> fused: 96 channels at
# 112x112 1.30 -> 1.07 ms; 144 at 56x56 0.68 -> 0.64, 0.50 -> 0.52 at stride 2; 672 at 14x14 0.43 -> 0.45)
MIN_EXPAND_ONLY_ELEMENTS = 1 << 19
ENV_SWITCH, EXPAND_SWITCH = "ONNXC_DWPW", "ONNXC_DWPW_EXPAND"


def _conv(n: Node | None) -> bool:
    return n is not None and n.op_type == "Conv" and n.domain in ("", "ai.onnx")


def _static(v: Value | None) -> tuple[int, ...] | None:
    t = None if v is None else v.type
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def _f32_const(v: Value | None) -> bool:
    return v is not None and v.const is not None and v.dtype == DType.FLOAT


def _ints(n: Node, name: str, default: list[int]) -> list[int]:
    v = n.attr(name, None)
    return default if v is None else [int(i) for i in v]


def _depthwise(d: Node) -> bool:
    x, w, y = d.input(0), d.input(1), d.outputs[0]
    ws = _static(w)
    if x is None or x.dtype != DType.FLOAT or y.dtype != DType.FLOAT or not _f32_const(w) or ws is None:
        return False
    if len(ws) != 4 or ws[1] != 1 or int(d.attr("group", 1)) != ws[0] or math.prod(ws[2:]) > MAX_TAPS:
        return False
    if d.input(2) is not None and not _f32_const(d.input(2)):
        return False
    if parse_epilogue(d).residual is not None or len(d.inputs) > 3 or d.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return False
    xs, ys = x.shape, y.shape
    if xs is None or len(xs) != 4 or xs[1] != ws[0] or ys is None or len(ys) != 4:
        return False
    return all(isinstance(v, int) for v in ys[1:]) and math.prod(ys[1:]) >= MIN_ELEMENTS \
        and ys[2] * ys[3] >= MIN_POSITIONS


def _pointwise(p: Node, c: int) -> bool:
    w, y = p.input(1), p.outputs[0]
    ws = _static(w)
    if not _f32_const(w) or ws is None or len(ws) != 4 or ws[1:] != (c, 1, 1) or y.dtype != DType.FLOAT:
        return False
    if int(p.attr("group", 1)) != 1 or p.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return False
    if len(p.inputs) > 4:  # an input scale (passes/fuse_input_scale.py) the fused kernel does not apply
        return False
    if any(s != 1 for s in _ints(p, "strides", [1, 1])) or any(d != 1 for d in _ints(p, "dilations", [1, 1])):
        return False
    if any(q != 0 for q in _ints(p, "pads", [0, 0, 0, 0])):
        return False
    return p.input(2) is None or _f32_const(p.input(2))


def match(p: Node, public: set[int]) -> Node | None:
    """The depthwise Conv feeding pointwise Conv ``p`` when the pair fuses (see the module doc)."""
    if not _conv(p) or p.input(0) is None:
        return None
    t = p.input(0)
    d = t.producer
    if not _conv(d) or d.graph is not p.graph or t.id in public or len(t.uses()) != 1:
        return None
    if not _depthwise(d) or not _pointwise(p, int(d.input(1).shape[0])):
        return None
    return d


def expand(d: Node, public: set[int], least: int = MIN_EXPAND_ELEMENTS) -> Node | None:
    """The pointwise Conv whose output ``d`` reads, when it joins the node (see the module doc) and its output
    holds at least ``least`` elements per image."""
    t = d.input(0)
    e = t.producer
    if not _conv(e) or e.graph is not d.graph or t.id in public or len(t.uses()) != 1 or e.input(0) is None:
        return None
    xs, ts = e.input(0).shape, t.shape
    if e.input(0).dtype != DType.FLOAT or xs is None or len(xs) != 4 or not isinstance(xs[1], int):
        return None
    if ts is None or len(ts) != 4 or not all(isinstance(v, int) for v in ts[1:]):
        return None
    req = parse_epilogue(e)
    if req.residual is not None or req.bias is not None or len(e.inputs) > 3 or not _pointwise(e, xs[1]):
        return None
    return e if math.prod(ts[1:]) >= least else None


def _depthwise_attrs(d: Node) -> dict[str, Attr]:
    """The node's attributes for depthwise Conv ``d``: its geometry and its activation request."""
    kh, kw = d.input(1).shape[2:]
    attrs = {
        "kernel_shape": Attr("kernel_shape", "INTS", [int(kh), int(kw)]),
        "strides": Attr("strides", "INTS", _ints(d, "strides", [1, 1])),
        "pads": Attr("pads", "INTS", _ints(d, "pads", [0, 0, 0, 0])),
        "dilations": Attr("dilations", "INTS", _ints(d, "dilations", [1, 1])),
    }
    return attrs | activation_attrs(parse_epilogue(d).activation, DW_ACT)


def _fused(d: Node, p: Node, e: Node | None) -> Node:
    """The DepthwisePointwise node computing ``p(d(e(x)))`` or ``p(d(x))`` (see the module doc)."""
    pw = parse_epilogue(p)
    attrs = _depthwise_attrs(d)
    ins = [d.input(0), d.input(1), d.input(2), p.input(1), p.input(2)]
    if pw.residual is not None:
        ins += [None] * (RESIDUAL_INPUT[OP] - len(ins)) + [p.input(pw.residual)]
        pw = EpilogueRequest(pw.activation, RESIDUAL_INPUT[OP])
    attrs |= request_attrs(pw)
    if e is not None:
        ins[0] = e.input(0)
        ins += [None] * (EXPAND_INPUT - len(ins)) + [e.input(1), e.input(2)]
        attrs |= activation_attrs(parse_epilogue(e).activation, EX_ACT)
    while ins and ins[-1] is None:
        ins.pop()
    return Node(OP, ins, [], attrs, domain=DOMAIN, name=(p.name or p.outputs[0].name) + "_dwpw")


def _fused_expand(e: Node, d: Node) -> Node:
    """The node computing ``d(e(x))``: no pointwise Conv after (see the module doc)."""
    attrs = _depthwise_attrs(d) | activation_attrs(parse_epilogue(e).activation, EX_ACT)
    ins = [e.input(0), d.input(1), d.input(2)] + [None] * (EXPAND_INPUT - 3) + [e.input(1), e.input(2)]
    while ins and ins[-1] is None:
        ins.pop()
    return Node(OP, ins, [], attrs, domain=DOMAIN, name=(d.name or d.outputs[0].name) + "_exdw")


def _fuse_expand_only(g: Graph, public: set[int]) -> bool:
    """Expanding pointwise Conv -> depthwise Conv pairs whose depthwise output goes elsewhere than a pointwise
    Conv (a squeeze-excite block's pooling and scale): fused without one."""
    changed = False
    for d in list(g.nodes):
        if d.graph is not g or not _conv(d) or not _depthwise(d):
            continue
        e = expand(d, public, MIN_EXPAND_ONLY_ELEMENTS)
        if e is None:
            continue
        out = d.outputs[0]
        fused = _fused_expand(e, d)
        g.insert_before(d, fused)
        g.remove(d)
        g.remove(e)
        fused.add_output(out)
        changed = True
    return changed


def fuse_graph(g: Graph) -> bool:
    changed = in_subgraphs(g, fuse_graph)
    public = {v.id for v in g.outputs}
    for p in list(g.nodes):
        if p.graph is not g:
            continue
        d = match(p, public)
        if d is None:
            continue
        out = p.outputs[0]
        e = expand(d, public) if os.environ.get(EXPAND_SWITCH, "1") not in ("0", "off", "false") else None
        fused = _fused(d, p, e)
        g.insert_before(p, fused)
        g.remove(p)
        g.remove(d)
        if e is not None:
            g.remove(e)
        fused.add_output(out)
        changed = True
    if os.environ.get(EXPAND_SWITCH, "1") not in ("0", "off", "false"):
        changed |= _fuse_expand_only(g, public)
    return changed


def fuse_depthwise_pointwise(model: Model) -> PassResult:
    if os.environ.get(ENV_SWITCH, "1") in ("0", "off", "false"):
        return PassResult(model, False)
    return PassResult(model, fuse_graph(model.graph))
