"""Kernels of data-movement ops that keep every element.

Reshape, Flatten, Squeeze, Unsqueeze and Identity are views (no code). Transpose uses the shared
transpose loop nest (row copies when the innermost axis stays put, 32x32 tiles otherwise), as do
DepthToSpace/SpaceToDepth through their 6-D view. Concat/Split copy contiguous row chunks, Expand is
the broadcasting loop, Tile copies input rows repeatedly, Dropout (inference) copies and writes an
all-true mask.

Shape functions (data-dependent output shapes): Reshape to a shape tensor read at run time (0 and -1
rules, allowzero), Squeeze/Unsqueeze with run-time axes, Expand/Tile/Split with run-time shape,
repeats or split sizes.

The C structure is in templates/movement_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.passes.shapes.movement import concat_axis, space_depth_perm, space_depth_view, transpose_perm

from ..cexpr import c_product
from ..templating import render
from . import dynshape as ds
from . import random
from .base import KernelCtx, alias_kernel, kernel, shape_function
from .copyutil import MOVES, copy, transpose_body
from .loops import broadcast_loop
from .typesets import ANY, MOVABLE

# views carry any element type (Identity also sequences and optionals)
alias_kernel("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", types=ANY)


@shape_function("Reshape")
def reshape_shape(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    ds.include(ctx)
    allowzero = int(bool(ctx.attr("allowzero", 0))) if ctx.node.version >= 14 else 0
    return "\n".join([ds.in_dims(ctx, 0, "din"), ds.read_ints(ctx, 1, y.rank, "t"), f"int64_t dout[{max(y.rank, 1)}];",
                      ds.check(f"onnxc_reshape_dims(rt, {ds.who(ctx)}, {x.rank}, din, {y.rank}, t, {allowzero}, dout)"),
                      ds.bind_array(ctx, 0, "dout"), "return 0;"])


def _squeeze_like(ctx: KernelCtx, unsqueeze: bool) -> str:
    """Shape function of Squeeze / Unsqueeze with run-time axes (input 1)."""
    x, y = ctx.ins[0], ctx.outs[0]
    ds.include(ctx)
    rank = y.rank if unsqueeze else x.rank
    k = abs(y.rank - x.rank)
    return render("movement_squeeze_shape.c.j2", unsqueeze=unsqueeze, din=ds.in_dims(ctx, 0, "din"),
                  read_axes=ds.read_ints(ctx, 1, k, "ax"), mark_len=max(rank, 1), k=k, rank=rank, in_rank=x.rank,
                  out_rank=y.rank, out_len=max(y.rank, 1), who=ds.who(ctx), bind=ds.bind_array(ctx, 0, "dout"))


@shape_function("Squeeze")
def squeeze_shape(ctx: KernelCtx) -> str:
    return _squeeze_like(ctx, False)


@shape_function("Unsqueeze")
def unsqueeze_shape(ctx: KernelCtx) -> str:
    return _squeeze_like(ctx, True)


@kernel("Transpose", types=MOVES)
def transpose(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    return transpose_body("in0", "out0", x.dims, transpose_perm(ctx.node, x.rank), x.ctype, x.dtype.itemsize,
                          ctx.include)


@kernel("DepthToSpace", "SpaceToDepth", types=MOVES)
def space_depth(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    view = [ctx.dim(d) for d in space_depth_view(ctx.node, x.shape)]
    _, perm = space_depth_perm(ctx.node)
    return transpose_body("in0", "out0", view, perm, x.ctype, x.dtype.itemsize, ctx.include)


def _chunks(operands, axis: int, inner: list[str], copy_of) -> list[dict]:
    """The non-empty chunks (one per operand) of an outer row, with the statement copying each."""
    chunks = []
    for i, v in enumerate(operands):
        c = c_product([v.dims[axis], *inner])
        if c != "0":
            chunks.append({"i": i, "size": c, "stmt": copy_of(i)})
    return chunks


@kernel("Concat", types=MOVES)
def concat(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    axis = concat_axis(ctx.node, y.rank)
    inner = y.dims[axis + 1:]
    chunks = _chunks(ctx.ins, axis, inner, lambda i: copy("out0 + o", f"in{i} + r * c{i}", f"c{i}", y.ctype, ctx))
    return render("movement_chunks.c.j2", split=False, outer=c_product(y.dims[:axis]), chunks=chunks)


def split_shape(ctx: KernelCtx) -> str:
    """Run-time split sizes: non-negative, summing to the axis."""
    x = ctx.ins[0]
    axis = ctx.node.attr("axis", 0)
    axis = axis + x.rank if axis < 0 else axis
    binds = [ds.bind(ctx, k, [f"sz[{k}]" if a == axis else y.dims[a] for a in range(y.rank)])
             for k, y in enumerate(ctx.outs)]
    return render("movement_split_shape.c.j2", read_sizes=ds.read_ints(ctx, 1, len(ctx.outs), "sz"),
                  n=len(ctx.outs), who=ds.who(ctx), axis_dim=x.dims[axis], binds=binds)


@kernel("Split", types=MOVES, shape_fn=split_shape)
def split(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    axis = ctx.node.attr("axis", 0)
    axis = axis + x.rank if axis < 0 else axis
    chunks = _chunks(ctx.outs, axis, x.dims[axis + 1:], lambda k: copy(f"out{k} + r * c{k}", "s", f"c{k}", x.ctype, ctx))
    return render("movement_chunks.c.j2", split=True, outer=c_product(x.dims[:axis]), row=c_product(x.dims[axis:]),
                  T=x.ctype, chunks=chunks)


def expand_shape(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    ds.include(ctx)
    k = ctx.ins[1].shape[0] if ctx.ins[1].rank else 1
    return "\n".join([ds.in_dims(ctx, 0, "din"), ds.read_ints(ctx, 1, k, "s"), f"int64_t dout[{max(y.rank, 1)}];",
                      ds.check(f"onnxc_expand_dims(rt, {ds.who(ctx)}, {x.rank}, din, {k}, s, dout)"),
                      ds.bind_array(ctx, 0, "dout"), "return 0;"])


@kernel("Expand", types=MOVES, shape_fn=expand_shape)
def expand(ctx: KernelCtx) -> str:
    return broadcast_loop(ctx.outs[0], [ctx.ins[0]], "{0}")


def tile_shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    ds.include(ctx)
    r = x.rank
    return render("movement_tile.c.j2", shape=True, din=ds.in_dims(ctx, 0, "din"), read_reps=ds.read_ints(ctx, 1, r, "rep"),
                  out_len=max(r, 1), rank=r, who=ds.who(ctx), bind=ds.bind_array(ctx, 0, "dout"),
                  check=ds.check(f"onnxc_check_dims(rt, {ds.who(ctx)}, \"output shape\", {r}, dout)"))


@kernel("Tile", types=MOVES, shape_fn=tile_shape)
def tile(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    r = x.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    xs = x.strides()
    axes = [{"out": y.dims[a], "dim": x.dims[a], "stride": xs[a]} for a in range(r - 2, -1, -1)]
    return render("movement_tile.c.j2", shape=False, rows=c_product(y.dims[:-1]), w=x.dims[-1], ow=y.dims[-1], axes=axes,
                  T=x.ctype, copy_row=copy("d + j", "in0 + src", "w", x.ctype))


@kernel("Dropout", types=MOVABLE)
def dropout(ctx: KernelCtx) -> str:
    if random.dropout_may_train(ctx.node):
        return random.dropout_training(ctx)
    x = ctx.ins[0]
    n = x.numel()
    mask_type = ctx.outs[1].ctype if len(ctx.outs) > 1 else ""
    return render("movement_dropout.c.j2", copy_all=copy("out0", "in0", n, x.ctype), n=n, mask_type=mask_type)
