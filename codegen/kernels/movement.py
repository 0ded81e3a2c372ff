"""Kernels of data-movement ops that keep every element.

Reshape, Flatten, Squeeze, Unsqueeze and Identity are views (no code). Transpose uses the shared
transpose loop nest (row copies when the innermost axis stays put, 32x32 tiles otherwise), as do
DepthToSpace/SpaceToDepth through their 6-D view. Concat/Split copy contiguous row chunks, Expand is
the broadcasting loop, Tile copies input rows repeatedly, Dropout (inference) copies and writes an
all-true mask.

Shape functions (data-dependent output shapes): Reshape to a shape tensor read at run time (0 and -1
rules, allowzero), Squeeze/Unsqueeze with run-time axes, Expand/Tile/Split with run-time shape,
repeats or split sizes.
"""

from __future__ import annotations

from onnxc.passes.shapes.movement import concat_axis, space_depth_perm, space_depth_view, transpose_perm

from . import dynshape as ds
from . import random
from .base import KernelCtx, alias_kernel, kernel, shape_function
from .copyutil import MOVES, copy, cprod, transpose_body
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


def _axes_marks(ctx: KernelCtx, rank: int, k: int) -> list[str]:
    """C marking ``mark[a] = 1`` for each of the ``k`` run-time axes (input 1) of a rank-``rank`` tensor."""
    return [ds.read_ints(ctx, 1, k, "ax"), f"int mark[{max(rank, 1)}] = {{0}};",
            f"for (int j = 0; j < {k}; j++) {{",
            f"const int a = onnxc_axis(ax[j], {rank});",
            "if (a < 0 || mark[a]) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: axes entry %lld is out of range "
            f"or repeated (rank {rank})\", {ds.who(ctx)}, (long long)ax[j]);",
            "mark[a] = 1;", "}"]


@shape_function("Squeeze")
def squeeze_shape(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    ds.include(ctx)
    lines = [ds.in_dims(ctx, 0, "din"), *_axes_marks(ctx, x.rank, x.rank - y.rank),
             f"int64_t dout[{max(y.rank, 1)}]; int o = 0;",
             f"for (int a = 0; a < {x.rank}; a++) {{",
             "if (!mark[a]) { dout[o++] = din[a]; continue; }",
             "if (din[a] != 1) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: cannot squeeze axis %d of size %lld\", "
             f"{ds.who(ctx)}, a, (long long)din[a]);", "}", "(void)o;"]
    return "\n".join([*lines, ds.bind_array(ctx, 0, "dout"), "return 0;"])


@shape_function("Unsqueeze")
def unsqueeze_shape(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    ds.include(ctx)
    lines = [ds.in_dims(ctx, 0, "din"), *_axes_marks(ctx, y.rank, y.rank - x.rank),
             f"int64_t dout[{y.rank}]; int i = 0;",
             f"for (int a = 0; a < {y.rank}; a++) dout[a] = mark[a] ? 1 : din[i++];", "(void)i; (void)din;"]
    return "\n".join([*lines, ds.bind_array(ctx, 0, "dout"), "return 0;"])


@kernel("Transpose", types=MOVES)
def transpose(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    return transpose_body("in0", "out0", x.dims, transpose_perm(ctx.node, x.rank), x.ctype, x.dtype.itemsize,
                          ctx.helper)


@kernel("DepthToSpace", "SpaceToDepth", types=MOVES)
def space_depth(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    view = [ctx.dim(d) for d in space_depth_view(ctx.node, x.shape)]
    _, perm = space_depth_perm(ctx.node)
    return transpose_body("in0", "out0", view, perm, x.ctype, x.dtype.itemsize, ctx.helper)


@kernel("Concat", types=MOVES)
def concat(ctx: KernelCtx) -> str:
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


def split_shape(ctx: KernelCtx) -> str:
    """Run-time split sizes: non-negative, summing to the axis."""
    x = ctx.ins[0]
    axis = ctx.node.attr("axis", 0)
    axis = axis + x.rank if axis < 0 else axis
    n = len(ctx.outs)
    lines = [ds.read_ints(ctx, 1, n, "sz"), "int64_t sum = 0;",
             f"for (int k = 0; k < {n}; k++) {{",
             "if (sz[k] < 0 || sz[k] > INT64_MAX - sum) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: split size "
             f"%lld is invalid\", {ds.who(ctx)}, (long long)sz[k]);", "sum += sz[k];", "}",
             f"if (sum != ({x.dims[axis]})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: split sizes sum to %lld, "
             f"but the axis has %lld elements\", {ds.who(ctx)}, (long long)sum, (long long)({x.dims[axis]}));"]
    for k, y in enumerate(ctx.outs):
        lines.append(ds.bind(ctx, k, [f"sz[{k}]" if a == axis else y.dims[a] for a in range(y.rank)]))
    return "\n".join([*lines, "return 0;"])


@kernel("Split", types=MOVES, shape_fn=split_shape)
def split(ctx: KernelCtx) -> str:
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
    return "\n".join([ds.in_dims(ctx, 0, "din"), ds.read_ints(ctx, 1, r, "rep"), f"int64_t dout[{max(r, 1)}];",
                      f"for (int a = 0; a < {r}; a++) {{",
                      "if (rep[a] < 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: repeats must not be negative, "
                      f"got %lld\", {ds.who(ctx)}, (long long)rep[a]);",
                      "if (din[a] && rep[a] > INT64_MAX / din[a]) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: "
                      f"repeats %lld make the output too large\", {ds.who(ctx)}, (long long)rep[a]);",
                      "dout[a] = din[a] * rep[a];", "}",
                      ds.check(f"onnxc_check_dims(rt, {ds.who(ctx)}, \"output shape\", {r}, dout)"),
                      ds.bind_array(ctx, 0, "dout"), "return 0;"])


@kernel("Tile", types=MOVES, shape_fn=tile_shape)
def tile(ctx: KernelCtx) -> str:
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


@kernel("Dropout", types=MOVABLE)
def dropout(ctx: KernelCtx) -> str:
    if random.dropout_may_train(ctx.node):
        return random.dropout_training(ctx)
    x = ctx.ins[0]
    lines = []
    n = x.numel()
    lines.append(copy("out0", "in0", n, x.ctype))
    if len(ctx.outs) > 1:
        m = ctx.outs[1]
        lines.append(f"for (int64_t i = 0; i < {n}; i++) out1[i] = ({m.ctype})1;")
    lines.append("return 0;")
    return "\n".join(lines)
