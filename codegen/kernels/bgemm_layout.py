"""The packed operand layout of the bfloat16 GEMM (runtime_c/onnxc_bgemm.h), as numpy functions.

With ``precision="bf16"``, Conv filters (A) and constant MatMul/Gemm operands (B) are rounded to bfloat16
and packed at compile time: half the bytes of float32 weights. A *pair* is one uint32 holding the bf16 of
elements k (low half) and k + 1 (high half) of the K axis; ``K2 = ceil(K / 2)`` pairs, the missing k of an
odd K is zero:

- packed A (M x K): ``ceil(M / 12)`` panels of K2 x 12 pairs; pair ``(i, q)`` at
  ``(i // 12) * K2 * 12 + q * 12 + i % 12``;
- packed B (K x N): ``ceil(N / 32)`` panels of K2 x 32 pairs; pair ``(q, j)`` at
  ``(j // 32) * K2 * 32 + q * 32 + j % 32``;

the float GEMM's layout (codegen/kernels/gemm_layout.py) with pairs for floats. The C packers
(``onnxc_bg_pack_a`` / ``onnxc_bg_pack_b``) write the same words (tests/ops/test_bf16.py).
"""

from __future__ import annotations

import numpy as np

from .gemm_layout import MR, NR, pack_a, pack_b


def round_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 of float32 ``x`` (round to nearest even, NaN kept and made quiet) as uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    r = np.where(nan, (u | np.uint32(0x00400000)) >> 16, r)
    return r.astype(np.uint16)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bf16 and widened back to float32 (what the bf16 GEMM multiplies)."""
    return (round_bf16_bits(x).astype(np.uint32) << 16).view(np.float32).reshape(np.shape(x))


def _pairs(x: np.ndarray) -> np.ndarray:
    """K x C float32 -> ceil(K / 2) x C uint32 pairs (rows 2q low, 2q + 1 high)."""
    k, c = x.shape
    even = np.zeros((k + k % 2, c), dtype=np.float32)
    even[:k] = x
    bits = round_bf16_bits(even).astype(np.uint32)
    return bits[0::2] | (bits[1::2] << 16)


def packed_a_size(m: int, k: int) -> int:
    """Pairs of the packed form of an M x K A operand."""
    return -(-m // MR) * MR * ((k + 1) // 2)


def packed_b_size(k: int, n: int) -> int:
    """Pairs of the packed form of a K x N B operand."""
    return -(-n // NR) * NR * ((k + 1) // 2)


def pack_a_bf16(a: np.ndarray) -> np.ndarray:
    """Pack a 2-D (M x K) float A operand into 12-row panels of bf16 pairs; a flat uint32 array."""
    pairs = _pairs(np.asarray(a, dtype=np.float32).T).T  # M x K2
    return pack_a(pairs.view(np.float32)).view(np.uint32)


def pack_b_bf16(b: np.ndarray) -> np.ndarray:
    """Pack a 2-D (K x N) float B operand into 32-column panels of bf16 pairs; a flat uint32 array."""
    return pack_b(_pairs(np.asarray(b, dtype=np.float32)).view(np.float32)).view(np.uint32)
