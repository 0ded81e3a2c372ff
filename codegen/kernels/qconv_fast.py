"""ConvInteger / QLinearConv / MatMulInteger / QLinearMatMul on the 8-bit integer GEMM
(runtime_c/onnxc_igemm.h: VNNI, AVX2 or portable micro-kernels by the compile target).

Taken when the weights are a constant the GEMM can hold packed from compile time:

- convolutions: a constant uint8/int8 filter, static channel counts, float32 scales, a per-tensor input
  zero point; each group's filter is packed as the GEMM's A (int8 bytes with row sums), the input's
  im2col columns go into packed uint8 B panels per chunk of output rows (templates/qconv_ig.c.j2).
  Groups of fewer than ``MIN_GROUP_ROWS`` output channels (depthwise) keep the sweep of qlinear.py: a
  GEMM with one or two rows wastes most of its 12-row panels.
- matrix products: a constant 2-D B, per-tensor A parameters, B parameters per tensor or per column;
  A's rows of every batch are one GEMM (templates/qmatmul_ig.c.j2) with B packed in the type opposite
  to A's.

The results are the same integers as qlinear.py's kernels (exact products, then the reference's
requantization ``saturate(rint((double)acc * mult + zy))`` with ``mult = a_scale * b_scale / y_scale``
in float32): the choice of path never changes a result.
"""

from __future__ import annotations

import math
import os

import numpy as np

from onnxc.codegen.templating import render
from onnxc.ir import DType
from onnxc.passes.shapes.quant_layout import INT_RANGES

from .base import KernelCtx, Operand
from .igemm_layout import pack_a, pack_b, packed_a_size
from .parcall import SLOTS, par_call
from .quant import load

MIN_GROUP_ROWS = 4
FLAT_DW_MAX_OW = 32  # output widths up to which depthwise taps run over flattened plane rows
MAX_DW_TAPS = 256  # float sums of the depthwise kernel stay exact integers (256 * 255 * 255 < 2^24)
# the least bytes of packed im2col columns per chunk; at run time half the L2 cache when that is more
# (runtime_c/onnxc_igemm.h onnxc_ig_col_budget): each chunk is two parallel regions, im2col then GEMM, and 256 KiB
# made the 56x56 convolutions of ResNet-18 seven chunks (QDQ b1 at 2 threads: 6.4 ms with 256 KiB, 5.7 with 512,
# 5.3-5.6 with 1 MiB on this 2 MiB L2; 1 thread unchanged)
COL_BUDGET = 1 << 19
# 1-D / 2-D convolutions with more than one tap whose group has a multiple of 4 input channels take the im2col by
# words of 4 channels (runtime_c/onnxc_igemm_q4.c: QDQ ResNet-18 b1 11.4 -> 9.5 ms at 1 thread, 8.5 -> 6.5 at 2);
# a 1x1 convolution reads each input byte once either way, and the words' extra pass made MobileNetV2 3% slower.
# ONNXC_IG_Q4=0 at compile time keeps the byte-wise im2col everywhere (an A/B knob, keyed in the model cache)
Q4_SWITCH = "ONNXC_IG_Q4"
OUT_TYPE = {DType.UINT8: "ONNXC_IG_OUT_U8", DType.INT8: "ONNXC_IG_OUT_S8", DType.INT32: "ONNXC_IG_OUT_I32",
            DType.FLOAT: "ONNXC_IG_OUT_F32"}


def _op(ctx: KernelCtx, i: int) -> Operand | None:
    return ctx.ins[i] if i < len(ctx.ins) else None


def _f32_scales(ctx: KernelCtx, idx: tuple[int, ...]) -> bool:
    return all(_op(ctx, i) is not None and _op(ctx, i).dtype == DType.FLOAT for i in idx)


def _zero_points(ctx: KernelCtx, i: int, n: int) -> np.ndarray | None:
    """The constant zero points of input i as int32 (n values when per channel, else one); None when
    not constant. An absent input is 0."""
    p = _op(ctx, i)
    if p is None:
        return np.zeros(1, np.int32)
    c = ctx.const_input(i)
    if c is None:
        return None
    c = np.asarray(c).reshape(-1).astype(np.int32)
    return c if c.size in (1, n) else None


def _include(ctx: KernelCtx) -> None:
    ctx.include("onnxc_igemm.h")


