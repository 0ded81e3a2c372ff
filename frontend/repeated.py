"""Large repeated attributes (INTS, FLOATS, STRINGS) decoded straight from their serialized bytes.

A converted tree ensemble carries attributes of millions of entries (``nodes_treeids``,
``nodes_values``, ``nodes_modes``...); ``list(a.ints)`` makes one Python object per entry (seconds and
gigabytes for a 5-million-node forest) only for the consumers to turn the lists into numpy arrays
again. Instead a run of elements is decoded with a few vectorized numpy passes, from the bytes of the
whole model before protobuf parses it (large_attrs.py), or from the serialized attribute otherwise:

- onnx.proto is proto2, so ``repeated float floats = 7``, ``repeated int64 ints = 8`` and ``repeated
  bytes strings = 9`` are not packed: element i is its tag byte (0x3D, 0x40, 0x4A) and its value, all
  elements in one run (the encoder writes a repeated field's elements together). FLOATS: 5 bytes per
  element, the 4 value bytes little-endian. INTS: the tag byte, then a base-128 varint of the two's
  complement value (1 to 10 bytes; its last byte has the high bit clear). Every byte below 0x80 ends a
  varint (the tag byte is one on its own), so the boundaries are the positions of those bytes and a value
  is the sum of its 7-bit groups shifted by 7 per position. STRINGS: the tag, the length, the bytes
  (``string_run`` says how the chain of elements is found); they are kept as their few distinct values
  and a code per element.
- A run ends at the first byte that is not its next element's tag (``*_run`` return the values and where
  the run ended); the run of a serialized attribute is found by walking its few other fields.

A packed encoding from another writer is parsed by protobuf and serialized here in the schema's form.
Anything unexpected (a tag that is not the element's, a count that does not match) returns None, and
the caller falls back to protobuf's lists. INTS are decoded in chunks, so the temporaries stay a few
times the chunk, not the attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

LARGE = 1 << 14  # entries from which INTS/FLOATS/STRINGS attributes of a parsed message are decoded here


class AttrArray(np.ndarray):
    """The value of a large INTS/FLOATS attribute: a numpy array that is falsy when empty, as the list it
    stands for would be, so readers' ``node.attr(name) or []`` keep working."""

    def __bool__(self) -> bool:
        return self.size > 0 if self.ndim == 1 else bool(np.asarray(self))

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        """Results of arithmetic and reductions are plain arrays (only the attribute itself is list-like)."""
        out = np.asarray(arr)
        return out[()] if return_scalar else out
_FLOATS, _INTS, _STRINGS = 7, 8, 9  # AttributeProto field numbers
_VOCAB = 64  # distinct values a STRINGS attribute decoded from its bytes may have
_CHUNK = 1 << 17  # elements per decoding pass (its temporaries stay in cache and reuse freed memory)


def varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    """(the protobuf varint at ``b[i]``, the offset past it); ValueError when it runs past ``end`` or 10 bytes."""
    v = shift = 0
    while True:
        if i >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        c = b[i]
        v |= (c & 0x7F) << shift
        i += 1
        if c < 0x80:
            return v, i
        shift += 7


def _run_start(b: bytes, field: int) -> int | None:
    """Offset of the first element of ``field`` in the serialized AttributeProto ``b`` (None: none, or bytes
    this reader does not follow)."""
    try:
        return _field_start(b, field)
    except ValueError:
        return None


def _field_start(b: bytes, field: int) -> int | None:
    i, end = 0, len(b)
    while i < end:
        tag, j = varint(b, i, end)
        num, wire = tag >> 3, tag & 7
        if num == field:
            return i if wire == {_FLOATS: 5, _INTS: 0, _STRINGS: 2}[field] else None
        if wire == 0:
            _, i = varint(b, j, end)
        elif wire == 1:
            i = j + 8
        elif wire == 2:
            n, k = varint(b, j, end)
            i = k + n
        elif wire == 5:
            i = j + 4
        else:
            return None
    return None


