"""Kernels of ops that produce values rather than move them: Shape, Size, onnxc::SymValue (shape
tensors written from the bound dimension variables), ConstantOfShape, Range, OneHot, Trilu, EyeLike.

Shape, Size and SymValue normally fold away or go dead; their kernels exist for symbolic shapes whose
values a later op reads at run time. Constant always folds and needs no kernel. ConstantOfShape,
Range and OneHot whose shape/limits/depth are known only at run time have shape functions.

The C structure is in templates/generate_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.shape_ops import SYM_DOMAIN, fill_value, range_stash, shape_range

from ..cexpr import c_literal, c_product
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, copy
from .typesets import ANY, ARITH

RANGE_TYPES = ARITH  # numbers of every width; floats in double like numpy.arange


def _write_dims(ctx: KernelCtx, dims) -> str:
    lines = [f"out0[{i}] = (int64_t)({ctx.dim(d)});" for i, d in enumerate(dims)]
    return "\n".join(lines + ["return 0;"])


@kernel("Shape", types=ANY)
def shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    a, b = shape_range(ctx.node, x.rank)
    return _write_dims(ctx, x.shape[a:b])


@kernel("Size", types=ANY)
def size(ctx: KernelCtx) -> str:
    return f"out0[0] = (int64_t)({ctx.ins[0].numel()});\nreturn 0;"


@kernel("SymValue", domain=SYM_DOMAIN, types={DType.INT64}, typed="out0")
def sym_value(ctx: KernelCtx) -> str:
    return _write_dims(ctx, ctx.attr("dims"))


def _cos_shape(ctx: KernelCtx) -> str:
    ds.include(ctx)
    k = ctx.outs[0].rank
    return "\n".join([ds.read_ints(ctx, 0, k, "s"),
                      ds.check(f"onnxc_check_dims(rt, {ds.who(ctx)}, \"shape\", {k}, s)"),
                      ds.bind_array(ctx, 0, "s"), "return 0;"])


# not bfloat16: a bfloat16 ``value`` reaches the IR as its uint16 bit pattern (frontend tensor attributes
# keep numpy dtypes), so its type and literal would be wrong
@kernel("ConstantOfShape", types=MOVABLE - {DType.BFLOAT16}, typed="out0", shape_fn=_cos_shape)
def constant_of_shape(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    return render("generate_fill.c.j2", n=y.numel(), value=c_literal(fill_value(ctx.node)[0], y.dtype))


def _range_shape(ctx: KernelCtx) -> str:
    """count = max(ceil((limit - start) / delta), 0); floats in double like the reference's arange."""
    dt = ctx.ins[0].dtype
    t = "float" if dt in half.HALF else ctx.ins[0].ctype
    half.use(ctx)
    fail = f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {{}}\", {ds.who(ctx)});"
    lines = [f"const {t} start = {half.load(dt, 'in0[0]')}, limit = {half.load(dt, 'in1[0]')}, "
             f"delta = {half.load(dt, 'in2[0]')};",
             "if (delta == 0) " + fail.format("delta must not be zero")]
    if dt.is_float:
        lines += ["double n = ceil(((double)limit - (double)start) / (double)delta);",
                  "if (!(n > 0)) n = 0;",
                  "if (n > 9.0e15) " + fail.format("the range has too many elements")]
    else:
        lines += ["const __int128 diff = (__int128)limit - (__int128)start;",
                  "int64_t n = 0;",
                  "if (diff != 0 && (diff > 0) == (delta > 0))",
                  "    n = (int64_t)((diff + (__int128)delta - (delta > 0 ? 1 : -1)) / (__int128)delta);"]
    lines += [ds.assign(ctx, ctx.outs[0].shape[0], "(int64_t)n"), "return 0;"]
    return "\n".join(lines)


