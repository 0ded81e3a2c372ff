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
group 1, a constant filter, at least MIN_CHANNELS input and output channels and, when the output map
is static, at least MIN_POSITIONS positions and, under LARGE_POSITIONS, Cin * Cout within
SMALL_MAP_WEIGHTS. Measured on 1 thread, batch 1, time against the im2col path:

- channels: from 64 channels 0.4-0.6x (64@224 0.55, 128@112 0.42, 256@56 0.4, 512@28 0.55); 16-32
  channels still about 0.75-0.8x, but their float32 error with uniform data (a few 1e-5 of the
  output's magnitude) exceeds what the GEMM-path tests accept (tests/ops/test_gemm.py, 40-48
  channels), so MIN_CHANNELS is 64;
- small maps: a 14x14 map has 16 tiles, half of a 32-tile GEMM panel; with few channels the
  transforms dominate, with many the transformed filter (4x the filter) is read from memory for few
  tiles: at 14x14, 32 channels 1.8x, 64 1.04x, 128 0.94x, 256 0.8x, 512 1.2x; 7x7 is not better.

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

MIN_CHANNELS = 64  # input and output channels below which im2col is kept
MIN_POSITIONS = 196  # static output maps smaller than this (e.g. 7x7) stay on im2col
LARGE_POSITIONS = 784  # below this (28x28), a map takes the path only with Cin * Cout in
SMALL_MAP_WEIGHTS = (128 * 128, 256 * 256)  # this range (inclusive)
BUDGET = 1 << 19  # floats of transformed input + products per tile block (2 MiB: about the L2)
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


def applies(ctx: KernelCtx, win: Window, m: int, cg: int, g: int) -> bool:
    """Whether a Conv node takes the Winograd path (see the module doc) within the weight budget
    (codegen/weight_budget.py: the transformed filter is 4x the filter)."""
    x, w = ctx.ins[0], ctx.ins[1]
    return (w.const is not None and _eligible(x.dtype, w.value.type.dtype, win, m, cg, g, ctx.outs[0].shape[2:])
            and ctx.may_grow_weights())


def _eligible(x_dtype: DType, w_dtype: DType, win: Window, m: int, cg: int, g: int, out: tuple) -> bool:
    if not enabled() or x_dtype != DType.FLOAT or w_dtype != DType.FLOAT:
        return False
    if win.rank != 2 or tuple(win.kernel) != (3, 3) or g != 1:
        return False
    if any(s != 1 for s in win.strides) or any(d != 1 for d in win.dilations):
        return False
    if cg < MIN_CHANNELS or m < MIN_CHANNELS:
        return False
    if not all(is_static(d) for d in out):
        return True
    op = math.prod(int(d) for d in out)
    return op >= MIN_POSITIONS and (op >= LARGE_POSITIONS or SMALL_MAP_WEIGHTS[0] <= cg * m <= SMALL_MAP_WEIGHTS[1])


@grows_weights
def candidate(node: Node) -> Candidate | None:
    """The weight growth of a Conv that would take the path, and its gain: the flops it saves per
    image, 3/4 of im2col's (a symbolic map counts as a 56x56 one)."""
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
    positions = math.prod(int(d) for d in out) if all(is_static(d) for d in out) else 56 * 56
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


def conv_winograd(ctx: KernelCtx, geo: dict, ep: Epilogue, bias: bool) -> str:
    """The C body of a Conv on the Winograd path (``applies`` was true); ``geo`` is conv.py's geometry."""
    use_gemm(ctx)
    ctx.helper("onnxc_winograd", '#include "onnxc_winograd.h"')
    if ep.act:
        use_act(ctx)
    w = np.asarray(ctx.ins[1].const, dtype=np.float32)
    m, c = w.shape[:2]
    u = filter_transform(w)
    ctx.repack_const(1, np.concatenate([pack_a(u[p]) for p in range(36)]))
    res = "NULL" if ep.residual is None else f"in{ep.residual}"
    epi = sg_epi(ep, bias="in2" if bias else "NULL", res=res)
    x = ctx.ins[0]
    ih, iw = geo["I"][1], geo["I"][2]
    oh, ow = geo["O"][1], geo["O"][2]
    ph, pw = geo["P"][1], geo["P"][2]
    return "\n".join([
        "/* Winograd F(4x4, 3x3): codegen/kernels/conv_winograd.py, runtime_c/onnxc_winograd.h */",
        f"const onnxc_sg_epi epi = {epi};",
        f"if (onnxc_wino_conv(rt->threads, in0, in1, out0, {x.dims[0]}, {c}, {ih}, {iw}, {m}, {oh}, {ow}, {ph}, {pw}, "
        f"&epi, {BUDGET}))",
        '    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in the Winograd convolution");',
        "return 0;",
    ])
