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

from . import half
from .base import KernelCtx, kernel
from .nncommon import FLOATS, mfn, prod
from .parfor import par_for
from .softmax_half import stepwise_half

VMATH = '#include "onnxc_vmath.h"'
ATTENTION = '#include "onnxc_attention.h"'


def _view(ctx: KernelCtx) -> tuple[str, str, str]:
    x = ctx.ins[0]
    axis = softmax_axis(ctx.node, x.rank)
    outer = prod(x.dims[:axis]) if axis else "1"
    if ctx.node.version < 13:
        return outer, prod(x.dims[axis:]), "1"
    inner = prod(x.dims[axis + 1:]) if axis + 1 < x.rank else "1"
    return outer, x.dims[axis], inner


@kernel(*SOFTMAX_OPS, types=FLOATS | half.HALF)
@stepwise_half(_view)
@half.via_float32
def softmax(ctx: KernelCtx) -> str:
    dt = ctx.ins[0].dtype
    op = ctx.node.op_type
    outer, n, inner = _view(ctx)
    T = dt.c
    ctx.helper("vmath", VMATH)
    ex = "onnxc_vexpf" if dt == DType.FLOAT else "exp"
    simd = "ONNXC_VM_SIMD" if dt == DType.FLOAT else "#pragma omp simd"  # loops computing exp
    lg = mfn("log", dt)
    head = [f"const int64_t O = {outer}, L = {n}, I = {inner};", "(void)I;"]
    if inner == "1":
        body = [f"    const {T} *restrict x = in0 + o * L;",
                f"    {T} *restrict y = out0 + o * L;",
                "    if (L == 0) continue;"]
        if op == "Hardmax":
            body += ["    int64_t at = 0;",
                     "    for (int64_t j = 1; j < L; j++) if (x[j] > x[at]) at = j;",
                     "    for (int64_t j = 0; j < L; j++) y[j] = 0;",
                     "    y[at] = 1;"]
        elif dt == DType.FLOAT:  # the row helpers of runtime_c/onnxc_attention.h (no subnormal exps)
            ctx.helper("attention", ATTENTION)
            if op == "Softmax":
                body += ["    onnxc_att_softmax_row(x, y, L);"]
            else:
                body += ["    float m;",
                         "    const float ls = onnxc_att_logsumexp_shift(x, L, &m);",
                         "#pragma omp simd",
                         "    for (int64_t j = 0; j < L; j++) y[j] = (x[j] - m) - ls;"]
        else:
            body += [f"    {T} m = x[0];",
                     "#pragma omp simd reduction(max : m)",
                     "    for (int64_t j = 0; j < L; j++) m = x[j] > m ? x[j] : m;",
                     f"    {T} s = 0;"]
            if op == "Softmax":
                body += ["#pragma omp simd reduction(+ : s)",
                         f"    for (int64_t j = 0; j < L; j++) {{ const {T} e = {ex}(x[j] - m); y[j] = e; s += e; }}",
                         f"    const {T} inv = 1 / s;",
                         "#pragma omp simd",
                         "    for (int64_t j = 0; j < L; j++) y[j] *= inv;"]
            else:
                body += ["#pragma omp simd reduction(+ : s)",
                         f"    for (int64_t j = 0; j < L; j++) s += {ex}(x[j] - m);",
                         f"    const {T} ls = {lg}(s);",
                         "#pragma omp simd",
                         "    for (int64_t j = 0; j < L; j++) y[j] = (x[j] - m) - ls;"]
        return "\n".join(head + par_for(ctx, "o", "O", body, work="O * L", head=head) + ["return 0;"])
    # strided: blocks of [L, I]; accumulators across the I positions
    body = [f"{T} *acc = ({T} *)onnxc_alloc((size_t)(2 * I) * sizeof({T}));",
            "if (!acc) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in softmax\");",
            f"{T} *mx = acc, *sm = acc + I;",
            "for (int64_t o = 0; o < O && L > 0; o++) {",
            f"    const {T} *restrict x = in0 + o * L * I;",
            f"    {T} *restrict y = out0 + o * L * I;",
            "    for (int64_t i = 0; i < I; i++) { mx[i] = x[i]; sm[i] = 0; }"]
    if op == "Hardmax":
        body += ["    /* sm[i] holds the argmax row of position i */",
                 "    for (int64_t k = 1; k < L; k++)",
                 "        for (int64_t i = 0; i < I; i++)",
                 f"            if (x[k * I + i] > mx[i]) {{ mx[i] = x[k * I + i]; sm[i] = ({T})k; }}",
                 "    for (int64_t k = 0; k < L; k++)",
                 "        for (int64_t i = 0; i < I; i++) y[k * I + i] = sm[i] == k ? 1 : 0;"]
    else:
        body += ["    for (int64_t k = 1; k < L; k++)",
                 "#pragma omp simd",
                 "        for (int64_t i = 0; i < I; i++) mx[i] = x[k * I + i] > mx[i] ? x[k * I + i] : mx[i];",
                 "    for (int64_t k = 0; k < L; k++)",
                 simd,
                 "        for (int64_t i = 0; i < I; i++) {",
                 f"            const {T} e = {ex}(x[k * I + i] - mx[i]);",
                 "            sm[i] += e;"
                 + ("\n            y[k * I + i] = e;" if op == "Softmax" else ""),
                 "        }"]
        if op == "Softmax":
            body += ["    for (int64_t i = 0; i < I; i++) sm[i] = 1 / sm[i];",
                     "    for (int64_t k = 0; k < L; k++)",
                     "#pragma omp simd",
                     "        for (int64_t i = 0; i < I; i++) y[k * I + i] *= sm[i];"]
        else:
            body += [f"    for (int64_t i = 0; i < I; i++) sm[i] = {lg}(sm[i]);",
                     "    for (int64_t k = 0; k < L; k++)",
                     "#pragma omp simd",
                     "        for (int64_t i = 0; i < I; i++) y[k * I + i] = (x[k * I + i] - mx[i]) - sm[i];"]
    body += ["}", "free(acc);"]
    return "\n".join(head + body + ["return 0;"])
