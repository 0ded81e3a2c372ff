"""Kernels of ops whose output size is the number of selected elements: NonZero, Compress, Unique,
NonMaxSuppression.

Each has a shape function that counts what the kernel will select (the run-time dim of
passes/shapes/select.py); the run function then allocates the outputs and the kernel fills them.
Unique and NonMaxSuppression do their selection twice (count, then fill) with the same C helper, so
the two passes agree by construction. NonMaxSuppression's helper (onnxc_nms_<type>) is in
runtime_c/onnxc_select.c, compiled once into the runtime library; Unique's is generated per type.

Unique views the input as [O, N, I] (N slices along the axis; O = I = 1 and N = size without an
axis), sorts slice indices with a stable merge sort (numeric order, NaN last and equal to NaN), so
each group of equal slices starts with its first occurrence; ``sorted=0`` renumbers the groups by
first occurrence.
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.select import compress_axis, unique_axis

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES, cprod
from .typesets import FLOATS

HEADER = '#include "onnxc_select.h"'


def _scores_accepts(node: Node) -> str | None:
    """The scores' type must be the boxes' (the boxes' type is declared with types=)."""
    b, s = node.input(0), node.input(1)
    if b is not None and s is not None and None not in (b.dtype, s.dtype) and b.dtype != s.dtype:
        return f"{s.dtype.short} scores with {b.dtype.short} boxes are not supported"
    return None


def _nonzero(x, expr: str) -> str:
    """C test of element ``expr`` of operand ``x`` being nonzero (-0.0 is zero, also as a half bit pattern)."""
    return f"(({expr}) & 0x7fff) != 0" if x.dtype in half.HALF else f"{expr} != 0"


def _mem_fail(ctx: KernelCtx) -> str:
    return f"return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ds.who(ctx)});"


# -- NonZero --------------------------------------------------------------------------------------

def _nonzero_shape(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    return "\n".join([f"const int64_t n = {x.numel()};", "int64_t c = 0;",
                      f"for (int64_t i = 0; i < n; i++) c += {_nonzero(x, 'in0[i]')};",
                      ds.assign(ctx, ctx.outs[0].shape[1], "c"), "return 0;"])


@kernel("NonZero", types=MOVABLE, shape_fn=_nonzero_shape)
def nonzero(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    lines = [f"const int64_t n = {x.numel()}, nz = {y.dims[1]};", "int64_t j = 0;",
             "for (int64_t i = 0; i < n; i++) {", f"if (!({_nonzero(x, 'in0[i]')})) continue;", "int64_t rem = i;"]
    for a in range(x.rank - 1, -1, -1):
        lines.append(f"out0[{a} * nz + j] = rem % ({x.dims[a]}); rem /= ({x.dims[a]});")
    return "\n".join([*lines, "(void)rem; j++;", "}", "(void)nz; (void)j;", "return 0;"])


# -- Compress -------------------------------------------------------------------------------------

def _compress_view(ctx: KernelCtx) -> tuple[str, str, str]:
    """(outer, axis length, inner) of the input as C expressions."""
    x = ctx.ins[0]
    axis = compress_axis(ctx.node, x.rank)
    if axis is None:
        return "1", x.numel(), "1"
    return cprod(x.dims[:axis]), x.dims[axis], cprod(x.dims[axis + 1:])


def _compress_shape(ctx: KernelCtx) -> str:
    _, n, _ = _compress_view(ctx)
    c = ctx.ins[1]
    axis = compress_axis(ctx.node, ctx.ins[0].rank)
    return "\n".join([
        f"const int64_t n = {n}, len = {c.dims[0]};", "int64_t cnt = 0;",
        "for (int64_t i = 0; i < len; i++) {", "if (!in1[i]) continue;",
        "if (i >= n) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: condition selects index %lld, but there are "
        f"only %lld elements\", {ds.who(ctx)}, (long long)i, (long long)n);", "cnt++;", "}",
        ds.assign(ctx, ctx.outs[0].shape[0 if axis is None else axis], "cnt"), "return 0;"])


@kernel("Compress", types=MOVES, shape_fn=_compress_shape)
def compress(ctx: KernelCtx) -> str:
    x, c = ctx.ins[0], ctx.ins[1]
    outer, n, inner = _compress_view(ctx)
    return "\n".join([
        f"const int64_t outer = {outer}, n = {n}, inner = {inner}, len = {c.dims[0]};",
        "const int64_t m = len < n ? len : n;", f"{x.ctype} *restrict d = out0;",
        "for (int64_t o = 0; o < outer; o++)", "for (int64_t i = 0; i < m; i++) {", "if (!in1[i]) continue;",
        f"memcpy(d, in0 + (o * n + i) * inner, (size_t)inner * sizeof({x.ctype}));", "d += inner;", "}",
        "return 0;"])


# -- Unique ---------------------------------------------------------------------------------------

# Unique's sort stays in the model's translation unit: there the [O, N, I] view is usually made of
# compile-time constants (O = I = 1 for a flat Unique) and GCC specializes the comparison; a generic
# runtime-library copy sorts 1.3-1.6x slower.
_UNIQUE_HELPER = """\
/* Order of slices a and b of the [O, N, I] view: numeric, NaN last and equal to NaN. */
static int onnxc_uq_cmp_{S}(const {T} *x, int64_t O, int64_t N, int64_t I, int64_t a, int64_t b) {{
    for (int64_t o = 0; o < O; o++) {{
        const {T} *p = x + (o * N + a) * I, *q = x + (o * N + b) * I;
        for (int64_t i = 0; i < I; i++) {{
            const {V} u = {load}(p[i]), v = {load}(q[i]);
            if (u < v) return -1;
            if (v < u) return 1;
            {nan}
        }}
    }}
    return 0;
}}

/* Stable merge sort of the slice indices into perm (tmp: N more entries); returns the number of
 * distinct slices. Equal slices end up adjacent, first occurrence first. */
static int64_t onnxc_uq_sort_{S}(const {T} *x, int64_t O, int64_t N, int64_t I, int64_t *perm, int64_t *tmp) {{
    for (int64_t i = 0; i < N; i++) perm[i] = i;
    for (int64_t w = 1; w < N; w *= 2) {{
        for (int64_t lo = 0; lo < N; lo += 2 * w) {{
            const int64_t mid = lo + w < N ? lo + w : N, hi = lo + 2 * w < N ? lo + 2 * w : N;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = onnxc_uq_cmp_{S}(x, O, N, I, perm[j], perm[i]) < 0 ? perm[j++] : perm[i++];
            while (i < mid) tmp[k++] = perm[i++];
            while (j < hi) tmp[k++] = perm[j++];
        }}
        memcpy(perm, tmp, (size_t)N * sizeof(int64_t));
    }}
    int64_t groups = 0;
    for (int64_t p = 0; p < N; p++)
        groups += p == 0 || onnxc_uq_cmp_{S}(x, O, N, I, perm[p - 1], perm[p]) != 0;
    return groups;
}}"""


def _unique_setup(ctx: KernelCtx) -> tuple[str, list[str]]:
    """The helper's suffix and C declaring O, N, I."""
    x = ctx.ins[0]
    dt = x.dtype
    nan = "const int nu = u != u, nv = v != v; if (nu != nv) return nu ? 1 : -1;" if dt.is_float else ""
    if dt in half.HALF:
        half.use(ctx)
    load = {DType.FLOAT16: "onnxc_h2f", DType.BFLOAT16: "onnxc_bf2f"}.get(dt, "")
    ctx.helper(f"onnxc_uq_{dt.short}", _UNIQUE_HELPER.format(S=dt.short, T=x.ctype, nan=nan, load=load,
                                                             V=half.compute_type(dt).c))
    axis = unique_axis(ctx.node, x.rank)
    if axis is None:
        o, n, i = "1", x.numel(), "1"
    else:
        o, n, i = cprod(x.dims[:axis]), x.dims[axis], cprod(x.dims[axis + 1:])
    return dt.short, [f"const int64_t O = {o}, N = {n}, I = {i};"]


def _unique_count(ctx: KernelCtx):
    """The run-time dim holding the number of distinct slices (axis of Y, or its only axis)."""
    return ctx.outs[0].shape[unique_axis(ctx.node, ctx.ins[0].rank) or 0]


def _unique_shape(ctx: KernelCtx) -> str:
    s, lines = _unique_setup(ctx)
    return "\n".join([*lines, "int64_t *perm = onnxc_alloc((size_t)N * 2 * sizeof(int64_t));",
                      "if (!perm) " + _mem_fail(ctx),
                      f"const int64_t u = onnxc_uq_sort_{s}(in0, O, N, I, perm, perm + N);", "free(perm);",
                      ds.assign(ctx, _unique_count(ctx), "u"), "return 0;"])


@kernel("Unique", types=MOVABLE, shape_fn=_unique_shape)
def unique(ctx: KernelCtx) -> str:
    s, lines = _unique_setup(ctx)
    x, n_out = ctx.ins[0], len(ctx.outs)
    lines += [f"const int64_t u = {ctx.dim(_unique_count(ctx))};",
              "int64_t *w = onnxc_alloc((size_t)N * 6 * sizeof(int64_t));", "if (!w) " + _mem_fail(ctx),
              "int64_t *perm = w, *ginv = w + 2 * N, *gfirst = w + 3 * N, *gcount = w + 4 * N, *pos = w + 5 * N;",
              f"onnxc_uq_sort_{s}(in0, O, N, I, perm, w + N);",
              "int64_t g = -1;",
              "for (int64_t p = 0; p < N; p++) {",
              f"if (p == 0 || onnxc_uq_cmp_{s}(in0, O, N, I, perm[p - 1], perm[p]) != 0) "
              "{ g++; gfirst[g] = perm[p]; gcount[g] = 0; }",
              "gcount[g]++; ginv[perm[p]] = g;", "}"]
    if ctx.attr("sorted", 1):
        lines.append("for (int64_t k = 0; k <= g; k++) pos[k] = k;")
    else:  # groups in order of first occurrence
        lines += ["for (int64_t k = 0; k <= g; k++) pos[k] = -1;", "int64_t next = 0;",
                  "for (int64_t i = 0; i < N; i++) if (pos[ginv[i]] < 0) pos[ginv[i]] = next++;"]
    lines += ["for (int64_t k = 0; k <= g; k++) {", "const int64_t p = pos[k];",
              "for (int64_t o = 0; o < O; o++) "
              f"memcpy(out0 + (o * u + p) * I, in0 + (o * N + gfirst[k]) * I, (size_t)I * sizeof({x.ctype}));"]
    if n_out > 1:
        lines.append("out1[p] = gfirst[k];")
    if n_out > 3:
        lines.append("out3[p] = gcount[k];")
    lines.append("}")
    if n_out > 2:
        lines.append("for (int64_t i = 0; i < N; i++) out2[i] = pos[ginv[i]];")
    return "\n".join([*lines, "free(w);", "return 0;"])


# -- NonMaxSuppression ----------------------------------------------------------------------------

def _nms_call(ctx: KernelCtx, out: str) -> str:
    """C computing ``n`` = the selected count (and writing rows to ``out`` unless it is NULL)."""
    bx, sc = ctx.ins[0], ctx.ins[1]
    t, s = bx.ctype, bx.dtype.short
    ctx.helper("onnxc_select", HEADER)

    def opt(i: int, expr: str, default: str) -> str:
        return expr if i < len(ctx.ins) and ctx.ins[i] is not None and ctx.ins[i].numel() != "0" else default

    maxout = opt(2, "(int64_t)in2[0]", "0")
    return "\n".join([
        f"const int64_t B = {bx.dims[0]}, S = {bx.dims[1]}, C = {sc.dims[1]};",
        f"if (({sc.dims[0]}) != B || ({sc.dims[2]}) != S || ({bx.dims[2]}) != 4) return onnxc_fail(rt, "
        f"ONNXC_ERR_RUNTIME, \"%s: boxes and scores shapes do not match\", {ds.who(ctx)});",
        f"const int64_t maxout = {maxout} > 0 ? {maxout} : 0;",
        "int64_t *w = onnxc_alloc((size_t)S * 3 * sizeof(int64_t));", "if (!w) " + _mem_fail(ctx),
        f"const int64_t n = onnxc_nms_{s}(in0, in1, B, C, S, maxout, ({t}){opt(3, 'in3[0]', '0')}, "
        f"{'1' if opt(4, 'x', '') else '0'}, ({t}){opt(4, 'in4[0]', '0')}, {int(ctx.attr('center_point_box', 0))}, "
        f"{out}, w);",
        "free(w);"])


def _nms_shape(ctx: KernelCtx) -> str:
    return "\n".join([_nms_call(ctx, "NULL"), ds.assign(ctx, ctx.outs[0].shape[0], "n"), "return 0;"])


@kernel("NonMaxSuppression", types=FLOATS, accepts=_scores_accepts, shape_fn=_nms_shape)
def nms(ctx: KernelCtx) -> str:
    return "\n".join([_nms_call(ctx, "out0"), "(void)n;", "return 0;"])
