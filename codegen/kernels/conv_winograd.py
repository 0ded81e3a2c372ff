"""Winograd F(4x4, 3x3) for float 3x3 stride-1 Conv with a constant filter (runtime_c/onnxc_winograd.h).

A 4x4 output tile of a 3x3 convolution is ``A^T [sum_c (G w_c G^T) .* (B^T d_c B)] A`` for the 6x6
input patch ``d_c`` of each channel: 36 multiplications per channel pair instead of 144, so the
convolution becomes 36 GEMMs [Cout x Cin] x [Cin x tiles] on the packed GEMM, 4x fewer flops than
im2col. The filter transform ``U = G w G^T`` runs here at compile time (float64, then rounded) and is
stored as the 36 packed A operands the GEMM reads; the input and output transforms run per call.

The interpolation points are 0, 1, -1, 1/2, -1/2 and infinity: with realistic data (He-initialized
weights, 64-512 channels) their float32 error is about 5e-6 of the output's magnitude, half that of
the textbook 0, +-1, +-2 (tests/ops/test_conv_winograd.py measures it).

The path is taken (``applies``) when it pays: float32, 2-D, kernel 3x3, strides and dilations 1,
group 1, a constant filter, at least MIN_CHANNELS input and output channels and MIN_PAIRS channel
pairs, and, when the output map is static, a map the GEMM uses well (``map_use``: the useful share of
the 4x4 tiles, times the share of the GEMM's 32-wide B panels the tiles of one image fill): from
GOOD_USE on, or from FAIR_USE on with Cin * Cout within SMALL_MAP_WEIGHTS. Measured on 1 thread,
batch 1, against the direct paths (implicit GEMM / rows):

- channels: 64 channels and more 0.45-0.6x on maps from 20x20 to 64x64; 32 channels 0.66-0.75x,
  32 -> 16 and 16 -> 32 0.7x, 24 0.8x, 16 -> 16 0.95-1.02x (so MIN_PAIRS). The float32 error stays
  near 5e-6 of the output's magnitude whatever the channel count (tests/ops/test_conv_winograd.py);
- maps: 20x20 (25 tiles, use 0.78) 0.5x; 16x16 (use 0.5) 0.95x at 64 channels, 0.64-0.72x at 128-256;
  14x14 (use 0.38) 1.0x at 64, 0.76-0.82x at 128-256; 10x10 (use 0.2) 1.5-2.2x; 7x7 2.6x.

The transformed filter is 4x the filter. Where the weight budget (codegen/weight_budget.py) grants
the growth it is stored, transformed and packed at compile time; otherwise, on maps of at least
RUNTIME_MIN_POSITIONS positions (or symbolic ones), or RUNTIME_SMALL_POSITIONS with few channel pairs, the filter is transformed per call into scratch
memory (runtime_c/onnxc_winograd.c onnxc_wino_filter: about 15 ns per channel pair, straight into the
packed layout; 32 -> 32 at 40x40 264 us against 241 us stored and 227 us direct), and the
budget goes first to the convolutions that have no such fallback.

Setting the environment variable ``ONNXC_WINOGRAD=0`` at compile time turns the path off (a debug
knob for A/B measurements against the im2col path; the model cache keys on it, see
codegen/model_cache.py CODEGEN_ENV).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

from onnxc.ir import DType, Node, OnnxcError, TensorType
from onnxc.ir.dims import is_static
from onnxc.passes.shapes.conv import conv_window
from onnxc.passes.shapes.spatial import Window

from ..weight_budget import Candidate, grows_weights
from .base import KernelCtx
from .epilogue import Epilogue, sg_epi, use_act
from .gemm_layout import pack_a
from .nncommon import use_gemm

MIN_CHANNELS = 16  # input and output channels below which the direct paths are kept
MIN_PAIRS = 512  # Cin * Cout below which they are kept (16 -> 16 is even)
GOOD_USE = 0.6  # static maps whose map_use reaches this take the path
FAIR_USE = 0.35  # from this use on, a map takes the path only with Cin * Cout in
SMALL_MAP_WEIGHTS = (128 * 128, 256 * 256)  # this range (inclusive)
RUNTIME_MIN_POSITIONS = 1024  # maps from this size on (32x32) transform the filter per call when not stored
# ...and maps from RUNTIME_SMALL_POSITIONS on with at most RUNTIME_SMALL_PAIRS channel pairs, whose transform
# costs less (20x20, per call against direct, 1 thread: 128 -> 128 0.86 -> 0.74 ms, 128 -> 80 0.58 -> 0.50,
# 80 -> 80 0.36 -> 0.30; 256 -> 256 at 16x16 would lose: 2.1 -> 2.9 ms)
RUNTIME_SMALL_POSITIONS = 400
RUNTIME_SMALL_PAIRS = 128 * 128
TRANSFORM_COST = 300  # flops a per-call filter transform costs per channel pair (the budget's unit)
BUDGET = 1 << 19  # floats of transformed input + products per task (2 MiB: about one core's L2)
ENV_SWITCH = "ONNXC_WINOGRAD"

_F = Fraction
# F(4x4, 3x3) with points 0, 1, -1, 1/2, -1/2, infinity (the C header hard-codes B^T and A^T).
BT = [
    [_F(1, 4), 0, _F(-5, 4), 0, 1, 0],
    [0, _F(-1, 4), _F(-1, 4), 1, 1, 0],
    [0, _F(1, 4), _F(-1, 4), -1, 1, 0],
    [0, _F(-1, 2), -1, _F(1, 2), 1, 0],
    [0, _F(1, 2), -1, _F(-1, 2), 1, 0],
    [0, _F(1, 4), 0, _F(-5, 4), 0, 1],
]
G = [
    [4, 0, 0],
    [_F(2, 3), _F(2, 3), _F(2, 3)],
    [_F(2, 3), _F(-2, 3), _F(2, 3)],
    [_F(-8, 3), _F(-4, 3), _F(-2, 3)],
    [_F(-8, 3), _F(4, 3), _F(-2, 3)],
    [0, 0, 1],
]
AT = [
    [1, 1, 1, 1, 1, 0],
    [0, 1, -1, _F(1, 2), _F(-1, 2), 0],
    [0, 1, 1, _F(1, 4), _F(1, 4), 0],
    [0, 1, -1, _F(1, 8), _F(-1, 8), 1],
]


def _mat(rows: list[list]) -> np.ndarray:
    return np.array([[float(v) for v in r] for r in rows], dtype=np.float64)


def enabled() -> bool:
    """Whether the debug switch leaves the Winograd path on (default: on)."""
    return os.environ.get(ENV_SWITCH, "1") not in ("0", "off", "false")


def applies(ctx: KernelCtx, win: Window, m: int, cg: int, g: int) -> str | None:
    """How a Conv node takes the Winograd path (see the module doc): "stored" (the transformed filter
    is a weight, within the weight budget: codegen/weight_budget.py), "runtime" (transformed per call),
    or None (not at all)."""
    x, w = ctx.ins[0], ctx.ins[1]
    out = ctx.outs[0].shape[2:]
    if w.const is None or not _eligible(x.dtype, w.value.type.dtype, win, m, cg, g, out):
        return None
    if ctx.may_grow_weights():
        return "stored"
    return "runtime" if _runtime_pays(out, m * cg) else None


def map_use(oh: int, ow: int) -> float:
    """The useful share of the GEMM work of a static OH x OW map: output positions over the 4x4 tiles'
    positions, times the tiles over the 32-wide B panels they fill (one image)."""
    tiles = -(-oh // 4) * -(-ow // 4)
    return oh * ow / (16 * tiles) * tiles / (32 * -(-tiles // 32))


def _runtime_pays(out: tuple, pairs: int) -> bool:
    if not all(is_static(d) for d in out):
        return True
    positions = math.prod(int(d) for d in out)
    return positions >= RUNTIME_MIN_POSITIONS or positions >= RUNTIME_SMALL_POSITIONS and pairs <= RUNTIME_SMALL_PAIRS


def _eligible(x_dtype: DType, w_dtype: DType, win: Window, m: int, cg: int, g: int, out: tuple) -> bool:
    if not enabled() or x_dtype != DType.FLOAT or w_dtype != DType.FLOAT:
        return False
    if win.rank != 2 or tuple(win.kernel) != (3, 3) or g != 1:
        return False
    if any(s != 1 for s in win.strides) or any(d != 1 for d in win.dilations):
        return False
    if min(cg, m) < MIN_CHANNELS or cg * m < MIN_PAIRS:
        return False
    if not all(is_static(d) for d in out):
        return True
    use = map_use(int(out[0]), int(out[1]))
    return use >= GOOD_USE or use >= FAIR_USE and SMALL_MAP_WEIGHTS[0] <= cg * m <= SMALL_MAP_WEIGHTS[1]


@grows_weights
def candidate(node: Node) -> Candidate | None:
    """The weight growth of a Conv that would take the path, and its gain: the flops it saves per
    image, 3/4 of im2col's (a symbolic map counts as a 56x56 one), or, where the filter could be
    transformed per call instead, only that transform's cost."""
    if node.op_type != "Conv" or node.domain or len(node.inputs) < 2 or node.inputs[1] is None:
        return None
    x, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    if w.const is None or not all(isinstance(t, TensorType) and t.shape is not None for t in (x.type, w.type, y.type)):
        return None
    if len(w.type.shape) != 4 or not all(is_static(d) for d in w.type.shape):
        return None
    m, cg = int(w.type.shape[0]), int(w.type.shape[1])
    try:
        win = conv_window(node)
    except OnnxcError:
        return None
    out = tuple(y.type.shape[2:])
    if not _eligible(x.type.dtype, w.type.dtype, win, m, cg, int(node.attr("group", 1)), out):
        return None
    if _runtime_pays(out, m * cg):
        return Candidate(node, extra_bytes=27 * m * cg * 4, gain=TRANSFORM_COST * m * cg)
    positions = math.prod(int(d) for d in out)
    return Candidate(node, extra_bytes=27 * m * cg * 4, gain=0.75 * 9 * 2 * m * cg * positions)


