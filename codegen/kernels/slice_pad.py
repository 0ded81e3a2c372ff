"""Slice and Pad kernels.

Both read their bounds as Dims from the same helpers the shape rules use (``slice_params``,
``pad_params``), so symbolic starts/pads become C expressions over the dimension variables. Slice
copies the longest contiguous run (trailing untouched axes merge into one memcpy); Pad fills each
output row in three parts: the leading pad, a memcpy of the input row, the trailing pad.
"""

from __future__ import annotations

from onnxc.passes.shapes.indexing import pad_mode, pad_params, slice_params

from .base import KernelCtx, kernel
from .copyutil import clit, copy, cprod, dtype_accepts, require

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


@kernel("Slice", accepts=dtype_accepts(0))
def slice_kernel(ctx: KernelCtx) -> str:
    require(ctx, 0)
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
    base = " + ".join([f"(st{a} + i{a} * {params[a][1]}) * ({xs[a]})" for a in range(j)] or ["0"])
    step, size = params[j][1], y.dims[j]
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


@kernel("Pad", accepts=dtype_accepts(0))
def pad(ctx: KernelCtx) -> str:
    require(ctx, 0)
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
