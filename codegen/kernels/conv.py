"""Conv and ConvTranspose kernels (templates/conv.c.j2, templates/conv_transpose.c.j2).

Every spatial rank (1-D, 2-D, 3-D) is viewed as 3-D by prepending size-1 axes, so one template
serves all. Conv picks one of three paths at compile time:

- ``pointwise``: 1x1 kernel, unit strides, no padding: one GEMM per (image, group) straight on X;
- ``depthwise``: one input channel per group (group > 1): direct accumulation per output plane;
- ``im2col``: general case: columns for a chunk of output rows (bounded scratch buffer, allocated
  per call), then a GEMM per chunk writing straight into Y.

ConvTranspose computes columns with a transposed-weight GEMM per chunk of input rows and scatters
them into Y (col2im). Bias initializes Y and the GEMMs accumulate with beta = 1.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.ir.dims import is_static
from onnxc.passes.shapes.conv import conv_transpose_window, conv_window
from onnxc.passes.shapes.spatial import Window

from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS, dtype_accepts, gemm_expr, lit, omp_for, unsupported

COL_BUDGET = 1 << 21  # elements of the im2col / col2im scratch buffer per call (8 MiB of float)


def _as3(vals: list[str], fill: str) -> list[str]:
    return [fill] * (3 - len(vals)) + list(vals)


def _geometry(ctx: KernelCtx, win: Window, inp: list[str], out: list[str]) -> dict:
    if win.rank > 3:
        raise unsupported(ctx, f"{win.rank}-D convolution is not supported (1-D to 3-D)")
    return {
        "I": _as3(inp, "1"), "O": _as3(out, "1"),
        "K": _as3([str(k) for k in win.kernel], "1"),
        "S": _as3([str(s) for s in win.strides], "1"),
        "Dl": _as3([str(d) for d in win.dilations], "1"),
        "P": _as3([ctx.dim(p) for p in win.pads_begin], "0"),
    }


def _static_channels(ctx: KernelCtx) -> tuple[int, int]:
    w = ctx.ins[1]
    if not (is_static(w.shape[0]) and is_static(w.shape[1])):
        raise unsupported(ctx, f"weight channel dims {list(w.shape[:2])} must be static")
    return int(w.shape[0]), int(w.shape[1])


@kernel("Conv", accepts=dtype_accepts(FLOATS | half.HALF, (0, 1)))
@half.via_float32
def conv(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    bias = len(ctx.ins) > 2 and ctx.ins[2] is not None
    dt = y.dtype
    m, cg = _static_channels(ctx)
    g = int(ctx.attr("group", 1))
    win = conv_window(ctx.node)
    geo = _geometry(ctx, win, x.dims[2:], y.dims[2:])
    one = lit(1.0, dt)
    beta = one if bias else lit(0.0, dt)
    pointwise = (all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
                 and all(p == 0 for p in win.pads_begin + win.pads_end))
    if pointwise:
        mode = "pointwise"
    elif cg == 1 and g > 1:
        mode = "depthwise"
    else:
        mode = "im2col"
    vals = dict(
        geo, T=dt.c, N=x.dims[0], C=x.dims[1], M=str(m), G=str(g), Cg=str(cg), Mg=str(m // g), bias=bias,
        mode=mode, col_budget=COL_BUDGET, unit_sw=win.strides[-1] == 1,
        omp_nm=omp_for("N * M * OP * KK"), omp_rows=omp_for("KG * ncol", 1 << 16),
        gemm_pointwise=_gemm_stmt(ctx, dt, "0", "Mg", "OP", "Cg", one, "a", "Cg", "b", "IP", beta, "y", "OP"),
        gemm_im2col=gemm_expr(ctx, dt, "0", "0", "Mg", "ncol", "KG", one, "a", "KG", "col", "ncol", beta, "y",
                              "OP"),
    )
    return render("conv.c.j2", **vals)


def _gemm_stmt(ctx: KernelCtx, dt: DType, ta: str, *args: str) -> str:
    return (f"if ({gemm_expr(ctx, dt, ta, '0', *args)}) "
            "return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in GEMM\");")


@kernel("ConvTranspose", accepts=dtype_accepts(FLOATS | half.HALF, (0, 1)))
@half.via_float32
def conv_transpose(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    bias = len(ctx.ins) > 2 and ctx.ins[2] is not None
    dt = y.dtype
    c, mg = _static_channels(ctx)
    g = int(ctx.attr("group", 1))
    win = conv_transpose_window(ctx.node)
    geo = _geometry(ctx, win, x.dims[2:], y.dims[2:])
    vals = dict(
        geo, T=dt.c, N=x.dims[0], C=x.dims[1], M=str(mg * g), G=str(g), Cg=str(c // g), Mg=str(mg), bias=bias,
        col_budget=COL_BUDGET, omp_m=omp_for("Mg * KK * ncol", 1 << 16),
        gemm=gemm_expr(ctx, dt, "1", "0", "MK", "ncol", "Cg", lit(1.0, dt), "a", "MK", "b", "IP",
                       lit(0.0, dt), "col", "ncol"),
    )
    return render("conv_transpose.c.j2", **vals)
