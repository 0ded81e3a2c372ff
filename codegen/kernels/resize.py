"""Resize (10, 11, 13, 18, 19) and Upsample (7, 9, 10) kernels.

Both kernels and the shape function start from the same C plan (runtime_c/onnxc_resize.h): the
scale and output size of every axis from the scales or sizes (constant or run-time data, with axes
and keep_aspect_ratio_policy). The kernel then builds one sampling table per axis (per output
coordinate: source indices and weights, see the header) and

- nearest: gathers every output element directly through the tables (any element type, bit copies;
  trailing axes that are never resized move as contiguous blocks);
- linear / cubic (antialias included): runs one separable pass per axis that changes, shrinking axes
  first so later passes touch fewer elements. Passes compute in float (float, float16, bfloat16) or
  double (double, integers: rounded half to even and saturated at the end, as onnx.reference).

Semantics follow onnx.reference (which the conformance data comes from); it differs from onnxruntime
in align_corners / tf_crop_and_resize / pytorch_half_pixel when ``dim * scale`` is not an integer:
the real-valued output length is used there. Resize-10 and Upsample use onnxruntime's rule
(asymmetric coordinates; nearest floors when upscaling, ceils when downscaling).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.resize import ResizeSpec, resize_spec

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import clit, cprod
from .parfor import PAR_GRAIN, par_for
from .typesets import ARITH, MOVABLE

_MODES = {"nearest": "ONNXC_RZ_NEAREST", "linear": "ONNXC_RZ_LINEAR", "cubic": "ONNXC_RZ_CUBIC"}
_CTMS = {"half_pixel": "ONNXC_RZ_HALF_PIXEL", "half_pixel_symmetric": "ONNXC_RZ_HALF_PIXEL_SYMMETRIC",
         "pytorch_half_pixel": "ONNXC_RZ_PYTORCH_HALF_PIXEL", "align_corners": "ONNXC_RZ_ALIGN_CORNERS",
         "asymmetric": "ONNXC_RZ_ASYMMETRIC", "tf_half_pixel_for_nn": "ONNXC_RZ_TF_HALF_PIXEL_FOR_NN",
         "tf_crop_and_resize": "ONNXC_RZ_TF_CROP_AND_RESIZE"}
_NEAREST = {"round_prefer_floor": "ONNXC_RZ_ROUND_PREFER_FLOOR", "round_prefer_ceil": "ONNXC_RZ_ROUND_PREFER_CEIL",
            "floor": "ONNXC_RZ_FLOOR", "ceil": "ONNXC_RZ_CEIL", "legacy": "ONNXC_RZ_LEGACY"}
_POLICY = {"stretch": 0, "not_larger": 1, "not_smaller": 2}
_INT_RANGE = {DType.INT8: ("INT8_MIN", "INT8_MAX"), DType.UINT8: ("0", "UINT8_MAX"),
              DType.INT16: ("INT16_MIN", "INT16_MAX"), DType.UINT16: ("0", "UINT16_MAX"),
              DType.INT32: ("INT32_MIN", "INT32_MAX"), DType.UINT32: ("0", "UINT32_MAX"),
              DType.INT64: ("INT64_MIN", "INT64_MAX"), DType.UINT64: ("0", "UINT64_MAX")}

# One separable pass of compute type {T} over a tensor viewed as [outer, in, inner] -> [outer, out, inner],
# and the driver running the passes of every changing axis (shrinking ones first).
PASS_C = """\\
typedef struct {{
    const {T} *src;
    {T} *dst;
    int64_t outer, inner, n, chunks;
    const onnxc_resize_axis *ax;
    const {T} *wt;
    {T} ev;
}} onnxc_resize_pass_{T}_args;