def fast_qconv(ctx: KernelCtx, vals: dict, w: int, zx: int, zw: int, quantized: bool, kernel: list[int]) -> str | None:
    """The integer-GEMM form of a convolution with template values ``vals`` from qlinear.py, or None."""
    W, X, Y = ctx.ins[w], ctx.ins[0], ctx.outs[0]
    wc = ctx.const_input(w)
    m, group = int(vals["M"]), int(vals["G"])
    if wc is None or m // group < MIN_GROUP_ROWS or len(kernel) > 3:
        return None
    if quantized and not _f32_scales(ctx, (1, 4, 6)):
        return None
    zx_op = _op(ctx, zx)
    if zx_op is not None and not all(d == "1" for d in zx_op.dims):
        return None
    zws = _zero_points(ctx, zw, m)
    if zws is None:
        return None
    cg = int(vals["Cg"])
    mg, kg = m // group, cg * math.prod(kernel)
    filt = np.asarray(wc).reshape(m, kg)
    q4 = cg % 4 == 0 and len(kernel) <= 2 and math.prod(kernel) > 1 and os.environ.get(Q4_SWITCH, "1") != "0"
    if q4:  # k ordered (c / 4, kh, kw, c % 4): the im2col copies words of 4 channels (onnxc_igemm_q4.c)
        filt = np.ascontiguousarray(filt.reshape(m, cg // 4, 4, kg // cg).transpose(0, 1, 3, 2).reshape(m, kg))
    packed = np.concatenate([pack_a(filt[g * mg:(g + 1) * mg], to_u8=False) for g in range(group)])
    ctx.repack_const(w, packed.view(filt.dtype))
    _include(ctx)
    if q4:
        ctx.include("onnxc_igemm_q4.h")
    zw_tab = ctx.blob_table("zw", zws)
    per = zws.size > 1
    out = dict(vals, KG=str(kg), K=[str(k) for k in [1] * (3 - len(kernel)) + list(kernel)],
               w=W.ptr, a_bytes=str(packed_a_size(mg, kg)), w_u8=int(W.dtype == DType.UINT8),
               x_u8=int(X.dtype == DType.UINT8), zx=_param(zx_op), zw_ptr=f"{zw_tab} + g * Mg" if per else zw_tab,
               zw_per=int(per), col_budget=COL_BUDGET, quantized=quantized, out_type=OUT_TYPE[Y.dtype],
               par=par_call(ctx), slots=SLOTS, blob_caps=ctx.blob_captures(), q4=q4)
    if quantized:
        xs, ws, ys, zy, bias = ctx.ins[1], ctx.ins[4], ctx.ins[6], _op(ctx, 7), _op(ctx, 8)
        per_w = not all(d == "1" for d in ws.dims)
        out.update(xs=load(xs.dtype, f"{xs.ptr}[0]"), ys=load(ys.dtype, f"{ys.ptr}[0]"),
                   ws=load(ws.dtype, f"{ws.ptr}[{'m' if per_w else '0'}]"), zy=_param(zy),
                   bias=f"(const int32_t *){bias.ptr} + g * Mg" if bias is not None else "NULL")
    return render("qconv_ig.c.j2", **out)


def _param(op: Operand | None) -> str:
    return "0" if op is None else f"(int32_t){op.ptr}[0]"


def _per_tensor(op: Operand | None) -> bool:
    return op is None or all(d == "1" for d in op.dims)


def fast_qmatmul(ctx: KernelCtx, a: int, b: int, za: int, zb: int, quantized: bool) -> str | None:
    """The integer-GEMM form of a matrix product with a constant 2-D B, or None."""
    A, B, Y = ctx.ins[a], ctx.ins[b], ctx.outs[0]
    bc = ctx.const_input(b)
    if bc is None or B.rank != 2 or A.rank < 2 or not _per_tensor(_op(ctx, za)):
        return None
    if quantized and (not _f32_scales(ctx, (1, 4, 6)) or not all(_per_tensor(_op(ctx, i)) for i in (1, 6, 7))):
        return None
    n = int(np.asarray(bc).shape[1])
    zbs = _zero_points(ctx, zb, n)
    if zbs is None or (quantized and not (_per_tensor(ctx.ins[4]) or ctx.ins[4].dims == [str(n)])):
        return None
    a_u8 = int(A.dtype == DType.UINT8)
    ctx.repack_const(b, pack_b(np.asarray(bc), to_u8=not a_u8).view(np.asarray(bc).dtype))
    _include(ctx)
    zb_tab = ctx.blob_table("zb", zbs)
    rows = " * ".join(f"({d})" for d in A.dims[:-1])
    out = dict(rows=rows, N=str(n), K=B.dims[0], checks=[], name=ctx.who, za=_param(_op(ctx, za)),
               a_u8=a_u8, b=B.ptr, b_u8=int(B.dtype == DType.UINT8), zb_ptr=zb_tab, zb_per=int(zbs.size > 1),
               quantized=quantized, out_type=OUT_TYPE[Y.dtype])
    if A.dims[-1] != B.dims[0]:
        out["checks"].append(f'if (({A.dims[-1]}) != K) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, '
                             f'"%s: A has %lld columns, B has {B.dims[0]} rows", {ctx.who}, (long long)({A.dims[-1]}));')
    if quantized:
        sa, sb, sy = ctx.ins[1], ctx.ins[4], ctx.ins[6]
        out.update(sa=load(sa.dtype, f"{sa.ptr}[0]"), sy=load(sy.dtype, f"{sy.ptr}[0]"),
                   sb=load(sb.dtype, f"{sb.ptr}[{'0' if _per_tensor(sb) else 'n'}]"), zy=_param(_op(ctx, 7)))
    return render("qmatmul_ig.c.j2", **out)


def _indexed(op: Operand | None, index: str, cast: str = "(int32_t)") -> str:
    """C expression of element ``index`` of a parameter (element 0 when it holds one value; 0 if absent)."""
    if op is None:
        return "0"
    return f"{cast}{op.ptr}[{'0' if _per_tensor(op) else index}]"


def _flat_dw(vals: dict) -> bool:
    """Whether a depthwise convolution sums its taps over the flattened rows of the padded phase planes
    (templates/qdwconv.c.j2 ``flat``): a static kernel, strides and dilations, and an output narrower than FLAT_DW_MAX_OW,
    whose rows alone fill few vectors (1 thread, ms, flat against per row: 576 channels at 14x14 0.112 against
    0.156, 192 at 28x28 0.106 against 0.151; 144 at 56x56 0.286 against 0.269)."""
    if not all(str(v).isdigit() for v in (*vals["K"][1:], *vals["Dl"][1:], *vals["S"][1:], vals["O"][2])):
        return False
    return int(vals["O"][2]) <= FLAT_DW_MAX_OW


def _flat_taps(vals: dict) -> list[tuple[int, str]]:
    """(tap index, C offset from flattened position v) of each tap of a ``flat`` depthwise convolution: tap (kh, kw)
    reads phase plane (kh DH % SH, kw DW % SW), kh DH / SH rows and kw DW / SW columns in."""
    (kh_n, kw_n), (sh, sw), (dh, dw) = ((int(v) for v in vals[k][1:3]) for k in ("K", "S", "Dl"))
    taps = []
    for kh in range(kh_n):
        for kw in range(kw_n):
            r, c = kh * dh, kw * dw
            taps.append((kh * kw_n + kw, f"{r % sh * sw + c % sw} * PRH * PWD + {r // sh} * PWD + {c // sw}"))
    return taps


def fast_qdwconv(ctx: KernelCtx, vals: dict, w: int, zx: int, zw: int, quantized: bool) -> str | None:
    """Depthwise (one input and one output channel per group) 1-D/2-D convolutions
    (templates/qdwconv.c.j2), or None."""
    if vals["Cg"] != "1" or vals["Mg"] != "1" or vals["I"][0] != "1" or vals["K"][0] != "1":
        return None
    if int(vals["K"][1]) * int(vals["K"][2]) > MAX_DW_TAPS:
        return None
    if not _per_tensor(_op(ctx, zx)) or (quantized and not _per_tensor(_op(ctx, 7))):
        return None
    X, W, Y = ctx.ins[0], ctx.ins[w], ctx.outs[0]
    flat = _flat_dw(vals)
    if flat:
        ctx.include("onnxc_depthwise.h")
    out = dict(N=vals["N"], C=vals["C"], IH=vals["I"][1], IW=vals["I"][2], OH=vals["O"][1], OW=vals["O"][2],
               KH=vals["K"][1], KW=vals["K"][2], SH=vals["S"][1], SW=vals["S"][2], DH=vals["Dl"][1],
               DW=vals["Dl"][2], PH=vals["P"][1], PW=vals["P"][2], checks=vals["checks"], name=ctx.who,
               quantized=quantized, Tx=X.dtype.c, Ty=Y.dtype.c, w=W.ptr, zx=_indexed(_op(ctx, zx), "0"),
               zw=_indexed(_op(ctx, zw), "c"), par=vals["par"], slots=SLOTS, xs="0", ys="0", zy="0",
               s8=int(Y.dtype == DType.INT8), dq=vals["dq"],
               flat=flat, taps=_flat_taps(vals) if flat else [])
    if quantized:
        xs, ws, ys = ctx.ins[1], ctx.ins[4], ctx.ins[6]
        lo, hi = INT_RANGES[Y.dtype]
        ws_i = "0" if _per_tensor(ws) else "c"
        out.update(xs=load(xs.dtype, f"{xs.ptr}[0]"), ys=load(ys.dtype, f"{ys.ptr}[0]"),
                   ws=load(ws.dtype, f"{ws.ptr}[{ws_i}]"), zy=_indexed(_op(ctx, 7), "0", "(double)"),
                   bias=_indexed(_op(ctx, 8), "c", "(uint32_t)"), lo=f"{lo}.0", hi=f"{hi}.0")
        if not _f32_scales(ctx, (1, 4, 6)):
            return None
    return render("qdwconv.c.j2", **out)
