"""Gather, GatherElements, GatherND, ScatterND, ScatterElements (and Scatter-9/11) kernels.

Indices are validated as they are read: an index outside [-n, n) makes the kernel return
ONNXC_ERR_RUNTIME with a message naming the node, never an out-of-bounds access. Negative indices
count from the end. Gather and GatherND copy whole inner slices with memcpy.

The C structure is in templates/gather_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from collections.abc import Callable

from onnxc.ir import DType, Node
from onnxc.passes.shapes.indexing import gathernd_shape, scatter_reduction

from ..cexpr import c_product
from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .copyutil import MOVABLE, MOVES, copy


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
    inner = c_product(x.dims[axis + 1:])
    return render("gather_gather.c.j2", outer=c_product(x.dims[:axis]), n=x.dims[axis], inner=inner, ni=ind.numel(),
                  T=x.ctype, check=lambda v, n: _check(ctx, v, n),
                  copy_row=copy("d + k * inner", "s + v * inner", inner, x.ctype))


def _elements(ctx: KernelCtx, store: Callable[[str], str] | None = None) -> str:
    """GatherElements, or ScatterElements when ``store`` is given (the statement combining an update into
    the output element at C offset ``off``): C over every index element."""
    x, ind = ctx.ins[0], ctx.ins[1]
    r = x.rank
    axis = ctx.node.attr("axis", 0)
    axis = axis + r if axis < 0 else axis
    xs = x.strides()
    last = r - 1
    base = " + ".join([f"c{a} * ({xs[a]})" for a in range(last) if a != axis] or ["0"])
    off = "base + v" if axis == last else f"base + v * ({xs[axis]}) + j"
    prelude = copy("out0", "in0", x.numel(), x.ctype) if store is not None else ""
    stmt = f"out0[row * w + j] = in0[{off}];" if store is None else store(off)
    coords = [{"i": a, "dim": ind.dims[a]} for a in range(last - 1, -1, -1)]
    return render("gather_elements.c.j2", prelude=prelude, rows=c_product(ind.dims[:-1]), w=ind.dims[-1],
                  n=x.dims[axis], coords=coords, base=base, store=stmt, check=lambda v, n: _check(ctx, v, n))


@kernel("GatherElements", types=MOVES)
def gather_elements(ctx: KernelCtx) -> str:
    return _elements(ctx)


def _comps(ctx: KernelCtx, dims: list[str], k: int) -> list[dict]:
    """The index-tuple components: each one's axis size and the stride of that axis (in elements)."""
    return [{"dim": dims[j], "stride": c_product(dims[j + 1:])} for j in range(k)]


@kernel("GatherND", types=MOVES)
def gather_nd(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    b, k, _ = gathernd_shape(ctx.node, x.shape, ind.shape)
    sl = c_product(x.dims[b + k:])
    return render("gather_nd.c.j2", scatter=False, nb=c_product(x.dims[:b]), cnt=c_product(ind.dims[b:-1]), sl=sl,
                  bstride=c_product(x.dims[b:]), comps=_comps(ctx, x.dims[b:], k), check=lambda v, n: _check(ctx, v, n),
                  copy_slice=copy("out0 + e * sl", "in0 + off", sl, x.ctype))


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
    return render("gather_nd.c.j2", scatter=True, prelude=copy("out0", "in0", x.numel(), x.ctype),
                  cnt=c_product(ind.dims[:-1]), sl=c_product(x.dims[k:]), comps=_comps(ctx, x.dims, k), T=x.ctype,
                  check=lambda v, n: _check(ctx, v, n), combine=_combine(red, "d[i]", "u[i]", x.dtype))


@kernel("ScatterElements", "Scatter", types=MOVES, accepts=_copy_only_reduction)
def scatter_elements(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    red = scatter_reduction(ctx.node)
    if x.dtype in half.HALF:
        half.use(ctx)
    return _elements(ctx, lambda off: _combine(red, f"out0[{off}]", "in2[row * w + j]", x.dtype))