/* the innermost axis: one dot product per output element, rows b in [lo, hi) */
static void onnxc_resize_dots_{T}(const onnxc_resize_pass_{T}_args *a, int64_t lo, int64_t hi) {{
    const onnxc_resize_axis *ax = a->ax;
    const int64_t n_in = ax->in, n_out = ax->out;
    const int taps = ax->taps;
    const int64_t *restrict idx = ax->idx;
    const {T} *restrict wt = a->wt;
    for (int64_t b = lo; b < hi; b++) {{
        const {T} *restrict s = a->src + b * n_in;
        {T} *restrict d = a->dst + b * n_out;
        if (taps == 2) {{
            for (int64_t o = 0; o < n_out; o++)
                d[o] = wt[2 * o] * s[idx[2 * o]] + wt[2 * o + 1] * s[idx[2 * o + 1]];
        }} else if (taps == 4) {{
            for (int64_t o = 0; o < n_out; o++) {{
                const int64_t *ix = idx + 4 * o;
                const {T} *w = wt + 4 * o;
                d[o] = w[0] * s[ix[0]] + w[1] * s[ix[1]] + w[2] * s[ix[2]] + w[3] * s[ix[3]];
            }}
        }} else {{
            for (int64_t o = 0; o < n_out; o++) {{
                {T} acc = 0;
                for (int t = 0; t < taps; t++) acc += wt[o * taps + t] * s[idx[o * taps + t]];
                d[o] = acc;
            }}
        }}
        if (ax->any_ext)
            for (int64_t o = 0; o < n_out; o++) if (ax->ext[o]) d[o] = a->ev;
    }}
}}

/* an outer axis: output rows bo = (b, o) in [lo, hi), weighted sums of whole input rows */
static void onnxc_resize_rows_{T}(const onnxc_resize_pass_{T}_args *a, int64_t lo, int64_t hi) {{
    const onnxc_resize_axis *ax = a->ax;
    const int64_t n_in = ax->in, n_out = ax->out, inner = a->inner;
    const int taps = ax->taps;
    const {T} ev = a->ev;
    for (int64_t bo = lo; bo < hi; bo++) {{
        const int64_t b = bo / n_out, o = bo - b * n_out;
        const {T} *restrict s = a->src + b * n_in * inner;
        {T} *restrict d = a->dst + bo * inner;
        const int64_t *ix = ax->idx + o * taps;
        const {T} *w = a->wt + o * taps;
        if (ax->ext[o]) {{
            for (int64_t i = 0; i < inner; i++) d[i] = ev;
        }} else if (taps == 2) {{
            const {T} *restrict s0 = s + ix[0] * inner, *restrict s1 = s + ix[1] * inner;
            const {T} w0 = w[0], w1 = w[1];
            for (int64_t i = 0; i < inner; i++) d[i] = w0 * s0[i] + w1 * s1[i];
        }} else if (taps == 4) {{
            const {T} *restrict s0 = s + ix[0] * inner, *restrict s1 = s + ix[1] * inner;
            const {T} *restrict s2 = s + ix[2] * inner, *restrict s3 = s + ix[3] * inner;
            const {T} w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
            for (int64_t i = 0; i < inner; i++) d[i] = w0 * s0[i] + w1 * s1[i] + w2 * s2[i] + w3 * s3[i];
        }} else {{
            const {T} *restrict s0 = s + ix[0] * inner;
            for (int64_t i = 0; i < inner; i++) d[i] = w[0] * s0[i];
            for (int t = 1; t < taps; t++) {{
                const {T} *restrict st = s + ix[t] * inner;
                for (int64_t i = 0; i < inner; i++) d[i] += w[t] * st[i];
            }}
        }}
    }}
}}

static void onnxc_resize_chunk_{T}(void *p, int64_t c, int slot) {{
    const onnxc_resize_pass_{T}_args *a = (const onnxc_resize_pass_{T}_args *)p;
    const int64_t lo = a->n * c / a->chunks, hi = a->n * (c + 1) / a->chunks;
    (void)slot;
    if (a->inner == 1) onnxc_resize_dots_{T}(a, lo, hi);
    else onnxc_resize_rows_{T}(a, lo, hi);
}}

