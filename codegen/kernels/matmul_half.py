"""float16 / bfloat16 MatMul and Gemm with the reference's rounding.

numpy computes a float16 matrix product (``np.dot`` and ``np.matmul``) with a float32 accumulator,
summing the products in k order and rounding to float16 once; ml_dtypes' bfloat16 ``np.dot`` does the
same (its ``np.matmul`` of batched operands runs float32 BLAS, whose summation order differs from
any fixed one only in the last float32 bits). The products of two half values are exact in float32,
so ``acc += a * b`` gives the same bits with or without a fused multiply-add. The kernels here
reproduce that arithmetic with a register-blocked kernel (runtime_c/onnxc_hgemm.h) whose tiles keep
their float32 accumulators across the whole k range, rounding each result once.

Gemm's reference is ``np.dot(a, b) * alpha + c * beta`` evaluated op by op with alpha and beta as
numpy float32 scalars: the rounded half product is promoted to float32, scaled, added to ``c * beta``
(each step a float32 rounding) and rounded to the half type once. :func:`gemm_epilogue` emits
exactly those steps.
"""

from __future__ import annotations

from onnxc.ir import DType

from ..cexpr import c_literal
from . import half
from .base import KernelCtx, Operand

HGEMM = {DType.FLOAT16: "onnxc_hgemm_f16", DType.BFLOAT16: "onnxc_hgemm_bf16"}


def half_gemm_helper(ctx: KernelCtx, dt: DType) -> str:
    """Name of the C function ``f(threads, M, N, K, A, sam, sak, B, sbk, sbn, Y)`` (runtime_c/onnxc_hgemm.h)
    writing the rounded ``dt`` product Y (row-major, ld N) of strided ``dt`` matrices A (M x K) and
    B (K x N); it returns nonzero when out of memory."""
    ctx.include("onnxc_hgemm.h")
    return HGEMM[dt]


def half_mm(ctx: KernelCtx, dt: DType, ta: bool, tb: bool, m: str, n: str, k: str, a: str, lda: str, b: str,
            ldb: str, y: str, threads: str = "rt->threads") -> str:
    """C expression: Y = op(A) op(B) in ``dt`` (nonzero when out of memory)."""
    fn = half_gemm_helper(ctx, dt)
    sam, sak = ("1", lda) if ta else (lda, "1")
    sbk, sbn = ("1", ldb) if tb else (ldb, "1")
    return f"{fn}({threads}, {m}, {n}, {k}, {a}, {sam}, {sak}, {b}, {sbk}, {sbn}, {y})"


def gemm_epilogue(ctx: KernelCtx, dt: DType, c: Operand | None, alpha: float, beta: float) -> list[str]:
    """Loops turning Y = round(A B) into the reference's ``Y * alpha + C * beta`` (see module doc)."""
    has_c = c is not None and beta != 0
    if alpha == 1 and not has_c:
        return []
    lines = [f"const float fa = {c_literal(alpha, DType.FLOAT)}, fb = {c_literal(beta, DType.FLOAT)}; (void)fb;"]
    # volatile keeps each float32 step rounded on its own (no contraction into a fused multiply-add)
    steps = [f"volatile float v = {half.load(dt, 'out0[i * N + j]')} * fa;"]
    if has_c:
        cd = ["1"] * (2 - c.rank) + list(c.dims)
        si = "0" if cd[0] == "1" else f"(({cd[0]}) == 1 ? 0 : {cd[1]})"
        sj = "0" if cd[1] == "1" else f"(({cd[1]}) == 1 ? 0 : 1)"
        lines.append(f"const int64_t csi = {si}, csj = {sj};")
        steps += [f"volatile float w = {half.load(dt, 'in2[i * csi + j * csj]')} * fb;", "v = v + w;"]
    steps.append(f"out0[i * N + j] = {half.store(dt, 'v')};")
    lines += ["for (int64_t i = 0; i < M; i++)", "    for (int64_t j = 0; j < N; j++) {"]
    lines += ["        " + st for st in steps]
    lines.append("    }")
    return lines
