"""Conv and ConvTranspose kernels (templates/conv*.c.j2, templates/conv_transpose.c.j2).

Every spatial rank (1-D, 2-D, 3-D) is viewed as 3-D by prepending size-1 axes, so one template
serves all. Conv picks a path at compile time:

- ``depthwise``: one input channel per group (group > 1): codegen/kernels/conv_depthwise.py (1-D/2-D:
  stride-phase planes, vectors over flattened output positions; 3-D: vectorized over the output width);
- ``pointwise``: 1x1 kernel, unit strides, no padding: one GEMM per (image, group) straight on X; on a
  1x1 map (squeeze-excite) one GEMM for the whole batch, the images as its rows;
- ``im2col``: general case: columns for a chunk of output positions (bounded scratch buffer, allocated
  per call), then a GEMM per chunk writing straight into Y. float convolutions with stride 1 or 2
  along W and a kernel of more than one tap take the *rows* variant instead: the input is copied once into a zero-padded buffer, and each
  tile of 32 output positions copies its B rows straight from it (``onnxc_sg_conv_rows``: one fixed
  32-float copy per row segment and tap, no bounds logic, an L1-sized panel per tile).

- ``implicit`` (float, constant filter, 1-D/2-D, AVX-512 targets; IMPLICIT_MAX_M / IMPLICIT_MIN_TAPS /
  IMPLICIT_SMALL_MAP / IMPLICIT_PW_MIN_K below say when; pointwise ones read X in place): no B copies at all, the micro-kernel reads each B row from a copy of the input
  split by stride phase along both axes (runtime_c/onnxc_conv_implicit.h); the other paths stay in the
  C as the fallback for targets without AVX-512.
- ``direct`` (float, constant filter, 1-D/2-D, stride 1 or 2 along W, more than DIRECT_MIN_M output channels
  and DIRECT_MIN_K taps, AVX-512; _direct says when): the output channels are the vector lanes and up to 12
  positions of a row are broadcast from the same phase-split copy (runtime_c/onnxc_conv_direct.h), the filter
  packed as the GEMM's B operand; no lanes are spent on padding columns or row ends, which the implicit GEMM's
  32-position tiles pay on narrow maps; wide rows (or unpadded inputs) are read in place, the others from the
  copy. Pointwise convolutions take it on maps up to DIRECT_PW_MAX_OP positions (the map as one row). Its C
  falls back to the transposed small-output GEMM (same packing).

float runs on the packed GEMM (runtime_c/onnxc_sgemm.h, templates/conv_packed.c.j2): a constant
filter is packed at compile time into the GEMM's A layout (codegen/kernels/gemm_layout.py), the
im2col columns are written straight into packed B panels, and bias, residual and activation
(codegen/kernels/epilogue.py) are applied to each output tile in the GEMM epilogue. double uses the
plain GEMM (templates/conv.c.j2): bias initializes Y, the GEMMs accumulate, the epilogue runs after.

ConvTranspose computes columns with a transposed-weight GEMM per chunk of input rows and scatters
them into Y (col2im). Bias initializes Y and the GEMMs accumulate with beta = 1.
"""

from __future__ import annotations

import math
import os

import numpy as np

from onnxc.ir import DType
from onnxc.ir.dims import is_static
from onnxc.passes.shapes.conv import conv_transpose_window, conv_window
from onnxc.passes.shapes.epilogue_spec import input_scale
from onnxc.passes.shapes.spatial import Window

from ..cexpr import c_literal
from ..templating import render
from . import bf16, conv_winograd, half
from .base import KernelCtx, kernel
from .conv_depthwise import depthwise
from .epilogue import epilogue, rows_epilogue, sg_epi, use_act
from .gemm_layout import pack_a, pack_b, packed_a_size, packed_b_size
from .nncommon import FLOATS, gemm_expr, same_type_accepts, unsupported, use_gemm
from .parcall import SLOTS, par_call

