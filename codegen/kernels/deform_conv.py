"""DeformConv (opset 19, 22): convolution whose sampling points move by learned offsets.

For each batch item the kernel builds a column matrix, then multiplies per group:

- columns: for every offset group, kernel position k and output position o, the sampling point is
  ``o * stride - pad_begin + k * dilation + offset`` per spatial axis; its value in each input
  channel of the offset group is the N-linear interpolation (bilinear in 2-D) of the 2^nd
  surrounding pixels, those outside the image counting as zero (GridSample with zero padding and
  align_corners=1), times the optional mask;
- output: ``Y[g] = W[g] @ columns[g] (+ B)`` with the blocked GEMM, ``[oC/g, C/g * K] x [C/g * K, O]``.

The corner indices and weights are computed once per sampling point and shared by the channels of
the offset group. float16/bfloat16 run in float32 (half.via_float32).

The C structure is in templates/deform_conv.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

import math

from onnxc.ir import DType
from onnxc.passes.shapes.misc_nn import deform_window

from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS, gemm_expr, mfn


def _checks(ctx: KernelCtx, group: int, og: int, k: int, nd: int) -> list[str]:
    """Run-time checks of the channel and size relations the shape rule could not decide statically
    (symbolic dims), so wrong inputs fail with a message instead of reading out of bounds."""
    x, w, off, y = ctx.ins[0], ctx.ins[1], ctx.ins[2], ctx.outs[0]
    b = ctx.ins[3] if len(ctx.ins) > 3 else None
    mask = ctx.ins[4] if len(ctx.ins) > 4 else None
    eqs = [(x.dims[1], f"({w.dims[1]}) * {group}", "input channels != W dim 1 * group"),
           (off.dims[1], str(og * k * nd), "offset channels != offset_group * prod(kernel) * rank"),
           (off.dims[0], x.dims[0], "offset batch != X batch"),
           (f"({x.dims[1]}) % {og}", "0", "input channels not a multiple of offset_group"),
           (f"({y.dims[1]}) % {group}", "0", "output channels not a multiple of group")]
    eqs += [(off.dims[2 + a], y.dims[2 + a], f"offset spatial dim {a} != output size") for a in range(nd)]
    if b is not None:
        eqs.append((b.dims[0], y.dims[1], "B length != output channels"))
    if mask is not None:
        eqs += [(mask.dims[1], str(og * k), "mask channels != offset_group * prod(kernel)"),
                (mask.dims[0], x.dims[0], "mask batch != X batch")]
        eqs += [(mask.dims[2 + a], y.dims[2 + a], f"mask spatial dim {a} != output size") for a in range(nd)]
    return [f"if (({a}) != ({e})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {why}\", {ds.who(ctx)});"
            for a, e, why in eqs if a != e and not (a.isdigit() and e.isdigit())]


@kernel("DeformConv", types=FLOATS | half.HALF)
@half.via_float32
def deform_conv(ctx: KernelCtx) -> str:
    x, w, off, y = ctx.ins[0], ctx.ins[1], ctx.ins[2], ctx.outs[0]
    b = ctx.ins[3] if len(ctx.ins) > 3 else None
    mask = ctx.ins[4] if len(ctx.ins) > 4 else None
    t, dt = x.ctype, x.dtype
    if dt not in (DType.FLOAT, DType.DOUBLE):
        raise NotImplementedError(f"DeformConv on {dt.short} tensors is not supported")
    win = deform_window(ctx.node)
    nd, k = win.rank, math.prod(win.kernel)
    group, og = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    ins, outs = x.dims[2:], y.dims[2:]
    pb = [ctx.dim(p) for p in win.pads_begin]
    strides, axes = k, []
    for a in range(nd):  # kernel position k -> per-axis kernel index (k / kstride) % kernel
        strides //= win.kernel[a]
        axes.append({"kernel": win.kernel[a], "kstride": strides, "out": outs[a], "stride": win.strides[a],
                     "pad": pb[a], "dilation": win.dilations[a]})
    one = "1.0f" if dt == DType.FLOAT else "1.0"
    beta = one if b is not None else ("0.0f" if dt == DType.FLOAT else "0.0")
    gemm = gemm_expr(ctx, dt, "0", "0", "OCg", "O", f"Cg * {k}", one, f"{w.ptr} + g * OCg * Cg * {k}", f"Cg * {k}",
                     f"col + g * Cg * {k} * O", "O", beta, "yg", "O")
    return render("deform_conv.c.j2", N=x.dims[0], C=x.dims[1], OC=y.dims[1], IS=" * ".join(f"({d})" for d in ins),
                  O=" * ".join(f"({d})" for d in outs), nd=nd, In=", ".join(ins), group=group, og=og,
                  checks=_checks(ctx, group, og, k, nd), T=t, K=k, who=ds.who(ctx), x=x.ptr, off=off.ptr,
                  mask=mask.ptr if mask is not None else "", y=y.ptr, axes=axes, floor=mfn("floor", dt),
                  mask_at=f"maskn[(g * {k} + k) * O + o]" if mask is not None else f"({t})1",
                  bias=b.ptr if b is not None else "", gemm=gemm)
