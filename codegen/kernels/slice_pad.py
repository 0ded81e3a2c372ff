"""Slice and Pad kernels.

Both read their bounds as Dims from the same helpers the shape rules use (``slice_params``,
``pad_params``), so symbolic starts/pads become C expressions over the dimension variables. Slice
copies the longest contiguous run (trailing untouched axes merge into one memcpy); Pad fills each
output row in three parts: the leading pad, a memcpy of the input row, the trailing pad.

With starts/ends/axes/steps or pads known only at run time, the shape functions below compute the
slice/pad parameters (run-time variables the kernels read through ``ctx.dim``) and the output dims.

The C is in templates/slice_pad.c.j2 (the kernels), slice_pad_shape.c.j2 (the shape functions) and
slice_pad_src.c.j2 (Pad's source index per mode).
"""

from __future__ import annotations

from onnxc.passes.shapes.indexing import pad_mode, pad_params, slice_params

from ..cexpr import c_literal, c_product
from ..templating import render
from . import dynshape as ds
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES, copy

MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}  # the mode argument of onnxc_pad_src


def _entries(ctx: KernelCtx, i: int) -> int:
    op = ctx.ins[i]
    return int(op.shape[0]) if op.rank else 1


def _ints(ctx: KernelCtx, i: int | None, n: int, var: str, default: str) -> tuple:
    """``int64_t var[n]`` as the shape template declares it: from input ``i``, or filled with ``default``
    (C, may use j_) when it is absent."""
    present = i is not None and i < len(ctx.ins) and ctx.ins[i] is not None
    return var, n, ds.read_ints(ctx, i, n, var) if present else None, default


def slice_shape(ctx: KernelCtx) -> str:
    """Numpy clamping of run-time starts/ends/steps: first index, step and count per sliced axis."""
    x = ctx.ins[0]
    r, n = x.rank, _entries(ctx, 1)
    ds.include(ctx)
    ints = [_ints(ctx, 1, n, "s", ""), _ints(ctx, 2, n, "e", ""), _ints(ctx, 3, n, "ax", "j_"),
            _ints(ctx, 4, n, "k", "1")]
    params = []
    for a, (first, step, _count) in enumerate(slice_params(ctx.node, x.shape)):
        for d, var in ((first, "st"), (step, "sp")):
            if ctx.lvalue(d) is not None:
                params.append((ds.assign(ctx, d, f"{var}[{a}]"), var, a, None))
            elif d != (0 if var == "st" else 1):  # a compile-time parameter: must agree
                params.append((None, var, a, ctx.dim(d)))
    return render("slice_pad_shape.c.j2", op="Slice", din=ds.in_dims(ctx, 0, "din"), ints=ints, r=r, n=n,
                  who=ds.who(ctx), params=params, bind=ds.bind(ctx, 0, [f"cnt[{a}]" for a in range(r)]))


@kernel("Slice", types=MOVES, shape_fn=slice_shape)
def slice_kernel(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    if x.rank == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    params = slice_params(ctx.node, x.shape)
    xs = x.strides()
    full = [p[0] == 0 and p[1] == 1 and p[2] == d for p, d in zip(params, x.shape)]  # (first, step, count)
    j = max((a for a in range(x.rank) if not full[a]), default=-1)
    if j < 0:
        return copy("out0", "in0", x.numel(), x.ctype) + "\nreturn 0;"
    block = c_product(x.dims[j + 1:])
    steps = [f"({ctx.dim(p[1])})" if not isinstance(p[1], int) else p[1] for p in params]  # run-time or static
    base = " + ".join([f"(st{a} + i{a} * {steps[a]}) * ({xs[a]})" for a in range(j)] or ["0"])
    run = c_product([y.dims[j], block])
    values = {"copy_run": None, "copy_block": None, "run": run}
    if steps[j] == 1:
        values["copy_run"] = copy("out0 + o", f"in0 + {base} + st{j} * ({xs[j]})", run, x.ctype, ctx)
    else:
        values["copy_block"] = copy("out0 + o", f"in0 + {base} + (st{j} + ij * {steps[j]}) * ({xs[j]})", block,
                                    x.ctype)
    return render("slice_pad.c.j2", op="Slice", j=j, st=[ctx.dim(p[0]) for p in params[:j + 1]], blk=block,
                  ydims=y.dims, **values)


def _pad_value(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    if ctx.node.version < 11:
        return c_literal(ctx.attr("value", 0.0), y.dtype)
    if len(ctx.ins) > 2 and ctx.ins[2] is not None:
        return "in2[0]"
    return c_literal(0, y.dtype)


def pad_shape(ctx: KernelCtx) -> str:
    """Run-time pads (and axes): the pad before each axis and the output dims (>= 0)."""
    x = ctx.ins[0]
    r, k = x.rank, _entries(ctx, 1)
    m = k // 2
    ds.include(ctx)
    ints = [_ints(ctx, 1, k, "p", ""), _ints(ctx, 3 if ctx.node.version >= 18 else None, m, "ax", "j_")]
    params = [(ds.assign(ctx, b, f"pb[{a}]"), "pb", a, None)
              for a, (b, _e) in enumerate(pad_params(ctx.node, x.shape)) if ctx.lvalue(b) is not None]
    return render("slice_pad_shape.c.j2", op="Pad", din=ds.in_dims(ctx, 0, "din"), ints=ints, r=r, n=m,
                  who=ds.who(ctx), big="INT64_MAX / 4", params=params, bind=ds.bind_array(ctx, 0, "dout"))


@kernel("Pad", types=MOVABLE, shape_fn=pad_shape)
def pad(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    mode = MODES[pad_mode(ctx.node)]
    r = x.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    ctx.helper("onnxc_pad_src", render("slice_pad_src.c.j2"))
    pads = pad_params(ctx.node, x.shape)
    xs = x.strides()
    last = r - 1
    return render("slice_pad.c.j2", op="Pad", X=x.ctype, Y=y.ctype, cv=_pad_value(ctx), mode=mode, last=last,
                  dims=[(x.dims[a], y.dims[a], ctx.dim(pads[a][0])) for a in range(r)],
                  empty=" || ".join(f"d{a} == 0" for a in range(r)), numel=y.numel(), rows=c_product(y.dims[:-1]),
                  axes=[(a, xs[a]) for a in range(last - 1, -1, -1)],
                  copy=copy("dst + lo", f"s + (lo - pb{last})", "hi - lo", x.ctype))
