"""The memory plan: place intermediate buffers with disjoint lifetimes at shared arena offsets.

Buffers whose sizes are static are placed at compile time (greedy first-fit, largest first); when
any size is symbolic the same algorithm runs at the start of each call in C
(``onnxc_plan_arena`` in runtime_c/onnxc.h), so one compiled model serves every shape. A static
arena, like any one tensor, holds at most MAX_TENSOR_BYTES (ir/limits.py): each buffer is within it,
but many alive at once could add up past it (and past what 64-bit offsets in the C hold).
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import ShapeError
from onnxc.ir.limits import MAX_TENSOR_BYTES

ALIGN = 64


@dataclass
class Slot:
    id: int
    size: int | None   # bytes when static
    first: int
    last: int


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def first_fit(slots: list[Slot]) -> tuple[dict[int, int], int]:
    """Offsets by slot id and the arena size; slots are placed in the order given."""
    placed: list[tuple[int, int, Slot]] = []
    offsets: dict[int, int] = {}
    total = 0
    for s in slots:
        need = _aligned(s.size or 0) or ALIGN
        off = 0
        moved = True
        while moved:
            moved = False
            for o, n, t in placed:
                if t.first > s.last or s.first > t.last:
                    continue
                if off < o + n and o < off + need:
                    off = o + n
                    moved = True
        placed.append((off, need, s))
        offsets[s.id] = off
        total = max(total, off + need)
    return offsets, total


def static_plan(slots: list[Slot]) -> tuple[dict[int, int], int] | None:
    """Compile-time plan when every size is known, else None."""
    if any(s.size is None for s in slots):
        return None
    offsets, total = first_fit(sorted(slots, key=lambda s: -(s.size or 0)))
    if total > MAX_TENSOR_BYTES:
        raise ShapeError(f"the static memory plan needs {total} bytes for the intermediate buffers alive at "
                         f"once, more than the limit of {MAX_TENSOR_BYTES} bytes")
    return offsets, total
