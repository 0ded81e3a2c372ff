"""Slice and Pad kernels.

Both read their bounds as Dims from the same helpers the shape rules use (``slice_params``,
``pad_params``), so symbolic starts/pads become C expressions over the dimension variables. Slice
copies the longest contiguous run (trailing untouched axes merge into one memcpy); Pad fills each
output row in three parts: the leading pad, a memcpy of the input row, the trailing pad.

With starts/ends/axes/steps or pads known only at run time, the shape functions below compute the
slice/pad parameters (run-time variables the kernels read through ``ctx.dim``) and the output dims.
"""

from __future__ import annotations

from onnxc.passes.shapes.indexing import pad_mode, pad_params, slice_params

from . import dynshape as ds
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES, clit, copy, cprod

PAD_SRC = """\
/* Source index of padded position i (already shifted by the leading pad) on an axis of size d;
 * -1 means the constant fill. mode: 0 constant, 1 reflect, 2 edge, 3 wrap. */
static inline int64_t onnxc_pad_src(int64_t i, int64_t d, int mode) {
    if (i >= 0 && i < d) return i;
    switch (mode) {
    case 1: {
        if (d == 1) return 0;
        const int64_t p = 2 * (d - 1);
        int64_t m = i % p;
        if (m < 0) m += p;
        return m >= d ? p - m : m;
    }
    case 2: return i < 0 ? 0 : d - 1;
    case 3: { int64_t m = i % d; return m < 0 ? m + d : m; }
    default: return -1;
    }
}"""

MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


def _entries(ctx: KernelCtx, i: int) -> int:
    op = ctx.ins[i]
    return int(op.shape[0]) if op.rank else 1


def _read_or(ctx: KernelCtx, i: int | None, n: int, var: str, default: str) -> str:
    """``int64_t var[n]`` from input ``i``, or filled with ``default`` (C, may use j_) when it is absent."""
    if i is not None and i < len(ctx.ins) and ctx.ins[i] is not None:
        return ds.read_ints(ctx, i, n, var)
    return f"int64_t {var}[{max(n, 1)}] = {{0}};\nfor (int j_ = 0; j_ < {n}; j_++) {var}[j_] = {default};"


def _axis_loop(ctx: KernelCtx, r: int, n: int) -> list[str]:
    """Open ``for (j < n)`` with ``a`` = the j-th axis (ax[j]) checked against rank ``r`` and repeats."""
    return [f"int mark[{max(r, 1)}] = {{0}};", f"for (int j = 0; j < {n}; j++) {{",
            f"const int a = onnxc_axis(ax[j], {r});",
            "if (a < 0 || mark[a]) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: axes entry %lld is out of range "
            f"or repeated (rank {r})\", {ds.who(ctx)}, (long long)ax[j]);", "mark[a] = 1;"]


def slice_shape(ctx: KernelCtx) -> str:
    """Numpy clamping of run-time starts/ends/steps: first index, step and count per sliced axis."""
    x = ctx.ins[0]
    r, n = x.rank, _entries(ctx, 1)
    ds.include(ctx)
    lines = [ds.in_dims(ctx, 0, "din"), ds.read_ints(ctx, 1, n, "s"), ds.read_ints(ctx, 2, n, "e"),
             _read_or(ctx, 3, n, "ax", "j_"), _read_or(ctx, 4, n, "k", "1"),
             f"int64_t st[{max(r, 1)}], sp[{max(r, 1)}], cnt[{max(r, 1)}];",
             f"for (int a = 0; a < {r}; a++) {{ st[a] = 0; sp[a] = 1; cnt[a] = din[a]; }}",
             *_axis_loop(ctx, r, n),
             f"if (k[j] == 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: steps must not be 0\", {ds.who(ctx)});",
             "onnxc_slice_axis(din[a], s[j], e[j], k[j], &st[a], &cnt[a]);", "sp[a] = k[j];", "}"]
    for a, (first, step, _count) in enumerate(slice_params(ctx.node, x.shape)):
        for d, var in ((first, "st"), (step, "sp")):
            if ctx.lvalue(d) is not None:
                lines.append(ds.assign(ctx, d, f"{var}[{a}]"))
            elif d != (0 if var == "st" else 1):  # a compile-time parameter: must agree
                lines.append(f"if ({var}[{a}] != ({ctx.dim(d)})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                             f"\"%s: unexpected slice parameter on axis {a}\", {ds.who(ctx)});")
    lines += [ds.bind(ctx, 0, [f"cnt[{a}]" for a in range(r)]), "return 0;"]
    return "\n".join(lines)


