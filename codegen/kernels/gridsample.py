"""GridSample (16, 20, 22): sample X (N, C, D1..Dr) at the normalized grid positions (N, O1..Or, r).

For every batch item the per-position sampling taps are computed once and shared by all channels:
for each spatial axis the source offsets (or -1: a zero of padding_mode "zeros") and the weights of
1 (nearest), 2 (linear) or 4 (cubic, Keys a = -0.75) taps. Coordinates follow onnx.reference (and
PyTorch): denormalized with or without align_corners, nearest rounds half to even, out-of-range
coordinates are clamped (border) or reflected (reflection) before the taps are taken, and every tap
outside the input is padded again by the same rule. Then each channel is an N-linear / N-cubic
combination over the taps, innermost axis first. Any number of spatial axes; float and double
(float16/bfloat16 through float32).
"""

from __future__ import annotations

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.resize import grid_mode

from ..cexpr import c_literal, c_product
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .parfor import par_for
from .typesets import ALL_FLOATS

_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
_PADDING = {"zeros": 0, "border": 1, "reflection": 2}

# Reflect x into [lo, hi] (onnx.reference's _gs_reflect) and map a tap index into the input (-1: zero).
HELPERS = """\
static inline {T} onnxc_gs_reflect_{T}({T} x, {T} lo, {T} hi) {{
    const {T} rng = hi - lo;
    if (!(rng > 0)) return lo;
    if (x < lo) {{
        const {T} dx = lo - x, q = floor(dx / rng), r = dx - q * rng;
        return fmod(q, 2) == 0 ? lo + r : hi - r;
    }}
    if (x > hi) {{
        const {T} dx = x - hi, q = floor(dx / rng), r = dx - q * rng;
        return fmod(q, 2) == 0 ? hi - r : lo + r;
    }}
    return x;
}}

static inline int64_t onnxc_gs_tap_{T}(int64_t i, int64_t d, int padding, {T} lo, {T} hi) {{
    if (padding == 0) return i >= 0 && i < d ? i : -1;
    if (padding == 2) i = (int64_t)onnxc_gs_reflect_{T}(({T})i, lo, hi);
    return i < 0 ? 0 : i >= d ? d - 1 : i;
}}"""


def _accepts(node: Node) -> str | None:
    """X's type is declared with ``types=``; the grid must be a float type too."""
    g = node.input(1)
    if g is not None and isinstance(g.type, TensorType) and g.type.dtype not in ALL_FLOATS:
        return f"grid of type {g.type.dtype.short} is not supported (float types only)"
    return None


def _coord_lines(ctx: KernelCtx, T: str, taps: int, mode: str) -> list[str]:
    """C filling ``ix``/``w`` (taps of position p, axis a: element offsets or -1, weights) from normalized
    coordinate ``v``."""
    dt = DType.DOUBLE if T == "double" else DType.FLOAT
    one, two = c_literal(1.0, dt), c_literal(2.0, dt)
    fl = "floor" if T == "double" else "floorf"
    lines = [f"const {T} dd = ({T})d[a];",
             f"{T} x = align ? (v + {one}) / {two} * (dd - {one}) : ((v + {one}) * dd - {one}) / {two};"]
    if mode == "nearest":
        lines.append(f"x = {'rint' if T == 'double' else 'rintf'}(x);")
    lines += ["if (x < lo[a] || x > hi[a]) {",
              f"    if (padding == 1) x = x < 0 ? 0 : x > dd - {one} ? dd - {one} : x;",
              f"    else if (padding == 2) x = onnxc_gs_reflect_{T}(x, lo[a], hi[a]);", "}",
              f"x = x != x ? -{two} : x < -{two} * {two} ? -{two} * {two} : x > dd + {two} ? dd + {two} : x;",
              f"int64_t *tx = ix + (p * {ctx.ins[0].rank - 2} + a) * {taps};",
              f"{T} *tw = w + (p * {ctx.ins[0].rank - 2} + a) * {taps};"]
    if mode == "nearest":
        return lines + [f"tx[0] = onnxc_gs_tap_{T}((int64_t)x, d[a], padding, lo[a], hi[a]);", f"tw[0] = {one};",
                        "if (tx[0] >= 0) tx[0] *= st[a];"]
    lines += [f"const {T} x0 = {fl}(x), t = x - x0;", "const int64_t i0 = (int64_t)x0;"]
    if mode == "linear":
        lines += [f"tw[0] = {one} - t; tw[1] = t;"]
        first = "i0"
    else:
        A = c_literal(-0.75, dt)
        lines += [f"const {T} A = {A}, u = {one} - t;",
                  f"tw[0] = ((A * (t + {one}) - 5 * A) * (t + {one}) + 8 * A) * (t + {one}) - 4 * A;",
                  f"tw[1] = ((A + 2) * t - (A + 3)) * t * t + {one};",
                  f"tw[2] = ((A + 2) * u - (A + 3)) * u * u + {one};",
                  f"tw[3] = ((A * (u + {one}) - 5 * A) * (u + {one}) + 8 * A) * (u + {one}) - 4 * A;"]
        first = "i0 - 1"
    lines += [f"for (int k = 0; k < {taps}; k++) {{",
              f"    tx[k] = onnxc_gs_tap_{T}({first} + k, d[a], padding, lo[a], hi[a]);",
              "    if (tx[k] >= 0) tx[k] *= st[a];  /* element offset along the axis */", "}"]
    return lines


