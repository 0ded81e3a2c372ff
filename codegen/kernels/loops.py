"""Loop nests shared by kernels: the N-ary broadcasting elementwise loop.

``broadcast_loop(out, ins, expr)`` writes ``out[i] = expr(in0[...], in1[...], ...)`` for every output
element, where each input is broadcast to the output shape (numpy rules). The loop nest is planned
from the shapes at compile time:

- axes whose output extent is statically 1 are dropped;
- adjacent axes that every input treats the same way (all equal to the output, or all broadcast)
  are coalesced into one, so equal shapes become one flat loop and ``[N, C, H, W] + [1, C, 1, 1]``
  becomes three loops;
- the innermost loop runs over contiguous output elements; a broadcast input there is a hoisted
  scalar, so the loop vectorizes.

A symbolic input dim that differs from the output's (``M`` against ``N``) may be 1 or equal at run
time: its stride is chosen at run time and a mismatch returns an error instead of reading out of
bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType
from onnxc.ir.dims import is_static

from .base import KernelCtx, Operand
from .parfor import par_for

# Elements from which an elementwise loop is shared out on the pool (below PAR_WORK_MIN, the other kernels'
# threshold): its input was usually written by a threaded kernel, half of it into the other core's cache, and
# one thread alone would pull that half over (an SE block's scale, 120 x 28 x 28: 11 us at 1 thread, 22 us
# on one of 2 threads after a 2-thread depthwise conv, 6 us on both). Chunks are contiguous index ranges,
# as the producer's are, so each thread mostly reads what it wrote.
ELEMENTWISE_PAR_MIN = 1 << 15

_BLOCK = 1 << 14  # elements of one block of a flat parallel loop


@dataclass
class _Axis:
    dim: str                 # C expression of the output extent
    kinds: tuple[str, ...]   # per input: "S" equal to the output, "B" broadcast, "D" decided at run time
    strides: list[str]       # per input: element stride (C expression), "0" when broadcast


def _mul(a: str, b: str) -> str:
    if a == "1":
        return b
    if b == "1":
        return a
    if a.isdigit() and b.isdigit():
        return str(int(a) * int(b))
    return f"({a}) * ({b})"


def _term(i: str, s: str) -> str | None:
    if s == "0":
        return None
    return i if s == "1" else f"{i} * {s}"


def _check(k: int, j: int, d: str, want: str) -> str:
    """A run-time test that input ``k``'s axis ``j`` (extent ``d``) broadcasts to extent ``want``."""
    return (f"if (({d}) != 1 && ({d}) != ({want})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: input "
            f"{k} axis {j} has %lld elements, cannot broadcast to %lld\", NODE, (long long)({d}), "
            f"(long long)({want}));")


def _plan(out: Operand, ins: list[Operand]) -> tuple[list[_Axis], list[str]]:
    """Coalesced loop axes and the run-time broadcast checks they need."""
    r = out.rank
    axes: list[_Axis] = []
    checks: list[str] = []
    strides = [op.strides() for op in ins]
    for a in range(r):
        od = out.shape[a]
        if is_static(od) and od == 1:
            for k, op in enumerate(ins):
                j = a - (r - op.rank)
                if j >= 0 and not is_static(op.shape[j]):
                    checks.append(_check(k, j, op.dims[j], "1"))
            continue
        kinds, st = [], []
        for k, op in enumerate(ins):
            j = a - (r - op.rank)
            if j < 0:
                kinds.append("B")
                st.append("0")
                continue
            d = op.shape[j]
            if d == od:
                kinds.append("S")
                st.append(strides[k][j])
            elif is_static(d) and d == 1:
                kinds.append("B")
                st.append("0")
            elif is_static(d) and is_static(od):
                raise ValueError(f"input {k} dim {d} cannot broadcast to {od} (axis {a})")
            else:
                kinds.append("D")
                st.append(f"(({op.dims[j]}) == 1 ? 0 : {strides[k][j]})")
                checks.append(_check(k, j, op.dims[j], out.dims[a]))
        ax = _Axis(out.dims[a], tuple(kinds), st)
        prev = axes[-1] if axes else None
        if prev is not None and prev.kinds == ax.kinds and "D" not in ax.kinds:
            prev.dim = _mul(prev.dim, ax.dim)
            prev.strides = ax.strides  # the inner axis' strides step through the merged axis
        else:
            axes.append(ax)
    return axes, checks


def _parallel(out: Operand, ctx: KernelCtx | None) -> bool:
    """Whether the loop may run on several threads: a model built for them, an output that may be large."""
    if ctx is None or ctx.threads <= 1:
        return False
    if out.static:
        n = 1
        for d in out.shape:
            n *= d
        return n >= ELEMENTWISE_PAR_MIN
    return True


