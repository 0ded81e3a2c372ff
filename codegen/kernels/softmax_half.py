"""Softmax on float16 / bfloat16 tensors, rounded step by step like the reference.

The reference (numpy) evaluates ``e = exp(x - max(x)); y = e / sum(e)`` op by op in the half type:
the difference, the exponential and the quotient are each computed in float32 and rounded to the
half type. The sum depends on the type and the memory layout:

* float16 along a contiguous axis: numpy's pairwise summation in float32 (blocks of eight partial
  sums below 128 elements, halves above), added to 0 and rounded once — ``onnxc_pwsum_f16``;
* bfloat16 (ml_dtypes adds element by element) and any strided axis: a running sum rounded to the
  half type after every addition.

Computing everything in float32 and rounding once (as other half kernels do) differs from that by
one unit in the last place on a fair share of elements — beyond the tolerance of bfloat16 results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from onnxc.ir import DType

from ..templating import render
from . import half
from .base import KernelCtx
from .parcall import par_call

PW_BLOCK = 128  # numpy's PW_BLOCKSIZE


def _pairwise_helper(ctx: KernelCtx) -> str:
    name = "onnxc_pwsum_f16"
    ctx.helper(name, render("softmax_half_pwsum.c.j2", name=name, block=PW_BLOCK).rstrip("\n"))
    return name


def softmax_half(ctx: KernelCtx, outer: str, n: str, inner: str) -> str:
    """Body of Softmax on a half tensor viewed as [outer, n, inner] (see module doc)."""
    half.use(ctx)
    dt = ctx.ins[0].dtype

    def ld(e: str) -> str:
        return half.load(dt, e)

    def st(e: str) -> str:
        return half.store(dt, e)

    def rnd(e: str) -> str:
        return ld(st(e))

    return render("softmax_half.c.j2", O=outer, L=n, I=inner, ld=ld, st=st, rnd=rnd,
                  pwsum=_pairwise_helper(ctx) if dt == DType.FLOAT16 else None,
                  contiguous=inner == "1", par=par_call(ctx))


def stepwise_half(view: Callable[[KernelCtx], tuple[str, str, str]]):
    """Decorator for the Softmax-family lowering: Softmax nodes on half types lower with
    :func:`softmax_half` (``view`` gives the [outer, n, inner] C sizes), every other node with the
    decorated function."""

    def deco(fn: Callable[[KernelCtx], str]) -> Callable[[KernelCtx], str]:
        @functools.wraps(fn)
        def run(ctx: KernelCtx) -> str:
            if ctx.node.op_type == "Softmax" and ctx.ins[0].dtype in half.HALF:
                return softmax_half(ctx, *view(ctx))
            return fn(ctx)

        return run

    return deco
