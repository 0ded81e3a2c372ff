"""MatMul and Gemm kernels on top of the blocked GEMM in runtime_c/onnxc_gemm.h.

MatMul follows numpy: 1-D operands are promoted to matrices; batch axes broadcast. When B has no
batch axes, A's batch folds into the rows of one big GEMM. Integer MatMul/Gemm use a plain i-k-j
loop that wraps in the element width (unsigned arithmetic, no undefined overflow).
Gemm first writes beta * C (broadcast) into Y, then accumulates alpha * op(A) op(B) with beta = 1.
float16/bfloat16 use the kernels of matmul_half.py, which round like the reference (numpy).
"""

from __future__ import annotations

from onnxc.ir import DType

from . import half
from .base import KernelCtx, Operand, kernel
from .epilogue import Epilogue, epilogue, rows_epilogue
from .gemv import gemv_body  # small-M products with a constant B (runtime_c/onnxc_gemv.h)
from .matmul_half import gemm_epilogue, half_mm
from .nncommon import FLOATS, GEMM_INTS, dtype_accepts, gemm_call, gemm_expr, lit, prod
from .parfor import par_for
from .sgemm_call import sgemm_stmt


def _epilogue(ctx: KernelCtx, dt: DType) -> tuple[Epilogue, str | None]:
    """The fused epilogue a fusion pass asked for (epilogue.py) and the residual pointer; float/double only."""
    ep = epilogue(ctx)
    if ep.active and dt not in FLOATS:
        raise ValueError(f"a fused activation/residual/bias is not supported for element type {dt.short}")
    return ep, None if ep.residual is None else f"in{ep.residual}"


def int_gemm_helper(ctx: KernelCtx, dt: DType) -> str:
    """Name of a static C function computing an integer GEMM with arbitrary strides (C = A B)."""
    c, u = dt.c, ("uint64_t" if dt.itemsize == 8 else "uint32_t")
    name = f"onnxc_igemm_{dt.short}"
    ctx.helper(name, f"""static void {name}(int64_t M, int64_t N, int64_t K, const {c} *A, int64_t sam, int64_t sak,
        const {c} *B, int64_t sbk, int64_t sbn, {c} *C, int64_t ldc) {{
    for (int64_t i = 0; i < M; i++) {{
        {u} *restrict y = ({u} *)(C + i * ldc);
        for (int64_t j = 0; j < N; j++) y[j] = 0;
        for (int64_t k = 0; k < K; k++) {{
            const {u} a = ({u})A[i * sam + k * sak];
            const {c} *b = B + k * sbk;
#pragma omp simd
            for (int64_t j = 0; j < N; j++) y[j] += a * ({u})b[j * sbn];
        }}
    }}
}}""")
    return name


def _mm(ctx: KernelCtx, dt: DType, ta: bool, tb: bool, m: str, n: str, k: str, a: str, lda: str, b: str,
        ldb: str, c: str, ldc: str, alpha: str = "", beta: str = "") -> str:
    """C statement: C = alpha op(A) op(B) + beta C (floats) or C = op(A) op(B) (ints)."""
    if dt in FLOATS:
        return gemm_call(ctx, dt, str(int(ta)), str(int(tb)), m, n, k, alpha or lit(1.0, dt), a, lda, b, ldb,
                         beta or lit(0.0, dt), c, ldc)
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
        rows = prod(abatch + ["M"]) if abatch else "M"
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
    head = [*lines, "const int64_t MK = M * K, KN = K * N, MN = M * N;"]
    # per-axis batch strides (in matrices) of A and B; 0 where the operand broadcasts
    for name, dims in (("a", abatch), ("b", bbatch)):
        off = nb - len(dims)
        acc = "1"
        strides = ["0"] * nb
        for ax in range(len(dims) - 1, -1, -1):
            d = dims[ax]
            strides[ax + off] = "0" if d == "1" else (acc if d == odims[ax + off] else f"(({d}) == 1 ? 0 : {acc})")
            acc = d if acc == "1" else f"{acc} * ({d})"
        for ax in range(nb):
            head.append(f"const int64_t s{name}{ax} = {strides[ax]};")
    # one flat loop over the output batch; small matrices run on the pool across the batch (whenever
    # there are two), large ones use the GEMM's own threads
    head += [f"const int64_t NB = {prod(odims)};",
             "const int inner = M * N * K >= 65536 || NB == 1;",
             "(void)MK; (void)KN; (void)MN; (void)inner;"]
    body = ["    int64_t r = bi, oa = 0, ob = 0, i;"]
    for ax in range(nb - 1, -1, -1):
        body.append(f"    i = r % ({odims[ax]}); r /= ({odims[ax]}); oa += i * sa{ax}; ob += i * sb{ax};")
    body += ["    (void)r; (void)i;",
             f"    const {dt.c} *pa = in0 + oa * MK;",
             f"    const {dt.c} *pb = in1 + ob * KN;",
             f"    {dt.c} *py = out0 + bi * MN;"]
    fail = "__atomic_store_n(bad, 1, __ATOMIC_RELAXED);"
    if dt in FLOATS:
        call = gemm_expr(ctx, dt, "0", "0", "M", "N", "K", lit(1.0, dt), "pa", "K", "pb", "N", lit(0.0, dt), "py",
                         "N", threads="inner ? rt->threads : 1")
        body.append(f"    if ({call}) {fail}")
    elif dt in half.HALF:
        call = half_mm(ctx, dt, False, False, "M", "N", "K", "pa", "K", "pb", "N", "py",
                       threads="inner ? rt->threads : 1")
        body.append(f"    if ({call}) {fail}")
    else:
        body.append("    " + _mm(ctx, dt, False, False, "M", "N", "K", "pa", "K", "pb", "N", "py", "N"))
    lines = [*head, "int bad_ = 0, *bad = &bad_;", "(void)bad;"]
    lines += par_for(ctx, "bi", "NB", body, work="inner ? 1 : NB", grain=1, head=head, captures=[("int *", "bad")])
    lines += ["if (bad_) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in MatMul\");"]
    lines += rows_epilogue(ep, dt, "out0", "NB * M", "N", res)
    lines.append("return 0;")
    return "\n".join(lines)


