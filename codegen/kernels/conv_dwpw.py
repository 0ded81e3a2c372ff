"""The kernel of onnxc::DepthwisePointwise (passes/fuse_depthwise_pointwise.py, templates/conv_dwpw.c.j2):
a depthwise Conv and the pointwise Conv reading it, a band of output rows at a time.

Per band of TR output rows of one image, the depthwise rows of every channel (bias and activation
included) go to the running thread's buffer S, C x TR*OW floats, and one pointwise GEMM (the filter
packed at compile time) reads S and writes the band of Y with the pointwise epilogue (bias, residual,
activation): on bands of few positions (_direct: at most conv.DIRECT_PW_MAX_OP, 14x14 maps) the direct
kernel, output channels as the vector lanes and the band's positions broadcast from S in place
(runtime_c/onnxc_conv_direct.h: no 32-wide position tiles left partly empty; 576 -> 96 at 14x14 with its
expansion, 1 / 2 threads: 0.365 -> 0.342 / 0.219 -> 0.201 ms); with few output channels
(conv.IMPLICIT_MAX_M) the implicit GEMM, which reads the rows of S in place (runtime_c/onnxc_conv_implicit.h,
AVX-512); else the packed GEMM. TR is the largest row count whose S fits BAND_BYTES, so S stays in the L2 cache between
the two steps and the depthwise output never goes to memory. Bands of all images run on the runtime's
pool, each with a one-thread GEMM.

With an expanding pointwise Conv E joined (input EXPAND_INPUT), each band first computes the rows of E its
depthwise rows read (a one-thread GEMM, E's bias and activation in its epilogue) into the thread's buffer,
moving to the front the rows its previous band of the same image left there; TR then fits S and those rows in
EX_BAND_BYTES. Without a pointwise Conv (input 3 absent: the depthwise output goes to a squeeze-excite block)
the depthwise rows are written straight into Y.

The depthwise rows of maps narrower than PHASED_MAX_OW: per channel, the band's input rows are scattered
into stride-phase planes inside a zero frame (runtime_c/onnxc_depthwise.h, as the standalone depthwise
Conv), so every tap is a constant shift and the band is computed over flattened positions in full vectors,
then copied into S without the frame's columns (14x14, 384 -> 64: 143 -> 115 us; 56x56 stride 2,
144 -> 32: 189 -> 150 us). Wider maps: for each kernel row, the output columns whose taps all read inside
the input row take one pass summing the whole kernel row (the tap offsets are constants), the columns at
the edges take the taps one by one (112x112, 32 -> 16: 353 us against 395 phased).
"""

from __future__ import annotations

import math
import os

import numpy as np

from onnxc.ir import DType, Node
from onnxc.passes.shapes.epilogue_spec import DW_ACT, DWPW_DOMAIN, DWPW_OP, EX_ACT, EXPAND_INPUT
from onnxc.passes.shapes.spatial import Window

from ..cexpr import c_literal
from ..templating import render
from .base import KernelCtx, kernel
from .conv import DIRECT_MIN_K, DIRECT_MIN_M, DIRECT_PW_MAX_OP, DIRECT_SWITCH, IMPLICIT_MAX_M
from .conv_depthwise import phased_taps
from .epilogue import Epilogue, activation, epilogue, sg_epi, use_act
from .gemm_layout import pack_a, pack_b
from .nncommon import use_gemm
from .parcall import SLOTS, par_call

EX_BAND_BYTES = 1 << 20  # with an expanding pointwise Conv: its rows and the depthwise band together
BAND_BYTES = 1 << 19  # the per-thread depthwise band: 512 KiB, with the GEMM's packed panels inside a 1-2 MiB L2
# (14x14 maps of 384-576 channels in one band instead of two: 126 -> 115 us; 256 KiB was chosen on a 1 MiB L2)
BAND_COST = 0.5  # a band's fixed cost (its GEMM call, the epilogue set-up), in rows, for band_rows
BAND_GRAIN = 1 << 16  # multiply-adds per band below which bands run on the calling thread
PHASED_MAX_OW = 64  # output widths below which the depthwise rows are computed over stride-phase planes
# (ONNXC_DWPW_PHASED_OW at compile time overrides it: an A/B knob, keyed in the model cache)
PREFETCH_CHANNELS = 2  # a channel's band rows are prefetched this many channels ahead (56x56, 144 -> 24: 0.86 -> 0.7x)


def _accepts(node: Node) -> str | None:
    if any(v is not None and v.dtype != DType.FLOAT for v in node.inputs) or node.outputs[0].dtype != DType.FLOAT:
        return "only float32 depthwise-pointwise pairs are fused"
    return None


def _rows_read(t: int, sh: int, kh: int, dh: int) -> int:
    """Input rows a band of ``t`` output rows reads (padding rows included)."""
    return (t - 1) * sh + (kh - 1) * dh + 1


def band_rows(oh: int, fit: int, threads: int) -> int:
    """Rows per band: at most ``fit`` (the band's buffer fits BAND_BYTES), as few bands as that allows, but
    with threads the count whose bands share out most evenly over them for one image: the busiest thread's
    rows plus BAND_COST rows per band it runs (14 rows in bands of 8 leave one thread 8 rows, the other 6;
    bands of 7 give each 7)."""
    if threads <= 1:
        return fit

    def cost(t: int) -> float:
        return math.ceil(math.ceil(oh / t) / threads) * (t + BAND_COST)  # the busiest thread's bands

    return min(range(fit, 0, -1), key=cost)


