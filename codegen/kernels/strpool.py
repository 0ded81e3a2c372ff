"""Strings a kernel only reads (lookup keys, vocabularies) as data in the weights blob instead of C literals.

``string_pool(ctx, name, strings)`` stores the strings NUL-terminated (UTF-8, undecodable bytes as they
were) one after the other, plus each one's offset, with ``KernelCtx.blob_table``; it returns a function
giving the C expression (``const char *``) of string ``i``. A vocabulary of 100,000 words then costs the
C compiler nothing. Strings a kernel writes to a string output stay static C literals (``ctables``): the
output holds pointers to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .base import KernelCtx


def _utf8(s: str | bytes) -> bytes:
    b = s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape")
    if b"\0" in b:
        raise NotImplementedError(f"string {s!r} holds a NUL character; C strings end at NUL")
    return b


def string_pool(ctx: KernelCtx, name: str, strings: Sequence[str | bytes]) -> Callable[[str], str]:
    """Put ``strings`` in the weights blob; returns ``at(i)``: the C expression of string ``i`` (a C index)."""
    raw = [_utf8(s) + b"\0" for s in strings]
    offs = np.zeros(max(len(raw), 1), np.int64)
    offs[1:len(raw)] = np.cumsum([len(r) for r in raw[:-1]], dtype=np.int64)
    chars = ctx.blob_table(f"{name}_chars", np.frombuffer(b"".join(raw) or b"\0", np.uint8))
    at = ctx.blob_table(f"{name}_at", offs)
    return lambda i: f"((const char *){chars} + {at}[{i}])"
