"""Square matrices ``[..., M, M]``: Det (opset 11, 22) and com.microsoft Inverse (opset 1).

Det: the determinant of each matrix, ``[..., M, M] -> [...]``.

Each matrix is copied into a double scratch matrix and factored by Gaussian elimination with
partial pivoting (LU, as LAPACK's getrf that numpy uses); the determinant is the product of the
pivots with the sign of the row permutation. A zero pivot column gives 0. Double precision
throughout, rounded once to the element type (float16/bfloat16 included).

Inverse: the inverse of each matrix, ``[..., M, M] -> [..., M, M]``, float32/float64/float16 as
onnxruntime's CPU kernel (Eigen's ``inverse()``). Each matrix is factored in double, PA = LU with
partial pivoting, then ``U^-1 L^-1`` is formed row by row (contiguous row updates) and its columns
are put back in the order of P; each element is rounded once to the element type. Matrices are
spread over the thread pool. A singular matrix (an exactly zero pivot) is not an error: as in
onnxruntime, the divisions by the zero pivot give infinities and NaNs in the rows of the inverse
they reach (the zero pivot is kept, as Eigen's PartialPivLU keeps it). The elements left finite are
onnxruntime's (also for M <= 4, where Eigen uses cofactor formulas; tests/ops/test_ms_fused.py);
which non-finite ones are inf and which NaN may differ.
"""

from __future__ import annotations

from onnxc.ir import DType

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import cprod
from .nncommon import FLOATS
from .parfor import par_for


@kernel("Det", types=FLOATS | half.HALF)
def det(ctx: KernelCtx) -> str:
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    m = x.dims[-1]
    # float16 straight from double (one rounding); other types through their compute type
    store = "onnxc_d2h(d)" if y.dtype == DType.FLOAT16 else half.store(y.dtype, f"({half.compute_type(y.dtype).c})d")
    return "\n".join([
        f"const int64_t B = {cprod(x.dims[:-2]) if x.rank > 2 else '1'}, M = {m}, MM = M * M;",
        "double *a = onnxc_alloc((size_t)(MM > 0 ? MM : 1) * sizeof(double));",
        f"if (!a) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ds.who(ctx)});",
        "for (int64_t b = 0; b < B; b++) {",
        f"    const {x.ctype} *restrict src = in0 + b * MM;",
        f"    for (int64_t i = 0; i < MM; i++) a[i] = (double){half.load(x.dtype, 'src[i]')};",
        "    double d = 1.0;",
        "    for (int64_t k = 0; k < M && d != 0.0; k++) {",
        "        int64_t p = k;",
        "        double best = fabs(a[k * M + k]);",
        "        for (int64_t i = k + 1; i < M; i++) {",
        "            const double v = fabs(a[i * M + k]);",
        "            if (v > best) { best = v; p = i; }",
        "        }",
        "        if (best == 0.0) { d = 0.0; break; }",
        "        if (p != k) {",
        "            for (int64_t j = 0; j < M; j++) { const double t = a[k * M + j]; a[k * M + j] = a[p * M + j]; "
        "a[p * M + j] = t; }",
        "            d = -d;",
        "        }",
        "        const double piv = a[k * M + k];",
        "        d *= piv;",
        "        for (int64_t i = k + 1; i < M; i++) {",
        "            const double f = a[i * M + k] / piv;",
        "            if (f == 0.0) continue;",
        "            for (int64_t j = k + 1; j < M; j++) a[i * M + j] -= f * a[k * M + j];",
        "        }",
        "    }",
        f"    out0[b] = {store};",
        "}",
        "free(a);", "return 0;"])


