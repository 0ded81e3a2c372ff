"""The GEMV path of Gemm and MatMul: small static M (batch-1 layers) times a constant float32 B.

B is packed at compile time into the panel layout of runtime_c/onnxc_gemv.h (``pack_gemv``), and the
run streams it once with the bias C (or MatMul's ``onnxc_bias``), a residual and an activation applied to each finished panel
(put there by passes/fuse_epilogues.py). codegen/kernels/matmul.py calls
:func:`gemv_body` first; it returns None when the node is not a GEMV (``gemv_dims``), and the
blocked GEMM takes it.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType
from onnxc.passes.fuse_epilogues import gemv_dims

from ..cexpr import c_literal
from .base import KernelCtx
from .epilogue import epilogue

NB = 64  # columns per panel (ONNXC_GV_NB)
_F = DType.FLOAT


def packed_size(k: int, n: int) -> int:
    """Elements of the packed form of a K x N B operand."""
    full, rest = divmod(n, NB)
    return (full * NB + -(-rest // 16) * 16) * k


def pack_gemv(b: np.ndarray) -> np.ndarray:
    """Pack a K x N B operand into the GEMV panel layout; returns a flat float32 array: panel p holds
    columns [64 p, 64 p + w) row by row (w = 64, the last panel's width rounded up to 16, zeros padded)
    and starts at 64 p K."""
    b = np.asarray(b, dtype=np.float32)
    k, n = b.shape
    parts = []
    for j0 in range(0, n, NB):
        cols = b[:, j0:j0 + NB]
        w = NB if n - j0 >= NB else -(-(n - j0) // 16) * 16
        if cols.shape[1] < w:
            cols = np.concatenate([cols, np.zeros((k, w - cols.shape[1]), np.float32)], axis=1)
        parts.append(np.ascontiguousarray(cols).reshape(-1))
    out = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    assert out.size == packed_size(k, n)
    return out


def _c_strides(ctx: KernelCtx, m: int, n: int) -> tuple[str, str] | None:
    """(csi, csj) as C expressions reading Gemm's C broadcast (unidirectionally) to [M, N]; None
    without C."""
    c = ctx.ins[2] if len(ctx.ins) > 2 else None
    if c is None:
        return None
    cd = ["1"] * (2 - c.rank) + list(c.dims)
    si = "0" if cd[0] == "1" else (cd[1] if cd[0] == str(m) else f"(({cd[0]}) == 1 ? 0 : {cd[1]})")
    sj = "0" if cd[1] == "1" else ("1" if cd[1] == str(n) else f"(({cd[1]}) == 1 ? 0 : 1)")
    return si, sj


def gemv_body(ctx: KernelCtx) -> str | None:
    """The kernel body of a Gemm/MatMul on the GEMV path, or None when the node is not one."""
    dims = gemv_dims(ctx.node)
    if dims is None:
        return None
    m, k, n = dims
    b = np.asarray(ctx.ins[1].const, dtype=np.float32)
    if ctx.node.op_type == "Gemm":
        if ctx.attr("transB", 0):
            b = b.T
        alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
        cs = _c_strides(ctx, m, n) if beta != 0 else None
        # transA with M == 1: A is K x 1, its one column is contiguous like a row
        lda = k
    else:
        alpha, beta, cs, lda = 1.0, 0.0, None, k
    ctx.repack_const(1, pack_gemv(b))
    ep = epilogue(ctx)
    res = "NULL" if ep.residual is None else f"in{ep.residual}"
    ctx.include("onnxc_gemv.h")
    c_args = f"in2, {cs[0]}, {cs[1]}" if cs is not None else "NULL, 0, 0"
    if ep.bias is not None:  # MatMul's per-column bias is the C term with beta = 1
        beta, c_args = 1.0, f"in{ep.bias}, 0, 1"
    return (f"onnxc_gemv(rt->threads, {m}, {n}, {k}, {c_literal(alpha, _F)}, in0, {lda}, in1, {c_literal(beta, _F)}, {c_args}, "
            f"{res}, {ep.act_args(_F)}, out0, {n});\nreturn 0;")
