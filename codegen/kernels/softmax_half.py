"""Softmax on float16 / bfloat16 tensors, rounded step by step like the reference.

The reference (numpy) evaluates ``e = exp(x - max(x)); y = e / sum(e)`` op by op in the half type:
the difference, the exponential and the quotient are each computed in float32 and rounded to the
half type. The sum depends on the type and the memory layout:

* float16 along a contiguous axis: numpy's pairwise summation in float32 (blocks of eight partial
  sums below 128 elements, halves above), added to 0 and rounded once — ``onnxc_pwsum_f16``;
* bfloat16 (ml_dtypes adds element by element) and any strided axis: a running sum rounded to the
  half type after every addition.

Computing everything in float32 and rounding once (as other half kernels do) differs from that by
one unit in the last place on a fair share of elements — beyond the tolerance of bfloat16 results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from onnxc.ir import DType

from . import half
from .base import KernelCtx
from .parfor import par_for

PW_BLOCK = 128  # numpy's PW_BLOCKSIZE


def _pairwise_helper(ctx: KernelCtx) -> str:
    name = "onnxc_pwsum_f16"
    ctx.helper(name, f"""/* numpy's pairwise float32 sum of n float16 values (HALF_pairwise_sum) */
static float {name}(const uint16_t *a, int64_t n) {{
    if (n < 8) {{
        float res = 0.0f;
        for (int64_t i = 0; i < n; i++) res += onnxc_h2f(a[i]);
        return res;
    }}
    if (n <= {PW_BLOCK}) {{
        float r[8];
        int64_t i;
        for (int j = 0; j < 8; j++) r[j] = onnxc_h2f(a[j]);
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += onnxc_h2f(a[i + j]);
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += onnxc_h2f(a[i]);
        return res;
    }}
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return {name}(a, n2) + {name}(a + n2, n - n2);
}}""")
    return name


def softmax_half(ctx: KernelCtx, outer: str, n: str, inner: str) -> str:
    """Body of Softmax on a half tensor viewed as [outer, n, inner] (see module doc)."""
    half.use(ctx)
    dt = ctx.ins[0].dtype

    def ld(e: str) -> str:
        return half.load(dt, e)

    def st(e: str) -> str:
        return half.store(dt, e)

    def rnd(e: str) -> str:
        return ld(st(e))

    head = [f"const int64_t O = {outer}, L = {n}, I = {inner};", "(void)I;"]
    if dt == DType.FLOAT16:
        row_sum = [f"    const float s = {rnd('0.0f + ' + _pairwise_helper(ctx) + '(y, L)')};"]
    else:
        row_sum = ["    float s = 0.0f;", f"    for (int64_t j = 0; j < L; j++) s = {rnd('s + ' + ld('y[j]'))};"]
    body = ["    const uint16_t *restrict x = in0 + o * L;",
            "    uint16_t *restrict y = out0 + o * L;",
            "    if (L == 0) continue;",
            f"    float m = {ld('x[0]')};",
            f"    for (int64_t j = 1; j < L; j++) {{ const float v = {ld('x[j]')}; m = v > m ? v : m; }}",
            f"    for (int64_t j = 0; j < L; j++) y[j] = {st('expf(' + rnd(ld('x[j]') + ' - m') + ')')};",
            *row_sum,
            f"    for (int64_t j = 0; j < L; j++) y[j] = {st(ld('y[j]') + ' / s')};"]
    rows = par_for(ctx, "o", "O", body, work="O * L", head=head)
    if inner == "1":
        return "\n".join(head + rows + ["return 0;"])
    # strided: a running sum per inner position, rounded after every addition
    strided = ["float *acc = (float *)onnxc_alloc((size_t)(2 * I) * sizeof(float));",
               "if (!acc) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in softmax\");",
               "float *mx = acc, *sm = acc + I;",
               "for (int64_t o = 0; o < O && L > 0; o++) {",
               "    const uint16_t *restrict x = in0 + o * L * I;",
               "    uint16_t *restrict y = out0 + o * L * I;",
               f"    for (int64_t i = 0; i < I; i++) {{ mx[i] = {ld('x[i]')}; sm[i] = 0.0f; }}",
               "    for (int64_t k = 1; k < L; k++)",
               "        for (int64_t i = 0; i < I; i++) {",
               f"            const float v = {ld('x[k * I + i]')};",
               "            mx[i] = v > mx[i] ? v : mx[i];",
               "        }",
               "    for (int64_t k = 0; k < L; k++)",
               "        for (int64_t i = 0; i < I; i++) {",
               f"            const uint16_t e = {st('expf(' + rnd(ld('x[k * I + i]') + ' - mx[i]') + ')')};",
               "            y[k * I + i] = e;",
               f"            sm[i] = {rnd('sm[i] + ' + ld('e'))};",
               "        }",
               "    for (int64_t k = 0; k < L; k++)",
               "        for (int64_t i = 0; i < I; i++)",
               f"            y[k * I + i] = {st(ld('y[k * I + i]') + ' / sm[i]')};",
               "}",
               "free(acc);"]
    # a run-time inner size of 1 is a contiguous axis: numpy sums it pairwise
    return "\n".join(head + ["if (I == 1) {"] + ["    " + ln for ln in rows] + ["    return 0;", "}"]
                     + strided + ["return 0;"])


def stepwise_half(view: Callable[[KernelCtx], tuple[str, str, str]]):
    """Decorator for the Softmax-family lowering: Softmax nodes on half types lower with
    :func:`softmax_half` (``view`` gives the [outer, n, inner] C sizes), every other node with the
    decorated function."""

    def deco(fn: Callable[[KernelCtx], str]) -> Callable[[KernelCtx], str]:
        @functools.wraps(fn)
        def run(ctx: KernelCtx) -> str:
            if ctx.node.op_type == "Softmax" and ctx.ins[0].dtype in half.HALF:
                return softmax_half(ctx, *view(ctx))
            return fn(ctx)

        return run

    return deco
