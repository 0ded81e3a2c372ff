"""Reduction kernels: Reduce*, ArgMax/ArgMin, CumSum/CumProd, TopK, LpNormalization, MVN.

Reduce* and MeanVarianceNormalization share one mechanism. The input's axes are coalesced into
alternating blocks of kept (K) and reduced (R) axes (static 1-sized axes dropped, adjacent axes of
one kind merged), e.g. reducing axes (1, 2) of [N, C, H, W] gives blocks [K N, R C*H, K W]. One loop
nest walks the input in memory order; the output (or an accumulator of the output's size) is
initialized with the reduction's identity and each input element is combined into it:

- innermost block K: a contiguous, vectorized row update ``acc[ob + j] = comb(acc[ob + j], x[ib + j])``;
- innermost block R: a horizontal ``#pragma omp simd reduction`` into a register, then one store.

A finalization loop applies Mean's division, L2's sqrt, the logs. Integer sums and products wrap in
the element width (computed in unsigned arithmetic, no undefined overflow). Ops with one axis
(ArgMax, CumSum, TopK, LpNormalization) view the tensor as [O, N, I] and render templates/reduce.c.j2;
the nests render templates/reduce_nest.c.j2, the Reduce*/MVN kernels around them templates/reduce_ops.c.j2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onnxc.ir import Dim, DType
from onnxc.passes.shapes.reduce import MVN_EPSILON, REDUCE_OPS, mvn_axes, reduce_axes
from onnxc.passes.shapes.shape_ops import RUNTIME

from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .parcall import par_call

NUMERIC = frozenset({DType.FLOAT, DType.DOUBLE, DType.INT8, DType.UINT8, DType.INT16, DType.UINT16,
                     DType.INT32, DType.UINT32, DType.INT64, DType.UINT64})
FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})

_INT_MIN = {DType.INT8: "INT8_MIN", DType.INT16: "INT16_MIN", DType.INT32: "INT32_MIN", DType.INT64: "INT64_MIN"}
_INT_MAX = {DType.INT8: "INT8_MAX", DType.INT16: "INT16_MAX", DType.INT32: "INT32_MAX", DType.INT64: "INT64_MAX",
            DType.UINT8: "UINT8_MAX", DType.UINT16: "UINT16_MAX", DType.UINT32: "UINT32_MAX",
            DType.UINT64: "UINT64_MAX"}


def mfn(name: str, dt: DType) -> str:
    """The <math.h> function ``name`` for the float type ``dt`` (sqrtf for float, sqrt for double)."""
    return name + "f" if dt == DType.FLOAT else name


def wrap_type(dt: DType) -> str:
    """Unsigned C type in which integer + and * wrap like the element width (no signed overflow)."""
    return "uint64_t" if dt.itemsize == 8 else "uint32_t"


# -- combining operators --------------------------------------------------------------------------

@dataclass(frozen=True)
class Comb:
    """How two partial results combine: ``omp`` names the OpenMP reduction operator."""

    omp: str            # + * max min || &&
    dtype: DType

    def __call__(self, a: str, b: str) -> str:
        dt = self.dtype
        if self.omp in ("+", "*"):
            if dt.is_int:
                w = wrap_type(dt)
                return f"({dt.c})(({w})({a}) {self.omp} ({w})({b}))"
            return f"({a}) {self.omp} ({b})"
        if self.omp in ("||", "&&"):
            return f"({a}) {self.omp} ({b})"
        cmp = ">" if self.omp == "max" else "<"
        return f"(({b}) {cmp} ({a}) ? ({b}) : ({a}))"


def identity(op: str, dt: DType) -> str:
    """C literal of the reduction identity of ``op`` over ``dt``."""
    if op in ("max", "min"):
        big = op == "min"
        if dt == DType.BOOL:
            return "true" if big else "false"
        if dt in FLOATS:
            return "INFINITY" if big else "-INFINITY"
        if big:
            return _INT_MAX[dt]
        return _INT_MIN.get(dt, "0")
    if op == "&&":
        return "true"
    if op == "||":
        return "false"
    return "1" if op == "*" else "0"


# -- block view and loop nest ---------------------------------------------------------------------

def blocks(shape: tuple, reduced: set[int]) -> list[tuple[bool, Dim]]:
    """Coalesced (is_reduced, extent) blocks of ``shape``; static 1-sized axes are dropped."""
    out: list[tuple[bool, Dim]] = []
    for i, d in enumerate(shape):
        if isinstance(d, int) and d == 1:
            continue
        red = i in reduced
        if out and out[-1][0] == red:
            out[-1] = (red, out[-1][1] * d)
        else:
            out.append((red, d))
    return out or [(False, 1)]


@dataclass(frozen=True)
class RowStep:
    """Innermost step over a kept block: ``lhs = rhs`` for each ``j`` < ``n``, vectorized."""

    n: str
    lhs: str
    rhs: str
    omp: None = None


@dataclass(frozen=True)
class SumStep:
    """Innermost step over a reduced block: ``s`` (C type ``type``, from ``start``) gets ``update`` for each
    ``j`` < ``n`` as an OpenMP ``omp`` reduction, then ``store = (acc_t)s``."""

    n: str
    type: str
    start: str
    omp: str
    update: str
    store: str
    acc_t: str


Body = Callable[[bool, str, str], RowStep | SumStep]  # (innermost is reduced, input base, output base) -> step


PAR_MIN = 1 << 15  # elements below which a nest stays single-threaded (as elementwise loops: codegen/kernels/loops.py)


def loop_nest(ctx: KernelCtx, blks: list[tuple[bool, Dim]], body: Body, work: Dim | None = None,
              captures: Sequence[tuple[str, str]] = ()) -> str:
    """Loops over every block but the last, in memory order (templates/reduce_nest.c.j2); ``body`` gives the
    step over the innermost block (extent ``e<last>``) from the linear input and output offsets of its
    first element.

    With ``work`` (the input's element count) the outermost loop runs on the runtime's pool
    (codegen/kernels/parfor.py) when it is a kept block (its iterations write disjoint outputs, so the
    results do not depend on the thread count) and the work is large enough; ``captures`` are the
    (C type, name) locals the body reads besides the operands and the extents (scratch pointers)."""
    m = len(blks)
    levels = []
    a_prev = b_prev = None
    for k in range(m - 1):
        b = None
        if not blks[k][0]:
            b = f"{b_prev} * e{k} + i{k}" if b_prev else f"i{k}"
        levels.append({"k": k, "a": f"{a_prev} * e{k} + i{k}" if a_prev else f"i{k}", "b": b})
        a_prev, b_prev = f"a{k}", (f"b{k}" if b else b_prev)
    last = m - 1
    ib = f"{a_prev} * e{last}" if a_prev else "0"
    if blks[last][0]:
        ob = b_prev or "0"
    else:
        ob = f"{b_prev} * e{last}" if b_prev else "0"
    parallel = m > 1 and work is not None and not blks[0][0] and not (isinstance(work, int) and work < PAR_MIN)
    return render("reduce_nest.c.j2", levels=levels, step=body(blks[last][0], ib, ob), parallel=parallel,
                  work=ctx.dim(work) if parallel else None, head="\n".join(extents(ctx, blks)),
                  captures=list(captures), grain=PAR_MIN // 2, par=par_call(ctx))


def extents(ctx: KernelCtx, blks: list[tuple[bool, Dim]]) -> list[str]:
    return [f"const int64_t e{k} = {ctx.dim(d)};" for k, (_, d) in enumerate(blks)]


def accumulate(blks: list[tuple[bool, Dim]], acc: str, acc_t: str, comb: Comb, ident: str,
               term: Callable[[str, str], str], src: str = "in0") -> Body:
    """Innermost step combining ``term(x, out_index)`` of each element into ``acc[out_index]``.

    With no reduced block at all the term is stored directly (a reduction over no axes)."""
    reducing = any(red for red, _ in blks)
    only_inner = reducing and [red for red, _ in blks].count(True) == 1 and blks[-1][0]
    n = f"e{len(blks) - 1}"

    def body(red: bool, ib: str, ob: str) -> RowStep | SumStep:
        if not red:
            rhs = term(f"{src}[{ib} + j]", f"{ob} + j")
            if reducing:
                rhs = comb(f"{acc}[{ob} + j]", rhs)
            return RowStep(n, f"{acc}[{ob} + j]", rhs)
        s_t = wrap_type(comb.dtype) if comb.dtype.is_int and comb.omp in ("+", "*") else acc_t
        t = term(f"{src}[{ib} + j]", ob)
        step = f"s {comb.omp}= ({s_t})({t});" if comb.omp in ("+", "*") else f"s = {comb('s', t)};"
        return SumStep(n, s_t, ident if only_inner else f"{acc}[{ob}]", comb.omp, step, f"{acc}[{ob}]", acc_t)

    return body


def needs_init(blks: list[tuple[bool, Dim]]) -> bool:
    """Whether the accumulator must be pre-filled with the identity (some output is combined twice)."""
    reds = [red for red, _ in blks]
    return any(reds) and not (reds.count(True) == 1 and reds[-1])


def unused_inputs(ctx: KernelCtx) -> list[str]:
    """Silence unused-parameter warnings for inputs read at compile time (axes, k)."""
    return [f"(void)in{i};" for i, op in enumerate(ctx.ins) if i > 0 and op is not None]


# -- Reduce* --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReduceSpec:
    comb: str                   # combining operator
    term: str                   # {x}: the mapped element
    final: str | None = None    # {a}: accumulated value, {n}: element count (float types)
    final_int: str | None = None  # same for integer types, computed in double / int64


_REDUCE = {
    "ReduceSum": ReduceSpec("+", "{x}"),
    "ReduceMean": ReduceSpec("+", "{x}", "{a} / ({T})({n})", "(({n}) ? {a} / (int64_t)({n}) : 0)"),
    "ReduceMax": ReduceSpec("max", "{x}"),
    "ReduceMin": ReduceSpec("min", "{x}"),
    "ReduceProd": ReduceSpec("*", "{x}"),
    "ReduceL1": ReduceSpec("+", "ABS"),
    "ReduceL2": ReduceSpec("+", "SQUARE", "{sqrt}({a})", "sqrt((double)({a}))"),
    "ReduceLogSum": ReduceSpec("+", "{x}", "{log}({a})", "log((double)({a}))"),
    "ReduceSumSquare": ReduceSpec("+", "SQUARE"),
}


def _term(kind: str, x: str, dt: DType) -> str:
    if kind == "ABS":
        if dt in FLOATS:
            return f"{mfn('fabs', dt)}({x})"
        return f"({x} < 0 ? -{x} : {x})" if dt.is_signed else x
    if kind == "SQUARE":
        return f"({x}) * ({x})" if dt in FLOATS else f"({dt.c})(({wrap_type(dt)}){x} * ({wrap_type(dt)}){x})"
    return x


# Element types per reduction. Integer sums and products wrap in the element width (exact modulo
# 2**bits, like a cast of the exact result); Mean and L2 divide or take the root of that sum, so they
# keep to the widths the spec lists; the logs take floats and, as opsets before 28 allow, the 32/64-bit
# ints (the sum is taken in the element width, the log in double). Max and Min also take bool.
_WIDE_INTS = frozenset({DType.INT32, DType.INT64, DType.UINT32, DType.UINT64})
REDUCE_TYPES = {"ReduceMax": NUMERIC | half.HALF | {DType.BOOL}, "ReduceMin": NUMERIC | half.HALF | {DType.BOOL},
                "ReduceMean": FLOATS | half.HALF | _WIDE_INTS, "ReduceL2": FLOATS | half.HALF | _WIDE_INTS,
                "ReduceLogSum": FLOATS | half.HALF | _WIDE_INTS, "ReduceLogSumExp": FLOATS | half.HALF | _WIDE_INTS}


def _register(fn):
    """One kernel per reduction, typed by REDUCE_TYPES (every other one: NUMERIC and half types)."""
    for op in REDUCE_OPS:
        kernel(op, types=REDUCE_TYPES.get(op, NUMERIC | half.HALF))(fn)
    return fn


@_register
@half.via_float32
def reduce_kernel(ctx: KernelCtx) -> str:
    op = ctx.node.op_type
    x, y = ctx.ins[0], ctx.outs[0]
    dt = x.dtype  # float for float16/bfloat16 (via_float32)
    axes = reduce_axes(ctx.node, x.rank)
    if axes is RUNTIME:
        from .reduce_dynamic import runtime_axes_body

        return runtime_axes_body(ctx)
    blks = blocks(x.shape, set(axes))
    values = {"head": "\n".join(unused_inputs(ctx) + extents(ctx, blks)), "nout": ctx.dim(math.prod(y.shape)),
              "init": needs_init(blks), "T": dt.c}
    if op == "ReduceLogSumExp":
        return _logsumexp(ctx, blks, values)
    spec = _REDUCE[op]
    comb_op = spec.comb
    if dt == DType.BOOL:
        comb_op = "||" if op == "ReduceMax" else "&&"
    ident = identity(comb_op, dt)
    nest = loop_nest(ctx, blks, accumulate(blks, "out0", dt.c, Comb(comb_op, dt), ident,
                                           lambda xe, _o: _term(spec.term, xe, dt).format(x=xe)),
                     work=math.prod(x.shape))
    final = spec.final if dt in FLOATS else spec.final_int
    if final:
        final = final.format(a="out0[i]", n=ctx.dim(math.prod(x.shape[a] for a in axes)), T=dt.c,
                             sqrt=mfn("sqrt", dt), log=mfn("log", dt))
    return render("reduce_ops.c.j2", kind="reduce", ident=ident, nest=nest, final=final, **values)


def _logsumexp(ctx: KernelCtx, blks: list, values: dict) -> str:
    """Two passes: the largest finite element per output (the shift), then log(sum(exp(x - shift))) + shift."""
    x = ctx.ins[0]
    dt = x.dtype
    work = math.prod(x.shape)
    sd = dt if dt in FLOATS else DType.DOUBLE
    st = sd.c
    lo = identity("max", dt)
    finite = (lambda xe, _o: f"(isinf({xe}) ? -INFINITY : {xe})") if dt in FLOATS else (lambda xe, _o: xe)
    nest_max = loop_nest(ctx, blks, accumulate(blks, "out0", dt.c, Comb("max", dt), lo, finite), work=work)
    ctx.include("onnxc_vmath.h")  # exp that vectorizes
    nest_sum = loop_nest(ctx, blks, accumulate(blks, "sum", st, Comb("+", sd), "0",
                                               lambda xe, o: f"onnxc_vm_exp_{st}(({st}){xe} - ({st})out0[{o}])"),
                         work=work, captures=[(f"{st} *", "sum")])
    return render("reduce_ops.c.j2", kind="logsumexp", ident=lo, nest_max=nest_max, nest_sum=nest_sum, ST=st,
                  floats=dt in FLOATS, log=mfn("log", sd), who=ctx.who, **values)


# -- MeanVarianceNormalization --------------------------------------------------------------------

@kernel("MeanVarianceNormalization", types=FLOATS)
def mvn_kernel(ctx: KernelCtx) -> str:
    """(x - mean) / (sqrt(var) + 1e-9) with mean and variance over ``axes`` (two-pass variance)."""
    x = ctx.ins[0]
    dt = x.dtype
    t = dt.c
    axes = mvn_axes(ctx.node, x.rank)
    blks = blocks(x.shape, set(axes))
    work = math.prod(x.shape)
    add = Comb("+", dt)
    mine = [(f"{t} *", "m"), (f"{t} *", "d")]
    last = f"e{len(blks) - 1}"

    def write(red: bool, ib: str, ob: str) -> RowStep:
        o = ob if red else f"{ob} + j"
        return RowStep(last, f"out0[{ib} + j]", f"(in0[{ib} + j] - m[{o}]) / d[{o}]")

    return render("reduce_ops.c.j2", kind="mvn", head="\n".join(extents(ctx, blks)), T=t,
                  nout=ctx.dim(math.prod(d for i, d in enumerate(x.shape) if i not in axes)),
                  count=ctx.dim(math.prod(x.shape[a] for a in axes)), init=needs_init(blks), who=ctx.who,
                  nest_mean=loop_nest(ctx, blks, accumulate(blks, "m", t, add, "0", lambda xe, _o: xe), work=work,
                                      captures=mine),
                  nest_var=loop_nest(ctx, blks, accumulate(blks, "d", t, add, "0",
                                                           lambda xe, o: f"({xe} - m[{o}]) * ({xe} - m[{o}])"),
                                     work=work, captures=mine),
                  nest_write=loop_nest(ctx, blks, write, work=work, captures=mine),
                  sqrt=mfn("sqrt", dt), eps=f"{MVN_EPSILON!r}" + ("f" if dt == DType.FLOAT else ""))


# -- single-axis ops: [O, N, I] views -------------------------------------------------------------

def oni(ctx: KernelCtx, shape: tuple, axis: int) -> dict:
    """C expressions of the [outer, axis, inner] view plus static facts about the inner size."""
    inner = math.prod(shape[axis + 1:])
    return {"O": ctx.dim(math.prod(shape[:axis])), "N": ctx.dim(shape[axis]), "I": ctx.dim(inner),
            "inner_one": inner == 1, "inner_many": isinstance(inner, int) and inner > 1}


def _axis(ctx: KernelCtx, default: int) -> int:
    r = ctx.ins[0].rank
    a = int(ctx.attr("axis", default))
    return a + r if a < 0 else a


@kernel("ArgMax", "ArgMin", types=NUMERIC | half.HALF)
@half.via_float32
def arg_kernel(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    axis = _axis(ctx, 0)
    cmp = ">" if ctx.node.op_type == "ArgMax" else "<"
    if ctx.attr("select_last_index", 0):
        cmp += "="
    n = x.shape[axis]
    return render("reduce.c.j2", kind="argmax", T=x.ctype, cmp=cmp, red="max" if cmp[0] == ">" else "min",
                  last=bool(ctx.attr("select_last_index", 0)),
                  maybe_empty=not (isinstance(n, int) and n > 0), **oni(ctx, x.shape, axis))


@kernel("CumSum", "CumProd", types=NUMERIC)
def cum_kernel(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    r = x.rank
    comb = Comb("+" if ctx.node.op_type == "CumSum" else "*", dt)
    a = ctx.const_input(1)
    if a is not None:
        view = oni(ctx, x.shape, int(a.reshape(-1)[0]) % r)  # range checked by the shape rule
    else:  # axis known only at run time: the template computes the view from it
        view = {"O": None, "N": None, "I": None, "inner_one": False, "inner_many": False}
    return render("reduce.c.j2", kind="cum", T=x.ctype, axis_known=a is not None, r=r, dims=", ".join(x.dims),
                  who=ctx.who, comb=comb, ident=identity(comb.omp, dt), exclusive=bool(ctx.attr("exclusive", 0)),
                  reverse=bool(ctx.attr("reverse", 0)), **view)


def _topk_shape(ctx: KernelCtx) -> str:
    """Run-time k: 0 <= k <= the axis size."""
    x = ctx.ins[0]
    axis = _axis(ctx, -1)
    n = x.dims[axis]
    return "\n".join([
        "const int64_t k = (int64_t)in1[0];",
        f"if (k < 0 || k > ({n})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: k = %lld is out of range for an "
        f"axis of %lld elements\", {ctx.who}, (long long)k, (long long)({n}));",
        f"{ctx.lvalue(ctx.outs[0].shape[axis])} = k;", "return 0;"])


@kernel("TopK", types=NUMERIC, shape_fn=_topk_shape)
def topk_kernel(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    axis = _axis(ctx, -1)
    largest = bool(ctx.attr("largest", 1))
    name = f"onnxc_topk_{dt.short}_{'max' if largest else 'min'}"  # runtime_c/onnxc_select.c
    ctx.include("onnxc_select.h")
    k = ctx.outs[0].shape[axis]
    n = x.shape[axis]
    static_ok = isinstance(k, int) and isinstance(n, int) and k <= n
    view = oni(ctx, x.shape, axis)
    body = render("reduce.c.j2", kind="topk", T=x.ctype, K=ctx.dim(k), helper=name, check_k=not static_ok,
                  node=ctx.who, **view)
    return "\n".join([*unused_inputs(ctx), body])


@kernel("LpNormalization", types=FLOATS)
def lpnorm_kernel(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    p = int(ctx.attr("p", 2))
    dt = x.dtype
    term = (lambda e: f"{mfn('fabs', dt)}({e})") if p == 1 else (lambda e: f"{e} * {e}")
    return render("reduce.c.j2", kind="lpnorm", T=x.ctype, p=p, term=term, sqrt=mfn("sqrt", dt),
                  **oni(ctx, x.shape, _axis(ctx, -1)))
