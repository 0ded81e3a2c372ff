"""Fused epilogues of Conv, Gemm, MatMul and onnxc::DepthwisePointwise: an activation and a residual add
applied to each output tile while it is in cache (runtime_c/onnxc_act.h, ``onnxc_sg_epi`` in
runtime_c/onnxc_sgemm.h).

A fusion pass requests them with node attributes; their names, the input positions and the activation
names and defaults are the contract of passes/shapes/epilogue_spec.py, which also parses a node's
request. This module adds what only C needs: the ONNXC_ACT_* code of each activation and the C
fragments that apply an epilogue.

So Conv computes ``Y = act(conv(X, W) + B + R)``, Gemm ``Y = act(alpha A B + beta C + R)`` and
MatMul ``Y = act(A B + bias + R)``: a fusion pass can fold ``Conv -> Add(R) -> Relu`` (ResNet),
``Conv -> Clip`` (MobileNet) or ``MatMul -> Add(bias) -> Add(R)`` (transformers) into one node.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType
from onnxc.passes.shapes.epilogue_spec import (
    PRODUCT_ACT,
    Activation,
    ActivationKeys,
    parse_activation,
    parse_epilogue,
)

from ..cexpr import c_literal
from .base import KernelCtx

# activation name (epilogue_spec.ACTIVATIONS) -> ONNXC_ACT_* code of runtime_c/onnxc_act.h
ACT_CODES: dict[str, int] = {
    "Relu": 1, "Clip": 2, "LeakyRelu": 3, "Sigmoid": 4, "HardSigmoid": 5, "HardSwish": 6, "Tanh": 7,
    "Swish": 8, "Gelu": 9, "Gelu:tanh": 10, "Mish": 11,
}
# the piecewise-linear ones: a few vector instructions per element, no exponential
CHEAP_ACTS = frozenset(ACT_CODES[n] for n in ("Relu", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish"))


@dataclass(frozen=True)
class Epilogue:
    """What a node's output gets after the product, as the C code needs it: ``act(y + bias + R)``."""

    act: int = 0        # ONNXC_ACT_* code, 0 = none
    a: float = 0.0      # activation parameters
    b: float = 0.0
    residual: int | None = None  # input index of R
    bias: int | None = None      # input index of the per-column bias

    @property
    def active(self) -> bool:
        return bool(self.act) or self.residual is not None or self.bias is not None

    def act_args(self, dt: DType) -> str:
        """``act, a, b`` as C arguments of ``onnxc_act_row_f/d``."""
        return f"{self.act}, {c_literal(self.a, dt)}, {c_literal(self.b, dt)}"


def _coded(act: Activation | None) -> tuple[int, float, float]:
    if act is None:
        return 0, 0.0, 0.0
    a, b = (list(act.params) + [0.0, 0.0])[:2]
    return ACT_CODES[act.name], a, b


def activation(ctx: KernelCtx, keys: ActivationKeys = PRODUCT_ACT) -> tuple[int, float, float]:
    """(ONNXC_ACT_* code, a, b) of the activation requested under ``keys`` (0 when none); an
    UnsupportedOpError naming the node on a request no kernel can serve (epilogue_spec.parse_activation)."""
    return _coded(parse_activation(ctx.node, keys))


def epilogue(ctx: KernelCtx) -> Epilogue:
    """The epilogue a node asks for (epilogue_spec.parse_epilogue, which raises on a malformed request)."""
    req = parse_epilogue(ctx.node)
    return Epilogue(*_coded(req.activation), req.residual, req.bias)


def use_act(ctx: KernelCtx) -> None:
    ctx.include("onnxc_act.h")


def sg_epi(ep: Epilogue, bias: str = "NULL", bias_cols: bool = False, res: str = "NULL", ldr: str = "0") -> str:
    """A C initializer of ``onnxc_sg_epi`` (float GEMM epilogue)."""
    return (f"{{{bias}, {int(bias_cols)}, {res}, {ldr}, {ep.act}, {c_literal(ep.a, DType.FLOAT)}, "
            f"{c_literal(ep.b, DType.FLOAT)}}}")


def sg_epi_decl(ctx: KernelCtx, ep: Epilogue, bias: str, bias_cols: bool, ldc: str) -> tuple[list[str], str]:
    """The C declaration of a GEMM call's epilogue ``epi`` (none when nothing is to apply) and the pointer to
    pass: (lines, "&epi" or "NULL"). The residual, if any, is ``in<ep.residual>`` with rows ``ldc`` apart."""
    if not (ep.active or bias != "NULL"):
        return [], "NULL"
    if ep.act:
        use_act(ctx)
    res = "NULL" if ep.residual is None else f"in{ep.residual}"
    return [f"const onnxc_sg_epi epi = {sg_epi(ep, bias=bias, bias_cols=bias_cols, res=res, ldr=ldc)};"], "&epi"


def rows_epilogue(ep: Epilogue, dt: DType, y: str, rows: str, n: str, res: str | None) -> list[str]:
    """C lines applying ``ep`` in place to ``rows`` rows of ``n`` contiguous elements at ``y`` (residual
    rows at ``res`` with the same layout, the bias of ``n`` values at ``in<ep.bias>``) — for kernels
    whose product does not fuse it per tile."""
    if not ep.active:
        return []
    sfx = "f" if dt == DType.FLOAT else "d"
    lines = [f"for (int64_t r_ = 0; r_ < {rows}; r_++) {{",
             f"    {dt.c} *restrict yr_ = {y} + r_ * ({n});"]
    if ep.bias is not None:
        lines += ["#pragma omp simd",
                  f"    for (int64_t j_ = 0; j_ < {n}; j_++) yr_[j_] += in{ep.bias}[j_];"]
    if res is not None:
        lines += [f"    const {dt.c} *rr_ = {res} + r_ * ({n});",
                  "#pragma omp simd",
                  f"    for (int64_t j_ = 0; j_ < {n}; j_++) yr_[j_] += rr_[j_];"]
    if ep.act:
        lines.append(f"    onnxc_act_row_{sfx}({ep.act_args(dt)}, yr_, {n});")
    lines.append("}")
    return lines