def broadcast_loop(out: Operand, ins: list[Operand], expr: str, out_expr_cast: str | None = None, *,
                   name: str = "", ctx: KernelCtx | None = None, simd: str = "#pragma omp simd") -> str:
    """C statements computing ``out`` elementwise; ``expr`` uses ``{0}``, ``{1}``... for input elements.

    ``name`` (a C string literal naming the node) goes into run-time broadcast errors; with ``ctx`` of a
    model built for several threads, large loops run on the runtime's pool (codegen/kernels/parfor.py):
    chunks of the outer iterations, or of blocks of the single flat loop. Every input element is loaded
    into a local before ``expr`` runs, so selects (``c ? x : y``) vectorize; bool inputs are read as
    uint8_t, which gcc vectorizes as masks where it does not vectorize _Bool. ``simd`` is the line before
    the inner loop.
    """
    cast = f"({out_expr_cast})" if out_expr_cast else ""
    axes, checks = _plan(out, ins)
    lines = [c.replace("NODE", name or '"elementwise"') for c in checks]
    if not axes:  # a single element
        axes = [_Axis("1", tuple("B" for _ in ins), ["0"] * len(ins))]
    outer, inner = axes[:-1], axes[-1]
    ostr = ["1"] * len(axes)
    for g in range(len(axes) - 2, -1, -1):
        ostr[g] = _mul(ostr[g + 1], axes[g + 1].dim)
    head = []
    for k in range(len(ins)):
        for g, ax in enumerate(axes):
            if ax.kinds[k] == "D":
                head.append(f"const int64_t s{k}_{g} = {ax.strides[k]};")
                ax.strides[k] = f"s{k}_{g}"
    par = _parallel(out, ctx) and inner.dim != "1"
    # the body of one outer iteration (indices i0, i1, ...) over the inner range [jlo, jhi)
    jlo, jhi = ("jl_", "jh_") if par and not outer else ("0", inner.dim)
    terms = [_term(f"i{g}", ostr[g]) for g in range(len(outer))]
    core = [f"{out.ctype} *restrict o = {out.ptr} + {' + '.join(t for t in terms if t) or '0'};"]
    loads = []
    for k, op in enumerate(ins):
        ct = "uint8_t" if op.dtype == DType.BOOL else op.ctype
        base = f"(const uint8_t *){op.ptr}" if op.dtype == DType.BOOL else op.ptr
        terms = [t for g, ax in enumerate(outer) if (t := _term(f"i{g}", ax.strides[k]))]
        core.append(f"const {ct} *restrict p{k} = {base}{' + ' + ' + '.join(terms) if terms else ''};")
        s = inner.strides[k]
        if s == "0" or inner.dim == "1":
            core.append(f"const {ct} x{k} = p{k}[0];")  # loop invariant
        else:
            loads.append(f"const {ct} x{k} = p{k}[{'j' if s == '1' else f'j * {s}'}]; ")
    value = f"{cast}({expr.format(*[f'x{k}' for k in range(len(ins))])})"
    if inner.dim == "1":
        core.append(f"o[0] = {value};")
    else:
        core.append(simd)
        core.append(f"for (int64_t j = {jlo}; j < {jhi}; j++) {{ {''.join(loads)}o[j] = {value}; }}")
    lines += head
    if not par:
        for g, ax in enumerate(outer):
            lines.append(f"for (int64_t i{g} = 0; i{g} < {ax.dim}; i{g}++) {{")
        lines += core
        lines.extend("}" for _ in outer)
    elif not outer:  # one flat loop: chunks of blocks of it
        n = inner.dim
        body = [f"const int64_t jl_ = b_ * {_BLOCK}, jh_ = jl_ + {_BLOCK} < ({n}) ? jl_ + {_BLOCK} : ({n});", *core]
        lines += par_for(ctx, "b_", f"(({n}) + {_BLOCK - 1}) / {_BLOCK}", body, work=n, head=head,
                          grain=ELEMENTWISE_PAR_MIN // 2)
    else:  # the outer iterations, flattened into one index
        count = "1"
        for ax in outer:
            count = _mul(count, ax.dim)
        idx, rest = [], "1"
        for g in range(len(outer) - 1, -1, -1):
            q = "f_" if rest == "1" else f"f_ / ({rest})"
            idx.append(f"const int64_t i{g} = {q if g == 0 else f'({q}) % ({outer[g].dim})'};")
            rest = _mul(rest, outer[g].dim)
        lines += par_for(ctx, "f_", count, [*reversed(idx), *core], work=out.numel(), head=head,
                          grain=ELEMENTWISE_PAR_MIN // 2)
    lines.append("return 0;")
    return "\n".join(lines)