def _direct(m: int, c: int, positions: int) -> bool:
    """Whether the pointwise GEMM of a band runs the direct kernel (output channels as the vector lanes, the band's
    positions broadcast: runtime_c/onnxc_conv_direct.h): few positions per band, where the packed GEMM's 32-wide
    position tiles are partly empty (14x14: 196 = 6 x 32 + 4; 98 per band at 2 threads). conv.py's thresholds and
    switch (ONNXC_DIRECT_CONV)."""
    how = os.environ.get(DIRECT_SWITCH, "1")
    if how == "0":
        return False
    return how == "2" or m > DIRECT_MIN_M and c >= DIRECT_MIN_K and positions <= DIRECT_PW_MAX_OP


@kernel(DWPW_OP, domain=DWPW_DOMAIN, types={DType.FLOAT}, accepts=_accepts)
def depthwise_pointwise(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    wdw, wpw = ctx.ins[1], ctx.ins[3] if len(ctx.ins) > 3 else None
    c = int(wdw.shape[0])
    m = c if wpw is None else int(wpw.shape[0])
    kh, kw = (int(k) for k in ctx.attr("kernel_shape"))
    sh, sw = (int(s) for s in ctx.attr("strides"))
    dh, dw = (int(d) for d in ctx.attr("dilations"))
    ph, pw = (int(p) for p in ctx.attr("pads")[:2])
    oh, ow = (int(d) for d in y.shape[2:])
    use_gemm(ctx)
    ep = epilogue(ctx)
    dw_act = activation(ctx, DW_ACT)
    if ep.act or dw_act[0]:
        use_act(ctx)
    wex = ctx.ins[EXPAND_INPUT] if len(ctx.ins) > EXPAND_INPUT else None
    ci, ex_act = c, (0, 0.0, 0.0)
    ex_bias = len(ctx.ins) > EXPAND_INPUT + 1 and ctx.ins[EXPAND_INPUT + 1] is not None
    if wex is not None:
        ci, iw = int(wex.shape[1]), int(x.shape[3])
        ctx.repack_const(EXPAND_INPUT, pack_a(np.asarray(wex.const, dtype=np.float32).reshape(c, ci)))
        ex_act = activation(ctx, EX_ACT)
        use_act(ctx)
        # rows of the band's input (E's output) per band of t output rows: the band and the expanded rows it reads
        band = ow if wpw is not None else 0  # the band's depthwise rows (none without a pointwise Conv: Y's)
        fit = max(1, min(oh, next((t for t in range(oh, 0, -1)
                                   if 4 * c * (t * band + _rows_read(t, sh, kh, dh) * iw) <= EX_BAND_BYTES), 1)))
    else:
        fit = max(1, min(oh, BAND_BYTES // (4 * c * ow)))
    tr, tr_image = band_rows(oh, fit, ctx.threads), band_rows(oh, fit, 1)
    direct = wpw is not None and _direct(m, c, max(tr, tr_image) * ow)
    if direct:  # W^T as the packed B operand, for the direct kernel and its fallback alike
        ctx.include("onnxc_conv_direct.h")
        ctx.include("onnxc_conv.h")
        ctx.repack_const(3, pack_b(np.asarray(wpw.const, dtype=np.float32).reshape(m, c).T))
    elif wpw is not None:
        ctx.repack_const(3, pack_a(np.asarray(wpw.const, dtype=np.float32).reshape(m, c)))
    implicit = wpw is not None and m <= IMPLICIT_MAX_M and not direct
    if implicit:
        ctx.include("onnxc_conv_implicit.h")
    res = "NULL" if ep.residual is None else f"in{ep.residual} + n * M * OP + oh0 * OW"
    epi = sg_epi(ep, bias="in4" if len(ctx.ins) > 4 and ctx.ins[4] is not None else "NULL", res=res, ldr="OP")
    act = f"{dw_act[0]}, {c_literal(dw_act[1], DType.FLOAT)}, {c_literal(dw_act[2], DType.FLOAT)}" if dw_act[0] else ""
    phased = ow < int(os.environ.get("ONNXC_DWPW_PHASED_OW", PHASED_MAX_OW))
    taps, dh_max, dw_max = phased_taps(Window(kernel=(kh, kw), strides=(sh, sw), dilations=(dh, dw), pads_begin=(ph, pw), pads_end=(0, 0), inp=(), out=())) if phased else ([], 0, 0)
    if phased:
        ctx.include("onnxc_depthwise.h")
    return render("conv_dwpw.c.j2", N=x.dims[0], C=str(c), M=str(m), IH=x.dims[2], IW=x.dims[3], OH=str(oh),
                  OW=str(ow), KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw, PH=ph, PW=pw, TR=tr, TR_image=tr_image, phased=phased, taps=taps,
                  dh_max=dh_max, dw_max=dw_max, VL=16, CI=str(ci), expand=wex is not None, EXI=EXPAND_INPUT, project=wpw is not None,
                  RM=_rows_read(max(tr, tr_image), sh, kh, dh),
                  ex_epi=sg_epi(Epilogue(*ex_act, None, None), bias=f"in{EXPAND_INPUT + 1}" if ex_bias else "NULL"),
                  dw_bias=len(ctx.ins) > 2 and ctx.ins[2] is not None, dw_act=act, epi=epi, par=par_call(ctx),
                  slots=SLOTS, grain=BAND_GRAIN, implicit=implicit, direct=direct, PFD=PREFETCH_CHANNELS)
