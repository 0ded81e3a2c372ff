"""Col2Im (opset 18): scatter-add column blocks back into N-D images (the inverse of im2col).

Input [N, C * prod(block), L] holds, for each channel and block offset, one value per block position
(L = prod of the block counts). Each value is added to the image pixel that block position and
offset cover, skipping pixels in the padding. Block offsets are the outer loop and block positions
the inner one, so each pixel receives its contributions in the reference's order (increasing block
offset). Sums are in the element type (float16/bfloat16 rounded after each addition, bool adds as
logical or, like numpy).

block_shape and image_shape may be known only at run time: the spatial rank is static, the sizes
are read into small arrays (the shape function binds the output dims they determine).
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.misc_nn import col2im_geometry

from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .copyutil import clit
from .typesets import MOVABLE


def _block(ctx: KernelCtx, nd: int) -> list[str]:
    """C declaring ``bk[nd]`` (block sizes) and ``K`` (their product), validated."""
    geo = col2im_geometry(ctx.node)
    if geo.block is not None and all(isinstance(b, int) for b in geo.block):
        items = [str(b) for b in geo.block]
    else:
        items = [f"(int64_t)in2[{a}]" for a in range(nd)]
    return [f"const int64_t bk[{nd}] = {{{', '.join(items)}}};",
            "int64_t K = 1;",
            f"for (int a = 0; a < {nd}; a++) {{",
            "    if (bk[a] <= 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: block_shape has a non-positive "
            f"value %lld\", {ds.who(ctx)}, (long long)bk[a]);",
            "    K *= bk[a];", "}"]


def _col2im_shape(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    nd = y.rank - 2
    lines = [*_block(ctx, nd), ds.read_ints(ctx, 1, nd, "s")]
    for a in range(nd):
        lines.append(f"if (s[{a}] < 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: image_shape has a negative "
                     f"value %lld\", {ds.who(ctx)}, (long long)s[{a}]);")
    lines += [f"if (({ctx.ins[0].dims[1]}) % K) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: input dim 1 is not "
              f"a multiple of prod(block_shape) = %lld\", {ds.who(ctx)}, (long long)K);",
              ds.bind(ctx, 0, [y.dims[0], f"({ctx.ins[0].dims[1]}) / K", *[f"s[{a}]" for a in range(nd)]]),
              "return 0;"]
    return "\n".join(lines)


def _accumulate(dt: DType, dst: str, src: str) -> str:
    if dt == DType.BOOL:
        return f"{dst} = {dst} || {src};"
    if dt in half.HALF:
        return f"{dst} = {half.store(dt, f'{half.load(dt, dst)} + {half.load(dt, src)}')};"
    return f"{dst} += {src};"


@kernel("Col2Im", types=MOVABLE, shape_fn=_col2im_shape)
def col2im(ctx: KernelCtx) -> str:
    half.use(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    geo = col2im_geometry(ctx.node)
    nd = geo.rank
    who = ds.who(ctx)

    def arr(name: str, vals) -> str:
        return f"const int64_t {name}[{nd}] = {{{', '.join(str(v) for v in vals)}}};"

    return "\n".join([
        *_block(ctx, nd),
        arr("im", y.dims[2:]), arr("st", geo.strides), arr("dl", geo.dilations), arr("pb", geo.pads_begin),
        arr("ps", [b + e for b, e in zip(geo.pads_begin, geo.pads_end)]),
        f"const int64_t NC = ({y.dims[0]}) * ({y.dims[1]}), L = {x.dims[2]};",
        f"if (({x.dims[1]}) != ({y.dims[1]}) * K) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: input dim 1 is "
        f"not a multiple of prod(block_shape) = %lld\", {who}, (long long)K);",
        f"int64_t nb[{nd}], IMG = 1, NB = 1;",
        f"for (int a = 0; a < {nd}; a++) {{",
        "    nb[a] = onnxc_floordiv(im[a] + ps[a] - dl[a] * (bk[a] - 1) - 1, st[a]) + 1;",
        "    if (nb[a] < 1) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: image axis %d of size %lld is too small "
        f"for the blocks\", {who}, a, (long long)im[a]);",
        "    IMG *= im[a]; NB *= nb[a];",
        "}",
        "if (NB != L) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the input holds %lld blocks per channel, the "
        f"image and block geometry give %lld\", {who}, (long long)L, (long long)NB);",
        "for (int64_t nc = 0; nc < NC; nc++) {",
        f"    const {x.ctype} *restrict src = in0 + nc * K * L;",
        f"    {y.ctype} *restrict dst = out0 + nc * IMG;",
        f"    for (int64_t i = 0; i < IMG; i++) dst[i] = {clit(0, y.dtype)};",
        "    for (int64_t kk = 0; kk < K; kk++) {",
        f"        int64_t off[{nd}], bi[{nd}] = {{0}}, rem = kk;",
        f"        for (int a = {nd - 1}; a >= 0; a--) {{ off[a] = (rem % bk[a]) * dl[a] - pb[a]; rem /= bk[a]; }}",
        f"        const {x.ctype} *restrict col = src + kk * L;",
        "        for (int64_t l = 0; l < L; l++) {",
        "            int64_t pos = 0, ok = 1;",
        f"            for (int a = 0; a < {nd}; a++) {{",
        "                const int64_t p = bi[a] * st[a] + off[a];",
        "                if (p < 0 || p >= im[a]) { ok = 0; break; }",
        "                pos = pos * im[a] + p;",
        "            }",
        "            if (ok) " + _accumulate(y.dtype, "dst[pos]", "col[l]"),
        f"            for (int a = {nd - 1}; a >= 0; a--) {{ if (++bi[a] < nb[a]) break; bi[a] = 0; }}",
        "        }",
        "    }",
        "}", "return 0;"])
