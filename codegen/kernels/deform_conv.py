"""DeformConv (opset 19, 22): convolution whose sampling points move by learned offsets.

For each batch item the kernel builds a column matrix, then multiplies per group:

- columns: for every offset group, kernel position k and output position o, the sampling point is
  ``o * stride - pad_begin + k * dilation + offset`` per spatial axis; its value in each input
  channel of the offset group is the N-linear interpolation (bilinear in 2-D) of the 2^nd
  surrounding pixels, those outside the image counting as zero (GridSample with zero padding and
  align_corners=1), times the optional mask;
- output: ``Y[g] = W[g] @ columns[g] (+ B)`` with the blocked GEMM, ``[oC/g, C/g * K] x [C/g * K, O]``.

The corner indices and weights are computed once per sampling point and shared by the channels of
the offset group. float16/bfloat16 run in float32 (half.via_float32).
"""

from __future__ import annotations

import math

from onnxc.ir import DType
from onnxc.passes.shapes.misc_nn import deform_window

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS, gemm_expr, mfn


def _checks(ctx: KernelCtx, group: int, og: int, k: int, nd: int) -> list[str]:
    """Run-time checks of the channel and size relations the shape rule could not decide statically
    (symbolic dims), so wrong inputs fail with a message instead of reading out of bounds."""
    x, w, off, y = ctx.ins[0], ctx.ins[1], ctx.ins[2], ctx.outs[0]
    b = ctx.ins[3] if len(ctx.ins) > 3 else None
    mask = ctx.ins[4] if len(ctx.ins) > 4 else None
    eqs = [(x.dims[1], f"({w.dims[1]}) * {group}", "input channels != W dim 1 * group"),
           (off.dims[1], str(og * k * nd), "offset channels != offset_group * prod(kernel) * rank"),
           (off.dims[0], x.dims[0], "offset batch != X batch"),
           (f"({x.dims[1]}) % {og}", "0", "input channels not a multiple of offset_group"),
           (f"({y.dims[1]}) % {group}", "0", "output channels not a multiple of group")]
    eqs += [(off.dims[2 + a], y.dims[2 + a], f"offset spatial dim {a} != output size") for a in range(nd)]
    if b is not None:
        eqs.append((b.dims[0], y.dims[1], "B length != output channels"))
    if mask is not None:
        eqs += [(mask.dims[1], str(og * k), "mask channels != offset_group * prod(kernel)"),
                (mask.dims[0], x.dims[0], "mask batch != X batch")]
        eqs += [(mask.dims[2 + a], y.dims[2 + a], f"mask spatial dim {a} != output size") for a in range(nd)]
    return [f"if (({a}) != ({e})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {why}\", {ds.who(ctx)});"
            for a, e, why in eqs if a != e and not (a.isdigit() and e.isdigit())]


