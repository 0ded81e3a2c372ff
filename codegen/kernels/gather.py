"""Gather, GatherElements, GatherND, ScatterND, ScatterElements (and Scatter-9/11) kernels.

Indices are validated as they are read: an index outside [-n, n) makes the kernel return
ONNXC_ERR_RUNTIME with a message naming the node, never an out-of-bounds access. Negative indices
count from the end. Gather and GatherND copy whole inner slices with memcpy.
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.indexing import gathernd_shape, scatter_reduction

from . import half
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES, copy, cprod


def _check(ctx: KernelCtx, var: str, n: str) -> str:
    """C statements validating index ``var`` against axis size ``n`` and making it non-negative."""
    who = ctx.who
    return (f"if ({var} < -({n}) || {var} >= ({n})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
            f"\"%s: index %lld is out of range for an axis of size %lld\", {who}, (long long){var}, "
            f"(long long)({n}));\n"
            f"if ({var} < 0) {var} += ({n});")


@kernel("Gather", types=MOVES)
def gather(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    axis = ctx.node.attr("axis", 0)
    axis = axis + x.rank if axis < 0 else axis
    inner = cprod(x.dims[axis + 1:])
    return "\n".join([
        f"const int64_t outer = {cprod(x.dims[:axis])}, n = {x.dims[axis]}, inner = {inner};",
        f"const int64_t ni = {ind.numel()};",
        "for (int64_t k = 0; k < ni; k++) {",
        "int64_t v = (int64_t)in1[k];",
        _check(ctx, "v", "n"),
        "}",
        "for (int64_t o = 0; o < outer; o++) {",
        f"{x.ctype} *restrict d = out0 + o * ni * inner;",
        "const " + x.ctype + " *restrict s = in0 + o * n * inner;",
        "for (int64_t k = 0; k < ni; k++) {",
        "int64_t v = (int64_t)in1[k];",
        "if (v < 0) v += n;",
        copy("d + k * inner", "s + v * inner", inner, x.ctype),
        "}", "}", "return 0;"])


def _coords(lines: list[str], dims: list[str], upto: int, row: str = "row") -> None:
    """Declare c0..c{upto-1}: the coordinates of ``row`` over ``dims[:upto]`` (row-major)."""
    lines.append(f"int64_t rem = {row};")
    for a in range(upto - 1, -1, -1):
        lines.append(f"const int64_t c{a} = rem % ({dims[a]}); rem /= ({dims[a]});")
    lines.append("(void)rem;")


@kernel("GatherElements", types=MOVES)
def gather_elements(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    r = x.rank
    axis = ctx.node.attr("axis", 0)
    axis = axis + r if axis < 0 else axis
    xs = x.strides()
    last = r - 1
    lines = [f"const int64_t rows = {cprod(ind.dims[:-1])}, w = {ind.dims[-1]}, n = {x.dims[axis]};",
             "for (int64_t row = 0; row < rows; row++) {"]
    _coords(lines, ind.dims, last)
    base = " + ".join([f"c{a} * ({xs[a]})" for a in range(last) if a != axis] or ["0"])
    lines += [f"const int64_t base = {base};", "for (int64_t j = 0; j < w; j++) {",
              "int64_t v = (int64_t)in1[row * w + j];", _check(ctx, "v", "n")]
    off = "base + v" if axis == last else f"base + v * ({xs[axis]}) + j"
    lines += [f"out0[row * w + j] = in0[{off}];", "}", "}", "return 0;"]
    return "\n".join(lines)


@kernel("GatherND", types=MOVES)
def gather_nd(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    b, k, _ = gathernd_shape(ctx.node, x.shape, ind.shape)
    sl = cprod(x.dims[b + k:])
    lines = [f"const int64_t nb = {cprod(x.dims[:b])}, cnt = {cprod(ind.dims[b:-1])};",
             f"const int64_t sl = {sl}, bstride = {cprod(x.dims[b:])};",
             "for (int64_t bi = 0; bi < nb; bi++) {", "for (int64_t t = 0; t < cnt; t++) {",
             "const int64_t e = bi * cnt + t;", "int64_t off = bi * bstride, v;"]
    for j in range(k):
        lines += [f"v = (int64_t)in1[e * {k} + {j}];", _check(ctx, "v", x.dims[b + j]),
                  f"off += v * ({cprod(x.dims[b + j + 1:])});"]
    lines += [copy("out0 + e * sl", "in0 + off", sl, x.ctype), "}", "}", "return 0;"]
    return "\n".join(lines)


def _copy_only_reduction(node: Node) -> str | None:
    """Types moved only as bytes (strings, float8, int4...) are scattered by assignment: a reduction needs
    arithmetic on them."""
    x = node.input(0)
    red = node.attr("reduction", "none")
    if x is not None and x.dtype is not None and x.dtype not in MOVABLE and red != "none":
        return f"reduction {red!r} on {x.dtype.short} tensors is not supported"
    return None


def _combine(red: str, dst: str, u: str, dt: DType) -> str:
    if red == "none":
        return f"{dst} = {u};"
    if dt in half.HALF:  # combine in float, store rounded
        x = f"{dt.short}_x"
        return (f"{{ {dt.c} {x} = {dst}; float {x}f = {half.load(dt, x)}, {x}u = {half.load(dt, u)}; "
                + _combine(red, f"{x}f", f"{x}u", DType.FLOAT) + f" {dst} = {half.store(dt, f'{x}f')}; }}")
    if red == "add":
        return f"{dst} = {dst} + {u};"
    if red == "mul":
        return f"{dst} = {dst} * {u};"
    if red == "max":
        return f"if ({u} > {dst}) {dst} = {u};"
    return f"if ({u} < {dst}) {dst} = {u};"


@kernel("ScatterND", types=MOVES, accepts=_copy_only_reduction)
def scatter_nd(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    red = scatter_reduction(ctx.node)
    if x.dtype in half.HALF:
        half.use(ctx)
    k = int(ind.shape[-1])
    sl = cprod(x.dims[k:])
    lines = [copy("out0", "in0", x.numel(), x.ctype),
             f"const int64_t cnt = {cprod(ind.dims[:-1])}, sl = {sl};",
             "for (int64_t t = 0; t < cnt; t++) {", "int64_t off = 0, v;"]
    for j in range(k):
        lines += [f"v = (int64_t)in1[t * {k} + {j}];", _check(ctx, "v", x.dims[j]),
                  f"off += v * ({cprod(x.dims[j + 1:])});"]
    lines += [f"{x.ctype} *restrict d = out0 + off;", "const " + x.ctype + " *restrict u = in2 + t * sl;",
              "for (int64_t i = 0; i < sl; i++) { " + _combine(red, "d[i]", "u[i]", x.dtype) + " }",
              "}", "return 0;"]
    return "\n".join(lines)


@kernel("ScatterElements", "Scatter", types=MOVES, accepts=_copy_only_reduction)
def scatter_elements(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    red = scatter_reduction(ctx.node)
    if x.dtype in half.HALF:
        half.use(ctx)
    r = x.rank
    axis = ctx.node.attr("axis", 0)
    axis = axis + r if axis < 0 else axis
    xs = x.strides()
    last = r - 1
    lines = [copy("out0", "in0", x.numel(), x.ctype),
             f"const int64_t rows = {cprod(ind.dims[:-1])}, w = {ind.dims[-1]}, n = {x.dims[axis]};",
             "for (int64_t row = 0; row < rows; row++) {"]
    _coords(lines, ind.dims, last)
    base = " + ".join([f"c{a} * ({xs[a]})" for a in range(last) if a != axis] or ["0"])
    off = "base + v" if axis == last else f"base + v * ({xs[axis]}) + j"
    lines += [f"const int64_t base = {base};", "for (int64_t j = 0; j < w; j++) {",
              "int64_t v = (int64_t)in1[row * w + j];", _check(ctx, "v", "n"),
              _combine(red, f"out0[{off}]", "in2[row * w + j]", x.dtype), "}", "}", "return 0;"]
    return "\n".join(lines)
