"""The packed operand layout of the float GEMM (runtime_c/onnxc_sgemm.h), as numpy functions.

Weights that are GEMM operands (Conv filters as A, constant MatMul/Gemm B) are packed at compile time
into the layout the micro-kernels read, so a run skips packing them. The layout is one pure function,
the same for every instruction set (each micro-kernel tiles the 12 x 32 panels its own way):

- packed A (M x K): ``ceil(M / 12)`` panels of K x 12; element ``A[i, p]`` at
  ``(i // 12) * K * 12 + p * 12 + i % 12``;
- packed B (K x N): ``ceil(N / 32)`` panels of K x 32; element ``B[p, j]`` at
  ``(j // 32) * K * 32 + p * 32 + j % 32``;

with zeros in the padding rows/columns of the last panel. tests/ops/test_gemm.py checks that the C
packing routines (``onnxc_sg_pack_a`` / ``onnxc_sg_pack_b``) produce the same arrays.
"""

from __future__ import annotations

import numpy as np

MR = 12  # rows of a packed A panel (ONNXC_SG_MR)
NR = 32  # columns of a packed B panel (ONNXC_SG_NR)


def packed_a_size(m: int, k: int) -> int:
    """Elements of the packed form of an M x K A operand."""
    return -(-m // MR) * MR * k


def packed_b_size(k: int, n: int) -> int:
    """Elements of the packed form of a K x N B operand."""
    return -(-n // NR) * NR * k


def pack_a(a: np.ndarray) -> np.ndarray:
    """Pack a 2-D (M x K) A operand into 12-row panels; returns a flat float32 array."""
    m, k = a.shape
    mp = -(-m // MR) * MR
    padded = np.zeros((mp, k), dtype=np.float32)
    padded[:m] = a
    # [panel, row-in-panel, p] -> [panel, p, row-in-panel]
    return np.ascontiguousarray(padded.reshape(mp // MR, MR, k).transpose(0, 2, 1)).reshape(-1)


def pack_b(b: np.ndarray) -> np.ndarray:
    """Pack a 2-D (K x N) B operand into 32-column panels; returns a flat float32 array."""
    k, n = b.shape
    np_ = -(-n // NR) * NR
    padded = np.zeros((k, np_), dtype=np.float32)
    padded[:, :n] = b
    # [p, panel, col-in-panel] -> [panel, p, col-in-panel]
    return np.ascontiguousarray(padded.reshape(k, np_ // NR, NR).transpose(1, 0, 2)).reshape(-1)