@kernel("DeformConv", types=FLOATS | half.HALF)
@half.via_float32
def deform_conv(ctx: KernelCtx) -> str:
    x, w, off, y = ctx.ins[0], ctx.ins[1], ctx.ins[2], ctx.outs[0]
    b = ctx.ins[3] if len(ctx.ins) > 3 else None
    mask = ctx.ins[4] if len(ctx.ins) > 4 else None
    t, dt = x.ctype, x.dtype
    if dt not in (DType.FLOAT, DType.DOUBLE):
        raise NotImplementedError(f"DeformConv on {dt.short} tensors is not supported")
    win = deform_window(ctx.node)
    nd, k = win.rank, math.prod(win.kernel)
    group, og = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    ins, outs = x.dims[2:], y.dims[2:]
    pb = [ctx.dim(p) for p in win.pads_begin]
    who = ds.who(ctx)
    L = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, OC = {y.dims[1]};",
         f"const int64_t IS = {' * '.join(f'({d})' for d in ins)}, O = {' * '.join(f'({d})' for d in outs)};",
         f"const int64_t In[{nd}] = {{{', '.join(ins)}}};",
         f"const int64_t Cg = C / {group}, OCg = OC / {group}, Cog = C / {og};",
         *_checks(ctx, group, og, k, nd),
         f"{t} *col = onnxc_alloc((size_t)C * {k} * (size_t)O * sizeof({t}));",
         f"if (!col) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {who});",
         "for (int64_t n = 0; n < N; n++) {",
         f"const {t} *restrict xn = {x.ptr} + n * C * IS;",
         f"const {t} *restrict offn = {off.ptr} + n * {og * k * nd} * O;"]
    if mask is not None:
        L.append(f"const {t} *restrict maskn = {mask.ptr} + n * {og * k} * O;")
    L += [f"for (int64_t g = 0; g < {og}; g++) {{", f"for (int64_t k = 0; k < {k}; k++) {{"]
    stride = k
    for a in range(nd):  # kernel position k -> per-axis kernel index
        stride //= win.kernel[a]
        L.append(f"const int64_t k{a} = (k / {stride}) % {win.kernel[a]};")
    L.append("int64_t o = 0;")
    for a in range(nd):
        L.append(f"for (int64_t o{a} = 0; o{a} < {outs[a]}; o{a}++) {{")
    L += [f"int64_t lo[{nd}]; {t} fr[{nd}];"]
    for a in range(nd):
        L += [f"{{ const {t} p = ({t})(o{a} * {win.strides[a]} - ({pb[a]}) + k{a} * {win.dilations[a]}) + "
              f"offn[((g * {k} + k) * {nd} + {a}) * O + o];",
              f"  const {t} f = {mfn('floor', dt)}(p); lo[{a}] = isfinite(f) && f > -1e15 && f < 1e15 ? (int64_t)f "
              f": INT64_MIN / 2; fr[{a}] = p - f; }}"]
    m = f"maskn[(g * {k} + k) * O + o]" if mask is not None else f"({t})1"
    L += [f"int64_t idx[{1 << nd}]; {t} wt[{1 << nd}]; int nc = 0;",
          f"for (int cb = 0; cb < {1 << nd}; cb++) {{",
          f"    {t} wv = {m}; int64_t id = 0; int ok = 1;",
          f"    for (int a = 0; a < {nd}; a++) {{",
          "        const int bit = (cb >> a) & 1; const int64_t q = lo[a] + bit;",
          "        if (q < 0 || q >= In[a]) { ok = 0; break; }",
          f"        wv *= bit ? fr[a] : ({t})1 - fr[a]; id = id * In[a] + q;",
          "    }",
          "    if (ok) { idx[nc] = id; wt[nc] = wv; nc++; }",
          "}",
          "for (int64_t c = g * Cog; c < (g + 1) * Cog; c++) {",
          f"    const {t} *restrict xc = xn + c * IS;",
          f"    {t} v = 0;",
          "    for (int j = 0; j < nc; j++) v += wt[j] * xc[idx[j]];",
          f"    col[(c * {k} + k) * O + o] = v;",
          "}",
          "o++;"]
    L += ["}"] * nd
    L += ["}", "}"]  # k, g
    L += [f"{t} *yn = {y.ptr} + n * OC * O;",
          f"for (int64_t g = 0; g < {group}; g++) {{",
          f"{t} *yg = yn + g * OCg * O;"]
    if b is not None:
        L.append(f"for (int64_t oc = 0; oc < OCg; oc++) for (int64_t j = 0; j < O; j++) "
                 f"yg[oc * O + j] = {b.ptr}[g * OCg + oc];")
    one = "1.0f" if dt == DType.FLOAT else "1.0"
    beta = one if b is not None else ("0.0f" if dt == DType.FLOAT else "0.0")
    gemm = gemm_expr(ctx, dt, "0", "0", "OCg", "O", f"Cg * {k}", one, f"{w.ptr} + g * OCg * Cg * {k}", f"Cg * {k}",
                     f"col + g * Cg * {k} * O", "O", beta, "yg", "O")
    L += ["if (OCg > 0 && O > 0 && Cg > 0) {",
          f"    if ({gemm}) {{ free(col); return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {who}); }}",
          "}"]
    if b is None:
        L.append("if (Cg == 0) for (int64_t j = 0; j < OCg * O; j++) yg[j] = 0;")
    L += ["}", "}", "free(col);", "return 0;"]  # group, batch
    return "\n".join(L)
