"""Size limits of compiled models, and overflow-free element counts and byte sizes.

Every static element count or byte size computed at compile time goes through :func:`element_count` /
:func:`byte_size` (exact Python ints, never numpy int64, which wraps silently) and is checked against
these limits, so the C code (which computes sizes in 64-bit integers) never sees a size that wraps:

- ``MAX_RANK``: the most axes a tensor may have (``ONNXC_MAX_RANK`` of the tensor ABI, runtime_c/onnxc.h);
- ``MAX_TENSOR_BYTES``: the largest tensor, and the largest static memory plan, in bytes (2^48, 256 TiB:
  more than any machine holds and far from 2^63, so a sum or product of a few such sizes in C stays exact).

Callers raise their own error class (ModelError in the frontend, ShapeError in shape inference,
InputError for call inputs) with the message :func:`too_big` gives.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MAX_RANK = 16
MAX_TENSOR_BYTES = 1 << 48


def element_count(dims: Iterable[int]) -> int:
    """The exact product of ``dims`` (1 for a scalar)."""
    return math.prod(int(d) for d in dims)


def byte_size(dtype, dims: Iterable[int]) -> int:
    """The exact size in bytes of a tensor of element type ``dtype`` (an ir DType) and static ``dims``."""
    return element_count(dims) * dtype.itemsize


def too_big(dtype, dims: Iterable[int]) -> str | None:
    """Why a tensor of static ``dims`` exceeds the limits, or None when it does not."""
    dims = [int(d) for d in dims]
    if len(dims) > MAX_RANK:
        return f"rank {len(dims)} is above onnxc's maximum rank {MAX_RANK}"
    if any(d < 0 for d in dims):
        return f"shape {dims} has a negative dimension"
    if any(d > MAX_TENSOR_BYTES for d in dims):  # even beside a 0 (an empty tensor), C must hold the dim
        return f"shape {dims} has a dimension above the limit of {MAX_TENSOR_BYTES}"
    n = byte_size(dtype, dims)
    if n > MAX_TENSOR_BYTES:
        return (f"shape {dims} holds {element_count(dims)} elements of {dtype.name.lower()}: {n} bytes, more than "
                f"the limit of {MAX_TENSOR_BYTES} bytes per tensor")
    return None
