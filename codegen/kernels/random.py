"""Kernels of the random ops: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike,
Bernoulli, Multinomial, and Dropout in training mode (called by the Dropout kernel in movement.py).

All draw from numpy's legacy generator (runtime_c/onnxc_random.h), the one onnx.reference uses, and
derive values the way its numpy code does: ``rand().astype(T) * (high - low) + low`` with float32
attributes, rounded to T at each step; binomial inversion for Bernoulli; ``uniform() >= ratio``
masks for Dropout. So a seeded node gives exactly the reference's values. Without a seed every call
draws a fresh one.
Multinomial has no reference implementation; it samples by inverting the cumulative distribution
of ``exp(x - max(x))`` per batch row with the same generator.

The C structure is in templates/random_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.random import seed_of

from ..cexpr import c_literal
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import copy

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16})


def _use(ctx: KernelCtx) -> None:
    half.use(ctx)
    ctx.include("onnxc_random.h")


def seed_state(ctx: KernelCtx, seed: int | None) -> str:
    """Declare and seed the generator state ``st``: the node's seed, else a fresh one per call."""
    _use(ctx)
    s = "onnxc_rng_entropy(&st)" if seed is None else f"UINT32_C({seed})"
    return f"onnxc_mt st;\nonnxc_mt_seed(&st, {s});"


def affine(dt: DType, draw: str, scale: float, shift: float) -> str:
    """C expression of ``draw`` (a double) stored as ``dt``, times ``scale`` plus ``shift`` (float32
    values), the way the reference computes ``r = draws.astype(dt); r *= scale; r += shift`` with
    float32 attributes: each step in the wider of ``dt`` and float32, rounded to ``dt``."""
    if dt == DType.DOUBLE:
        return f"onnxc_rng_affine_d({draw}, {c_literal(scale, dt)}, {c_literal(shift, dt)})"
    fs, ft = c_literal(scale, DType.FLOAT), c_literal(shift, DType.FLOAT)
    if dt == DType.FLOAT:
        return f"onnxc_rng_affine_f({draw}, {fs}, {ft})"
    first = f"onnxc_d2h({draw})" if dt == DType.FLOAT16 else f"onnxc_f2bf((float)({draw}))"
    mul = half.store(dt, f"{half.load(dt, first)} * {fs}")
    return half.store(dt, f"{half.load(dt, mul)} + {ft}")


def _f32(*xs: float) -> list[float]:
    return [float(np.float32(x)) for x in xs]


def _fill(ctx: KernelCtx, draw: str, scale: float, shift: float) -> str:
    y = ctx.outs[0]
    return render("random_fill.c.j2", seed=seed_state(ctx, seed_of(ctx.node)), n=y.numel(), draw=draw,
                  value=affine(y.dtype, "d", scale, shift))


@kernel("RandomUniform", "RandomUniformLike", types=FLOATS, typed="out0")
def random_uniform(ctx: KernelCtx) -> str:
    low, high = _f32(ctx.attr("low", 0.0), ctx.attr("high", 1.0))
    return _fill(ctx, "onnxc_mt_double(&st)", float(np.float32(high) - np.float32(low)), low)


@kernel("RandomNormal", "RandomNormalLike", types=FLOATS, typed="out0")
def random_normal(ctx: KernelCtx) -> str:
    return _fill(ctx, "onnxc_mt_gauss(&st)", *_f32(ctx.attr("scale", 1.0), ctx.attr("mean", 0.0)))


def _from_bit(dt: DType, b: str) -> str:
    """C expression of 0/1 int ``b`` as a ``dt`` element."""
    if dt == DType.BOOL:
        return f"({b}) != 0"
    if dt in half.HALF:
        return f"(({b}) ? {c_literal(1, dt)} : {c_literal(0, dt)})"
    return f"({dt.c})({b})"


@kernel("Bernoulli", types=FLOATS)  # the probabilities' type; any output type
def bernoulli(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    return render("random_bernoulli.c.j2", seed=seed_state(ctx, seed_of(ctx.node)), n=x.numel(),
                  load_p=half.load(x.dtype, "in0[i]"), who=ds.who(ctx), bit=_from_bit(y.dtype, "onnxc_mt_bernoulli(&st, p)"))


@kernel("Multinomial", types=FLOATS)
def multinomial(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    return render("random_multinomial.c.j2", B=x.dims[0], C=x.dims[1], S=y.dims[1], who=ds.who(ctx),
                  seed=seed_state(ctx, seed_of(ctx.node)), T=x.ctype, load_x=half.load(x.dtype, "xb[k]"), Y=y.ctype)


# -- Dropout, training mode ---------------------------------------------------------------------

def dropout_may_train(node: Node) -> bool:
    """Whether a Dropout node may run in training mode (its training_mode input is not a constant false
    and its ratio is not a constant zero)."""
    from onnxc.passes.shapes.movement import dropout_ratio_is_zero, dropout_training

    return dropout_training(node) is not False and not dropout_ratio_is_zero(node)


def dropout_accepts(node: Node) -> str | None:
    for v in (node.input(0), node.input(1)):
        if v is not None and isinstance(v.type, TensorType) and v.type.dtype not in FLOATS:
            return f"training-mode Dropout on {v.type.dtype.short} tensors is not supported"
    return None


def dropout_training(ctx: KernelCtx) -> str:
    """Dropout-12+ whose training_mode is true at run time (or may be): with probability ``ratio`` an
    element becomes 0, the others are scaled by 1 / (1 - ratio); the mask says which were kept.
    In inference mode (or ratio 0) the body copies the input and sets the whole mask."""
    reason = dropout_accepts(ctx.node)
    if reason:
        raise NotImplementedError(reason)
    half.use(ctx)
    x = ctx.ins[0]
    r = ctx.ins[1] if len(ctx.ins) > 1 else None
    mask = len(ctx.outs) > 1
    rt = DType.DOUBLE if r is not None and r.dtype == DType.DOUBLE else DType.FLOAT
    ct = DType.DOUBLE if DType.DOUBLE in (rt, x.dtype) else DType.FLOAT
    kept = f"({ct.c}){half.load(x.dtype, 'in0[i]')} * ({ct.c})m * ({ct.c})scale"
    n = x.numel()
    return render("random_dropout.c.j2", n=n, ratio="(double)" + half.load(r.dtype, "in1[0]") if r is not None else "0.5",
                  copy_all=copy("out0", "in0", "n", x.ctype), mask=mask, who=ds.who(ctx), RT=rt.c,
                  seed=seed_state(ctx, seed_of(ctx.node)), kept=half.store(x.dtype, kept))
