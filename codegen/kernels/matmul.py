"""MatMul and Gemm kernels on top of the blocked GEMM in runtime_c/onnxc_gemm.h.

MatMul follows numpy: 1-D operands are promoted to matrices; batch axes broadcast. When B has no
batch axes, A's batch folds into the rows of one big GEMM. Integer MatMul/Gemm use a plain i-k-j
loop that wraps in the element width (unsigned arithmetic, no undefined overflow).
Gemm first writes beta * C (broadcast) into Y, then accumulates alpha * op(A) op(B) with beta = 1.
float16/bfloat16 use the kernels of matmul_half.py, which round like the reference (numpy).

The C structure is in templates/matmul_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.ir import DType

from ..cexpr import c_literal, c_product
from ..templating import render
from . import half
from .base import KernelCtx, Operand, kernel
from .epilogue import Epilogue, epilogue, rows_epilogue
from .gemv import gemv_body  # small-M products with a constant B (runtime_c/onnxc_gemv.h)
from .matmul_half import gemm_epilogue, half_mm
from .nncommon import FLOATS, GEMM_INTS, dtype_accepts, gemm_call, gemm_expr
from .parcall import par_call
from .sgemm_call import sgemm_stmt


def _epilogue(ctx: KernelCtx, dt: DType) -> tuple[Epilogue, str | None]:
    """The fused epilogue a fusion pass requested (epilogue.py) and the residual pointer; float/double only."""
    ep = epilogue(ctx)
    if ep.active and dt not in FLOATS:
        raise NotImplementedError(f"a fused activation/residual/bias is not supported for element type {dt.short}")
    return ep, None if ep.residual is None else f"in{ep.residual}"


def int_gemm_helper(ctx: KernelCtx, dt: DType) -> str:
    """Name of a static C function computing an integer GEMM with arbitrary strides (C = A B)."""
    c, u = dt.c, ("uint64_t" if dt.itemsize == 8 else "uint32_t")
    name = f"onnxc_igemm_{dt.short}"
    ctx.helper(name, render("matmul_igemm.c.j2", name=name, T=c, U=u).rstrip("\n"))
    return name


def _mm(ctx: KernelCtx, dt: DType, ta: bool, tb: bool, m: str, n: str, k: str, a: str, lda: str, b: str,
        ldb: str, c: str, ldc: str, alpha: str = "", beta: str = "") -> str:
    """C statement: C = alpha op(A) op(B) + beta C (floats) or C = op(A) op(B) (ints)."""
    if dt in FLOATS:
        return gemm_call(ctx, dt, str(int(ta)), str(int(tb)), m, n, k, alpha or c_literal(1.0, dt), a, lda, b, ldb,
                         beta or c_literal(0.0, dt), c, ldc)
    fn = int_gemm_helper(ctx, dt)
    sam, sak = ("1", lda) if ta else (lda, "1")
    sbk, sbn = ("1", ldb) if tb else (ldb, "1")
    return f"{fn}({m}, {n}, {k}, {a}, {sam}, {sak}, {b}, {sbk}, {sbn}, {c}, {ldc});"


@kernel("MatMul", types=FLOATS | half.HALF | GEMM_INTS, accepts=dtype_accepts(FLOATS | half.HALF | GEMM_INTS, (1,)))
def matmul(ctx: KernelCtx) -> str:
    if (body := gemv_body(ctx)) is not None:  # the GEMV path (codegen/kernels/gemv.py)
        return body
    a, b, y = ctx.ins[0], ctx.ins[1], ctx.outs[0]
    dt = y.dtype
    ad = ["1", a.dims[0]] if a.rank == 1 else list(a.dims)
    bd = [b.dims[0], "1"] if b.rank == 1 else list(b.dims)
    m, k, n = ad[-2], ad[-1], bd[-1]
    ep, res = _epilogue(ctx, dt)
    lines = [f"const int64_t M = {m}, N = {n}, K = {k};"]
    abatch, bbatch = ad[:-2], bd[:-2]
    if not bbatch:  # A's batch axes fold into the rows of one GEMM
        rows = c_product(abatch + ["M"]) if abatch else "M"
        if dt in half.HALF:
            lines.append(f"if ({half_mm(ctx, dt, False, False, rows, 'N', 'K', 'in0', 'K', 'in1', 'N', 'out0')}) "
                         "return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in MatMul\");")
        elif dt == DType.FLOAT:  # constant B packed at compile time, epilogue fused
            bias = "NULL" if ep.bias is None else f"in{ep.bias}"
            lines.append(sgemm_stmt(ctx, rows, "N", "K", "1.0f", "in0", "K", False, 1, False, "0.0f", "out0", "N", ep,
                                    bias=bias, bias_cols=True))
        else:
            lines.append(_mm(ctx, dt, False, False, rows, "N", "K", "in0", "K", "in1", "N", "out0", "N"))
            lines += rows_epilogue(ep, dt, "out0", rows, "N", res)
        lines.append("return 0;")
        return "\n".join(lines)
    nb = max(len(abatch), len(bbatch))
    odims = list(y.dims[:nb])
    axes = [{"i": ax, "dim": odims[ax]} for ax in range(nb)]
    # per-axis batch strides (in matrices) of A and B; 0 where the operand broadcasts
    for name, dims in (("sa", abatch), ("sb", bbatch)):
        off = nb - len(dims)
        acc = "1"
        for ax in range(nb):
            axes[ax][name] = "0"
        for ax in range(len(dims) - 1, -1, -1):
            d = dims[ax]
            axes[ax + off][name] = "0" if d == "1" else (acc if d == odims[ax + off] else f"(({d}) == 1 ? 0 : {acc})")
            acc = d if acc == "1" else f"{acc} * ({d})"
    threads = "inner ? rt->threads : 1"
    if dt in FLOATS:
        call = gemm_expr(ctx, dt, "0", "0", "M", "N", "K", c_literal(1.0, dt), "pa", "K", "pb", "N", c_literal(0.0, dt), "py",
                         "N", threads=threads)
    elif dt in half.HALF:
        call = half_mm(ctx, dt, False, False, "M", "N", "K", "pa", "K", "pb", "N", "py", threads=threads)
    else:
        call = _mm(ctx, dt, False, False, "M", "N", "K", "pa", "K", "pb", "N", "py", "N")
    return render("matmul_batched.c.j2", M=m, N=n, K=k, axes=axes, NB=c_product(odims), T=dt.c, call=call,
                  fallible=dt in FLOATS or dt in half.HALF, epilogue=rows_epilogue(ep, dt, "out0", "NB * M", "N", res),
                  par=par_call(ctx))


def _c_vector(c: Operand, y: Operand) -> bool | None:
    """True when Gemm's C is one value per column of Y ([N] or [1, N]), False when one per row ([M, 1]),
    None otherwise (a full matrix, a scalar, or a size that is only known at run time)."""
    cd = ["1"] * (2 - c.rank) + list(c.dims)
    if cd[0] == "1" and cd[1] == y.dims[1] and y.dims[1] != "1":
        return True
    if cd[1] == "1" and cd[0] == y.dims[0] and y.dims[0] != "1":
        return False
    return None


def _fill_c(c: Operand, y: Operand, beta: str, dt: DType) -> str:
    """Loops writing Y = beta * C with C broadcast (unidirectionally) to Y's [M, N]."""
    cd = ["1"] * (2 - c.rank) + list(c.dims)
    si = "0" if cd[0] == "1" else (cd[1] if cd[0] == y.dims[0] else f"(({cd[0]}) == 1 ? 0 : {cd[1]})")
    sj = "0" if cd[1] == "1" else ("1" if cd[1] == y.dims[1] else f"(({cd[1]}) == 1 ? 0 : 1)")
    mul = "" if beta in ("1.0f", "1.0") else f"{beta} * "
    return render("matmul_gemm_c.c.j2", has_c=True, si=si, sj=sj, scale=False, T=dt.c, mul=mul).rstrip("\n")