# PA = LU in place: a row-major n x n in double, L unit lower below the diagonal, U on and above it;
# perm[i] is the row of A now in row i. A pivot column of zeros is left as it is (U gets a zero on
# its diagonal), as Eigen's PartialPivLU leaves it, so the solve divides by that zero.
_LU = """static void onnxc_lu_d(int64_t n, double *restrict a, int64_t *restrict perm) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t k = 0; k < n; k++) {
        double *restrict rk = a + k * n;
        int64_t p = k;
        double best = fabs(rk[k]);
        for (int64_t i = k + 1; i < n; i++) {
            const double v = fabs(a[i * n + k]);
            if (v > best) { best = v; p = i; }
        }
        if (best == 0.0) continue;
        if (p != k) {
            double *restrict rp = a + p * n;
            for (int64_t j = 0; j < n; j++) { const double t = rk[j]; rk[j] = rp[j]; rp[j] = t; }
            const int64_t t = perm[k]; perm[k] = perm[p]; perm[p] = t;
        }
        const double piv = rk[k];
        for (int64_t i = k + 1; i < n; i++) {
            double *restrict ri = a + i * n;
            const double f = ri[k] / piv;
            ri[k] = f;
            for (int64_t j = k + 1; j < n; j++) ri[j] -= f * rk[j];
        }
    }
}
"""

# z = U^-1 L^-1 from the factors in lu (so that A^-1 = z P): first W = L^-1 (row i of W has its
# nonzeros in columns 0..i), then Z by back substitution, both as updates of whole contiguous rows.
_LU_INV = """static void onnxc_lu_inv_d(int64_t n, const double *restrict lu, double *restrict z) {
    for (int64_t i = 0; i < n; i++) {
        double *restrict zi = z + i * n;
        for (int64_t j = 0; j < n; j++) zi[j] = 0.0;
        zi[i] = 1.0;
        for (int64_t k = 0; k < i; k++) {
            const double l = lu[i * n + k];
            const double *restrict zk = z + k * n;
            for (int64_t j = 0; j <= k; j++) zi[j] -= l * zk[j];
        }
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        double *restrict zi = z + i * n;
        for (int64_t k = i + 1; k < n; k++) {
            const double u = lu[i * n + k];
            const double *restrict zk = z + k * n;
            for (int64_t j = 0; j < n; j++) zi[j] -= u * zk[j];
        }
        const double d = lu[i * n + i];
        for (int64_t j = 0; j < n; j++) zi[j] /= d;
    }
}
"""


def _round(dt: DType, expr: str) -> str:
    """C expression rounding double ``expr`` once to a ``dt`` element."""
    return f"onnxc_d2h({expr})" if dt == DType.FLOAT16 else f"({dt.c})({expr})"


@kernel("Inverse", domain="com.microsoft", types=FLOATS | {DType.FLOAT16})
def inverse(ctx: KernelCtx) -> str:
    """Each matrix: copied into double scratch, factored, inverted, rounded into the output."""
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    lu, inv = ctx.helper("onnxc_lu_d", _LU), ctx.helper("onnxc_lu_inv_d", _LU_INV)
    head = [f"const int64_t B = {cprod(x.dims[:-2]) if x.rank > 2 else '1'}, M = {x.dims[-1]}, MM = M * M;"]
    slots = "(rt->threads > 1 ? rt->threads : 1)"
    lines = head + [
        "if (B == 0 || M == 0) return 0;",
        f"double *scr = onnxc_alloc((size_t)({slots} * 2 * MM) * sizeof(double));",
        f"int64_t *perms = onnxc_alloc((size_t)({slots} * M) * sizeof(int64_t));",
        "if (!scr || !perms) {",
        "    free(scr); free(perms);",
        f"    return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ds.who(ctx)});",
        "}"]
    body = [
        "    double *restrict a = scr + (size_t)slot_ * (size_t)(2 * MM), *restrict z = a + MM;",
        "    int64_t *restrict perm = perms + (size_t)slot_ * (size_t)M;",
        f"    const {x.ctype} *restrict src = in0 + b * MM;",
        f"    {y.ctype} *restrict dst = out0 + b * MM;",
        f"    for (int64_t i = 0; i < MM; i++) a[i] = (double){half.load(x.dtype, 'src[i]')};",
        f"    {lu}(M, a, perm);",
        f"    {inv}(M, a, z);",
        "    for (int64_t i = 0; i < M; i++)",
        f"        for (int64_t k = 0; k < M; k++) dst[i * M + perm[k]] = {_round(y.dtype, 'z[i * M + k]')};"]
    lines += par_for(ctx, "b", "B", body, work="(double)B * (double)MM * (double)M", head=head,
                     captures=[("double *", "scr"), ("int64_t *", "perms")])
    return "\n".join(lines + ["free(scr); free(perms);", "return 0;"])
