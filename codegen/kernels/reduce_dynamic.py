"""Reduce* whose ``axes`` input is known only at run time.

The shape function validates the axes (in range, no repeats) and binds the output dims (1 or the
input dim with keepdims, the kept dims otherwise). The kernel rebuilds the reduced-axes mask from the
same input and walks the input row by row: each input axis has an output stride (0 when reduced), so
every element combines into ``out[sum(coord * ostride)]``. Slower than the specialized loop nests of
reduce.py, which need the axes at compile time, but it keeps models with computed axes running.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.reduce import REDUCE_OPS

from ..templating import render
from . import dynshape as ds
from .base import KernelCtx, shape_function
from .reduce import _REDUCE, FLOATS, Comb, _term, identity, mfn


def _values(ctx: KernelCtx) -> dict:
    """What both templates read: the rank, the axes (input 1, ``ax``) and the input dims (``din``)."""
    r = ctx.ins[0].rank
    k = int(ctx.ins[1].shape[0]) if ctx.ins[1].rank else 1
    ds.include(ctx)
    return {"r": r, "k": k, "read_axes": ds.read_ints(ctx, 1, k, "ax"), "din": ds.in_dims(ctx, 0, "din"),
            "who": ds.who(ctx)}


@shape_function(*REDUCE_OPS)
def reduce_shape(ctx: KernelCtx) -> str:
    return render("reduce_dynamic.c.j2", kind="shape", keep=bool(ctx.attr("keepdims", 1)),
                  bind=ds.bind_array(ctx, 0, "dout"), **_values(ctx))


def runtime_axes_body(ctx: KernelCtx) -> str:
    """Kernel body of a Reduce* node whose axes are read at run time (already validated)."""
    x, y = ctx.ins[0], ctx.outs[0]
    op, dt = ctx.node.op_type, x.dtype
    values = dict(kind="body", nout=y.numel(), numel=x.numel(), T=dt.c, floats=dt in FLOATS, **_values(ctx))
    if op == "ReduceLogSumExp":
        sd = dt if dt in FLOATS else DType.DOUBLE
        st = sd.c
        shift = "(isinf(xv) ? -INFINITY : xv)" if dt in FLOATS else "xv"
        return render("reduce_dynamic.c.j2", logsumexp=True, ST=st, ident=identity("max", dt),
                      update=Comb("max", dt)("out0[o]", shift),
                      sum_update=Comb("+", sd)("sum[o]", f"{mfn('exp', sd)}(({st})xv - ({st})out0[o])"),
                      final=f"{mfn('log', sd)}(sum[i]) + ({st})out0[i]", **values)
    spec = _REDUCE[op]
    comb_op = spec.comb
    if dt == DType.BOOL:
        comb_op = "||" if op == "ReduceMax" else "&&"
    final = spec.final if dt in FLOATS else spec.final_int
    if final:
        final = final.format(a="out0[i]", n="count", T=dt.c, sqrt=mfn("sqrt", dt), log=mfn("log", dt))
    return render("reduce_dynamic.c.j2", logsumexp=False, ident=identity(comb_op, dt),
                  update=Comb(comb_op, dt)("out0[o]", _term(spec.term, "xv", dt).format(x="xv")),
                  final=final, **values)
