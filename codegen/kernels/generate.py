"""Kernels of ops that produce values rather than move them: Shape, Size, onnxc::SymValue (shape
tensors written from the bound dimension variables), ConstantOfShape, Range, OneHot, Trilu, EyeLike.

Shape, Size and SymValue normally fold away or go dead; their kernels exist for symbolic shapes whose
values a later op reads at run time. Constant always folds and needs no kernel. ConstantOfShape,
Range and OneHot whose shape/limits/depth are known only at run time have shape functions.
"""

from __future__ import annotations

from onnxc.ir import Node
from onnxc.passes.shapes.shape_ops import SYM_DOMAIN, fill_value, shape_range

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import clit, copy, cprod, dtype_accepts, require


def _write_dims(ctx: KernelCtx, dims) -> str:
    lines = [f"out0[{i}] = (int64_t)({ctx.dim(d)});" for i, d in enumerate(dims)]
    return "\n".join(lines + ["return 0;"])


@kernel("Shape")
def shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    a, b = shape_range(ctx.node, x.rank)
    return _write_dims(ctx, x.shape[a:b])


@kernel("Size")
def size(ctx: KernelCtx) -> str:
    return f"out0[0] = (int64_t)({ctx.ins[0].numel()});\nreturn 0;"


@kernel("SymValue", domain=SYM_DOMAIN)
def sym_value(ctx: KernelCtx) -> str:
    return _write_dims(ctx, ctx.attr("dims"))


def _cos_accepts(node: Node) -> str | None:
    from onnxc.ir import dtype_from_numpy

    from .copyutil import SUPPORTED

    try:
        dt = dtype_from_numpy(fill_value(node).dtype)
    except Exception:  # noqa: BLE001 - invalid attributes are reported by the shape rule
        return None
    return None if dt in SUPPORTED else f"{dt.short} tensors are not supported yet"


def _cos_shape(ctx: KernelCtx) -> str:
    ds.include(ctx)
    k = ctx.outs[0].rank
    return "\n".join([ds.read_ints(ctx, 0, k, "s"),
                      ds.check(f"onnxc_check_dims(rt, {ds.who(ctx)}, \"shape\", {k}, s)"),
                      ds.bind_array(ctx, 0, "s"), "return 0;"])


@kernel("ConstantOfShape", accepts=_cos_accepts, shape_fn=_cos_shape)
def constant_of_shape(ctx: KernelCtx) -> str:
    require(ctx)
    y = ctx.outs[0]
    v = clit(fill_value(ctx.node)[0], y.dtype)
    return (f"const int64_t n = {y.numel()};\n"
            f"for (int64_t i = 0; i < n; i++) out0[i] = {v};\nreturn 0;")


def _range_shape(ctx: KernelCtx) -> str:
    """count = max(ceil((limit - start) / delta), 0); floats in double like the reference's arange."""
    t = ctx.ins[0].ctype
    fail = f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {{}}\", {ds.who(ctx)});"
    lines = [f"const {t} start = in0[0], limit = in1[0], delta = in2[0];",
             "if (delta == 0) " + fail.format("delta must not be zero")]
    if ctx.ins[0].dtype.is_float:
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


def _range_accepts(node: Node) -> str | None:
    v = node.input(0)
    if v is not None and v.dtype in half.HALF:
        return f"Range on {v.dtype.short} tensors is not supported"
    return dtype_accepts(0)(node)


@kernel("Range", accepts=_range_accepts, shape_fn=_range_shape)
def range_kernel(ctx: KernelCtx) -> str:
    require(ctx, 0)
    if ctx.ins[0].dtype in half.HALF:
        raise NotImplementedError(f"Range on {ctx.ins[0].dtype.short} tensors is not supported")
    y = ctx.outs[0]
    t = y.ctype
    if y.dtype.is_float:  # like the reference (numpy arange): start + i * delta in double
        value = f"({t})((double)start + (double)i * (double)delta)"
    else:
        value = f"({t})(start + ({t})i * delta)"
    return (f"const {t} start = in0[0], delta = in2[0];\n"
            f"const int64_t n = {y.numel()};\n"
            f"for (int64_t i = 0; i < n; i++) out0[i] = {value};\nreturn 0;")


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