@kernel("Gemm", types=FLOATS | half.HALF | GEMM_INTS, accepts=dtype_accepts(FLOATS | half.HALF | GEMM_INTS, (1,)))
def gemm(ctx: KernelCtx) -> str:
    if (body := gemv_body(ctx)) is not None:  # the GEMV path (codegen/kernels/gemv.py)
        return body
    a, b, y = ctx.ins[0], ctx.ins[1], ctx.outs[0]
    c = ctx.ins[2] if len(ctx.ins) > 2 else None
    dt = y.dtype
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    k = a.dims[0] if ta else a.dims[1]
    ep, res = _epilogue(ctx, dt)
    lines = [f"const int64_t M = {y.dims[0]}, N = {y.dims[1]}, K = {k};"]
    if dt in half.HALF:
        call = half_mm(ctx, dt, ta, tb, "M", "N", "K", "in0", a.dims[1], "in1", b.dims[1], "out0")
        lines.append(f"if ({call}) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in Gemm\");")
        lines += gemm_epilogue(ctx, dt, c, alpha, beta)
        lines.append("return 0;")
        return "\n".join(lines)
    if dt in FLOATS:
        has_c = c is not None and beta != 0
        vec = _c_vector(c, y) if has_c and beta == 1 and dt == DType.FLOAT else None
        if vec is not None:  # a bias per column (row): added in the GEMM epilogue, Y is written once
            lines.append(sgemm_stmt(ctx, "M", "N", "K", c_literal(alpha, dt), "in0", a.dims[1], ta, 1, tb, "0.0f", "out0",
                                    "N", ep, bias="in2", bias_cols=vec))
            lines.append("return 0;")
            return "\n".join(lines)
        if has_c:
            lines.append(_fill_c(c, y, c_literal(beta, dt), dt))
        if dt == DType.FLOAT:  # constant B packed at compile time, epilogue fused
            lines.append(sgemm_stmt(ctx, "M", "N", "K", c_literal(alpha, dt), "in0", a.dims[1], ta, 1, tb,
                                    c_literal(1.0 if has_c else 0.0, dt), "out0", "N", ep))
        else:
            lines.append(_mm(ctx, dt, ta, tb, "M", "N", "K", "in0", a.dims[1], "in1", b.dims[1], "out0", "N",
                             c_literal(alpha, dt), c_literal(1.0 if has_c else 0.0, dt)))
            lines += rows_epilogue(ep, dt, "out0", "M", "N", res)
        lines.append("return 0;")
        return "\n".join(lines)
    # integers: Y = A B, then Y = alpha * Y + beta * C in double, truncated like numpy's astype
    lines.append(_mm(ctx, dt, ta, tb, "M", "N", "K", "in0", a.dims[1], "in1", b.dims[1], "out0", "N"))
    if alpha != 1 or (c is not None and beta != 0):
        has_c = c is not None and beta != 0
        si = sj = cterm = "0"
        if has_c:
            cd = ["1"] * (2 - c.rank) + list(c.dims)
            si = "0" if cd[0] == "1" else f"(({cd[0]}) == 1 ? 0 : {cd[1]})"
            sj = "0" if cd[1] == "1" else f"(({cd[1]}) == 1 ? 0 : 1)"
            cterm = f"{beta!r} * (double)in2[i * csi + j * csj]"
        lines.append(render("matmul_gemm_c.c.j2", has_c=has_c, si=si, sj=sj, scale=True, T=dt.c, alpha=repr(alpha),
                            cterm=cterm).rstrip("\n"))
    lines.append("return 0;")
    return "\n".join(lines)