def filter_transform(w: np.ndarray) -> np.ndarray:
    """U[p = 6 i + j, co, ci] = (G w[co, ci] G^T)[i, j] for a (Cout, Cin, 3, 3) filter, in float32."""
    g = _mat(G)
    u = np.einsum("ik,abkl,jl->ijab", g, w.astype(np.float64), g)
    return u.reshape(36, w.shape[0], w.shape[1]).astype(np.float32)


def reference(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """Naive numpy Winograd convolution (float64 transforms) of x (N, C, H, W) with w (M, C, 3, 3) and
    pads (top, left, bottom, right): the algorithm of the C kernel, for tests."""
    bt, at = _mat(BT), _mat(AT)
    u = filter_transform(w).astype(np.float64).reshape(6, 6, w.shape[0], w.shape[1])
    n, _, h, wd = x.shape
    oh, ow = h + pads[0] + pads[2] - 2, wd + pads[1] + pads[3] - 2
    th, tw = -(-oh // 4), -(-ow // 4)
    xp = np.zeros((n, x.shape[1], th * 4 + 2, tw * 4 + 2))
    hi, wi = min(h, th * 4 + 2 - pads[0]), min(wd, tw * 4 + 2 - pads[1])
    xp[:, :, pads[0]:pads[0] + hi, pads[1]:pads[1] + wi] = x[:, :, :hi, :wi]
    y = np.zeros((n, w.shape[0], th * 4, tw * 4))
    for i in range(th):
        for j in range(tw):
            v = np.einsum("ik,nckl,jl->ijnc", bt, xp[:, :, 4 * i:4 * i + 6, 4 * j:4 * j + 6], bt)
            prod = np.einsum("ijmc,ijnc->ijnm", u, v)
            y[:, :, 4 * i:4 * i + 4, 4 * j:4 * j + 4] = np.einsum("ak,klnm,bl->nmab", at, prod, at)
    return y[:, :, :oh, :ow]


def conv_winograd(ctx: KernelCtx, geo: dict, ep: Epilogue, bias: bool, how: str) -> str:
    """The C body of a Conv on the Winograd path; ``how`` is what ``applies`` said ("stored" or
    "runtime"), ``geo`` is conv.py's geometry."""
    use_gemm(ctx)
    ctx.include("onnxc_winograd.h")
    if ep.act:
        use_act(ctx)
    w = np.asarray(ctx.ins[1].const, dtype=np.float32)
    m, c = w.shape[:2]
    if how == "stored":
        u = filter_transform(w)
        ctx.repack_const(1, np.concatenate([pack_a(u[p]) for p in range(36)]))
    res = "NULL" if ep.residual is None else f"in{ep.residual}"
    epi = sg_epi(ep, bias="in2" if bias else "NULL", res=res)
    x = ctx.ins[0]
    ih, iw = geo["I"][1], geo["I"][2]
    oh, ow = geo["O"][1], geo["O"][2]
    ph, pw = geo["P"][1], geo["P"][2]
    fail = 'return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in the Winograd convolution");'
    conv = (f"onnxc_wino_conv(rt->threads, in0, {{u}}, out0, {x.dims[0]}, {c}, {ih}, {iw}, {m}, {oh}, {ow}, {ph}, "
            f"{pw}, &epi, {BUDGET})")
    head = ["/* Winograd F(4x4, 3x3): codegen/kernels/conv_winograd.py, runtime_c/onnxc_winograd.h */",
            f"const onnxc_sg_epi epi = {epi};"]
    if how == "stored":
        return "\n".join([*head, f"if ({conv.format(u='in1')})", f"    {fail}", "return 0;"])
    return "\n".join([
        *head,
        "/* the filter is transformed per call (the weight budget went elsewhere) */",
        f"float *U = (float *)onnxc_alloc((size_t)(36 * onnxc_sg_packed_a_size({m}, {c})) * sizeof(float));",
        f"const int st = !U || onnxc_wino_filter(rt->threads, in1, {m}, {c}, U) || {conv.format(u='U')};",
        "free(U);",
        f"if (st) {fail}",
        "return 0;",
    ])
