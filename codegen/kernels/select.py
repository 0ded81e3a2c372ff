"""Kernels of ops whose output size is the number of selected elements: NonZero, Compress, Unique,
NonMaxSuppression.

Each has a shape function that counts what the kernel will select (the run-time dim of
passes/shapes/select.py); the run function then allocates the outputs and the kernel fills them.
Unique and NonMaxSuppression do their selection twice (count, then fill) with the same C helper, so
the two passes agree by construction. NonMaxSuppression's helper (onnxc_nms_<type>) is in
runtime_c/onnxc_select.c, compiled once into the runtime library; Unique's is generated per type
(templates/select_unique_sort.c.j2). The C of NonZero, Compress and Unique is in
templates/select_<op>.c.j2, one template for the shape function and the kernel of an op.

Unique views the input as [O, N, I] (N slices along the axis; O = I = 1 and N = size without an
axis), sorts slice indices with a stable merge sort (numeric order, NaN last and equal to NaN), so
each group of equal slices starts with its first occurrence; ``sorted=0`` renumbers the groups by
first occurrence.
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.select import compress_axis, unique_axis

from ..cexpr import c_product
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES
from .typesets import FLOATS


def _scores_accepts(node: Node) -> str | None:
    """The scores' type must be the boxes' (the boxes' type is declared with types=)."""
    b, s = node.input(0), node.input(1)
    if b is not None and s is not None and None not in (b.dtype, s.dtype) and b.dtype != s.dtype:
        return f"{s.dtype.short} scores with {b.dtype.short} boxes are not supported"
    return None


def _nonzero(x, expr: str) -> str:
    """C test of element ``expr`` of operand ``x`` being nonzero (-0.0 is zero, also as a half bit pattern)."""
    return f"(({expr}) & 0x7fff) != 0" if x.dtype in half.HALF else f"{expr} != 0"


def _mem_fail(ctx: KernelCtx) -> str:
    return f"return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ds.who(ctx)});"


# -- NonZero --------------------------------------------------------------------------------------

def _nonzero_shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    return render("select_nonzero.c.j2", shape=True, n=x.numel(), test=_nonzero(x, "in0[i]"),
                  assign=ds.assign(ctx, ctx.outs[0].shape[1], "c"))


@kernel("NonZero", types=MOVABLE, shape_fn=_nonzero_shape)
def nonzero(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    dims = [(a, x.dims[a]) for a in range(x.rank - 1, -1, -1)]
    return render("select_nonzero.c.j2", shape=False, n=x.numel(), nz=y.dims[1], test=_nonzero(x, "in0[i]"),
                  dims=dims)


# -- Compress -------------------------------------------------------------------------------------

def _compress_view(ctx: KernelCtx) -> tuple[str, str, str]:
    """(outer, axis length, inner) of the input as C expressions."""
    x = ctx.ins[0]
    axis = compress_axis(ctx.node, x.rank)
    if axis is None:
        return "1", x.numel(), "1"
    return c_product(x.dims[:axis]), x.dims[axis], c_product(x.dims[axis + 1:])


def _compress_shape(ctx: KernelCtx) -> str:
    _, n, _ = _compress_view(ctx)
    axis = compress_axis(ctx.node, ctx.ins[0].rank)
    return render("select_compress.c.j2", shape=True, n=n, len=ctx.ins[1].dims[0], who=ds.who(ctx),
                  assign=ds.assign(ctx, ctx.outs[0].shape[0 if axis is None else axis], "cnt"))


@kernel("Compress", types=MOVES, shape_fn=_compress_shape)
def compress(ctx: KernelCtx) -> str:
    outer, n, inner = _compress_view(ctx)
    return render("select_compress.c.j2", shape=False, outer=outer, n=n, inner=inner, len=ctx.ins[1].dims[0],
                  T=ctx.ins[0].ctype)


# -- Unique ---------------------------------------------------------------------------------------

def _unique_view(ctx: KernelCtx) -> dict[str, str]:
    """The values both Unique templates take: the [O, N, I] view, the helpers' suffix (registering them)."""
    x = ctx.ins[0]
    dt = x.dtype
    if dt in half.HALF:
        half.use(ctx)
    load = {DType.FLOAT16: "onnxc_h2f", DType.BFLOAT16: "onnxc_bf2f"}.get(dt, "")
    ctx.helper(f"onnxc_uq_{dt.short}", render("select_unique_sort.c.j2", S=dt.short, T=x.ctype, load=load,
                                              V=half.compute_type(dt).c, is_float=dt.is_float))
    axis = unique_axis(ctx.node, x.rank)
    if axis is None:
        o, n, i = "1", x.numel(), "1"
    else:
        o, n, i = c_product(x.dims[:axis]), x.dims[axis], c_product(x.dims[axis + 1:])
    return {"S": dt.short, "O": o, "N": n, "I": i, "who": ds.who(ctx)}


def _unique_count(ctx: KernelCtx):
    """The run-time dim holding the number of distinct slices (axis of Y, or its only axis)."""
    return ctx.outs[0].shape[unique_axis(ctx.node, ctx.ins[0].rank) or 0]


def _unique_shape(ctx: KernelCtx) -> str:
    return render("select_unique.c.j2", shape=True, assign=ds.assign(ctx, _unique_count(ctx), "u"),
                  **_unique_view(ctx))


@kernel("Unique", types=MOVABLE, shape_fn=_unique_shape)
def unique(ctx: KernelCtx) -> str:
    return render("select_unique.c.j2", shape=False, u=ctx.dim(_unique_count(ctx)), T=ctx.ins[0].ctype,
                  sorted=bool(ctx.attr("sorted", 1)), n_out=len(ctx.outs), **_unique_view(ctx))


# -- NonMaxSuppression ----------------------------------------------------------------------------

def _nms_call(ctx: KernelCtx, out: str) -> str:
    """C computing ``n`` = the selected count (and writing rows to ``out`` unless it is NULL)."""
    bx, sc = ctx.ins[0], ctx.ins[1]
    t, s = bx.ctype, bx.dtype.short
    ctx.include("onnxc_select.h")

    def opt(i: int, expr: str, default: str) -> str:
        return expr if i < len(ctx.ins) and ctx.ins[i] is not None and ctx.ins[i].numel() != "0" else default

    maxout = opt(2, "(int64_t)in2[0]", "0")
    return "\n".join([
        f"const int64_t B = {bx.dims[0]}, S = {bx.dims[1]}, C = {sc.dims[1]};",
        f"if (({sc.dims[0]}) != B || ({sc.dims[2]}) != S || ({bx.dims[2]}) != 4) return onnxc_fail(rt, "
        f"ONNXC_ERR_RUNTIME, \"%s: boxes and scores shapes do not match\", {ds.who(ctx)});",
        f"const int64_t maxout = {maxout} > 0 ? {maxout} : 0;",
        "int64_t *w = onnxc_alloc((size_t)S * 3 * sizeof(int64_t));", "if (!w) " + _mem_fail(ctx),
        f"const int64_t n = onnxc_nms_{s}(in0, in1, B, C, S, maxout, ({t}){opt(3, 'in3[0]', '0')}, "
        f"{'1' if opt(4, 'x', '') else '0'}, ({t}){opt(4, 'in4[0]', '0')}, {int(ctx.attr('center_point_box', 0))}, "
        f"{out}, w);",
        "free(w);"])


def _nms_shape(ctx: KernelCtx) -> str:
    return "\n".join([_nms_call(ctx, "NULL"), ds.assign(ctx, ctx.outs[0].shape[0], "n"), "return 0;"])


@kernel("NonMaxSuppression", types=FLOATS, accepts=_scores_accepts, shape_fn=_nms_shape)
def nms(ctx: KernelCtx) -> str:
    return "\n".join([_nms_call(ctx, "out0"), "(void)n;", "return 0;"])
