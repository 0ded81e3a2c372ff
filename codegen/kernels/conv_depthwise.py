"""Depthwise Conv (one input channel per group, ``group > 1``): the lowering of Conv's depthwise branch.

1-D and 2-D convolutions of at most MAX_TAPS taps take the *phased* path
(templates/conv_depthwise_phased.c.j2, runtime_c/onnxc_depthwise.h): each input plane is split once
into its stride phases inside a zero frame, so every tap is a constant shift and the output is
computed over flattened positions in full vectors, every tap unrolled, without bounds checks. That
keeps 7x7 and 14x14 maps (MobileNet's last blocks) as fast per element as large ones, where the
row-vectorized path wastes most of each vector. 3-D convolutions and larger kernels take the
row-vectorized path (templates/conv_depthwise.c.j2). Both split the work over (batch, channel) planes on
the runtime's pool (codegen/kernels/parcall.py), so a batch of one still shares its channels.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.ir.dims import is_static
from onnxc.passes.shapes.spatial import Window

from ..templating import render
from .base import KernelCtx
from .epilogue import CHEAP_ACTS, Epilogue
from .parcall import SLOTS, par_call

MAX_TAPS = 64   # largest kernel (taps) unrolled by the phased path
# The phased path applies the activation to its accumulator tile (whole vectors, the WH - OW extra columns
# included) rather than to the rows of Y just copied from it, whose reads stalled on store forwarding: always for
# the piecewise-linear activations (960 channels at 7x7, Clip: 0.217 -> 0.172 ms; 576 at 14x14: 0.272 ->
# 0.265), for the others on maps at most ACT_ON_TILE_MAX_W wide (SiLU at 7x7: 0.315 -> 0.287 ms; at 14x14
# the extra columns' exponentials cost more: 0.370 -> 0.405), and with a stride: there the rows of Y read back
# ran as slowly at 2 threads as at 1 (SiLU, 3x3 stride 2 from 28x28, 960 channels: 0.221 / 0.188 -> 0.222 / 0.106 ms
# at 1 / 2 threads; 240 channels 5x5: 0.044 -> 0.039 ms at 2 threads; 144 at 112x112: 0.730 -> 0.693 at 1)
ACT_ON_TILE_MAX_W = 8
TILE = 2048     # output positions per accumulator tile (8 KiB of float: stays in L1)
VECTOR_BYTES = 64


def phased_taps(win: Window) -> tuple[list[tuple[int, str]], int, int]:
    """The taps of a 1-D/2-D window as (weight index, C offset into the phase planes), and the extra
    phase rows / columns (beyond the output's) the shifts reach."""
    kh, kw = ([1] + list(win.kernel))[-2:]
    sh, sw = ([1] + list(win.strides))[-2:]
    dh, dw = ([1] + list(win.dilations))[-2:]
    taps = []
    for i in range(kh):
        for j in range(kw):
            rh, rw = i * dh, j * dw
            phase = (rh % sh) * sw + rw % sw
            taps.append((i * kw + j, f"{phase} * PS + {rh // sh} * WH + {rw // sw}"))
    return taps, (kh - 1) * dh // sh, (kw - 1) * dw // sw


def depthwise(ctx: KernelCtx, common: dict, win: Window, ep: Epilogue, res: str | None) -> str:
    """The C body of a depthwise Conv (``common``: the geometry values of conv_dims.c.j2)."""
    dt = ctx.outs[0].dtype
    sfx = "f" if dt == DType.FLOAT else "d"
    act = ep.act_args(dt) if ep.act else ""
    ntaps = 1
    for k in win.kernel:
        ntaps *= int(k)
    if win.rank <= 2 and ntaps <= MAX_TAPS:
        ctx.include("onnxc_depthwise.h")
        taps, dh_max, dw_max = phased_taps(win)
        ow = ctx.outs[0].shape[-1]
        act_on_tile = bool(ep.act) and res is None and (
            ep.act in CHEAP_ACTS or is_static(ow) and int(ow) <= ACT_ON_TILE_MAX_W
            or any(int(s) > 1 for s in win.strides))
        return render("conv_depthwise_phased.c.j2", **common, res=res, act=act, act_on_tile=act_on_tile, sfx=sfx,
                      taps=taps, dh_max=dh_max, dw_max=dw_max, tile=TILE, V=f"onnxc_dw_v{sfx}",
                      VL=VECTOR_BYTES // dt.np.itemsize, par=par_call(ctx), slots=SLOTS)
    return render("conv_depthwise.c.j2", **common, res=res, act=act, sfx=sfx, par=par_call(ctx))
