"""Let go of the resident pages of constants that are views of a mapped file (large external weights:
frontend/external.py). Once the lowering has copied or packed a weight into the weights blob, its pages
in the model's file mapping only add to the compile's memory; dropping them (MADV_DONTNEED) keeps the
data readable (a later read pages it in again from the file) and the peak memory near one copy."""

from __future__ import annotations

import contextlib
import mmap

import numpy as np


def backing_map(arr: np.ndarray) -> mmap.mmap | None:
    """The file mapping ``arr`` is a view of, if any."""
    b = arr
    while b is not None:
        if isinstance(b, mmap.mmap):
            return b
        b = b.obj if isinstance(b, memoryview) else getattr(b, "base", None)
    return None


def release(arr: object) -> None:
    """Drop the resident pages wholly inside ``arr``'s bytes when it is a view of a file mapping."""
    if not isinstance(arr, np.ndarray) or arr.nbytes < mmap.PAGESIZE:
        return
    m = backing_map(arr)
    if m is None or m.closed:
        return
    start = arr.__array_interface__["data"][0] - np.frombuffer(m, np.uint8, count=1).ctypes.data
    lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = (start + arr.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if 0 <= lo < hi <= len(m):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
