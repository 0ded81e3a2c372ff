"""Fused epilogues of Conv, Gemm and MatMul: an activation and a residual add applied to each output
tile while it is in cache (runtime_c/onnxc_act.h, ``onnxc_sg_epi`` in runtime_c/onnxc_sgemm.h).

A fusion pass requests them with node attributes that ONNX models never carry:

- ``onnxc_activation`` (string): ``Relu``, ``Clip``, ``LeakyRelu``, ``Sigmoid``, ``HardSigmoid``,
  ``HardSwish``, ``Tanh``, ``Swish``, ``Gelu`` (erf form), ``Gelu:tanh`` (Gelu with
  ``approximate="tanh"``) or ``Mish``, applied last;
- ``onnxc_activation_params`` (floats): the activation's attributes in ONNX order and with ONNX
  defaults when left out: Clip ``[min, max]`` (-inf, inf), LeakyRelu ``[alpha]`` (0.01), HardSigmoid
  ``[alpha, beta]`` (0.2, 0.5), Swish ``[alpha]`` (1.0); none for the others;
- ``onnxc_residual`` (int, 1 = on): one more input, right after the op's own inputs (Conv and Gemm:
  input 3, with input 2 possibly absent; MatMul: input 2), holding a tensor R of exactly the output's
  shape that is added before the activation;
- ``onnxc_bias`` (int, 1 = on; MatMul only): one more input after the residual slot, so MatMul's
  inputs are ``A, B, R (absent when onnxc_residual is off), bias``: a vector of the output's element
  type holding one value per output column, of shape ``[N]`` or ``[1, ..., 1, N]``, added first.

So Conv computes ``Y = act(conv(X, W) + B + R)``, Gemm ``Y = act(alpha A B + beta C + R)`` and
MatMul ``Y = act(A B + bias + R)``: a fusion pass can fold ``Conv -> Add(R) -> Relu`` (ResNet),
``Conv -> Clip`` (MobileNet) or ``MatMul -> Add(bias) -> Add(R)`` (transformers) into one node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onnxc.ir import DType

from .base import KernelCtx
from .nncommon import lit

ACT_ATTR = "onnxc_activation"
PARAMS_ATTR = "onnxc_activation_params"
RESIDUAL_ATTR = "onnxc_residual"
BIAS_ATTR = "onnxc_bias"

# name -> (ONNXC_ACT_* code, default parameters)
ACTIVATIONS: dict[str, tuple[int, tuple[float, ...]]] = {
    "Relu": (1, ()),
    "Clip": (2, (-math.inf, math.inf)),
    "LeakyRelu": (3, (0.01,)),
    "Sigmoid": (4, ()),
    "HardSigmoid": (5, (0.2, 0.5)),
    "HardSwish": (6, ()),
    "Tanh": (7, ()),
    "Swish": (8, (1.0,)),
    "Gelu": (9, ()),
    "Gelu:tanh": (10, ()),
    "Mish": (11, ()),
}

# index of the residual input per op (right after the op's own inputs)
RESIDUAL_INPUT = {"Conv": 3, "Gemm": 3, "MatMul": 2, "DepthwisePointwise": 5}  # the last: passes/fuse_depthwise_pointwise.py
# index of the per-column bias input (after the residual slot) of the ops that take ``onnxc_bias``
BIAS_INPUT = {"MatMul": 3}


@dataclass(frozen=True)
class Epilogue:
    """What a node's output gets after the product: ``act(y + bias + R)``."""

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
        return f"{self.act}, {lit(self.a, dt)}, {lit(self.b, dt)}"


def activation(ctx: KernelCtx, attr: str = ACT_ATTR, params_attr: str = PARAMS_ATTR) -> tuple[int, float, float]:
    """(ONNXC_ACT_* code, a, b) of the activation requested by attributes ``attr`` / ``params_attr``
    (0 when none); NotImplementedError (an UnsupportedOpError for the user) on a request it cannot serve:
    these attributes may come from a model file."""
    name = ctx.attr(attr, None)
    if isinstance(name, bytes):
        name = name.decode()
    if not name:
        return 0, 0.0, 0.0
    if name not in ACTIVATIONS:
        raise NotImplementedError(f"{attr}={name!r} is not one of {', '.join(ACTIVATIONS)}")
    act, defaults = ACTIVATIONS[name]
    params = [float(p) for p in (ctx.attr(params_attr, None) or [])]
    if len(params) > len(defaults):
        raise NotImplementedError(f"{name} takes {len(defaults)} parameter(s), got {params_attr}={params}")
    vals = params + list(defaults[len(params):])
    a, b = (vals + [0.0, 0.0])[:2]
    return act, a, b


def epilogue(ctx: KernelCtx) -> Epilogue:
    """The epilogue a node asks for (see the module doc); NotImplementedError on a request it cannot serve
    (these attributes may come from a model file)."""
    node = ctx.node
    act, a, b = activation(ctx)
    residual = None
    if int(ctx.attr(RESIDUAL_ATTR, 0) or 0):
        residual = RESIDUAL_INPUT[node.op_type]
        r = ctx.ins[residual] if residual < len(ctx.ins) else None
        y = ctx.outs[0]
        if r is None:
            raise NotImplementedError(f"{RESIDUAL_ATTR}=1 but input {residual} (the residual) is missing")
        if r.dtype != y.dtype or tuple(r.shape) != tuple(y.shape):
            raise NotImplementedError(f"the residual input {residual} has type {r.dtype} {list(r.shape)}; it must match the "
                             f"output {y.dtype} {list(y.shape)}")
    return Epilogue(act, a, b, residual, _bias(ctx))


def _bias(ctx: KernelCtx) -> int | None:
    """The input index of the per-column bias a node asks for, or None; NotImplementedError when it is malformed."""
    if not int(ctx.attr(BIAS_ATTR, 0) or 0):
        return None
    op = ctx.node.op_type
    if op not in BIAS_INPUT:
        raise NotImplementedError(f"{BIAS_ATTR} is only supported on {', '.join(BIAS_INPUT)}, not {op}")
    i = BIAS_INPUT[op]
    bv = ctx.ins[i] if i < len(ctx.ins) else None
    y = ctx.outs[0]
    if bv is None:
        raise NotImplementedError(f"{BIAS_ATTR}=1 but input {i} (the bias) is missing")
    dims = list(bv.dims)
    if bv.dtype != y.dtype or not dims or not y.dims or any(d != "1" for d in dims[:-1]) or dims[-1] != y.dims[-1] \
            or bv.rank > y.rank:
        raise NotImplementedError(f"the bias input {i} has type {bv.dtype} {list(bv.shape)}; it must be a vector of "
                         f"{y.dtype} with one value per output column ({y.shape[-1] if y.shape else 1})")
    return i


def use_act(ctx: KernelCtx) -> None:
    ctx.helper("onnxc_act", '#include "onnxc_act.h"')


def sg_epi(ep: Epilogue, bias: str = "NULL", bias_cols: bool = False, res: str = "NULL", ldr: str = "0") -> str:
    """A C initializer of ``onnxc_sg_epi`` (float GEMM epilogue)."""
    return (f"{{{bias}, {int(bias_cols)}, {res}, {ldr}, {ep.act}, {lit(ep.a, DType.FLOAT)}, "
            f"{lit(ep.b, DType.FLOAT)}}}")


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