/* One pass over [outer, in, inner] -> [outer, out, inner]: rows (or, on the innermost axis, outer
   slices) in chunks on the runtime's pool from PAR_WORK_MIN (1 << 18) multiply-adds. */
static void onnxc_resize_pass_{T}(int threads, const {T} *restrict src, {T} *restrict dst, int64_t outer,
                                 int64_t inner, const onnxc_resize_axis *ax, const {T} *restrict wt, {T} ev) {{
    onnxc_resize_pass_{T}_args a = {{src, dst, outer, inner, inner == 1 ? outer : outer * ax->out, 1, ax, wt, ev}};
    const int64_t k = onnxc_chunks(threads, (double)a.n * (double)inner * (double)ax->taps * (inner == 1 ? (double)ax->out : 1.0),
                                   {grain});
    a.chunks = k < a.n ? k : (a.n > 1 ? a.n : 1);
    if (a.chunks <= 1) onnxc_resize_chunk_{T}(&a, 0, 0);
    else onnxc_parallel(threads, a.chunks, onnxc_resize_chunk_{T}, &a);
}}

static int onnxc_resize_separable_{T}(onnxc_rt *rt, const char *who, const {T} *x, {T} *y, int rank,
                                      const int64_t *din, const onnxc_resize_axis *ax, {T} ev) {{
    int order[ONNXC_MAX_RANK], n = 0;
    for (int a = 0; a < rank; a++) {{
        if (ax[a].identity) continue;
        const double ra = (double)ax[a].out / (double)ax[a].in;
        int k = n++;
        while (k > 0 && (double)ax[order[k - 1]].out / (double)ax[order[k - 1]].in > ra) {{
            order[k] = order[k - 1];
            k--;
        }}
        order[k] = a;
    }}
    int64_t cur[ONNXC_MAX_RANK], numel = 1, big = 0;
    for (int a = 0; a < rank; a++) {{ cur[a] = din[a]; numel *= din[a]; }}
    if (n == 0) {{
        memcpy(y, x, (size_t)numel * sizeof({T}));
        return 0;
    }}
    for (int k = 0; k + 1 < n; k++) {{ /* largest intermediate */
        numel = numel / cur[order[k]] * ax[order[k]].out;
        cur[order[k]] = ax[order[k]].out;
        if (numel > big) big = numel;
    }}
    for (int a = 0; a < rank; a++) cur[a] = din[a];
    {T} *tmp[2] = {{NULL, NULL}};
    for (int j = 0; j < (n > 2 ? 2 : n - 1); j++)
        if (!(tmp[j] = onnxc_alloc((size_t)big * sizeof({T})))) {{
            free(tmp[0]);
            return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory for resize passes", who);
        }}
    for (int k = 0; k < n; k++) {{
        const int a = order[k];
        int64_t outer = 1, inner = 1;
        for (int j = 0; j < a; j++) outer *= cur[j];
        for (int j = a + 1; j < rank; j++) inner *= cur[j];
        const int64_t nw = ax[a].out * ax[a].taps;
        {T} *wt = onnxc_alloc((size_t)nw * sizeof({T}));
        if (!wt) {{
            free(tmp[0]);
            free(tmp[1]);
            return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory for resize weights", who);
        }}
        for (int64_t j = 0; j < nw; j++) wt[j] = ({T})ax[a].w[j];
        onnxc_resize_pass_{T}(rt->threads, k ? tmp[(k - 1) & 1] : x, k == n - 1 ? y : tmp[k & 1], outer, inner,
                              &ax[a], wt, ev);
        free(wt);
        cur[a] = ax[a].out;
    }}
    free(tmp[0]);
    free(tmp[1]);
    return 0;
}}"""


def _accepts(node: Node) -> str | None:
    """Nearest moves any element type (``types=``); interpolation needs arithmetic; scales are float."""
    x = node.input(0)
    t = x.type if x is not None else None
    mode = node.attr("mode", "nearest")
    if isinstance(t, TensorType) and mode != "nearest" and t.dtype not in ARITH:
        return f"element type {t.dtype.short} is not supported for mode {mode!r}"
    if isinstance(t, TensorType) and t.shape is not None and len(t.shape) > 16:
        return "rank above 16 is not supported"
    scales = node.input(1 if node.op_type == "Upsample" or node.version < 11 else 2)
    if scales is not None and isinstance(scales.type, TensorType) and scales.type.dtype not in (DType.FLOAT,
                                                                                              DType.DOUBLE):
        return f"scales of type {scales.type.dtype.short} are not supported (float expected)"
    return None


def _plan(ctx: KernelCtx, spec: ResizeSpec) -> list[str]:
    """C declaring ``din``/``dout`` (input and output dims) and ``sc`` (per-axis scale), checked."""
    ctx.helper("onnxc_resize", '#include "onnxc_resize.h"')
    r, n = spec.rank, len(spec.axes)
    lines = [ds.in_dims(ctx, 0, "din"), f"double sc[{max(r, 1)}]; int64_t dout[{max(r, 1)}];",
             f"const int axs[{max(n, 1)}] = {{{', '.join(map(str, spec.axes)) or '0'}}};"]
    scales, sizes = "NULL", "NULL"
    if spec.attr_scales is not None:
        vals = ", ".join(clit(s, DType.FLOAT) for s in spec.attr_scales)
        lines.append(f"const float scl[{max(n, 1)}] = {{{vals or '0'}}};")
        scales = "scl"
    elif spec.scales is not None:
        lines.append(f"float scl[{max(n, 1)}];\nfor (int j = 0; j < {n}; j++) scl[j] = (float)in{spec.scales}[j];")
        scales = "scl"
    else:
        lines.append(ds.read_ints(ctx, spec.sizes, n, "szs"))
        sizes = "szs"
    lines.append(ds.check(f"onnxc_resize_plan(rt, {ds.who(ctx)}, {r}, din, {n}, axs, {scales}, {sizes}, "
                          f"{_POLICY[spec.policy]}, sc, dout)"))
    return lines


def resize_shape(ctx: KernelCtx) -> str:
    """Output dims computed from run-time scales or sizes."""
    spec = resize_spec(ctx.node)
    return "\n".join([*_plan(ctx, spec), "(void)sc;", ds.bind_array(ctx, 0, "dout"), "return 0;"])


def _opts(ctx: KernelCtx, spec: ResizeSpec) -> str:
    roi = ctx.ins[spec.roi] if spec.roi is not None else None
    f32 = int(roi is not None and roi.dtype != DType.DOUBLE)
    return (f"const onnxc_resize_opts opt = {{{_MODES[spec.mode]}, {_CTMS[spec.ctm]}, {_NEAREST[spec.nearest_mode]}, "
            f"{int(spec.antialias)}, {int(spec.exclude_outside)}, {spec.cubic_a!r}, {f32}}};")


def _roi(ctx: KernelCtx, spec: ResizeSpec) -> list[str]:
    """``lo[a]``/``hi[a]``: the roi of every axis (0 and 1 where it has none)."""
    r, n = spec.rank, len(spec.axes)
    lines = [f"double lo[{max(r, 1)}], hi[{max(r, 1)}];", f"for (int a = 0; a < {r}; a++) {{ lo[a] = 0.0; hi[a] = 1.0; }}"]
    if spec.roi is not None:
        roi = ctx.ins[spec.roi]
        if roi.dtype in half.HALF:
            half.use(ctx)
        for i, a in enumerate(spec.axes):
            lo = half.load(roi.dtype, f"in{spec.roi}[{i}]")
            hi = half.load(roi.dtype, f"in{spec.roi}[{n + i}]")
            lines.append(f"lo[{a}] = (double)({lo}); hi[{a}] = (double)({hi});")
    return lines


def _ev_stored(spec: ResizeSpec, dt: DType) -> str:
    """The extrapolation value as a stored element of ``dt``."""
    v = spec.extrapolation
    if dt == DType.BOOL:
        return clit(v != 0, dt)
    if dt.is_float or dt in half.HALF:
        return clit(v, dt)
    info = np.iinfo(dt.np)
    return clit(int(min(max(np.round(v), info.min), info.max)) if np.isfinite(v) else 0, dt)


def _nearest(ctx: KernelCtx, spec: ResizeSpec) -> list[str]:
    """Gather every output element through the tables, plane by plane (all axes but the last two);
    an output row reading the same source row as the previous one is a copy of it; trailing axes
    that are never resized move as contiguous blocks."""
    x = ctx.ins[0]
    r = spec.rank
    k = r
    while k > 0 and (k - 1) not in spec.axes:
        k -= 1
    if k == 0:
        return [f"memcpy(out0, in0, (size_t)({x.numel()}) * sizeof({x.ctype}));"]
    xs, ct = x.strides(), x.ctype
    blk = cprod(x.dims[k:]) if k < r else "1"
    row_axis = k - 2  # -1: a single row
    head = [f"const {ct} ev = {_ev_stored(spec, x.dtype)};", f"const int64_t blk = {blk}, L = dout[{k - 1}];",
            f"const int64_t R = {f'dout[{row_axis}]' if row_axis >= 0 else '1'}, row = L * blk, plane = R * row;",
            f"const int64_t planes = {' * '.join(f'dout[{a}]' for a in range(max(row_axis, 0))) or '1'};",
            f"const int64_t *restrict ixl = ax[{k - 1}].idx;"]
    lines = [f"{ct} *restrict dp = out0 + pl * plane;",
             "int64_t rem = pl, base = 0, s; int ext = 0;"]
    for a in range(row_axis - 1, -1, -1):
        lines += [f"s = ax[{a}].idx[rem % dout[{a}]]; rem /= dout[{a}];",
                  f"if (s < 0) ext = 1; else base += s * ({xs[a]});"]
    lines += ["(void)rem; (void)s;",
              "if (ext) { for (int64_t t = 0; t < plane; t++) dp[t] = ev; continue; }",
              "int64_t prev = -1;",
              "for (int64_t i = 0; i < R; i++) {",
              f"{ct} *restrict drow = dp + i * row;",
              f"const int64_t si = {f'ax[{row_axis}].idx[i]' if row_axis >= 0 else '0'};",
              "if (si < 0) { for (int64_t t = 0; t < row; t++) drow[t] = ev; prev = -1; continue; }",
              f"if (si == prev) {{ memcpy(drow, drow - row, (size_t)row * sizeof({ct})); continue; }}",
              "prev = si;",
              f"const {ct} *restrict srow = in0 + base + si * ({xs[row_axis] if row_axis >= 0 else '0'});"]
    if blk == "1":
        lines += ["for (int64_t j = 0; j < L; j++) { const int64_t sj = ixl[j]; drow[j] = sj < 0 ? ev : srow[sj]; }"]
    else:
        lines += ["for (int64_t j = 0; j < L; j++) {", "const int64_t sj = ixl[j];",
                  "if (sj < 0) { for (int64_t t = 0; t < blk; t++) drow[j * blk + t] = ev; }",
                  f"else memcpy(drow + j * blk, srow + sj * blk, (size_t)blk * sizeof({ct}));", "}"]
    lines += ["}"]
    # the planes on the runtime's pool; the tables and output dims are the kernel's locals
    caps = [("const onnxc_resize_axis *", "ax"), ("const int64_t *", "dout")]
    if any("din[" in ln for ln in head + lines):
        caps.append(("const int64_t *", "din"))
    return [*head, *par_for(ctx, "pl", "planes", lines, work="planes * plane", head=head, captures=caps)]


def _store_int(ctx: KernelCtx, dt: DType) -> str:
    """Helper rounding a double half to even and saturating it into integer type ``dt``."""
    lo, hi = _INT_RANGE[dt]
    name = f"onnxc_resize_sat_{dt.short}"
    ctx.helper(name, f"static inline {dt.c} {name}(double v) {{\n"
                     f"    if (v != v) return 0;\n    v = nearbyint(v);\n"
                     f"    if (v <= (double){lo}) return {lo};\n    if (v >= (double){hi}) return {hi};\n"
                     f"    return ({dt.c})v;\n}}")
    return name


def _separable(ctx: KernelCtx, spec: ResizeSpec) -> list[str]:
    """Linear / cubic: passes in the compute type; converted copies for half and integer types."""
    x, y = ctx.ins[0], ctx.outs[0]
    dt = x.dtype
    ct = DType.DOUBLE if dt == DType.DOUBLE or dt in _INT_RANGE else DType.FLOAT
    T = ct.c
    ctx.helper(f"onnxc_resize_pass_{T}", PASS_C.format(T=T, grain=PAR_GRAIN))
    ev = clit(spec.extrapolation, ct)
    call = f"onnxc_resize_separable_{T}(rt, {ds.who(ctx)}, {{src}}, {{dst}}, {spec.rank}, din, ax, {ev})"
    if dt == ct:
        return [f"if (!rc) rc = {call.format(src='in0', dst='out0')};"]
    if dt in half.HALF:
        half.use(ctx)
        store = half.store(dt, "yc[i]")
        load = half.load(dt, "in0[i]")
    else:
        store = f"{_store_int(ctx, dt)}(yc[i])"
        load = f"({T})in0[i]"
    return [f"{T} *xc = NULL, *yc = NULL;",
            f"if (!rc && (!(xc = onnxc_alloc((size_t)({x.numel()}) * sizeof({T}))) || "
            f"!(yc = onnxc_alloc((size_t)({y.numel()}) * sizeof({T})))))",
            f"    rc = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory converting to {T}\", {ds.who(ctx)});",
            "if (!rc) {",
            f"for (int64_t i = 0; i < {x.numel()}; i++) xc[i] = {load};",
            f"rc = {call.format(src='xc', dst='yc')};",
            f"if (!rc) for (int64_t i = 0; i < {y.numel()}; i++) out0[i] = {store};",
            "}", "free(xc);", "free(yc);"]


@kernel("Resize", "Upsample", types=MOVABLE, accepts=_accepts, shape_fn=resize_shape)
def resize(ctx: KernelCtx) -> str:
    spec = resize_spec(ctx.node)
    y = ctx.outs[0]
    r = spec.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    lines = _plan(ctx, spec)
    for a in range(r):
        lines.append(f"if (dout[{a}] != ({y.dims[a]})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: output axis "
                     f"{a} has %lld elements, expected %lld\", {ds.who(ctx)}, (long long)dout[{a}], "
                     f"(long long)({y.dims[a]}));")
    lines += [f"if (({y.numel()}) == 0) return 0;", _opts(ctx, spec), *_roi(ctx, spec),
              f"onnxc_resize_axis ax[{r}];", "memset(ax, 0, sizeof ax);", "int rc = 0;",
              f"for (int a = 0; a < {r} && !rc; a++)",
              f"    rc = onnxc_resize_axis_init(rt, {ds.who(ctx)}, &ax[a], &opt, din[a], dout[a], sc[a], lo[a], hi[a]);"]
    if spec.mode == "nearest":
        lines += ["if (!rc) {", *_nearest(ctx, spec), "}"]
    else:
        lines += _separable(ctx, spec)
    lines += [f"for (int a = 0; a < {r}; a++) onnxc_resize_axis_free(&ax[a]);", "return rc;"]
    return "\n".join(lines)