_same_weight_type = same_type_accepts(1)
COL_BUDGET = 1 << 21  # elements of the im2col / col2im scratch buffer per call (8 MiB of float)
PACKED_COL_BUDGET = 1 << 19  # elements of a packed im2col chunk (2 MiB of float: stays in L2)
SMALL_OP = 512  # largest output map (positions) the transposed small-output path takes
# 1-D / 2-D float convolutions with a constant filter take the implicit GEMM (runtime_c/onnxc_conv_implicit.h)
# where the target has AVX-512; ONNXC_IMPLICIT_CONV=0 at compile time keeps the paths below (A/B knob,
# keyed in the model cache like ONNXC_WINOGRAD)
IMPLICIT_SWITCH = "ONNXC_IMPLICIT_CONV"
# ...when it pays (1 thread, against the rows path): few output channels, where the rows path's copied
# B panel serves few row panels (128->32 3x3 at 56x56 0.83x), or large kernels whose taps share input
# rows (7x7 stem 0.93x, 16->32 5x5 0.9x); with 64+ channels and a 3x3 kernel the copied panel, read
# once per row panel from L1, wins (3x3 stride 2, 128 channels: 1.2x)
IMPLICIT_MAX_M = 48
# ...and on small maps at stride 1, whatever the channels, where the implicit GEMM's chunks can cut the output
# channels at no copy cost (runtime_c/onnxc_cut.h): 256 -> 256 3x3 at 14x14 1.68 -> 1.64 ms (1 thread), 0.96 ->
# 0.86 ms (2 threads)
IMPLICIT_SMALL_MAP = 256
IMPLICIT_MIN_TAPS = 25
# ...and wherever the rows path would run, whatever the channels; 1 thread, against the rows path: 3x3 stride 2,
# 32 -> 64 at 80x80 0.53 -> 0.45 ms, 64 -> 128 at 56x56 0.89 -> 0.82, 144 -> 144 at 199x39 batch 4 25.7 -> 23.2;
# 1x3 64 -> 64 at 56x56 0.63 -> 0.53; 1-D k = 5, 64 -> 128, batch 8 x 1024 4.6 -> 4.3; 3x3 dilation 2 and 1-D k = 3
# within 3%. 2 threads sharing an image: stride 1 the same way (1x3: 0.32 -> 0.28; 1-D k = 5 at 4096: 1.21 -> 1.07),
# but at stride 2 the rows path is as fast or faster (64 -> 128 at 56x56: 0.46 against 0.50), so there the implicit
# GEMM runs only where an image is on one thread (1 thread, or whole images per thread: onnxc_by_image)
# pointwise (1x1) convolutions read X in place instead of packing it when few output channels share the
# packed panel and the K loop is long enough: 144 -> 24 at 56x56 0.62x, 96 -> 24 0.75x, 192 -> 32 at 28x28
# 0.97x; 32 -> 16 at 112x112 2.1x and 64 -> 384 1.3x (long outputs, short K) stay packed
IMPLICIT_PW_MIN_K = 64
# 2-D convolutions with the output channels as the vector lanes (runtime_c/onnxc_conv_direct.h, AVX-512):
# ONNXC_DIRECT_CONV=0 at compile time never, =2 wherever it applies (A/B knobs), else where _direct says
DIRECT_SWITCH = "ONNXC_DIRECT_CONV"
DIRECT_MIN_M, DIRECT_MIN_K = 16, 64
DIRECT_PW_MAX_OP = 256  # pointwise convolutions on static maps up to this many positions
DIRECT_WINO_MAP, DIRECT_WINO_M = 400, 64  # ...and before Winograd on maps this small (_direct_before_winograd)


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
    """The weight's first two dims. Every weight dim must be static: the kernels are specialized to
    them, and a kernel_shape attribute beside a symbolic weight dim is not checked against it."""
    w = ctx.ins[1]
    if not all(is_static(d) for d in w.shape):
        raise unsupported(ctx, f"weight dims [{', '.join(map(str, w.shape))}] must be static")
    return int(w.shape[0]), int(w.shape[1])