def _c_vector(c: Operand, y: Operand) -> bool | None:
    """True when Gemm's C is one value per column of Y ([N] or [1, N]), False when one per row ([M, 1]),
    None otherwise (a full matrix, a scalar, or a size that is only known at run time)."""
    cd = ["1"] * (2 - c.rank) + list(c.dims)
    if cd[0] == "1" and cd[1] == y.dims[1] and y.dims[1] != "1":
        return True
    if cd[1] == "1" and cd[0] == y.dims[0] and y.dims[0] != "1":
        return False
    return None


def _fill_c(c: Operand, y: Operand, beta: str, dt: DType) -> list[str]:
    """Loops writing Y = beta * C with C broadcast (unidirectionally) to Y's [M, N]."""
    cd = ["1"] * (2 - c.rank) + list(c.dims)
    si = "0" if cd[0] == "1" else (cd[1] if cd[0] == y.dims[0] else f"(({cd[0]}) == 1 ? 0 : {cd[1]})")
    sj = "0" if cd[1] == "1" else ("1" if cd[1] == y.dims[1] else f"(({cd[1]}) == 1 ? 0 : 1)")
    scale = "" if beta in ("1.0f", "1.0") else f"{beta} * "
    return [f"const int64_t csi = {si}, csj = {sj};",
            "for (int64_t i = 0; i < M; i++) {",
            f"    {dt.c} *restrict yr = out0 + i * N;",
            f"    const {dt.c} *cr = in2 + i * csi;",
            "#pragma omp simd",
            f"    for (int64_t j = 0; j < N; j++) yr[j] = {scale}cr[j * csj];",
            "}"]


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
            lines.append(sgemm_stmt(ctx, "M", "N", "K", lit(alpha, dt), "in0", a.dims[1], ta, 1, tb, "0.0f", "out0",
                                    "N", ep, bias="in2", bias_cols=vec))
            lines.append("return 0;")
            return "\n".join(lines)
        if has_c:
            lines += _fill_c(c, y, lit(beta, dt), dt)
        if dt == DType.FLOAT:  # constant B packed at compile time, epilogue fused
            lines.append(sgemm_stmt(ctx, "M", "N", "K", lit(alpha, dt), "in0", a.dims[1], ta, 1, tb,
                                    lit(1.0 if has_c else 0.0, dt), "out0", "N", ep))
        else:
            lines.append(_mm(ctx, dt, ta, tb, "M", "N", "K", "in0", a.dims[1], "in1", b.dims[1], "out0", "N",
                             lit(alpha, dt), lit(1.0 if has_c else 0.0, dt)))
            lines += rows_epilogue(ep, dt, "out0", "M", "N", res)
        lines.append("return 0;")
        return "\n".join(lines)
    # integers: Y = A B, then Y = alpha * Y + beta * C in double, truncated like numpy's astype
    lines.append(_mm(ctx, dt, ta, tb, "M", "N", "K", "in0", a.dims[1], "in1", b.dims[1], "out0", "N"))
    if alpha != 1 or (c is not None and beta != 0):
        cterm = "0"
        if c is not None and beta != 0:
            cd = ["1"] * (2 - c.rank) + list(c.dims)
            si = "0" if cd[0] == "1" else f"(({cd[0]}) == 1 ? 0 : {cd[1]})"
            sj = "0" if cd[1] == "1" else f"(({cd[1]}) == 1 ? 0 : 1)"
            lines.append(f"const int64_t csi = {si}, csj = {sj};")
            cterm = f"{beta!r} * (double)in2[i * csi + j * csj]"
        lines += ["for (int64_t i = 0; i < M; i++)",
                  "    for (int64_t j = 0; j < N; j++)",
                  f"        out0[i * N + j] = ({dt.c})({alpha!r} * (double)out0[i * N + j] + {cterm});"]
    lines.append("return 0;")
    return "\n".join(lines)
