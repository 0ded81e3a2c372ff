"""Col2Im (opset 18): scatter-add column blocks back into N-D images (the inverse of im2col).

Input [N, C * prod(block), L] holds, for each channel and block offset, one value per block position
(L = prod of the block counts). Each value is added to the image pixel that block position and
offset cover, skipping pixels in the padding. Block offsets are the outer loop and block positions
the inner one, so each pixel receives its contributions in the reference's order (increasing block
offset). Sums are in the element type (float16/bfloat16 rounded after each addition, bool adds as
logical or, like numpy).

block_shape and image_shape may be known only at run time: the spatial rank is static, the sizes
are read into small arrays (the shape function binds the output dims they determine).

The C structure is in templates/col2im.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.misc_nn import col2im_geometry

from ..cexpr import c_literal
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .typesets import MOVABLE


def _block(ctx: KernelCtx, nd: int) -> str:
    """The block sizes: compile-time numbers, or read from input 2."""
    geo = col2im_geometry(ctx.node)
    if geo.block is not None and all(isinstance(b, int) for b in geo.block):
        return ", ".join(str(b) for b in geo.block)
    return ", ".join(f"(int64_t)in2[{a}]" for a in range(nd))


def _col2im_shape(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    nd = y.rank - 2
    return render("col2im.c.j2", shape=True, nd=nd, block=_block(ctx, nd), who=ds.who(ctx),
                  read_image=ds.read_ints(ctx, 1, nd, "s"), C_in=ctx.ins[0].dims[1],
                  bind=ds.bind(ctx, 0, [y.dims[0], f"({ctx.ins[0].dims[1]}) / K", *[f"s[{a}]" for a in range(nd)]]))


def _accumulate(dt: DType, dst: str, src: str) -> str:
    if dt == DType.BOOL:
        return f"{dst} = {dst} || {src};"
    if dt in half.HALF:
        return f"{dst} = {half.store(dt, f'{half.load(dt, dst)} + {half.load(dt, src)}')};"
    return f"{dst} += {src};"


@kernel("Col2Im", types=MOVABLE, shape_fn=_col2im_shape)
def col2im(ctx: KernelCtx) -> str:
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    geo = col2im_geometry(ctx.node)
    nd = geo.rank

    def arr(vals) -> str:
        return ", ".join(str(v) for v in vals)

    return render("col2im.c.j2", shape=False, nd=nd, block=_block(ctx, nd), who=ds.who(ctx), im=arr(y.dims[2:]),
                  st=arr(geo.strides), dl=arr(geo.dilations), pb=arr(geo.pads_begin),
                  ps=arr(b + e for b, e in zip(geo.pads_begin, geo.pads_end)), N=y.dims[0], C=y.dims[1], L=x.dims[2],
                  C_in=x.dims[1], T=x.ctype, zero=c_literal(0, y.dtype), accumulate=_accumulate(y.dtype, "dst[pos]", "col[l]"))
