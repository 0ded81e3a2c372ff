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

The C is in templates/linalg_det.c.j2, linalg_inverse.c.j2 and linalg_lu.c.j2 (the factorization helpers).
"""

from __future__ import annotations

from onnxc.ir import DType

from ..cexpr import c_product
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS
from .parcall import SLOTS, par_call


def _batch(x) -> str:
    """C count of the matrices of ``x``: the product of its leading dims."""
    return c_product(x.dims[:-2]) if x.rank > 2 else "1"


@kernel("Det", types=FLOATS | half.HALF)
def det(ctx: KernelCtx) -> str:
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    # float16 straight from double (one rounding); other types through their compute type
    store = "onnxc_d2h(d)" if y.dtype == DType.FLOAT16 else half.store(y.dtype, f"({half.compute_type(y.dtype).c})d")
    return render("linalg_det.c.j2", B=_batch(x), M=x.dims[-1], T=x.ctype, load=half.load(x.dtype, "src[i]"),
                  store=store, who=ds.who(ctx))


def _round(dt: DType, expr: str) -> str:
    """C expression rounding double ``expr`` once to a ``dt`` element."""
    return f"onnxc_d2h({expr})" if dt == DType.FLOAT16 else f"({dt.c})({expr})"


@kernel("Inverse", domain="com.microsoft", types=FLOATS | {DType.FLOAT16})
def inverse(ctx: KernelCtx) -> str:
    """Each matrix: copied into double scratch, factored, inverted, rounded into the output."""
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    ctx.helper("onnxc_lu_d", render("linalg_lu.c.j2"))
    return render("linalg_inverse.c.j2", B=_batch(x), M=x.dims[-1], T=x.ctype, Y=y.ctype,
                  load=half.load(x.dtype, "src[i]"), store=_round(y.dtype, "z[i * M + k]"), who=ds.who(ctx),
                  slots=SLOTS, par=par_call(ctx))
