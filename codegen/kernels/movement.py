"""Kernels of data-movement ops that keep every element.

Reshape, Flatten, Squeeze, Unsqueeze and Identity are views (no code). Transpose uses the shared
transpose loop nest (row copies when the innermost axis stays put, 32x32 tiles otherwise), as do
DepthToSpace/SpaceToDepth through their 6-D view. Concat/Split copy contiguous row chunks, Expand is
the broadcasting loop, Tile copies input rows repeatedly, Dropout (inference) copies and writes an
all-true mask.
"""

from __future__ import annotations

from onnxc.passes.shapes.movement import concat_axis, space_depth_perm, space_depth_view, transpose_perm

from .base import KernelCtx, alias_kernel, kernel
from .copyutil import copy, cprod, dtype_accepts, require, transpose_body
from .loops import broadcast_loop

alias_kernel("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


@kernel("Transpose", accepts=dtype_accepts(0))
def transpose(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x = ctx.ins[0]
    return transpose_body("in0", "out0", x.dims, transpose_perm(ctx.node, x.rank), x.ctype, x.dtype.itemsize,
                          ctx.helper)


@kernel("DepthToSpace", "SpaceToDepth", accepts=dtype_accepts(0))
def space_depth(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x = ctx.ins[0]
    view = [ctx.dim(d) for d in space_depth_view(ctx.node, x.shape)]
    _, perm = space_depth_perm(ctx.node)
    return transpose_body("in0", "out0", view, perm, x.ctype, x.dtype.itemsize, ctx.helper)


@kernel("Concat", accepts=dtype_accepts(0))
def concat(ctx: KernelCtx) -> str:
    require(ctx, 0)
    y = ctx.outs[0]
    axis = concat_axis(ctx.node, y.rank)
    inner = y.dims[axis + 1:]
    lines = [f"const int64_t outer = {cprod(y.dims[:axis])};", "int64_t o = 0;"]
    chunks = []
    for i, x in enumerate(ctx.ins):
        c = cprod([x.dims[axis], *inner])
        if c != "0":
            lines.append(f"const int64_t c{i} = {c};")
            chunks.append(i)
    lines.append("for (int64_t r = 0; r < outer; r++) {")
    for i in chunks:
        lines.append(copy("out0 + o", f"in{i} + r * c{i}", f"c{i}", y.ctype) + f" o += c{i};")
    lines += ["}", "(void)o;", "return 0;"]
    return "\n".join(lines)


@kernel("Split", accepts=dtype_accepts(0))
def split(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x = ctx.ins[0]
    axis = ctx.node.attr("axis", 0)
    axis = axis + x.rank if axis < 0 else axis
    inner = x.dims[axis + 1:]
    lines = [f"const int64_t outer = {cprod(x.dims[:axis])};", f"const int64_t row = {cprod(x.dims[axis:])};"]
    chunks = []
    for k, y in enumerate(ctx.outs):
        c = cprod([y.dims[axis], *inner])
        if c != "0":
            lines.append(f"const int64_t c{k} = {c};")
            chunks.append(k)
    lines += ["for (int64_t r = 0; r < outer; r++) {", "const " + x.ctype + " *restrict s = in0 + r * row;"]
    for k in chunks:
        lines.append(copy(f"out{k} + r * c{k}", "s", f"c{k}", x.ctype) + f" s += c{k};")
    lines += ["(void)s;", "}", "return 0;"]
    return "\n".join(lines)


@kernel("Expand", accepts=dtype_accepts(0))
def expand(ctx: KernelCtx) -> str:
    require(ctx, 0)
    return broadcast_loop(ctx.outs[0], [ctx.ins[0]], "{0}")


@kernel("Tile", accepts=dtype_accepts(0))
def tile(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x, y = ctx.ins[0], ctx.outs[0]
    r = x.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    xs = x.strides()
    lines = [f"const int64_t rows = {cprod(y.dims[:-1])};", f"const int64_t w = {x.dims[-1]};",
             f"const int64_t ow = {y.dims[-1]};", "if (w == 0) return 0;",
             "for (int64_t row = 0; row < rows; row++) {", "int64_t rem = row, src = 0;"]
    for a in range(r - 2, -1, -1):
        lines.append(f"{{ const int64_t i = rem % ({y.dims[a]}); rem /= ({y.dims[a]}); "
                     f"src += (i % ({x.dims[a]})) * ({xs[a]}); }}")
    lines += [f"{x.ctype} *restrict d = out0 + row * ow;",
              "for (int64_t j = 0; j < ow; j += w) " + copy("d + j", "in0 + src", "w", x.ctype),
              "}", "return 0;"]
    return "\n".join(lines)


@kernel("Dropout", accepts=dtype_accepts(0))
def dropout(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x = ctx.ins[0]
    lines = []
    n = x.numel()
    lines.append(copy("out0", "in0", n, x.ctype))
    if len(ctx.outs) > 1:
        m = ctx.outs[1]
        lines.append(f"for (int64_t i = 0; i < {n}; i++) out1[i] = ({m.ctype})1;")
    lines.append("return 0;")
    return "\n".join(lines)