def _sum_lines(r: int, taps: int, T: str) -> list[str]:
    """C computing ``acc0`` for position p: nested sums over the taps, innermost axis first."""
    lines = []
    for a in range(r):
        lines += [f"{T} acc{a} = 0;", f"for (int t{a} = 0; t{a} < {taps}; t{a}++) {{",
                  f"const int64_t i{a} = ip[{a * taps} + t{a}];", f"if (i{a} < 0) continue;",
                  f"const int64_t o{a} = {'o' + str(a - 1) + ' + ' if a else ''}i{a};"]
    lines.append(f"acc{r - 1} += wp[{(r - 1) * taps} + t{r - 1}] * xc[o{r - 1}];")
    for a in range(r - 1, 0, -1):
        lines += ["}", f"acc{a - 1} += wp[{(a - 1) * taps} + t{a - 1}] * acc{a};"]
    lines.append("}")
    return lines


@kernel("GridSample", types=ALL_FLOATS, accepts=_accepts)
@half.via_float32
def grid_sample(ctx: KernelCtx) -> str:
    x, g, y = ctx.ins[0], ctx.ins[1], ctx.outs[0]
    r = x.rank - 2
    T = x.ctype
    mode = grid_mode(ctx.node)
    taps = _TAPS[mode]
    align = int(bool(ctx.attr("align_corners", 0)))
    padding = _PADDING[ctx.attr("padding_mode", "zeros")]
    ctx.helper(f"onnxc_gs_{T}", HELPERS.format(T=T))
    dt = DType.DOUBLE if T == "double" else DType.FLOAT
    xs = x.strides()
    lo = ", ".join(c_literal(-0.5, dt) if not align else "0" for _ in range(r))
    hi = ", ".join(f"({T})(d[{a}] - 1)" if align else f"({T})d[{a}] - {c_literal(0.5, dt)}" for a in range(r))
    head = [f"const int64_t N = {y.dims[0]}, C = {y.dims[1]}, P = {c_product(y.dims[2:])}, S = {c_product(x.dims[2:])};",
            f"const int64_t d[{r}] = {{{', '.join(x.dims[2:])}}}, st[{r}] = {{{', '.join(xs[2:])}}};",
            f"const int align = {align}, padding = {padding};",
            f"const {T} lo[{r}] = {{{lo}}}, hi[{r}] = {{{hi}}};",
            "(void)N; (void)C; (void)S; (void)align; (void)padding; (void)lo; (void)hi; (void)st;"]
    taps_of_p = [f"const {g.ctype} *gp = in1 + (n * P + p) * {r};",
                 f"for (int a = 0; a < {r}; a++) {{",
                 f"const {T} v = ({T})gp[{r - 1} - a];  /* grid component 0 is the innermost axis */",
                 *_coord_lines(ctx, T, taps, mode), "}"]
    channel = [f"const {T} *xc = in0 + (n * C + c) * S;",
               f"{T} *yc = out0 + (n * C + c) * P;",
               "for (int64_t p = 0; p < P; p++) {",
               f"const int64_t *ip = ix + p * {r * taps};",
               f"const {T} *wp = w + p * {r * taps};",
               *_sum_lines(r, taps, T),
               "yc[p] = acc0;", "}"]
    mine = [("int64_t", "n"), ("int64_t *", "ix"), (f"{T} *", "w")]
    lines = [*head,
             f"if (({g.dims[0]}) != N) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: grid has %lld batch items, X "
             f"has %lld\", {ds.who(ctx)}, (long long)({g.dims[0]}), (long long)N);",
             "if (N * C * P == 0) return 0;",
             f"int64_t *ix = onnxc_alloc((size_t)P * {r * taps} * sizeof(int64_t));",
             f"{T} *w = onnxc_alloc((size_t)P * {r * taps} * sizeof({T}));",
             "if (!ix || !w) { free(ix); free(w); return onnxc_fail(rt, ONNXC_ERR_MEMORY, "
             f"\"%s: out of memory for sampling taps\", {ds.who(ctx)}); }}",
             "for (int64_t n = 0; n < N; n++) {",
             *par_for(ctx, "p", "P", taps_of_p, work=f"P * {r * taps}", head=head, captures=mine),
             *par_for(ctx, "c", "C", channel, work=f"C * P * {taps ** r}", head=head, captures=mine),
             "}",
             "free(ix); free(w);", "return 0;"]
    return "\n".join(lines)
