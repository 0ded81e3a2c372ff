"""onnxc::MatMulNBits: a float32 product with 4-bit block-quantized constant weights kept 4-bit.

The node (passes/shapes/contrib.py: ``nbits_spec``) comes from com.microsoft MatMulNBits
(passes/expansions/ms_nbits.py) or DequantizeLinear(uint4 / int4 blocked along K) -> MatMul
(passes/fold_weight_dequant.py). Its constant Q, S and Z are packed here, at compile time, into the
layout of runtime_c/onnxc_nbits.h (``pack_q`` / ``pack_table``: 32-column groups, eight 4-bit k per
uint32 word, per-block scale and zero-point tables), and the run calls ``onnxc_nbits_matmul``: a GEMV
that dequantizes in registers for up to 16 rows (decoding), the float GEMM on dequantized slices above
(prefill). The weights blob holds K * N / 2 bytes of Q plus the tables, instead of 4 K N bytes of
float weights.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node
from onnxc.passes.shapes.contrib import NBITS_DOMAIN, nbits_spec

from ..cexpr import c_product
from .base import KernelCtx, kernel

NR = 32  # columns per group (ONNXC_NB_NR)
PAD_Q = 8  # q, z of padding rows and columns: (8 - 8) * 0 = 0


def pack_q(q: np.ndarray) -> np.ndarray:
    """uint4 values Q [K, N] (one per byte) -> the packed bytes: per 32-column group and run of 8 k, 32
    little-endian uint32 words, word j holding q[8 c + t][32 g + j] in bits 4 t .. 4 t + 3."""
    k, n = q.shape
    k8, groups = -(-k // 8), -(-n // NR)
    full = np.full((k8 * 8, groups * NR), PAD_Q, np.uint32)
    full[:k, :n] = q
    runs = full.reshape(k8, 8, groups, NR).transpose(2, 0, 1, 3)  # [g, c, t, j]
    words = np.zeros((groups, k8, NR), np.uint32)
    for t in range(8):
        words |= runs[:, :, t, :] << np.uint32(4 * t)
    return words.astype("<u4").view(np.uint8).reshape(-1)


def pack_table(t: np.ndarray, pad: float) -> np.ndarray:
    """A per-block table [blocks, N] -> [groups, blocks, 32] flat, padding columns set to ``pad``."""
    nb, n = t.shape
    groups = -(-n // NR)
    out = np.full((nb, groups * NR), pad, t.dtype)
    out[:, :n] = t
    return np.ascontiguousarray(out.reshape(nb, groups, NR).transpose(1, 0, 2)).reshape(-1)


def _accepts(node: Node) -> str | None:
    for i, what in ((1, "Q"), (2, "S"), (3, "Z")):
        v = node.input(i)
        if v is not None and v.const is None:
            return f"{what} (input {i}) must be a constant: it is packed at compile time"
    return None


@kernel("MatMulNBits", domain=NBITS_DOMAIN, types={DType.FLOAT}, accepts=_accepts)
def matmul_nbits(ctx: KernelCtx) -> str:
    spec = nbits_spec(ctx.node)
    a = ctx.ins[0]
    ctx.repack_const(1, pack_q(np.asarray(ctx.const_input(1), np.uint8)))
    ctx.repack_const(2, pack_table(np.asarray(ctx.const_input(2), np.float32), 0.0))
    zp = zpf = "NULL"
    if spec.zp == DType.UINT4:
        ctx.repack_const(3, pack_table(np.asarray(ctx.const_input(3), np.uint8), PAD_Q))
        zp = "in3"
    elif spec.zp == DType.FLOAT:
        ctx.repack_const(3, pack_table(np.asarray(ctx.const_input(3), np.float32), float(PAD_Q)))
        zpf = "in3"
    bias = "in4" if ctx.node.input(4) is not None else "NULL"
    rows = c_product(list(a.dims[:-1])) if a.rank > 1 else "1"
    ctx.include("onnxc_nbits.h")
    return "\n".join([
        f"const onnxc_nb_weights w_ = {{{spec.n}, {spec.k}, {spec.block}, in1, in2, {zp}, {zpf}, {bias}}};",
        f"if (onnxc_nbits_matmul(rt->threads, {rows}, in0, {spec.k}, &w_, out0, {spec.n}))",
        f'    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in %s", {ctx.who});',
        "return 0;"])
