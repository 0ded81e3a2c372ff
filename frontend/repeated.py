"""Large repeated numeric attributes (INTS, FLOATS) decoded straight into numpy arrays.

A converted tree ensemble carries attributes of millions of entries (``nodes_treeids``,
``nodes_values``...); ``list(a.ints)`` makes one Python object per entry (seconds and gigabytes for a
5-million-node forest) only for the consumers to turn the lists into numpy arrays again. Instead, the
attribute is serialized once (C speed) and its field decoded with a few vectorized numpy passes:

- onnx.proto is proto2, so ``repeated float floats = 7`` and ``repeated int64 ints = 8`` are not packed:
  element i is its tag byte (0x3D for a float, 0x40 for an int) and its value, all elements in one run
  (the encoder writes a repeated field's elements together). FLOATS: 5 bytes per element, the 4 value
  bytes little-endian. INTS: the tag byte, then a base-128 varint of the two's complement value (1 to 10
  bytes; its last byte has the high bit clear). Every byte below 0x80 ends a varint (the tag byte is one
  on its own), so the boundaries are the positions of those bytes and a value is the sum of its 7-bit
  groups shifted by 7 per position.
- The run is found by walking the attribute's few other fields in Python (name, type...).

A packed encoding from another writer is parsed by protobuf and serialized here in the schema's form.
Anything unexpected (a tag that is not the element's, a count that does not match) returns None, and
the caller falls back to ``list()``. Arrays are decoded in
chunks, so the temporaries stay a few times the chunk, not the attribute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LARGE = 1 << 14  # entries from which INTS/FLOATS attributes are decoded into arrays


class AttrArray(np.ndarray):
    """The value of a large INTS/FLOATS attribute: a numpy array that is falsy when empty, as the list it
    stands for would be, so readers' ``node.attr(name) or []`` keep working."""

    def __bool__(self) -> bool:
        return self.size > 0 if self.ndim == 1 else bool(np.asarray(self))

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        """Results of arithmetic and reductions are plain arrays (only the attribute itself is list-like)."""
        out = np.asarray(arr)
        return out[()] if return_scalar else out
_FLOATS, _INTS = 7, 8  # AttributeProto field numbers
_CHUNK = 1 << 20  # elements per decoding pass


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        v |= (c & 0x7F) << shift
        i += 1
        if c < 0x80:
            return v, i
        shift += 7


def _run_start(b: bytes, field: int) -> int | None:
    """Offset of the first element of ``field`` in the serialized AttributeProto ``b``."""
    i = 0
    while i < len(b):
        tag, j = _varint(b, i)
        num, wire = tag >> 3, tag & 7
        if num == field:
            return i if (field == _FLOATS and wire == 5) or (field == _INTS and wire == 0) else None
        if wire == 0:
            _, i = _varint(b, j)
        elif wire == 1:
            i = j + 8
        elif wire == 2:
            n, k = _varint(b, j)
            i = k + n
        elif wire == 5:
            i = j + 4
        else:
            return None
    return None


def _floats(b: np.ndarray, start: int, n: int) -> np.ndarray | None:
    run = b[start:start + 5 * n]
    if len(run) != 5 * n:
        return None
    rows = run.reshape(n, 5)
    if (rows[:, 0] != 0x3D).any():
        return None
    return np.ascontiguousarray(rows[:, 1:]).view("<f4").reshape(n).astype(np.float32)


def _ints(b: np.ndarray, start: int, n: int) -> np.ndarray | None:
    out = np.empty(n, np.uint64)
    pos, done = start, 0
    while done < n:
        m = min(_CHUNK, n - done)
        window = b[pos:pos + 11 * m]  # at most 11 bytes an element (tag + 10-byte varint)
        ends = np.flatnonzero(window < 0x80)[:2 * m]  # tag, value end, tag, value end...
        if len(ends) < 2 * m:
            return None
        tag_at, vend = ends[0::2], ends[1::2]
        if tag_at[0] != 0 or (tag_at[1:] != vend[:-1] + 1).any() or (window[tag_at] != 0x40).any():
            return None
        vstart = tag_at + 1
        length = vend - tag_at  # bytes of each varint, 1 to 10
        if length.max() > 10:
            return None
        vals = (window[vstart] & 0x7F).astype(np.uint64)
        for k in range(1, int(length.max())):  # the k-th 7-bit group of the values that have one
            idx = np.flatnonzero(length > k)
            vals[idx] |= (window[vstart[idx] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        out[done:done + m] = vals
        pos += int(vend[-1]) + 1
        done += m
    return out.view(np.int64)


def repeated_numbers(a: Any, kind: str) -> np.ndarray | None:
    """The INTS (int64) or FLOATS (float32) of AttributeProto ``a`` as an array, or None when its encoding
    is not the expected one (the caller then reads it with ``list()``)."""
    field, count = (_INTS, len(a.ints)) if kind == "INTS" else (_FLOATS, len(a.floats))
    raw = a.SerializeToString()
    start = _run_start(raw, field)
    if start is None:
        return None
    b = np.frombuffer(raw, np.uint8)
    out = _ints(b, start, count) if field == _INTS else _floats(b, start, count)
    return None if out is None else out.view(AttrArray)
