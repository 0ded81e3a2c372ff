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

from . import dynshape as ds
from .base import KernelCtx, shape_function
from .reduce import _REDUCE, FLOATS, Comb, _term, identity, mfn


def _mask(ctx: KernelCtx, check: bool) -> list[str]:
    """``red[a]`` = 1 for each axis listed in input 1 (validated when ``check``)."""
    r, k = ctx.ins[0].rank, int(ctx.ins[1].shape[0]) if ctx.ins[1].rank else 1
    lines = [ds.read_ints(ctx, 1, k, "ax"), f"int red[{max(r, 1)}] = {{0}};", f"for (int j = 0; j < {k}; j++) {{",
             f"const int a = onnxc_axis(ax[j], {r});"]
    if check:
        lines.append("if (a < 0 || red[a]) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: axes entry %lld is out of "
                     f"range or repeated (rank {r})\", {ds.who(ctx)}, (long long)ax[j]);")
    return [*lines, "red[a] = 1;", "}"]


@shape_function(*REDUCE_OPS)
def reduce_shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    ds.include(ctx)
    keep = bool(ctx.attr("keepdims", 1))
    lines = [ds.in_dims(ctx, 0, "din"), *_mask(ctx, True), f"int64_t dout[{max(x.rank, 1)}]; int o = 0;",
             f"for (int a = 0; a < {x.rank}; a++) "
             + ("dout[o++] = red[a] ? 1 : din[a];" if keep else "if (!red[a]) dout[o++] = din[a];"),
             "(void)o;"]
    return "\n".join([*lines, ds.bind_array(ctx, 0, "dout"), "return 0;"])


def _walk(r: int, acc: str, update: str) -> list[str]:
    """For every input element ``in0[i]``: ``acc[o] = update`` with ``o`` its output offset and ``xv`` its value."""
    return ["for (int64_t row = 0; row < rows; row++) {", "int64_t rem = row, ob = 0;",
            f"for (int a = {r - 2}; a >= 0; a--) {{ ob += (rem % din[a]) * ostr[a]; rem /= din[a]; }}",
            f"const int64_t os = ostr[{r - 1}];",
            "for (int64_t j = 0; j < w; j++) {", "const int64_t o = ob + j * os;",
            "const __typeof__(in0[0]) xv = in0[row * w + j];", f"{acc}[o] = {update};", "}", "}"]


def runtime_axes_body(ctx: KernelCtx) -> str:
    """Kernel body of a Reduce* node whose axes are read at run time (already validated)."""
    x, y = ctx.ins[0], ctx.outs[0]
    op, dt, r = ctx.node.op_type, x.dtype, x.rank
    ds.include(ctx)
    lines = [ds.in_dims(ctx, 0, "din"), *_mask(ctx, False),
             f"int64_t ostr[{r}], count = 1;",
             f"{{ int64_t s = 1; for (int a = {r - 1}; a >= 0; a--) {{ ostr[a] = red[a] ? 0 : s; "
             "if (red[a]) count *= din[a]; else s *= din[a]; } }",
             f"const int64_t w = din[{r - 1}], nout = {y.numel()};",
             f"const int64_t rows = w ? ({x.numel()}) / w : 0;", "(void)count;"]
    if op == "ReduceLogSumExp":
        sd = dt if dt in FLOATS else DType.DOUBLE
        st = sd.c
        mx, add = Comb("max", dt), Comb("+", sd)
        shift = "(isinf(xv) ? -INFINITY : xv)" if dt in FLOATS else "xv"
        lines += [f"for (int64_t i = 0; i < nout; i++) out0[i] = {identity('max', dt)};",
                  *_walk(r, "out0", mx("out0[o]", shift)),
                  f"{st} *sum = onnxc_alloc((size_t)nout * sizeof({st}));",
                  f"if (!sum) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ds.who(ctx)});",
                  "for (int64_t i = 0; i < nout; i++) sum[i] = 0;"]
        if dt in FLOATS:
            lines.append("for (int64_t i = 0; i < nout; i++) if (!isfinite(out0[i])) out0[i] = 0;")
        lines += [*_walk(r, "sum", add("sum[o]", f"{mfn('exp', sd)}(({st})xv - ({st})out0[o])")),
                  f"for (int64_t i = 0; i < nout; i++) out0[i] = ({dt.c})({mfn('log', sd)}(sum[i]) + ({st})out0[i]);",
                  "free(sum);", "return 0;"]
        return "\n".join(lines)
    spec = _REDUCE[op]
    comb_op = spec.comb
    if dt == DType.BOOL:
        comb_op = "||" if op == "ReduceMax" else "&&"
    comb = Comb(comb_op, dt)
    lines += [f"for (int64_t i = 0; i < nout; i++) out0[i] = {identity(comb_op, dt)};",
              *_walk(r, "out0", comb("out0[o]", _term(spec.term, "xv", dt).format(x="xv")))]
    final = spec.final if dt in FLOATS else spec.final_int
    if final:
        expr = final.format(a="out0[i]", n="count", T=dt.c, sqrt=mfn("sqrt", dt), log=mfn("log", dt))
        lines.append(f"for (int64_t i = 0; i < nout; i++) out0[i] = ({dt.c})({expr});")
    return "\n".join([*lines, "return 0;"])
