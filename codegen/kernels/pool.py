"""Pooling kernels: MaxPool (with optional Indices), AveragePool, LpPool (templates/pool.c.j2) and the
global pools (one reduction per (n, c) plane).

Max, sum and sum of |x|^p windows are separable, so each output row (n, c, od, oh) costs two
vectorized passes: a vertical one combining its (kd, kh) tap rows column by column into a row buffer
(one unrolled pass when all taps lie inside the input, clipped tap rows at the border), and a
horizontal one combining KW buffer columns per output (unrolled, unit stride or strided). The buffer's
padding columns hold the combination's identity, so neither pass checks bounds. Blocks of rows are
spread over the runtime's pool (each thread with its own buffer, codegen/kernels/parcall.py) when the
work is large; the global pools spread their planes. AveragePool divides by the taps
inside the input (count_include_pad=0) or inside the padded extent (count_include_pad=1); taps that
ceil_mode pushes past the padded extent never count, as in onnxruntime and PyTorch. MaxPool's Indices
keep the row-major first maximum of each window.
"""

from __future__ import annotations

from collections.abc import Callable

from onnxc.ir import DType
from onnxc.passes.shapes.pool import pool_window

from ..cexpr import c_literal, c_product
from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .conv import _as3
from .nncommon import FLOATS, mfn
from .parcall import SLOTS, par_call
from .parfor import par_for

MAXPOOL_TYPES = FLOATS | {DType.INT8, DType.UINT8}
_LOWEST = {DType.FLOAT: "-INFINITY", DType.DOUBLE: "-INFINITY", DType.INT8: "INT8_MIN", DType.UINT8: "0"}
_UNROLL_W = 16  # kernel widths whose horizontal taps are unrolled
_UNROLL_ROWS = 16  # (kd, kh) tap rows combined in one unrolled pass over interior output rows
# first and one-past-last kernel tap k with 0 <= start + k * dil < lim
_TAPS = """static inline int64_t onnxc_tap_lo(int64_t start, int64_t dil) {
    return start >= 0 ? 0 : (-start + dil - 1) / dil;
}
static inline int64_t onnxc_tap_hi(int64_t start, int64_t dil, int64_t lim, int64_t k) {
    const int64_t n = lim - start <= 0 ? 0 : (lim - start + dil - 1) / dil;
    return n < k ? n : k;
}
"""


def _lp_p(ctx: KernelCtx) -> float:
    return float(ctx.attr("p", 2.0 if ctx.node.version < 2 else 2))


def _lp_term_finish(p: float, dt: DType, v: str = "v") -> tuple[str, str]:
    """C expressions for one LpPool term (of element ``v``) and the final value (of ``acc``)."""
    if p == 2:
        return f"{v} * {v}", f"{mfn('sqrt', dt)}(acc)"
    if p == 1:
        return f"{mfn('fabs', dt)}({v})", "acc"
    return (f"{mfn('pow', dt)}({mfn('fabs', dt)}({v}), {c_literal(p, dt)})",
            f"{mfn('pow', dt)}(acc, {c_literal(1.0 / p, dt)})")


@kernel("MaxPool", types=MAXPOOL_TYPES | half.HALF)
@half.via_float32
def max_pool(ctx: KernelCtx) -> str:
    return _pool(ctx, "max")


@kernel("AveragePool", types=FLOATS | half.HALF)
@half.via_float32
def average_pool(ctx: KernelCtx) -> str:
    return _pool(ctx, "avg")


@kernel("LpPool", types=FLOATS | half.HALF)
@half.via_float32
def lp_pool(ctx: KernelCtx) -> str:
    return _pool(ctx, "lp")


def _comb(kind: str) -> Callable[[str, str], str]:
    """C expression combining a partial result ``a`` with a term ``b``: max, or + for the sums."""
    if kind == "max":
        return lambda a, b: f"(({b}) > ({a}) ? ({b}) : ({a}))"
    return lambda a, b: f"({a}) + ({b})"


def _pool(ctx: KernelCtx, kind: str) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    dt = x.dtype
    win = pool_window(ctx.node)
    if win.rank > 3:
        raise NotImplementedError(f"{win.rank}-D pooling is not supported (1-D to 3-D)")
    term, finish = _lp_term_finish(_lp_p(ctx), dt) if kind == "lp" else ("v", "acc")
    kw, dw = win.kernel[-1], win.dilations[-1]
    k3, d3 = _as3(list(win.kernel), 1), _as3(list(win.dilations), 1)
    # row offsets (after the first) of the (kd, kh) taps, for the unrolled pass over interior rows
    taps = []
    if len(ctx.outs) == 1 and k3[0] * k3[1] - 1 < _UNROLL_ROWS:
        taps = [f"({kd * d3[0]} * IH + {kh * d3[1]}) * IW" for kd in range(k3[0]) for kh in range(k3[1])][1:]
    vals = dict(
        T=dt.c, N=x.dims[0], C=x.dims[1], I=_as3(x.dims[2:], "1"), O=_as3(y.dims[2:], "1"),
        K=_as3([str(k) for k in win.kernel], "1"), S=_as3([str(s) for s in win.strides], "1"),
        Dl=_as3([str(d) for d in win.dilations], "1"), P=_as3([ctx.dim(p) for p in win.pads_begin], "0"),
        PE=_as3([ctx.dim(p) for p in win.pads_end], "0"), kind=kind,
        include_pad=bool(ctx.attr("count_include_pad", 0)),
        ident=_LOWEST.get(dt, "0") if kind == "max" else "0", comb=_comb(kind),
        indices=len(ctx.outs) > 1, column_major=bool(ctx.attr("storage_order", 0)),
        term=term, finish=finish, taps=taps, unroll_w=kw <= _UNROLL_W, KWs=kw, DWs=dw, who=ctx.who,
        work=f"NC * OP * {c_product([str(k) for k in win.kernel])}", par=par_call(ctx), slots=SLOTS,
    )
    ctx.helper("onnxc_pool_taps", _TAPS)
    return render("pool.c.j2", **vals)


@kernel("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", types=FLOATS | half.HALF)
@half.via_float32
def global_pool(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    op = ctx.node.op_type
    plane = c_product(x.dims[2:]) if x.rank > 2 else "1"
    head = [f"const int64_t NC = {c_product(x.dims[:2])}, P = {plane};"]
    body = [f"    const {dt.c} *x = in0 + nc * P;"]
    if op == "GlobalMaxPool":
        body += [f"    {dt.c} acc = -INFINITY;",
                 "#pragma omp simd reduction(max : acc)",
                 "    for (int64_t i = 0; i < P; i++) acc = x[i] > acc ? x[i] : acc;",
                 "    out0[nc] = acc;"]
    else:
        term, finish = ("x[i]", f"acc / ({dt.c})P") if op == "GlobalAveragePool" else \
            _lp_term_finish(_lp_p(ctx), dt, "x[i]")
        body += [f"    {dt.c} acc = 0;",
                 "#pragma omp simd reduction(+ : acc)",
                 f"    for (int64_t i = 0; i < P; i++) acc += {term};",
                 f"    out0[nc] = {finish};"]
    # the (n, c) planes on the runtime's pool
    return "\n".join([*head, *par_for(ctx, "nc", "NC", body, work="NC * P", head=head), "return 0;"])