@kernel("Conv", types=FLOATS | half.HALF, accepts=_same_weight_type)
@half.via_float32
def conv(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    bias = len(ctx.ins) > 2 and ctx.ins[2] is not None
    dt = y.dtype
    m, cg = _static_channels(ctx)
    g = int(ctx.attr("group", 1))
    win = conv_window(ctx.node)
    geo = _geometry(ctx, win, x.dims[2:], y.dims[2:])
    ep = epilogue(ctx)
    res = None if ep.residual is None else f"in{ep.residual}"
    if ep.act:
        use_act(ctx)
    common = dict(geo, T=dt.c, N=x.dims[0], C=x.dims[1], M=str(m), G=str(g), Cg=str(cg), Mg=str(m // g),
                  bias=bias, unit_sw=win.strides[-1] == 1)
    scale = input_scale(ctx.node)  # a squeeze-excite scale folded in (passes/fuse_input_scale.py)
    if scale is not None and (dt != DType.FLOAT or ctx.ins[1].const is None):
        raise unsupported(ctx, "an input scale needs a float32 Conv with a constant filter")
    if cg == 1 and g > 1:
        return depthwise(ctx, common, win, ep, res)
    if scale is None and bf16.conv_applies(ctx, cg, g):  # precision="bf16": codegen/kernels/bf16.py
        return bf16.conv_bf16(ctx, common, win, ep, res, m // g, g)
    how = conv_winograd.applies(ctx, win, m, cg, g)  # 3x3 stride 1: codegen/kernels/conv_winograd.py
    if how and not _direct_before_winograd(ctx, win, m // g, cg * math.prod(win.kernel)):
        return conv_winograd.conv_winograd(ctx, geo, ep, bias, how)
    pointwise = (all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
                 and all(p == 0 for p in win.pads_begin + win.pads_end))
    mode = "pointwise" if pointwise else "im2col"
    if dt == DType.FLOAT:
        return _conv_packed(ctx, common, win, mode, ep, res, m // g, g, scale)
    one = c_literal(1.0, dt)
    beta = one if bias else c_literal(0.0, dt)
    vals = dict(
        common, mode=mode, col_budget=COL_BUDGET, par=par_call(ctx),
        gemm_pointwise=_gemm_stmt(ctx, dt, "0", "Mg", "OP", "Cg", one, "a", "Cg", "b", "IP", beta, "y", "OP"),
        gemm_im2col=gemm_expr(ctx, dt, "0", "0", "Mg", "ncol", "KG", one, "a", "KG", "col", "ncol", beta, "y",
                              "OP"),
        epilogue="\n".join(rows_epilogue(ep, dt, "out0", "N * M", "OP", res)),
    )
    return render("conv.c.j2", **vals)


def _conv_packed(ctx: KernelCtx, common: dict, win: Window, mode: str, ep, res: str | None, mg: int, g: int,
                 scale: int | None = None) -> str:
    """The float Conv on the packed GEMM; a constant filter is packed here, once per group. ``scale``: the
    input of a per-image input scale (pointwise, group 1, constant filter: passes/shapes/epilogue_spec.py)."""
    use_gemm(ctx)
    w = ctx.ins[1]
    kg = int(np.prod(w.shape[1:]))
    packed = w.const is not None and w.value.type.dtype == DType.FLOAT
    if scale is not None and not (mode == "pointwise" and packed and g == 1):
        raise unsupported(ctx, "an input scale needs a 1x1 Conv of group 1 with a constant float32 filter")
    if mode == "pointwise" and packed and g == 1 and scale is None and _one_position(ctx):
        return _conv_one_position(ctx, ep, res, mg, kg, common["bias"])
    direct = packed and _direct(ctx, win, mode, mg, kg)
    small = direct or _small_output(ctx, win, mode, mg)
    if direct:
        ctx.include("onnxc_conv_direct.h")
    if small:
        ctx.include("onnxc_conv.h")
    if small and packed:  # W^T as the packed B operand
        groups = np.asarray(w.const, dtype=np.float32).reshape(g, mg, kg)
        ctx.repack_const(1, np.concatenate([pack_b(groups[i].T) for i in range(g)]))
        a, fa = f"in1 + g * {packed_b_size(kg, mg)}", "ONNXC_SG_PACKED"
    elif small:
        a, fa = "in1 + g * Mg * KG", "ONNXC_SG_TRANS"
    elif packed:
        groups = np.asarray(w.const, dtype=np.float32).reshape(g, mg, kg)
        ctx.repack_const(1, np.concatenate([pack_a(groups[i]) for i in range(g)]))
        a, fa = f"in1 + g * {packed_a_size(mg, kg)}", "ONNXC_SG_PACKED"
    else:
        a, fa = "in1 + g * Mg * KG", "ONNXC_SG_PLAIN"
    scaled, wextra = None, ""
    if scale is not None:  # the scaled filter of each image in the body's scratch, after what the body uses
        size, panel = (packed_b_size(kg, mg), 32) if small else (packed_a_size(mg, kg), 12)
        sdim = ctx.ins[scale].shape[0]
        scaled = dict(input=scale, panel=panel, panels=size // (panel * kg), offset="OP * Mg" if small else "0",
                      per_image=not (is_static(sdim) and int(sdim) == 1))
        wextra, a = f" + {size}", "ws"
    bias = "in2 + g * Mg" if common["bias"] else "NULL"
    resp = "NULL" if res is None else f"{res} + (n * M + g * Mg) * OP"
    epi = sg_epi(ep, bias=bias, res=resp, ldr="OP")
    epi_chunk = sg_epi(ep, bias=bias, res=resp if res is None else resp + " + j0", ldr="OP")
    rows = win.strides[-1] in (1, 2) and math.prod(win.kernel) > 1  # strided 1x1: im2col reads less
    implicit = (os.environ.get(IMPLICIT_SWITCH, "1") != "0" and packed and not small and win.rank <= 2
                and (mode == "pointwise" and mg <= IMPLICIT_MAX_M and kg >= IMPLICIT_PW_MIN_K
                     or mode != "pointwise" and (mg <= IMPLICIT_MAX_M or math.prod(win.kernel) >= IMPLICIT_MIN_TAPS
                                                 or _small_map(ctx, win))))
    # the other convolutions the rows path takes: the implicit GEMM too, at stride 2 along W only where an image
    # runs on one thread (1 thread, or whole images per thread; shared among threads the rows path stays)
    wide = (not implicit and os.environ.get(IMPLICIT_SWITCH, "1") != "0" and packed and not small
            and win.rank <= 2 and rows)
    per_image = wide and win.strides[-1] == 2
    if implicit or wide:
        ctx.include("onnxc_conv_implicit.h")
    return render("conv_packed.c.j2", **common, mode=mode, a=a, fa=fa, packed=packed, epi=epi, epi_chunk=epi_chunk,
                  col_budget=PACKED_COL_BUDGET, rows=rows, small=small, direct=direct, implicit=implicit or wide,
                  implicit_per_image=per_image, par=par_call(ctx), slots=SLOTS, scaled=scaled, wextra=wextra)


def _direct(ctx: KernelCtx, win: Window, mode: str, mg: int, kg: int) -> bool:
    """Whether a float 1-D / 2-D convolution takes the direct kernel (output channels as lanes): stride 1 or 2
    along W (its fallback is the transposed GEMM on the phase-split copy)."""
    how = os.environ.get(DIRECT_SWITCH, "1")
    if how == "0" or win.rank > 2 or win.strides[-1] not in (1, 2):
        return False
    if how == "2":
        return True
    if mode == "pointwise":  # the map as one row; pays on small maps only (below)
        dims = ctx.outs[0].shape[2:]
        if not all(is_static(d) for d in dims) or math.prod(int(d) for d in dims) > DIRECT_PW_MAX_OP:
            return False
    # pointwise at 7x7, against the transposed GEMM, 1 / 2 threads: 960 -> 160 0.109 / 0.074 -> 0.095 / 0.066 ms,
    # 320 -> 1280 0.297 / 0.156 -> 0.276 / 0.141; at 14x14 672 -> 112 0.212 / 0.147 -> 0.197 / 0.118, 112 -> 672
    # within 3%; at 40x40 and up the packed GEMM stays ahead (48 -> 32 at 80x80: 0.250 against 0.276).
    # measured against the implicit GEMM / rows / transposed-GEMM paths (1 and 2 threads): 256 -> 64 3x3 at 10x10
    # 0.28 -> 0.18 ms (1 thread), 128 -> 256 stride 2 at 20x20 0.47 -> 0.38, 256 -> 256 at 14x14 1.60 -> 1.43,
    # 512 -> 512 at 7x7 1.67 -> 1.57; at 2 threads 0.5-0.9x. With 16 output channels or fewer (half-empty
    # vectors, a broadcast per FMA) or a short K loop (a 3-channel stem: the transposes weigh), 8-12% slower.
    return mg > DIRECT_MIN_M and kg >= DIRECT_MIN_K


def _direct_before_winograd(ctx: KernelCtx, win: Window, mg: int, kg: int) -> bool:
    """Whether the direct kernel beats Winograd: static maps of at most DIRECT_WINO_MAP positions with at most
    DIRECT_WINO_M output channels, where the Winograd input transform weighs most against its GEMM (its cost per
    product goes as 1 / Cout). Measured, direct against Winograd, 1 / 2 threads: 20x20 128 -> 64 0.38 / 0.23 ms
    against 0.42 / 0.28, 32 -> 32 0.057 / 0.051 against 0.083 / 0.083, 64 -> 64 0.20 / 0.13 against 0.22 / 0.16;
    with more output channels (80, 128) or on larger maps (28x28 up) Winograd stays ahead."""
    dims = ctx.outs[0].shape[2:]
    return (all(is_static(d) for d in dims) and math.prod(int(d) for d in dims) <= DIRECT_WINO_MAP
            and mg <= DIRECT_WINO_M and _direct(ctx, win, "im2col", mg, kg)
            and ctx.ins[1].const is not None and ctx.ins[1].value.type.dtype == DType.FLOAT)


def _small_map(ctx: KernelCtx, win: Window) -> bool:
    """A static output map of at most IMPLICIT_SMALL_MAP positions at stride 1: too few tiles for the rows
    path's copied B panel to be shared out among threads without reading the filter again per tile."""
    dims = ctx.outs[0].shape[2:]
    return (all(is_static(d) for d in dims) and math.prod(int(d) for d in dims) <= IMPLICIT_SMALL_MAP
            and all(s == 1 for s in win.strides))


def _one_position(ctx: KernelCtx) -> bool:
    dims = ctx.outs[0].shape[2:]
    return all(is_static(d) and int(d) == 1 for d in dims)


def _conv_one_position(ctx: KernelCtx, ep, res: str | None, m: int, c: int, bias: bool) -> str:
    """A 1x1 convolution on a 1x1 map (squeeze-excite's two small layers): X is an N x C matrix and Y an
    N x M one, so the batch becomes the GEMM's rows, Y = X W^T with W^T packed at compile time as the B
    operand (one GEMM for the batch, not one matrix-vector product per image), bias per column and a
    residual laid out like Y in the epilogue."""
    w = np.asarray(ctx.ins[1].const, dtype=np.float32).reshape(m, c)
    ctx.repack_const(1, pack_b(w.T))
    epi = sg_epi(ep, bias="in2" if bias else "NULL", bias_cols=True, res="NULL" if res is None else res, ldr=str(m))
    n = ctx.outs[0].dims[0]
    return "\n".join([
        "/* 1x1 map: Y (N x M) = X (N x C) W^T, one GEMM for the batch (codegen/kernels/conv.py) */",
        f"const onnxc_sg_epi epi = {epi};",
        f"if (onnxc_sgemm_ex(rt->threads, {n}, {m}, {c}, 1.0f, in0, {c}, ONNXC_SG_PLAIN, in1, 0, ONNXC_SG_PACKED, 0.0f, "
        f"out0, {m}, &epi))",
        '    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in GEMM");',
        "return 0;",
    ])


def _small_output(ctx: KernelCtx, win: Window, mode: str, mg: int) -> bool:
    """Whether the output map is small enough that the GEMM should run transposed (positions as the
    micro-kernel's rows, in steps of 4, rather than its columns, in steps of 16): a static map of at
    most SMALL_OP positions that wastes over 10% of the columns and clearly less as rows, enough
    channels to fill the columns, and a stride of 1 or 2 along W (the phase-split copy)."""
    dims = ctx.outs[0].shape[2:]
    if not all(is_static(d) for d in dims) or mg < 32:
        return False
    op = math.prod(int(d) for d in dims)
    if not 8 <= op <= SMALL_OP or (mode != "pointwise" and win.strides[-1] not in (1, 2)):
        return False
    as_cols, as_rows = op / (-(-op // 16) * 16), op / (-(-op // 4) * 4)
    return as_cols < 0.9 and as_rows >= as_cols + 0.05


def _gemm_stmt(ctx: KernelCtx, dt: DType, ta: str, *args: str) -> str:
    return (f"if ({gemm_expr(ctx, dt, ta, '0', *args)}) "
            "return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in GEMM\");")


@kernel("ConvTranspose", types=FLOATS | half.HALF, accepts=_same_weight_type)
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
        col_budget=COL_BUDGET, par=par_call(ctx),
        gemm=gemm_expr(ctx, dt, "1", "0", "MK", "ncol", "Cg", c_literal(1.0, dt), "a", "MK", "b", "IP",
                       c_literal(0.0, dt), "col", "ncol"),
    )
    return render("conv_transpose.c.j2", **vals)
