"""``precision="bf16"``: float32 MatMul, Gemm and Conv on the bfloat16 GEMM (runtime_c/onnxc_bgemm.h).

What changes with the option (``KernelCtx.precision == "bf16"``):

- MatMul / Gemm whose B is a 2-D float32 constant (``sgemm_call.packable_b``): B is rounded to bf16 and
  packed at compile time (codegen/kernels/bgemm_layout.py, half the bytes), A is rounded while the GEMM
  packs it; products accumulate in float32 and the epilogue (bias, residual, activation) runs in float32;
- Conv with a constant float32 filter, except depthwise ones: the filter is the packed bf16 A operand;
  the input is the B operand as it is (1x1, stride 1, no padding), or else the B panels are built from a
  zero-padded copy of the input split by column phase (``onnxc_bg_conv_rows``: 32 positions of two taps
  per row of pairs, any stride and dilation, 1-D to 3-D). This replaces the float paths of codegen/kernels/conv.py (Winograd, implicit, rows) for these nodes.

Everything else stays float32: elementwise ops, normalizations, softmax, products of two activations
(attention's Q K^T), depthwise convolutions, and the GEMV path of products with a few rows
(codegen/kernels/gemv.py, bound by reading the weights rather than by multiply-adds).
The kernel is chosen at run time: VDPBF16PS where the CPU has AVX512_BF16, else a portable C kernel that
computes the same values (slowly), so a model compiled with the option runs correctly anywhere (an AOT
artifact too); compile() warns when the machine it runs on lacks AVX512_BF16 (``warn_if_slow``).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from onnxc.ir import DType
from onnxc.passes.shapes.spatial import Window

from ..templating import render
from .base import KernelCtx
from .bgemm_layout import pack_a_bf16, pack_b_bf16, packed_a_size
from .epilogue import Epilogue, sg_epi, sg_epi_decl

PRECISIONS = ("fp32", "bf16")


def check_precision(precision: str) -> str:
    """``precision`` when it is one onnxc knows, else a ValueError naming the choices."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, not {precision!r}")
    return precision


def cpu_flags() -> set[str] | None:
    """This CPU's feature flags (Linux /proc/cpuinfo), or None where they cannot be read."""
    try:
        m = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return None
    return set(m.group(1).split()) if m else None


def warn_if_slow(stacklevel: int = 3) -> None:
    """A RuntimeWarning when this CPU is known to lack AVX512_BF16: the bf16 kernels then run the portable C
    fallback, correct but slower than float32."""
    flags = cpu_flags()
    if flags is not None and "avx512_bf16" not in flags:
        warnings.warn("precision='bf16': this CPU has no AVX512_BF16, so the bfloat16 GEMM runs its portable C "
                      "kernel (the same values, slower than float32)", RuntimeWarning, stacklevel=stacklevel)


def enabled(ctx: KernelCtx) -> bool:
    return ctx.precision == "bf16"


def bgemm_stmt(ctx: KernelCtx, m: str, n: str, k: str, alpha: str, a: str, lda: str, ta: bool, b_index: int,
               tb: bool, beta: str, c: str, ldc: str, ep: Epilogue, bias: str, bias_cols: bool) -> str:
    """C statement: ``sgemm_call.sgemm_stmt`` on the bf16 GEMM, for a constant float32 B (input ``b_index``)."""
    ctx.include("onnxc_bgemm.h")
    w = np.asarray(ctx.ins[b_index].const, dtype=np.float32)
    ctx.repack_const(b_index, pack_b_bf16(w.T if tb else w).view(np.float32))
    fa = "ONNXC_SG_TRANS" if ta else "ONNXC_SG_PLAIN"
    lines, epi = sg_epi_decl(ctx, ep, bias, bias_cols, ldc)
    lines.append(f"if (onnxc_bgemm_ex(rt->threads, {m}, {n}, {k}, {alpha}, {a}, {lda}, {fa}, in{b_index}, 0, "
                 f"ONNXC_BG_PACKED, {beta}, {c}, {ldc}, {epi})) "
                 "return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in GEMM\");")
    return "\n".join(lines)


def conv_applies(ctx: KernelCtx, cg: int, g: int) -> bool:
    """Whether a float Conv runs on the bf16 GEMM: the option is on, the filter a float32 constant, and the
    convolution not depthwise."""
    w = ctx.ins[1]
    return (enabled(ctx) and ctx.outs[0].dtype == DType.FLOAT and w.const is not None
            and w.value.type.dtype == DType.FLOAT and not (cg == 1 and g > 1))


def conv_bf16(ctx: KernelCtx, common: dict, win: Window, ep: Epilogue, res: str | None, mg: int, g: int) -> str:
    """The Conv kernel body (templates/conv_bf16.c.j2); the filter is packed here, once per group."""
    ctx.include("onnxc_bgemm.h")
    w = ctx.ins[1]
    kg = int(np.prod(w.shape[1:]))
    groups = np.asarray(w.const, dtype=np.float32).reshape(g, mg, kg)
    ctx.repack_const(1, np.concatenate([pack_a_bf16(groups[i]) for i in range(g)]).view(np.float32))
    pointwise = (all(k == 1 for k in win.kernel) and all(s == 1 for s in win.strides)
                 and all(p == 0 for p in win.pads_begin + win.pads_end))
    bias = "in2 + g * Mg" if common["bias"] else "NULL"
    resp = "NULL" if res is None else f"{res} + (n * M + g * Mg) * OP"
    return render("conv_bf16.c.j2", **common, pointwise=pointwise, a=f"in1 + g * {packed_a_size(mg, kg)}",
                  epi=sg_epi(ep, bias=bias, res=resp, ldr="OP"))
