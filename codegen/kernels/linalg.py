"""Det (opset 11, 22): determinants of square matrices ``[..., M, M] -> [...]``.

Each matrix is copied into a double scratch matrix and factored by Gaussian elimination with
partial pivoting (LU, as LAPACK's getrf that numpy uses); the determinant is the product of the
pivots with the sign of the row permutation. A zero pivot column gives 0. Double precision
throughout, rounded once to the element type (float16/bfloat16 included).
"""

from __future__ import annotations

from onnxc.ir import DType

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import cprod
from .nncommon import FLOATS


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
