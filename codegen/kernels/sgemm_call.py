"""Calls of the float GEMM entry point ``onnxc_sgemm_ex`` (runtime_c/onnxc_sgemm.h) for MatMul and
Gemm: a constant B operand is packed at compile time (codegen/kernels/gemm_layout.py) so runs skip
packing it, and the node's epilogue (codegen/kernels/epilogue.py) is fused into the output tiles.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType

from . import bf16
from .base import KernelCtx
from .epilogue import Epilogue, sg_epi_decl
from .gemm_layout import pack_b
from .nncommon import use_gemm


def packable_b(ctx: KernelCtx, i: int) -> bool:
    """Whether input ``i`` is a 2-D float32 constant that can be packed at compile time."""
    op = ctx.ins[i]
    return (op is not None and op.const is not None and op.rank == 2 and op.value.type.dtype == DType.FLOAT
            and op.static)


def sgemm_stmt(ctx: KernelCtx, m: str, n: str, k: str, alpha: str, a: str, lda: str, ta: bool, b_index: int,
               tb: bool, beta: str, c: str, ldc: str, ep: Epilogue | None = None, bias: str = "NULL",
               bias_cols: bool = False) -> str:
    """C statement: C = act(alpha op(A) op(B) + beta C + bias + R) in float, where B is input ``b_index``
    (packed here when :func:`packable_b`) and ``bias`` (a C pointer or NULL) holds one value per column
    (``bias_cols``) or per row; returns from the kernel on allocation failure."""
    use_gemm(ctx)
    b = ctx.ins[b_index]
    if bf16.enabled(ctx) and packable_b(ctx, b_index):  # precision="bf16": codegen/kernels/bf16.py
        return bf16.bgemm_stmt(ctx, m, n, k, alpha, a, lda, ta, b_index, tb, beta, c, ldc, ep or Epilogue(), bias,
                               bias_cols)
    if packable_b(ctx, b_index):
        w = np.asarray(b.const, dtype=np.float32)
        ctx.repack_const(b_index, pack_b(w.T if tb else w))
        fb, ldb = "ONNXC_SG_PACKED", "0"
    else:
        fb, ldb = ("ONNXC_SG_TRANS" if tb else "ONNXC_SG_PLAIN"), (str(b.dims[1]) if b.rank == 2 else "1")
    fa = "ONNXC_SG_TRANS" if ta else "ONNXC_SG_PLAIN"
    lines, epi = sg_epi_decl(ctx, ep or Epilogue(), bias, bias_cols, ldc)
    lines.append(f"if (onnxc_sgemm_ex(rt->threads, {m}, {n}, {k}, {alpha}, {a}, {lda}, {fa}, in{b_index}, {ldb}, {fb}, "
                 f"{beta}, {c}, {ldc}, {epi})) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in GEMM\");")
    return "\n".join(lines)
