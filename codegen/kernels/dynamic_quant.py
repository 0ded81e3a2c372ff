"""DynamicQuantizeLinear: the range pass and the quantize pass of runtime_c/onnxc_dynq.h.

Two reads of the float32 input and one write of uint8, instead of the op's function body (a ReduceMax, a
ReduceMin, a float32 elementwise pass and a cast). The numpy twin is
passes/shapes/dynamic_quant.py:dynamic_quantize.
"""

from __future__ import annotations

from onnxc.codegen.templating import render
from onnxc.ir import DType

from .base import KernelCtx, kernel


@kernel("DynamicQuantizeLinear", types=(DType.FLOAT,))
def dynamic_quantize_linear(ctx: KernelCtx) -> str:
    x, y, s, z = ctx.ins[0], ctx.outs[0], ctx.outs[1], ctx.outs[2]
    ctx.include("onnxc_dynq.h")
    return render("dynq.c.j2", x=x.ptr, n=x.numel(), y=y.ptr, scale=s.ptr, zp=z.ptr)
