"""Normalization kernels: BatchNormalization (inference), InstanceNormalization, LayerNormalization, LRN.

BatchNormalization folds its four statistics into one scale and shift per channel (per element for
the spatial=0 form of opset < 9) and applies them in one pass. Instance normalization uses two passes
over each normalized block (mean, then centered variance), accumulating in double. Layer normalization
gathers the sum and the sum of squares of a row in one vectorized pass (double accumulators: the
products of floats are exact in double and E[x^2] - mean^2 loses only the digits double has to spare),
then normalizes the row while it is still in cache (double rows keep the two-pass centered variance).
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.norm import stash_dtype

from . import half, training
from .base import KernelCtx, kernel
from .nncommon import FLOATS, is_used, lit, mfn, prod, unsupported
from .parfor import par_for


def _bn_accepts(node: Node) -> str | None:
    if node.version < 7 and not node.attr("is_test", 0):
        return "training mode (is_test=0) is not supported; set is_test=1 for inference"
    if training.bn_training(node):
        return None  # codegen/kernels/training.py
    if any(is_used(o) for o in node.outputs[1:]):
        return "the training outputs (running/saved mean and variance) are not supported"
    return None


@kernel("BatchNormalization", types=FLOATS | half.HALF, accepts=_bn_accepts)
@half.via_float32
def batch_norm(ctx: KernelCtx) -> str:
    if training.bn_training(ctx.node):
        return training.batch_norm_training(ctx)
    x = ctx.ins[0]
    dt = x.dtype
    eps = float(ctx.attr("epsilon", 1e-5))
    per_elem = ctx.ins[1].rank > 1  # spatial=0 (opset < 9): statistics of shape [C, D1, ...]
    s = prod(x.dims[2:]) if x.rank > 2 else "1"
    sqrt = mfn("sqrt", dt)
    head = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, S = {s};"]
    coef = f"in1[{{i}}] / {sqrt}(in4[{{i}}] + {lit(eps, dt)})"
    if per_elem:
        body = ["    const int64_t c = nc % C;",
                  f"    const {dt.c} *restrict x = in0 + nc * S;",
                  f"    {dt.c} *restrict y = out0 + nc * S;",
                  "#pragma omp simd",
                  "    for (int64_t j = 0; j < S; j++) {",
                  "        const int64_t i = c * S + j;",
                  f"        const {dt.c} a = {coef.format(i='i')};",
                  "        y[j] = (x[j] - in3[i]) * a + in2[i];",
                  "    }"]
    else:
        body = ["    const int64_t c = nc % C;",
                  f"    const {dt.c} a = {coef.format(i='c')};",
                  f"    const {dt.c} b = in2[c] - in3[c] * a;",
                  f"    const {dt.c} *restrict x = in0 + nc * S;",
                  f"    {dt.c} *restrict y = out0 + nc * S;",
                  "#pragma omp simd",
                  "    for (int64_t j = 0; j < S; j++) y[j] = x[j] * a + b;"]
    lines = head + par_for(ctx, "nc", "N * C", body, work="N * C * S", head=head)
    lines.append("return 0;")
    return "\n".join(lines)


def _moments(dt: DType, n: str) -> list[str]:
    """C lines computing ``mean`` and ``var`` (double) of x[0..n)."""
    return ["    double sum = 0, sq = 0;",
            "#pragma omp simd reduction(+ : sum)",
            f"    for (int64_t j = 0; j < {n}; j++) sum += (double)x[j];",
            f"    const double mean = {n} > 0 ? sum / (double)({n}) : 0;",
            "#pragma omp simd reduction(+ : sq)",
            f"    for (int64_t j = 0; j < {n}; j++) {{ const double d = (double)x[j] - mean; sq += d * d; }}",
            f"    const double var = {n} > 0 ? sq / (double)({n}) : 0;"]


def _moments_one_pass(n: str) -> list[str]:
    """C lines computing ``mean`` and ``var`` (double) of x[0..n) in one pass over the row."""
    return ["    double sum = 0, sq = 0;",
            "#pragma omp simd reduction(+ : sum, sq)",
            f"    for (int64_t j = 0; j < {n}; j++) {{ const double v = (double)x[j]; sum += v; sq += v * v; }}",
            f"    const double mean = {n} > 0 ? sum / (double)({n}) : 0;",
            f"    double var = {n} > 0 ? sq / (double)({n}) - mean * mean : 0;",
            "    var = var > 0 ? var : 0;"]


@kernel("InstanceNormalization", types=FLOATS | half.HALF)
@half.via_float32
def instance_norm(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    eps = float(ctx.attr("epsilon", 1e-5))
    head = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, S = {prod(x.dims[2:])};"]
    body = ["    const int64_t c = nc % C;",
            f"    const {dt.c} *restrict x = in0 + nc * S;",
            f"    {dt.c} *restrict y = out0 + nc * S;"]
    body += _moments(dt, "S")
    body += [f"    const {dt.c} a = ({dt.c})((double)in1[c] / sqrt(var + {eps!r}));",
             f"    const {dt.c} b = ({dt.c})((double)in2[c] - mean * (double)a);",
             "#pragma omp simd",
             "    for (int64_t j = 0; j < S; j++) y[j] = x[j] * a + b;"]
    lines = head + par_for(ctx, "nc", "N * C", body, work="N * C * S", head=head)
    return "\n".join(lines + ["return 0;"])


@kernel("LayerNormalization", types=FLOATS | half.HALF)
@half.via_float32
def layer_norm(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    st = stash_dtype(ctx.node)
    axis = int(ctx.attr("axis", -1))
    axis = axis + x.rank if axis < 0 else axis
    eps = float(ctx.attr("epsilon", 1e-5))
    cols = prod(x.dims[axis:]) if axis < x.rank else "1"
    rows = prod(x.dims[:axis]) if axis > 0 else "1"
    idx = {}
    for i in (1, 2):
        op = ctx.ins[i] if i < len(ctx.ins) else None
        if op is None:
            continue
        n = op.numel()
        if n == "1":
            idx[i] = "0"
        elif list(op.dims) == list(x.dims[x.rank - op.rank:]) and op.rank <= x.rank - axis:
            # same trailing dims: contiguous over the block's last prod(op dims) elements
            idx[i] = "j" if op.rank == x.rank - axis else f"j % ({n})"
        else:
            raise unsupported(ctx, f"input {i} of shape {list(op.shape)} must match the normalized shape "
                                   f"{list(x.shape[axis:])} (other broadcasts are not supported yet)")
    scale = f"in1[{idx[1]}]"
    shift = f" + in2[{idx[2]}]" if 2 in idx else ""
    head = [f"const int64_t R = {rows}, L = {cols};"]
    body = [f"    const {dt.c} *restrict x = in0 + r * L;",
            f"    {dt.c} *restrict y = out0 + r * L;"]
    # float rows: one pass (exact products in double); double rows keep the centered second pass
    body += _moments_one_pass("L") if dt == DType.FLOAT else _moments(dt, "L")
    body += [f"    const double inv = 1.0 / sqrt(var + {eps!r});",
              f"    const {dt.c} m = ({dt.c})mean, s = ({dt.c})inv;",
              "#pragma omp simd",
              f"    for (int64_t j = 0; j < L; j++) y[j] = (x[j] - m) * s * {scale}{shift};"]
    for k, name in ((1, "mean"), (2, "inv")):
        if len(ctx.outs) > k:
            body.append(f"    out{k}[r] = ({st.c}){name};")
    lines = head + par_for(ctx, "r", "R", body, work="R * L", head=head)
    return "\n".join(lines + ["return 0;"])


@kernel("LRN", types=FLOATS | half.HALF)
@half.via_float32
def lrn(ctx: KernelCtx) -> str:
    """y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta. The window sums for one
    channel are a few vectorized multiply-adds over the plane; the power runs as exp(-beta * log(.))
    through onnxc_vmath.h for float (vectorized; libm's powf is a scalar call per element)."""
    x = ctx.ins[0]
    dt = x.dtype
    size = int(ctx.attr("size"))
    alpha, beta, bias = (float(ctx.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2  # channels before / after c in the window
    base = f"{lit(bias, dt)} + {lit(alpha / size, dt)} * y[j]"
    simd = "#pragma omp simd"
    if dt == DType.FLOAT:
        ctx.helper("onnxc_vmath", '#include "onnxc_vmath.h"')
        scale = f"onnxc_vexpf({lit(-beta, dt)} * onnxc_vlogf({base}))"
        simd = "ONNXC_VM_SIMD"
    else:
        scale = f"pow({base}, {lit(-beta, dt)})"
    head = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, S = {prod(x.dims[2:])};"]
    body = [
        "    const int64_t n = nc / C, c = nc % C;",
        f"    const int64_t c0 = c - {lo} < 0 ? 0 : c - {lo}, c1 = c + {hi} >= C ? C - 1 : c + {hi};",
        f"    const {dt.c} *restrict x = in0 + nc * S;",
        f"    {dt.c} *restrict y = out0 + nc * S;",
        "#pragma omp simd",
        "    for (int64_t j = 0; j < S; j++) y[j] = 0;",
        "    for (int64_t k = c0; k <= c1; k++) {",
        f"        const {dt.c} *restrict xk = in0 + (n * C + k) * S;",
        "#pragma omp simd",
        "        for (int64_t j = 0; j < S; j++) y[j] += xk[j] * xk[j];",
        "    }",
        simd,
        f"    for (int64_t j = 0; j < S; j++) y[j] = x[j] * {scale};"]
    lines = head + par_for(ctx, "nc", "N * C", body, work=f"N * C * S * {size}", head=head)
    return "\n".join(lines + ["return 0;"])
