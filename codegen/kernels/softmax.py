"""Softmax, LogSoftmax and Hardmax, numerically stable (the row maximum is subtracted first).

The input is viewed as [outer, n, inner]: opset < 13 coerces to 2-D at ``axis`` (inner = 1, n = the
product of the trailing axes); opset >= 13 normalizes along the single axis ``axis``. With inner = 1
each row is contiguous and is finished before the next one starts: its maximum, its exponentials
with their sum, and the scaling are three vectorized loops over a row that stays in cache, so memory
sees one read and one write per element. LogSoftmax is ``(x - max) - log(sum)``: subtracting the
rounded ``max + log(sum)`` instead would lose the small results next to the maximum. Float rows use the row helpers of runtime_c/onnxc_attention.h
(``onnxc_att_softmax_row``: the max, exp-sum and scaling of runtime_c/onnxc_vmath_rows.h, AVX-512 intrinsics
where available, with exponentials whose normalized result would be subnormal flushed to zero: masked
rows (-10000 or -inf entries) otherwise cost a microcode assist per subnormal, 7x the row time). Otherwise
(inner > 1) the kernel walks the n rows of a block, vectorized across the inner positions, with
per-position accumulators in a scratch buffer.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.norm import SOFTMAX_OPS, softmax_axis

from ..cexpr import c_product
from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS, mfn
from .parcall import par_call
from .softmax_half import stepwise_half


def _view(ctx: KernelCtx) -> tuple[str, str, str]:
    x = ctx.ins[0]
    axis = softmax_axis(ctx.node, x.rank)
    outer = c_product(x.dims[:axis]) if axis else "1"
    if ctx.node.version < 13:
        return outer, c_product(x.dims[axis:]), "1"
    inner = c_product(x.dims[axis + 1:]) if axis + 1 < x.rank else "1"
    return outer, x.dims[axis], inner


@kernel(*SOFTMAX_OPS, types=FLOATS | half.HALF)
@stepwise_half(_view)
@half.via_float32
def softmax(ctx: KernelCtx) -> str:
    dt = ctx.ins[0].dtype
    op = ctx.node.op_type
    outer, n, inner = _view(ctx)
    ctx.include("onnxc_vmath.h")
    rows = inner == "1"
    att_rows = rows and op != "Hardmax" and dt == DType.FLOAT
    if att_rows:  # the row helpers of runtime_c/onnxc_attention.h (no subnormal exps)
        ctx.include("onnxc_attention.h")
    return render("softmax.c.j2", O=outer, L=n, I=inner, op=op, T=dt.c, rows=rows, att_rows=att_rows,
                  ex="onnxc_vexpf" if dt == DType.FLOAT else "exp", lg=mfn("log", dt),
                  simd="ONNXC_VM_SIMD" if dt == DType.FLOAT else "#pragma omp simd",  # loops computing exp
                  par=par_call(ctx))