def _half_range(ctx: KernelCtx) -> str:
    """float16/bfloat16 (Range-27): start + i * delta in the stash type (float or double), each step
    rounded in that type (volatile: no fused multiply-add), then rounded to the output type."""
    half.use(ctx)
    dt = ctx.outs[0].dtype
    st = "double" if range_stash(ctx.node) == DType.DOUBLE else "float"
    if st == "float":
        out = half.store(dt, "start + p")
    else:  # double -> float16 directly; bfloat16 through float (as ml_dtypes converts)
        out = "onnxc_d2h(start + p)" if dt == DType.FLOAT16 else "onnxc_f2bf((float)(start + p))"
    return render("generate_range.c.j2", half=True, T=st, start=half.load(dt, "in0[0]"), delta=half.load(dt, "in2[0]"),
                  n=ctx.outs[0].numel(), check=False, store=out)


@kernel("Range", types=RANGE_TYPES, shape_fn=_range_shape)
def range_kernel(ctx: KernelCtx) -> str:
    if ctx.ins[0].dtype in half.HALF:
        return _half_range(ctx)
    y = ctx.outs[0]
    t = y.ctype
    if y.dtype.is_float:  # like the reference (numpy arange): start + i * delta in double
        value = f"({t})((double)start + (double)i * (double)delta)"
    else:
        value = f"({t})(start + ({t})i * delta)"
    return render("generate_range.c.j2", half=False, T=t, n=y.numel(), check=y.dtype.is_float, who=ctx.who,
                  value=value)


def _onehot_shape(ctx: KernelCtx) -> str:
    """Run-time depth (any numeric type, truncated to an integer) must be positive."""
    half.use(ctx)
    axis = ctx.node.attr("axis", -1)
    axis = axis + ctx.outs[0].rank if axis < 0 else axis
    return "\n".join([
        f"const double v = (double){half.load(ctx.ins[1].dtype, 'in1[0]')};",
        "if (!(v >= 1 && v < 9.0e15)) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: depth must be positive, "
        f"got %g\", {ds.who(ctx)}, v);",
        ds.assign(ctx, ctx.outs[0].shape[axis], "(int64_t)v"), "return 0;"])


def _onehot_accepts(node: Node) -> str | None:
    """The indices' type (the values', the op's main type, is declared with types=)."""
    v = node.input(0)
    if v is not None and v.dtype is not None and v.dtype not in ARITH:
        return f"{v.dtype.short} indices are not supported"
    return None


@kernel("OneHot", types=MOVABLE, typed="in2", accepts=_onehot_accepts, shape_fn=_onehot_shape)
def onehot(ctx: KernelCtx) -> str:
    half.use(ctx)
    ind, y = ctx.ins[0], ctx.outs[0]
    axis = ctx.node.attr("axis", -1)
    axis = axis + y.rank if axis < 0 else axis
    return render("generate_onehot.c.j2", T=y.ctype, depth=y.dims[axis], outer=c_product(ind.dims[:axis]),
                  inner=c_product(ind.dims[axis:]), n=y.numel(), float_index=ind.dtype.is_float,
                  load_index=half.load(ind.dtype, "in0[o * inner + j]"))


@kernel("Trilu", types=MOVABLE)
def trilu(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    k = "(int64_t)in1[0]" if len(ctx.ins) > 1 and ctx.ins[1] is not None else "0"
    upper = bool(ctx.attr("upper", 1))
    # per row i: upper keeps columns j >= i + k, lower keeps j <= i + k
    split = "i + k" if upper else "i + k + 1"
    zeros = [{"zero": True, "lo": "0", "hi": "m"}, {"zero": True, "lo": "m", "hi": "cols"}]
    copies = [{"zero": False, "stmt": copy(f"d + {lo}", f"s + {lo}", f"{hi} - {lo}", x.ctype)}
              for lo, hi in (("0", "m"), ("m", "cols"))]
    parts = [zeros[0], copies[1]] if upper else [copies[0], zeros[1]]
    return render("generate_trilu.c.j2", k=k, nb=c_product(x.dims[:-2]), rows=x.dims[-2], cols=x.dims[-1], T=x.ctype,
                  split=split, parts=parts, zero=c_literal(0, x.dtype))


@kernel("EyeLike", types=MOVABLE, typed="out0")
def eyelike(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    return render("generate_eyelike.c.j2", rows=y.dims[0], cols=y.dims[1], k=int(ctx.attr("k", 0)),
                  zero=c_literal(0, y.dtype), one=c_literal(1, y.dtype))
