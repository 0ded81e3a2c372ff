"""Kernels that place input elements at computed positions: MaxUnpool (9, 11, 22), ReverseSequence
(10, 28) and TensorScatter (24).

All three are data movement, so one body serves every element type (copied as its storage type).
Positions read from data (MaxUnpool's indices, sequence lengths, write indices) are validated: an
invalid one is an error naming the node, never an out-of-bounds access.
"""

from __future__ import annotations

from onnxc.passes.shapes.misc_nn import reverse_axes, scatter_axis, scatter_mode, unpool_inferred

from ..cexpr import c_literal, c_product
from . import dynshape as ds
from .base import KernelCtx, kernel
from .copyutil import copy
from .typesets import ALL_FLOATS, STORABLE


def _fail(ctx: KernelCtx, msg: str, *args: str) -> str:
    extra = "".join(f", {a}" for a in args)
    return f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {msg}\", {ds.who(ctx)}{extra});"


def _same(ctx: KernelCtx, pairs: list[tuple[str, str, str]]) -> list[str]:
    """Run-time checks ``a == b`` for dims the shape rule could not compare (symbolic), naming ``what``."""
    return ["if ((" + a + ") != (" + b + ")) " + _fail(ctx, f"{what} is %lld, expected %lld", f"(long long)({a})",
                                                      f"(long long)({b})")
            for a, b, what in pairs if a != b]


# -- MaxUnpool ------------------------------------------------------------------------------------

def _unpool_shape(ctx: KernelCtx) -> str:
    r = ctx.outs[0].rank
    lines = [ds.read_ints(ctx, 2, r, "s")]
    lines += [f"if (s[{a}] < 0) " + _fail(ctx, "output_shape has a negative value %lld", f"(long long)s[{a}]")
              for a in range(r)]
    return "\n".join([*lines, ds.bind_array(ctx, 0, "s"), "return 0;"])


@kernel("MaxUnpool", types=ALL_FLOATS, shape_fn=_unpool_shape)
def maxunpool(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    inf = [ctx.dim(d) for d in unpool_inferred(ctx.node)]
    outs = y.dims[2:]
    lines = _same(ctx, [(i, d, f"I dim {a}") for a, (i, d) in enumerate(zip(ctx.ins[1].dims, x.dims))])
    lines += [f"const int64_t NC = {c_product(x.dims[:2])}, n = {x.numel()};",
             f"const int64_t total = NC * {c_product(inf)};",
             f"for (int64_t i = 0; i < {y.numel()}; i++) out0[i] = {c_literal(0, y.dtype)};"]
    same = list(y.shape[2:]) == list(unpool_inferred(ctx.node))
    if not same:  # the inferred tensor sits at the start of each axis of a larger output
        lines.append(f"if (({y.dims[0]}) != ({x.dims[0]}) || ({y.dims[1]}) != ({x.dims[1]})) "
                     + _fail(ctx, "output_shape must keep N and C of X"))
        for a, (o, i) in enumerate(zip(outs, inf)):
            lines.append(f"if (({o}) < ({i})) " + _fail(ctx, f"output_shape axis {a + 2} is %lld, smaller than the "
                                                       "unpooled size %lld", f"(long long)({o})", f"(long long)({i})"))
    lines += ["for (int64_t i = 0; i < n; i++) {",
              "    const int64_t idx = in1[i];",
              "    if (idx < 0 || idx >= total) " + _fail(ctx, "index %lld at element %lld is outside [0, %lld)",
                                                          "(long long)idx", "(long long)i", "(long long)total")]
    if same:
        lines.append("    out0[idx] = in0[i];")
    else:
        lines.append("    int64_t rem = idx, pos = 0, mul = 1;")
        for a in range(len(inf) - 1, -1, -1):
            lines.append(f"    pos += (rem % ({inf[a]})) * mul; rem /= ({inf[a]}); mul *= ({outs[a]});")
        lines.append("    out0[pos + rem * mul] = in0[i];")
    lines += ["}", "return 0;"]
    return "\n".join(lines)


# -- ReverseSequence ------------------------------------------------------------------------------

@kernel("ReverseSequence", types=STORABLE)  # elements are copied whole
def reverse_sequence(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    b_axis, t_axis = reverse_axes(ctx.node)
    row = "b * T + t" if b_axis == 0 else "t * B + b"
    src = "b * T + s" if b_axis == 0 else "s * B + b"
    return "\n".join([
        *_same(ctx, [(ctx.ins[1].dims[0], x.dims[b_axis], "the length of sequence_lens")]),
        f"const int64_t B = {x.dims[b_axis]}, T = {x.dims[t_axis]}, R = {c_product(x.dims[2:]) if x.rank > 2 else '1'};",
        "for (int64_t b = 0; b < B; b++) {",
        "    const int64_t L = in1[b];",
        "    if (L < 0 || L > T) " + _fail(ctx, "sequence_lens[%lld] = %lld is outside [0, %lld]", "(long long)b",
                                         "(long long)L", "(long long)T"),
        "    for (int64_t t = 0; t < T; t++) {",
        "        const int64_t s = t < L ? L - 1 - t : t;",
        "        " + copy(f"out0 + ({row}) * R", f"in0 + ({src}) * R", "R", x.ctype),
        "    }",
        "}", "return 0;"])


# -- TensorScatter --------------------------------------------------------------------------------

@kernel("TensorScatter", types=STORABLE)  # elements are copied whole
def tensor_scatter(ctx: KernelCtx) -> str:
    past, upd = ctx.ins[0], ctx.ins[1]
    wi = ctx.ins[2] if len(ctx.ins) > 2 else None
    axis = scatter_axis(ctx.node)
    circular = scatter_mode(ctx.node) == "circular"
    d = past.dims
    pairs = [(u, p, f"update dim {a}") for a, (u, p) in enumerate(zip(upd.dims, d)) if a != axis]
    if wi is not None:
        pairs.append((wi.dims[0], d[0], "the length of write_indices"))
    lines = [*_same(ctx, pairs),f"const int64_t outer = {c_product(d[:axis])}, per_batch = {c_product(d[1:axis]) if axis > 1 else '1'};",
             f"const int64_t M = {d[axis]}, S = {upd.dims[axis]}, R = {c_product(d[axis + 1:]) if axis + 1 < past.rank else '1'};",
             "if (S > M) " + _fail(ctx, "update has %lld positions, the cache %lld", "(long long)S", "(long long)M"),
             copy("out0", "in0", past.numel(), past.ctype),
             "for (int64_t o = 0; o < outer; o++) {",
             f"    const int64_t w = {'in2[o / per_batch]' if wi is not None else '0'};",
             "    for (int64_t s = 0; s < S; s++) {"]
    if circular:
        lines.append("        const int64_t p = onnxc_mod(w + s, M);")
    else:
        lines += ["        const int64_t p = w + s;",
                  "        if (w < 0 || p >= M) " + _fail(ctx, "write index %lld + %lld is outside the %lld cache "
                                                          "positions (mode linear)", "(long long)w", "(long long)s",
                                                          "(long long)M")]
    lines += ["        " + copy("out0 + (o * M + p) * R", "in1 + (o * S + s) * R", "R", past.ctype),
              "    }", "}", "(void)per_batch;", "return 0;"]
    return "\n".join(lines)
