"""The packed operand layout of the 8-bit integer GEMM (runtime_c/onnxc_igemm.h), as numpy functions.

Integer weights that are GEMM operands (QLinearConv / ConvInteger filters as A, constant QLinearMatMul /
MatMulInteger B) are packed at compile time into the bytes the micro-kernels read, so a run skips packing
them. The layout is the same for every instruction set; with ``KQ = ceil(K / 4)`` groups of 4 consecutive k:

- packed A (M x K): ``ceil(M / 8)`` panels of KQ groups of 8 rows x 4 bytes; ``A[i, k]`` at
  ``(i // 8) * KQ * 32 + (k // 4) * 32 + (i % 8) * 4 + k % 4``;
- packed B (K x N): ``ceil(N / 32)`` panels of KQ groups of 32 columns x 4 bytes; ``B[k, j]`` at
  ``(j // 32) * KQ * 128 + (k // 4) * 128 + (j % 32) * 4 + k % 4``;

with zeros in the padding (k, rows, columns), followed by the int32 sums over k of each padded row of A /
column of B (little-endian, as the byte values of the packed type). The bytes are uint8 or int8 as asked:
an operand of the other type is flipped (``x ^ 0x80``; its zero point then moves by 128, which the GEMM
does from the operand's own type). tests/ops/test_igemm.py checks that the C packers
(``onnxc_ig_pack_a`` / ``onnxc_ig_pack_b``) write the same bytes.
"""

from __future__ import annotations

import numpy as np

MR = 8  # rows of a packed A panel (ONNXC_IG_MR)
NR = 32  # columns of a packed B panel (ONNXC_IG_NR)


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def packed_a_size(m: int, k: int) -> int:
    """Bytes of the packed form of an M x K A operand, sums included."""
    return _ceil(m, MR) * (_ceil(k, 4) + 4)


def packed_b_size(k: int, n: int) -> int:
    """Bytes of the packed form of a K x N B operand, sums included."""
    return _ceil(n, NR) * (_ceil(k, 4) + 4)


def _padded_bytes(x: np.ndarray, rows: int, cols: int, to_u8: bool) -> np.ndarray:
    """x (uint8 or int8, 2-D) as bytes of the packed type, zero-padded to rows x cols."""
    if x.ndim != 2 or x.dtype not in (np.uint8, np.int8):
        raise ValueError(f"integer GEMM operands are 2-D uint8/int8 arrays, got {x.dtype} of shape {x.shape}")
    raw = x.view(np.uint8)
    if (x.dtype == np.uint8) != to_u8:
        raw = raw ^ np.uint8(0x80)
    out = np.zeros((rows, cols), dtype=np.uint8)
    out[: x.shape[0], : x.shape[1]] = raw
    return out


def _sums(padded: np.ndarray, axis: int, to_u8: bool) -> np.ndarray:
    vals = padded if to_u8 else padded.view(np.int8)
    return vals.sum(axis=axis, dtype=np.int64).astype("<i4").view(np.uint8)


def pack_a(a: np.ndarray, to_u8: bool = False) -> np.ndarray:
    """Pack a 2-D (M x K) uint8/int8 A into 8-row panels of uint8 (``to_u8``) or int8 bytes, with its
    row sums; returns a flat uint8 array of ``packed_a_size`` bytes."""
    m, k = a.shape
    mp, kp = _ceil(m, MR), _ceil(k, 4)
    p = _padded_bytes(a, mp, kp, to_u8)
    # [panel, row, group, t] -> [panel, group, row, t]
    panels = p.reshape(mp // MR, MR, kp // 4, 4).transpose(0, 2, 1, 3)
    return np.concatenate([panels.reshape(-1), _sums(p, 1, to_u8)])


def pack_b(b: np.ndarray, to_u8: bool = True) -> np.ndarray:
    """Pack a 2-D (K x N) uint8/int8 B into 32-column panels of uint8 (``to_u8``) or int8 bytes, with its
    column sums; returns a flat uint8 array of ``packed_b_size`` bytes."""
    k, n = b.shape
    kp, np_ = _ceil(k, 4), _ceil(n, NR)
    p = _padded_bytes(b, kp, np_, to_u8)
    # [group, t, panel, column] -> [panel, group, column, t]
    panels = p.reshape(kp // 4, 4, np_ // NR, NR).transpose(2, 0, 3, 1)
    return np.concatenate([panels.reshape(-1), _sums(p, 0, to_u8)])
