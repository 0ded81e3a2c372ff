"""Loop nests shared by kernels: the N-ary broadcasting elementwise loop.

``broadcast_loop(out, ins, expr)`` writes ``out[i] = expr(in0[...], in1[...], ...)`` for every output
element, where each input is broadcast to the output shape (numpy rules). Static shapes collapse to
one flat loop or to rows with contiguous inner loops; symbolic dims decide broadcasting at run time.
"""

from __future__ import annotations

from .base import Operand


def _is1(d: str) -> bool:
    return d == "1"


def broadcast_loop(out: Operand, ins: list[Operand], expr: str, out_expr_cast: str | None = None) -> str:
    """C statements computing ``out`` elementwise; ``expr`` uses ``{0}``, ``{1}``... for input elements."""
    r = out.rank
    cast = f"({out_expr_cast})" if out_expr_cast else ""
    # fast path: every input has the output's shape or is a single element
    flat = True
    for op in ins:
        if op.shape == out.shape:
            continue
        if all(_is1(d) for d in op.dims):
            continue
        flat = False
    if flat:
        args = [f"{op.ptr}[i]" if op.shape == out.shape else f"{op.ptr}[0]" for op in ins]
        n = out.numel()
        return (f"const int64_t n = {n};\n"
                f"#pragma omp simd\n"
                f"for (int64_t i = 0; i < n; i++) {out.ptr}[i] = {cast}({expr.format(*args)});\n"
                "return 0;")
    lines = []
    # per-axis output dims and per-input strides (0 where the input broadcasts)
    for a in range(r):
        lines.append(f"const int64_t d{a} = {out.dims[a]};")
    for k, op in enumerate(ins):
        off = r - op.rank
        strides = op.strides()
        for a in range(r):
            j = a - off
            if j < 0 or _is1(op.dims[j]):
                s = "0"
            elif op.dims[j] == out.dims[a]:
                s = strides[j]
            else:
                s = f"(({op.dims[j]}) == 1 ? 0 : {strides[j]})"
            lines.append(f"const int64_t s{k}_{a} = {s};")
    if r == 0:
        args = [f"{op.ptr}[0]" for op in ins]
        lines.append(f"{out.ptr}[0] = {cast}({expr.format(*args)});")
        lines.append("return 0;")
        return "\n".join(lines)
    lines.append("int64_t o = 0;")
    inner = r - 1
    # outer loops
    for a in range(inner):
        lines.append(f"for (int64_t i{a} = 0; i{a} < d{a}; i{a}++) {{")
    bases = []
    for k in range(len(ins)):
        terms = [f"i{a} * s{k}_{a}" for a in range(inner)] or ["0"]
        bases.append(f"const int64_t b{k} = {' + '.join(terms)};")
    lines.extend(bases)
    args = [f"{op.ptr}[b{k} + j * s{k}_{inner}]" for k, op in enumerate(ins)]
    lines.append(f"for (int64_t j = 0; j < d{inner}; j++) {out.ptr}[o + j] = {cast}({expr.format(*args)});")
    lines.append(f"o += d{inner};")
    for _ in range(inner):
        lines.append("}")
    lines.append("return 0;")
    return "\n".join(lines)
