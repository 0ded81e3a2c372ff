"""RoiAlign (10, 16, 22): bilinear samples averaged (or maxed) over each bin of each region of interest.

Per region, the sample positions and their four bilinear weights are computed once (as in
onnx.reference and onnxruntime) and shared by all channels. Coordinates: roi * spatial_scale, shifted by
-0.5 for coordinate_transformation_mode half_pixel (the opset-16 default; opset 10 has no shift and
forces malformed regions to 1x1); sampling_ratio 0 takes ceil(roi_size / output_size) samples per bin.
Samples beyond one pixel outside the map contribute weight 0. mode "max" takes the maximum of the
weighted corner values, matching the reference implementations. float and double; float16/bfloat16
through float32.
"""

from __future__ import annotations

from onnxc.ir import DType

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .nncommon import lit
from .parfor import par_for
from .typesets import ALL_FLOATS

MAX_SAMPLES = 1 << 26  # sample positions per region (adaptive sampling of huge regions would exhaust memory)


@kernel("RoiAlign", types=ALL_FLOATS)  # rois share X's type (T1)
@half.via_float32
def roi_align(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    T = x.ctype
    dt = DType.DOUBLE if T == "double" else DType.FLOAT
    oh, ow = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    sr = int(ctx.attr("sampling_ratio", 0))
    half_pixel = ctx.node.version >= 16 and ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    is_max = ctx.attr("mode", "avg") == "max"
    one = lit(1.0, dt)
    ceil_ = "ceil" if T == "double" else "ceilf"
    who = ds.who(ctx)
    acc = ("m" if is_max else "s / (" + T + ")count")
    if is_max:  # the largest weighted corner of each sample, then the largest sample
        fold = [f"{T} v = pw_[0] * xc[pp[0]];",
                "for (int q = 1; q < 4; q++) if (pw_[q] * xc[pp[q]] > v) v = pw_[q] * xc[pp[q]];",
                "if (j == 0 || v > m) m = v;"]
    else:
        fold = ["s += pw_[0] * xc[pp[0]] + pw_[1] * xc[pp[1]] + pw_[2] * xc[pp[2]] + pw_[3] * xc[pp[3]];"]
    head = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, H = {x.dims[2]}, W = {x.dims[3]}, R = {y.dims[0]};",
            "(void)N; (void)R;"]
    # one channel of region n: every output bin from the region's shared samples (pos, wt)
    channel = [f"const {T} *xc = in0 + (in2[n] * C + c) * H * W;",
               f"{T} *yc = out0 + (n * C + c) * {oh * ow};",
               "int64_t kk = 0;",
               f"for (int64_t b = 0; b < {oh * ow}; b++) {{",
               f"{T} s = 0, m = 0;",
               "for (int64_t j = 0; j < gh * gw; j++, kk++) {",
               "const int64_t *pp = pos + 4 * kk;",
               f"const {T} *pw_ = wt + 4 * kk;",
               *fold,
               "}",
               "(void)s; (void)m; (void)count;",
               f"yc[b] = {acc};",
               "}"]
    lines = [
        *head,
        f"const {T} scale = {lit(float(ctx.attr('spatial_scale', 1.0)), dt)}, off = {lit(0.5 if half_pixel else 0.0, dt)};",
        f"if (({ctx.ins[2].dims[0]}) != R) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: %lld rois but %lld "
        f"batch_indices\", {who}, (long long)R, (long long)({ctx.ins[2].dims[0]}));",
        "if (R * C == 0) return 0;",
        "if (H == 0 || W == 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: X has an empty spatial axis\", "
        f"{who});",
        "for (int64_t n = 0; n < R; n++)",
        "    if (in2[n] < 0 || in2[n] >= N) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: batch_indices[%lld] = "
        f"%lld is out of range [0, %lld)\", {who}, (long long)n, (long long)in2[n], (long long)N);",
        "int rc = 0;",
        "for (int64_t n = 0; n < R && !rc; n++) {",
        f"const {T} *roi = in1 + n * 4;",
        f"const {T} x1 = roi[0] * scale - off, y1 = roi[1] * scale - off;",
        f"{T} rw = (roi[2] * scale - off) - x1, rh = (roi[3] * scale - off) - y1;",
    ]
    if not half_pixel:
        lines.append(f"if (!(rw > {one})) rw = {one};\nif (!(rh > {one})) rh = {one};")
    lines += [
        f"const {T} bh = rh / ({T}){oh}, bw = rw / ({T}){ow};",
    ]
    if sr > 0:
        lines.append(f"const int64_t gh = {sr}, gw = {sr};")
    else:
        lines += [f"const {T} fh = {ceil_}(rh / ({T}){oh}), fw = {ceil_}(rw / ({T}){ow});",
                  "if (!(fh < 1e7) || !(fw < 1e7)) { rc = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: region %lld is "
                  f"too large for adaptive sampling\", {who}, (long long)n); break; }}",
                  "const int64_t gh = fh > 0 ? (int64_t)fh : 0, gw = fw > 0 ? (int64_t)fw : 0;"]
    lines += [
        "const int64_t count = gh * gw > 1 ? gh * gw : 1;",
        f"const int64_t ns = (int64_t){oh * ow} * gh * gw;",
        f"if (ns > {MAX_SAMPLES}) {{ rc = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: region %lld needs too many "
        f"samples\", {who}, (long long)n); break; }}",
        "int64_t *pos = onnxc_alloc((size_t)(ns ? ns : 1) * 4 * sizeof(int64_t));",
        f"{T} *wt = onnxc_alloc((size_t)(ns ? ns : 1) * 4 * sizeof({T}));",
        "if (!pos || !wt) { free(pos); free(wt); rc = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", "
        f"{who}); break; }}",
        "int64_t k = 0;",
        f"for (int64_t ph = 0; ph < {oh}; ph++)",
        f"for (int64_t pw = 0; pw < {ow}; pw++)",
        "for (int64_t iy = 0; iy < gh; iy++) {",
        f"const {T} yy = y1 + ({T})ph * bh + (({T})iy + {lit(0.5, dt)}) * bh / ({T})gh;",
        "for (int64_t ix = 0; ix < gw; ix++, k++) {",
        f"{T} xx = x1 + ({T})pw * bw + (({T})ix + {lit(0.5, dt)}) * bw / ({T})gw, yv = yy;",
        "int64_t *pp = pos + 4 * k;",
        f"{T} *pw_ = wt + 4 * k;",
        f"if (!(yv >= -{one} && yv <= ({T})H && xx >= -{one} && xx <= ({T})W)) {{",
        "    for (int q = 0; q < 4; q++) { pp[q] = 0; pw_[q] = 0; }",
        "    continue;", "}",
        "if (yv < 0) yv = 0;", "if (xx < 0) xx = 0;",
        "int64_t yl = (int64_t)yv, xl = (int64_t)xx, yh, xh;",
        f"if (yl >= H - 1) {{ yh = yl = H - 1; yv = ({T})yl; }} else yh = yl + 1;",
        f"if (xl >= W - 1) {{ xh = xl = W - 1; xx = ({T})xl; }} else xh = xl + 1;",
        f"const {T} ly = yv - ({T})yl, lx = xx - ({T})xl, hy = {one} - ly, hx = {one} - lx;",
        "pp[0] = yl * W + xl; pp[1] = yl * W + xh; pp[2] = yh * W + xl; pp[3] = yh * W + xh;",
        "pw_[0] = hy * hx; pw_[1] = hy * lx; pw_[2] = ly * hx; pw_[3] = ly * lx;",
        "}", "}",
        *par_for(ctx, "c", "C", channel, work="C * ns", head=head,
                 captures=[("int64_t", "n"), ("int64_t", "gh"), ("int64_t", "gw"), ("int64_t", "count"),
                           ("int64_t *", "pos"), (f"{T} *", "wt")]),
        "free(pos); free(wt);",
        "}",
        "return rc;",
    ]
    return "\n".join(lines)
