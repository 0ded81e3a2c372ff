"""RoiAlign (10, 16, 22): bilinear samples averaged (or maxed) over each bin of each region of interest.

Per region, the sample positions and their four bilinear weights are computed once (as in
onnx.reference and onnxruntime) and shared by all channels. Coordinates: roi * spatial_scale, shifted by
-0.5 for coordinate_transformation_mode half_pixel (the opset-16 default; opset 10 has no shift and
forces malformed regions to 1x1); sampling_ratio 0 takes ceil(roi_size / output_size) samples per bin.
Samples beyond one pixel outside the map contribute weight 0. mode "max" takes the maximum of the
weighted corner values, matching the reference implementations. float and double; float16/bfloat16
through float32.

The C structure is in templates/roialign.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.ir import DType

from ..cexpr import c_literal
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .parcall import par_call
from .typesets import ALL_FLOATS

MAX_SAMPLES = 1 << 26  # sample positions per region (adaptive sampling of huge regions would exhaust memory)


@kernel("RoiAlign", types=ALL_FLOATS)  # rois share X's type (T1)
@half.via_float32
def roi_align(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    T = x.ctype
    dt = DType.DOUBLE if T == "double" else DType.FLOAT
    oh, ow = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    sr = int(ctx.attr("sampling_ratio", 0))
    half_pixel = ctx.node.version >= 16 and ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    is_max = ctx.attr("mode", "avg") == "max"
    return render("roialign.c.j2", N=x.dims[0], C=x.dims[1], H=x.dims[2], W=x.dims[3], R=y.dims[0], T=T,
                  scale=c_literal(float(ctx.attr("spatial_scale", 1.0)), dt), off=c_literal(0.5 if half_pixel else 0.0, dt),
                  nbi=ctx.ins[2].dims[0], who=ds.who(ctx), half_pixel=half_pixel, one=c_literal(1.0, dt), half=c_literal(0.5, dt),
                  OH=oh, OW=ow, sr=sr, ceil="ceil" if T == "double" else "ceilf", max_samples=MAX_SAMPLES,
                  is_max=is_max, par=par_call(ctx))