@kernel("Slice", types=MOVES, shape_fn=slice_shape)
def slice_kernel(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    if x.rank == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    params = slice_params(ctx.node, x.shape)
    xs = x.strides()
    full = [s == 0 and k == 1 and n == d for (s, k, n), d in zip(params, x.shape)]
    j = max((a for a in range(x.rank) if not full[a]), default=-1)
    if j < 0:
        return copy("out0", "in0", x.numel(), x.ctype) + "\nreturn 0;"
    block = cprod(x.dims[j + 1:])
    lines = [f"const int64_t st{a} = {ctx.dim(params[a][0])};" for a in range(j + 1)]
    lines += [f"const int64_t blk = {block};", "int64_t o = 0;"]
    for a in range(j):
        lines.append(f"for (int64_t i{a} = 0; i{a} < {y.dims[a]}; i{a}++) {{")
    steps = [f"({ctx.dim(p[1])})" if not isinstance(p[1], int) else p[1] for p in params]  # run-time or static
    base = " + ".join([f"(st{a} + i{a} * {steps[a]}) * ({xs[a]})" for a in range(j)] or ["0"])
    step, size = steps[j], y.dims[j]
    if step == 1:
        n = cprod([size, block])
        lines.append(copy("out0 + o", f"in0 + {base} + st{j} * ({xs[j]})", n, x.ctype))
        lines.append(f"o += {n};")
    else:
        lines.append(f"for (int64_t ij = 0; ij < {size}; ij++) {{")
        lines.append(copy("out0 + o", f"in0 + {base} + (st{j} + ij * {step}) * ({xs[j]})", block, x.ctype))
        lines.append("o += blk;")
        lines.append("}")
    lines += ["}"] * j
    lines += ["(void)o; (void)blk;", "return 0;"]
    return "\n".join(lines)


def _pad_value(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    if ctx.node.version < 11:
        return clit(ctx.attr("value", 0.0), y.dtype)
    if len(ctx.ins) > 2 and ctx.ins[2] is not None:
        return "in2[0]"
    return clit(0, y.dtype)


def pad_shape(ctx: KernelCtx) -> str:
    """Run-time pads (and axes): the pad before each axis and the output dims (>= 0)."""
    x = ctx.ins[0]
    r, k = x.rank, _entries(ctx, 1)
    m = k // 2
    ds.include(ctx)
    big = "INT64_MAX / 4"
    lines = [ds.in_dims(ctx, 0, "din"), ds.read_ints(ctx, 1, k, "p"),
             _read_or(ctx, 3 if ctx.node.version >= 18 else None, m, "ax", "j_"),
             f"int64_t pb[{max(r, 1)}] = {{0}}, pe[{max(r, 1)}] = {{0}}, dout[{max(r, 1)}];",
             *_axis_loop(ctx, r, m),
             f"if (p[j] < -{big} || p[j] > {big} || p[{m} + j] < -{big} || p[{m} + j] > {big}) return onnxc_fail(rt, "
             f"ONNXC_ERR_RUNTIME, \"%s: pads %lld, %lld are out of range\", {ds.who(ctx)}, (long long)p[j], "
             f"(long long)p[{m} + j]);",
             f"pb[a] = p[j]; pe[a] = p[{m} + j];", "}",
             f"for (int a = 0; a < {r}; a++) {{", "dout[a] = din[a] + pb[a] + pe[a];",
             "if (dout[a] < 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: pads %lld, %lld crop axis %d of size "
             f"%lld below zero\", {ds.who(ctx)}, (long long)pb[a], (long long)pe[a], a, (long long)din[a]);", "}"]
    for a, (b, _e) in enumerate(pad_params(ctx.node, x.shape)):
        if ctx.lvalue(b) is not None:
            lines.append(ds.assign(ctx, b, f"pb[{a}]"))
    lines += [ds.bind_array(ctx, 0, "dout"), "return 0;"]
    return "\n".join(lines)


@kernel("Pad", types=MOVABLE, shape_fn=pad_shape)
def pad(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    mode = MODES[pad_mode(ctx.node)]
    r = x.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    ctx.helper("onnxc_pad_src", PAD_SRC)
    pads = pad_params(ctx.node, x.shape)
    xs = x.strides()
    lines = [f"const {y.ctype} cv = {_pad_value(ctx)};"]
    for a in range(r):
        lines += [f"const int64_t d{a} = {x.dims[a]}, od{a} = {y.dims[a]}, pb{a} = {ctx.dim(pads[a][0])};"]
    if mode:
        empty = " || ".join(f"d{a} == 0" for a in range(r))
        lines.append(f"if (({empty}) && {y.numel()} > 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                     "\"Pad: cannot pad an empty axis in this mode\");")
    last = r - 1
    lines += [f"const int64_t rows = {cprod(y.dims[:-1])};",
              "for (int64_t row = 0; row < rows; row++) {",
              f"{y.ctype} *restrict dst = out0 + row * od{last};",
              "int64_t rem = row, base = 0, src;"]
    for a in range(last - 1, -1, -1):
        lines += [f"src = onnxc_pad_src(rem % od{a} - pb{a}, d{a}, {mode}); rem /= od{a};",
                  f"if (src < 0) {{ for (int64_t j = 0; j < od{last}; j++) dst[j] = cv; continue; }}",
                  f"base += src * ({xs[a]});"]
    n, pb, d = f"od{last}", f"pb{last}", f"d{last}"
    lines += [
        f"const {x.ctype} *restrict s = in0 + base;",
        f"int64_t lo = {pb} > 0 ? {pb} : 0; if (lo > {n}) lo = {n};",
        f"int64_t hi = {pb} + {d} < {n} ? {pb} + {d} : {n}; if (hi < lo) hi = lo;",
        "for (int64_t j = 0; j < lo; j++) {",
        f"src = onnxc_pad_src(j - {pb}, {d}, {mode}); dst[j] = src < 0 ? cv : s[src]; }}",
        copy("dst + lo", f"s + (lo - {pb})", "hi - lo", x.ctype),
        f"for (int64_t j = hi; j < {n}; j++) {{",
        f"src = onnxc_pad_src(j - {pb}, {d}, {mode}); dst[j] = src < 0 ? cv : s[src]; }}",
        "}", "return 0;",
    ]
    return "\n".join(lines)
