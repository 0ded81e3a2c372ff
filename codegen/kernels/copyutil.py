"""Helpers shared by the data-movement kernels: the element types they move, element copies and the
transpose loop nest (blocked for 2-D swaps, strided otherwise) that DepthToSpace reuses.

Data movement is element-type agnostic: kernels copy whole elements (``memcpy`` or assignment of the
storage type), so one body serves every numeric type and bool, and float16/bfloat16 (uint16_t bit
patterns; ``cexpr.c_literal`` writes their literals as bit patterns).
"""

from __future__ import annotations

from collections.abc import Callable

from ..cexpr import c_product
from .typesets import LOWP, MOVABLE, STRING, SUBBYTE

# Types whose values are handled bit-exactly by these kernels (``types=`` of the numeric movers).
SUPPORTED = MOVABLE
# ... and of the kernels here that only move whole elements (assignment or memcpy of the storage type):
# string tensors (arrays of ``onnxc_str`` pointers, runtime_c/onnxc_strings.h) pass through as pointer
# copies, float8/float4 and int4/int2 (one element per byte) as bytes. Transpose, Concat, Gather,
# Slice...; Scatter ops move them only without a reduction.
MOVES = MOVABLE | STRING | LOWP | SUBBYTE


def is_one(d: str) -> bool:
    return d == "1"


def copy(dst: str, src: str, n: str, ctype: str, ctx=None) -> str:
    """Statement copying ``n`` elements (memcpy, or a plain loop when ``n`` is a small literal). With the
    KernelCtx ``ctx`` of a model built for several threads, a copy that may be large runs on the pool
    (onnxc_copy_par, runtime_c/onnxc_pool.h: serial below ONNXC_COPY_PAR_MIN bytes)."""
    if n == "1":
        return f"({dst})[0] = ({src})[0];"
    if n.isdigit() and int(n) <= 8:
        return f"for (int64_t c_ = 0; c_ < {n}; c_++) ({dst})[c_] = ({src})[c_];"
    if ctx is not None and ctx.threads > 1 and not (n.isdigit() and int(n) < PAR_COPY_MIN_ELEMENTS):
        ctx.include("onnxc_pool.h")
        return f"onnxc_copy_par(rt->threads, {dst}, {src}, (size_t)({n}) * sizeof({ctype}));"
    return f"memcpy({dst}, {src}, (size_t)({n}) * sizeof({ctype}));"


PAR_COPY_MIN_ELEMENTS = 1 << 15  # static copies of fewer (4-byte) elements stay plain memcpy calls


# -- transpose --------------------------------------------------------------------------------------

def reduce_perm(dims: list[str], perm: list[int]) -> tuple[list[str], list[int]]:
    """Drop size-1 axes and merge input axes that stay adjacent and in order in the output."""
    keep = [a for a in range(len(dims)) if not is_one(dims[a])]
    rank_of = {a: k for k, a in enumerate(keep)}
    p = [rank_of[a] for a in perm if a in rank_of]
    d = [dims[a] for a in keep]
    groups: list[list[int]] = []
    for a in p:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])  # merged input axes, input order
    new_dims = [c_product([d[a] for a in groups[g]]) for g in order]
    pos = {g: k for k, g in enumerate(order)}
    return new_dims, [pos[g] for g in range(len(groups))]


def transpose_body(src: str, dst: str, dims: list[str], perm: list[int], ctype: str, itemsize: int,
                   include: Callable[[str], None]) -> str:
    """C statements writing ``dst = transpose(src, perm)`` for a row-major ``src`` of C dims ``dims``;
    ``include`` requests a header by name (``KernelCtx.include``)."""
    d, p = reduce_perm(dims, perm)
    r = len(d)
    if r <= 1 or p == list(range(r)):
        return copy(dst, src, c_product(d) if d else "1", ctype) + "\nreturn 0;"
    lines = [f"const int64_t n{a} = {d[a]};" for a in range(r)]
    istr = ["1"] * r
    for a in range(r - 2, -1, -1):
        istr[a] = c_product([istr[a + 1], f"n{a + 1}"]) if istr[a + 1] != "1" else f"n{a + 1}"
    lines += [f"const int64_t s{a} = {istr[a]};" for a in range(r)]
    odim = [f"n{p[j]}" for j in range(r)]
    ostr = ["1"] * r
    for j in range(r - 2, -1, -1):
        ostr[j] = f"{ostr[j + 1]} * {odim[j + 1]}" if ostr[j + 1] != "1" else odim[j + 1]
    lines += [f"const int64_t t{j} = {ostr[j]};" for j in range(r)]
    if p[-1] == r - 1:
        # the innermost output axis is contiguous in the input: copy rows
        outer = list(range(r - 1))
        for j in outer:
            lines.append(f"for (int64_t i{j} = 0; i{j} < {odim[j]}; i{j}++) {{")
        ib = " + ".join(f"i{j} * s{p[j]}" for j in outer)
        ob = " + ".join(f"i{j} * t{j}" for j in outer)
        lines.append(copy(f"{dst} + {ob}", f"{src} + {ib}", d[p[-1]], ctype))
        lines += ["}"] * len(outer)
        lines.append("return 0;")
        return "\n".join(lines)
    # a 2-D transpose per outer index: the output axis reading contiguous input (q) against the innermost
    # output axis (last), blocked and vectorized in onnxc_transpose.h
    q, last = p.index(r - 1), r - 1
    include("onnxc_transpose.h")
    outer = [j for j in range(r) if j not in (q, last)]
    for j in outer:
        lines.append(f"for (int64_t i{j} = 0; i{j} < {odim[j]}; i{j}++) {{")
    ib = " + ".join([f"i{j} * s{p[j]}" for j in outer] or ["0"])
    ob = " + ".join([f"i{j} * t{j}" for j in outer] or ["0"])
    lines.append(f"onnxc_transpose2d_{itemsize * 8}({src} + {ib}, s{p[last]}, {dst} + {ob}, t{q}, "
                 f"{odim[last]}, {odim[q]});")
    lines += ["}"] * len(outer)
    lines.append("return 0;")
    return "\n".join(lines)
