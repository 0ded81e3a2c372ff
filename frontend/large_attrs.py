"""Large attributes of the main graph's nodes cut out of a serialized ModelProto before protobuf parses it.

A converted 10,000-tree ensemble is a 185 MB file of which nearly every byte is in a dozen attributes
(``nodes_treeids``, ``nodes_modes``...; tens of millions of elements). Parsing them into protobuf's
repeated fields and serializing them again to decode them with numpy (repeated.py) costs more than the
decoding itself, and the parsed message holds them a second time. Instead ``cut`` walks the bytes down
ModelProto.graph -> GraphProto.node -> NodeProto.attribute (a few Python steps a field, skipping every
field that is too small to hold a large attribute), decodes each large INTS, FLOATS or STRINGS run
straight from the file's bytes with repeated.py's run decoders, and returns the model without those runs:
each cut attribute keeps its name and type and gets a field of number MARK (not in ONNX's schema: protobuf
keeps it as an unknown field) holding a random per-load tag and the index of its decoded value. While the loader builds the graph
(``active``), ``take`` gives the value of an attribute that carries the mark.

An attribute is cut only when its type is given and is the one of its run, the run is one contiguous
field of the plain proto2 encoding and nothing in its bytes is unexpected; otherwise it is left to
protobuf, as is everything outside the main graph's nodes. Bytes that do not walk as protobuf fields are
returned unchanged for protobuf to parse and report.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from . import repeated

MIN_BYTES = 1 << 16  # a field smaller than this holds no attribute worth cutting
MARK = (1 << 29) - 1  # the field number that names a cut attribute's value (the largest protobuf allows)
_GRAPH, _NODE, _ATTRIBUTE = 7, 1, 5  # ModelProto.graph, GraphProto.node, NodeProto.attribute
_TYPE = 20  # AttributeProto.type
_RUNS = {7: (6, 5), 8: (7, 0), 9: (8, 2)}  # element field -> (its AttributeType, its wire type)

_INDEX_BITS = 24  # a mark is the load's tag << _INDEX_BITS | the value's index

_ACTIVE: ContextVar[Cut | None] = ContextVar("onnxc_large_attrs", default=None)


class Cut:
    """The values ``cut`` decoded, in mark order (int64/float32 arrays, (vocab, codes) pairs for STRINGS),
    and the tag of their marks (a mark with another tag, e.g. from a file, names none of them)."""

    def __init__(self) -> None:
        self.values: list = []
        self.tag = secrets.randbits(32)

    def mark(self, value: Any) -> int:
        self.values.append(value)
        return self.tag << _INDEX_BITS | (len(self.values) - 1)

    def value(self, mark: int) -> Any:
        index = mark & ((1 << _INDEX_BITS) - 1)
        return self.values[index] if mark >> _INDEX_BITS == self.tag and index < len(self.values) else None


class _Skip(Exception):
    """The bytes are not what this walker expects: leave them to protobuf."""


def _varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    try:
        return repeated.varint(b, i, end)
    except ValueError:
        raise _Skip from None


def _encode(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _fields(b: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, offset of the field, offset of its value, offset past it) per field."""
    i = start
    while i < end:
        tag, j = _varint(b, i, end)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            _, k = _varint(b, j, end)
        elif wire == 1:
            k = j + 8
        elif wire == 2:
            n, j = _varint(b, j, end)
            k = j + n
        elif wire == 5:
            k = j + 4
        else:
            raise _Skip
        if num == 0 or k > end:
            raise _Skip
        yield num, wire, i, j, k
        i = k


def _rebuilt(b: bytes, start: int, end: int, child: int, edit: Callable[[int, int], bytes | None]) -> bytes | None:
    """The message ``b[start:end]`` with each length-delimited field ``child`` of MIN_BYTES or more replaced
    by ``edit(value start, value end)`` (None: kept), or None when nothing changed."""
    pieces, last, changed = [], start, False
    for num, wire, at, j, k in _fields(b, start, end):
        if num != child or wire != 2 or k - j < MIN_BYTES:
            continue
        new = edit(j, k)
        if new is None:
            continue
        pieces += [b[last:at], _encode(child << 3 | 2), _encode(len(new)), new]
        last, changed = k, True
    return b"".join(pieces + [b[last:end]]) if changed else None


def _attribute(b: bytes, arr: np.ndarray, start: int, end: int, store: Cut) -> bytes | None:
    """The AttributeProto ``b[start:end]`` without its large run and with the mark, or None to keep it."""
    kind = run = None
    i = start
    while i < end:  # the few fields of the attribute, stepping over the run in one decode
        tag, j = _varint(b, i, end)
        num, wire = tag >> 3, tag & 7
        if num in _RUNS and wire == _RUNS[num][1]:
            if run is not None:
                return None  # a second run, or two element fields
            found = (repeated.float_run if num == 7 else repeated.int_run if num == 8 else repeated.string_run)(
                arr, i, end)
            if found is None:
                return None
            run = (num, i, found[-1], found[:-1])
            i = found[-1]
            continue
        if num == MARK:
            return None
        *_, k = next(_fields(b, i, end))
        if num == _TYPE and wire == 0:
            kind = _varint(b, j, end)[0]
        i = k
    if run is None or kind != _RUNS[run[0]][0] or run[2] - run[1] < MIN_BYTES or \
            len(store.values) >= 1 << _INDEX_BITS:
        return None
    num, at, stop, value = run
    mark = store.mark(value[0] if num != 9 else value)
    return b[start:at] + b[stop:end] + _encode(MARK << 3) + _encode(mark)


def cut(data: bytes) -> tuple[bytes, Cut]:
    """(the ModelProto ``data`` without the runs of its main graph's large attributes, their values)."""
    values = Cut()
    if len(data) < MIN_BYTES:
        return data, values
    arr = np.frombuffer(data, np.uint8)
    try:
        def node(j: int, k: int) -> bytes | None:
            return _rebuilt(data, j, k, _ATTRIBUTE, lambda s, e: _attribute(data, arr, s, e, values))

        def graph(j: int, k: int) -> bytes | None:
            return _rebuilt(data, j, k, _NODE, node)

        out = _rebuilt(data, 0, len(data), _GRAPH, graph)
    except _Skip:
        return data, Cut()
    return (data, Cut()) if out is None else (out, values)


@contextlib.contextmanager
def active(values: Cut) -> Iterator[None]:
    """Within the block, ``take`` reads marks against ``values`` (what ``cut`` returned)."""
    token = _ACTIVE.set(values)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def take(a: Any, decode: Callable[[bytes], Any]) -> Any:
    """The cut value of AttributeProto ``a`` (an empty INTS/FLOATS/STRINGS field), or None when it carries no
    mark or no cut is active: INTS/FLOATS as repeated.AttrArray, STRINGS as repeated.AttrStrings."""
    values = _ACTIVE.get()
    if values is None or not values.values:
        return None
    raw = a.SerializeToString()  # name, type and mark: a few bytes
    try:
        marks = [_varint(raw, j, len(raw))[0] for num, wire, _, j, _ in _fields(raw, 0, len(raw))
                 if num == MARK and wire == 0]
    except _Skip:
        return None
    value = values.value(marks[0]) if len(marks) == 1 else None
    if value is None:
        return None
    if isinstance(value, tuple):
        return repeated.strings_value(value[0], value[1], decode)
    return value.view(repeated.AttrArray)