@kernel("OneHot", accepts=dtype_accepts(0, 2), shape_fn=_onehot_shape)
def onehot(ctx: KernelCtx) -> str:
    require(ctx, 0, 2)
    half.use(ctx)
    ind, y = ctx.ins[0], ctx.outs[0]
    axis = ctx.node.attr("axis", -1)
    axis = axis + y.rank if axis < 0 else axis
    lines = [f"const {y.ctype} off = in2[0], on = in2[1];",
             f"const int64_t depth = {y.dims[axis]}, outer = {cprod(ind.dims[:axis])}, "
             f"inner = {cprod(ind.dims[axis:])};",
             f"for (int64_t i = 0; i < {y.numel()}; i++) out0[i] = off;",
             "for (int64_t o = 0; o < outer; o++) {", "for (int64_t j = 0; j < inner; j++) {"]
    if ind.dtype.is_float:
        lines += [f"double fv = (double){half.load(ind.dtype, 'in0[o * inner + j]')};", "if (fv < 0) fv += (double)depth;",
                  "if (!(fv >= 0 && fv < (double)depth)) continue;",
                  "const int64_t v = (int64_t)fv;", "if ((double)v != fv) continue;"]
    else:
        lines += ["int64_t v = (int64_t)in0[o * inner + j];", "if (v < 0) v += depth;",
                  "if (v < 0 || v >= depth) continue;"]
    lines += ["out0[(o * depth + v) * inner + j] = on;", "}", "}", "return 0;"]
    return "\n".join(lines)


@kernel("Trilu", accepts=dtype_accepts(0))
def trilu(ctx: KernelCtx) -> str:
    require(ctx, 0)
    x = ctx.ins[0]
    k = "(int64_t)in1[0]" if len(ctx.ins) > 1 and ctx.ins[1] is not None else "0"
    upper = bool(ctx.attr("upper", 1))
    zero = clit(0, x.dtype)
    # per row i: upper keeps columns j >= i + k, lower keeps j <= i + k
    split = "i + k" if upper else "i + k + 1"
    first, second = ("zero", "copy") if upper else ("copy", "zero")

    def part(kind: str, lo: str, hi: str) -> str:
        if kind == "zero":
            return f"for (int64_t j = {lo}; j < {hi}; j++) d[j] = {zero};"
        return copy(f"d + {lo}", f"s + {lo}", f"{hi} - {lo}", x.ctype)

    return "\n".join([
        f"const int64_t k = {k};",
        f"const int64_t nb = {cprod(x.dims[:-2])}, rows = {x.dims[-2]}, cols = {x.dims[-1]};",
        "for (int64_t b = 0; b < nb; b++) {", "for (int64_t i = 0; i < rows; i++) {",
        f"const {x.ctype} *restrict s = in0 + (b * rows + i) * cols;",
        f"{x.ctype} *restrict d = out0 + (b * rows + i) * cols;",
        f"int64_t m = {split}; if (m < 0) m = 0; if (m > cols) m = cols;",
        part(first, "0", "m"), part(second, "m", "cols"),
        "}", "}", "return 0;"])


@kernel("EyeLike", accepts=dtype_accepts(outputs=(0,)))
def eyelike(ctx: KernelCtx) -> str:
    require(ctx)
    y = ctx.outs[0]
    k = int(ctx.attr("k", 0))
    return "\n".join([
        f"const int64_t rows = {y.dims[0]}, cols = {y.dims[1]};",
        f"for (int64_t i = 0; i < rows * cols; i++) out0[i] = {clit(0, y.dtype)};",
        "for (int64_t i = 0; i < rows; i++) {",
        f"const int64_t j = i + ({k});",
        f"if (j >= 0 && j < cols) out0[i * cols + j] = {clit(1, y.dtype)};",
        "}", "return 0;"])