def float_run(b: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int]:
    """(the float32 values, the offset past them) of the FLOATS elements from ``start`` (before ``stop``):
    5-byte records, tag 0x3D then the value, up to the first record whose tag is another."""
    rows = b[start:start + (stop - start) // 5 * 5].reshape(-1, 5)
    bad = np.flatnonzero(rows[:, 0] != 0x3D)
    n = int(bad[0]) if len(bad) else len(rows)
    return np.ascontiguousarray(rows[:n, 1:]).view("<f4").reshape(n).astype(np.float32), start + 5 * n


def int_run(b: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int] | None:
    """(the int64 values, the offset past them) of the INTS elements from ``start`` (before ``stop``), up
    to the first byte that is not an element's tag; None for a varint longer than 10 bytes. The values are
    written chunk by chunk into one array sized for the most elements the bytes could hold (only the
    pages written are ever touched)."""
    out = np.empty(max((stop - start) // 2, 1), np.uint64)
    pos, done, per = start, 0, 3.0  # bytes an element, as the last chunk had them
    while True:
        m = _CHUNK
        pair = b[pos:min(pos + 2 * m, stop)]
        pair = pair[:len(pair) // 2 * 2].reshape(-1, 2)
        if len(pair) == m and (pair[:64, 0] == 0x40).all() and (pair[:, 0] == 0x40).all() and \
                (pair[:, 1] < 0x80).all():  # one-byte values
            out[done:done + m] = pair[:, 1]
            pos, done = pos + 2 * m, done + m
            continue
        size = int(m * per * 1.25) + 64  # a window that likely holds the chunk; doubled until it does
        while True:
            window = b[pos:min(pos + min(size, 11 * m), stop)]  # at most 11 bytes an element
            ends = np.flatnonzero(window < 0x80)[:2 * m]  # tag, value end, tag, value end...
            if len(ends) == 2 * m or size >= 11 * m or pos + size >= stop:
                break
            size *= 2
        tag_at, vend = ends[0:len(ends) // 2 * 2:2], ends[1::2]
        good = window[tag_at] == 0x40
        good[0:1] &= tag_at[0:1] == 0
        good[1:] &= tag_at[1:] == vend[:-1] + 1
        k = len(good) if good.all() else int(np.argmin(good))  # elements of the run in this chunk
        tag_at, vend = tag_at[:k], vend[:k]
        length = vend - tag_at  # bytes of each varint, 1 to 10
        if k and length.max() > 10:
            return None
        vals = out[done:done + k]
        first = tag_at + 1
        vals[:] = window[first] & 0x7F
        for g in range(1, int(length.max()) if k else 0):  # the g-th 7-bit group of the values that have one
            more = length > g
            if np.count_nonzero(more) * 4 < k:  # few values this long: gather only theirs
                idx = np.flatnonzero(more)
                vals[idx] |= (window[first[idx] + g] & 0x7F).astype(np.uint64) << np.uint64(7 * g)
                continue
            at = first + g  # past a value's end only where ``more`` is False (masked); kept within the window
            np.minimum(at, len(window) - 1, out=at)
            group = window[at] & 0x7F
            group *= more
            vals |= group.astype(np.uint64) << np.uint64(7 * g)
        used = int(vend[-1]) + 1 if k else 0
        pos, done, per = pos + used, done + k, max(used / max(k, 1), 2.0)
        if k < m:
            return out[:done].view(np.int64), pos


def string_run(b: np.ndarray, start: int, stop: int) -> tuple[list[bytes], np.ndarray, int] | None:
    """(the distinct values, per element its index among them (int8), the offset past the run) of the
    STRINGS elements from ``start`` (before ``stop``): tag byte 0x4A, a one-byte length (below 128), the
    bytes. Window by window, the candidate starts are the 0x4A bytes followed by such a length; the run is
    the chain of candidates from the window's start in which each element ends where the next candidate
    starts (a candidate inside a string ends the chain early: the caller then finds the field again after
    the run and gives up). None past _VOCAB distinct values or for an element past ``stop``."""
    codes = np.empty(max((stop - start) // 2, 1), np.int8)  # at most one element every 2 bytes
    vocab: list[bytes] = []
    pos, done, ended = start, 0, False
    while not ended and pos < stop:
        window = b[pos:min(pos + 8 * _CHUNK, stop)]
        cand = np.flatnonzero(window[:-1] == 0x4A)
        cand = cand[window[cand + 1] < 0x80]
        if not len(cand) or cand[0] != 0:
            break
        lens = window[cand + 1].astype(np.int64)
        nxt = cand + 2 + lens
        broken = np.flatnonzero(nxt[:-1] != cand[1:])
        n = int(broken[0]) + 1 if len(broken) else len(cand)
        ended = bool(len(broken)) or pos + len(window) == stop
        if nxt[n - 1] > len(window):  # the last element runs past the window: the next window starts with it
            if pos + len(window) == stop:
                return None
            n, ended = n - 1, False
        if not _group(window, cand[:n] + 2, lens[:n], vocab, codes[done:done + n]):
            return None
        pos, done = pos + int(nxt[n - 1]), done + n
    return (vocab, codes[:done], pos) if done else None


def _group(w: np.ndarray, offs: np.ndarray, lens: np.ndarray, vocab: list[bytes], codes: np.ndarray) -> bool:
    """Set ``codes`` of the strings at ``offs`` (``lens`` long) to their values' indices in ``vocab``, adding
    new values (False past _VOCAB): per value, the strings of its length compared byte by byte."""
    codes[:] = -1
    rest, k = np.arange(len(offs)), 0
    while len(rest):
        if k == len(vocab):
            if k == _VOCAB:
                return False
            vocab.append(w[offs[rest[0]]:offs[rest[0]] + lens[rest[0]]].tobytes())
        same = rest[lens[rest] == len(vocab[k])]
        at = offs[same]
        for j, c in enumerate(vocab[k]):
            keep = w[j:][at] == c
            if not keep.all():
                same, at = same[keep], at[keep]
        codes[same] = k
        rest, k = rest[codes[rest] < 0], k + 1
    return True


class AttrStrings(list):
    """The value of a large STRINGS attribute: the list of its strings, with ``vocab`` (the distinct
    strings) and ``codes`` (per element its index in ``vocab``) for readers that want numbers."""

    vocab: list
    codes: np.ndarray


def strings_value(vocab: list, codes: np.ndarray, decode: Callable[[bytes], Any]) -> AttrStrings:
    """The AttrStrings of ``codes`` into ``vocab``, each distinct value passed through ``decode`` once."""
    texts = [decode(v) for v in vocab]
    table = np.empty(len(texts), object)
    table[:] = texts
    out = AttrStrings(table[codes].tolist())
    out.vocab, out.codes = texts, codes
    return out


def repeated_strings(a: Any, decode: Callable[[bytes], Any]) -> AttrStrings | None:
    """The STRINGS of AttributeProto ``a`` (see strings_value), or None when the encoding is not the
    expected one (the caller then reads the field itself)."""
    raw = a.SerializeToString()
    start = _run_start(raw, _STRINGS)
    found = None if start is None else string_run(np.frombuffer(raw, np.uint8), start, len(raw))
    if found is None or len(found[1]) != len(a.strings):
        return None
    return strings_value(found[0], found[1], decode)


def repeated_numbers(a: Any, kind: str) -> np.ndarray | None:
    """The INTS (int64) or FLOATS (float32) of AttributeProto ``a`` as an array, or None when its encoding
    is not the expected one (the caller then reads it with ``list()``)."""
    field, count = (_INTS, len(a.ints)) if kind == "INTS" else (_FLOATS, len(a.floats))
    raw = a.SerializeToString()
    start = _run_start(raw, field)
    if start is None:
        return None
    b = np.frombuffer(raw, np.uint8)
    found = int_run(b, start, len(b)) if field == _INTS else float_run(b, start, len(b))
    return None if found is None or len(found[0]) != count else found[0].view(AttrArray)
