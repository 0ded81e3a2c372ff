"""Kernels of training-time computations: the optimizers of ai.onnx.preview.training (Adagrad, Adam,
Momentum standard and Nesterov) and BatchNormalization with training_mode=1 (called by the
BatchNormalization kernel in norm.py).

The optimizer formulas are the spec's pseudo code, elementwise, evaluated in double and rounded
once to the tensor type. Several tensors per node become one loop each in the same kernel.
"""

from __future__ import annotations

from onnxc.ir import DType, ModelError, Node
from onnxc.passes.shapes.training import TRAINING_DOMAIN, momentum_mode, tensor_count

from ..cexpr import c_product
from . import dynshape as ds
from .base import KernelCtx, kernel
from .nncommon import FLOATS
from .parfor import par_for


def _attr(ctx: KernelCtx, name: str, default: float | None = None) -> str:
    v = ctx.attr(name, default)
    if v is None:
        raise ModelError(f"{ctx.node.describe()}: attribute {name} is required")
    return repr(float(v))


def _optimizer(ctx: KernelCtx, prologue: list[str], reads: list[str], body: list[str],
               writes: list[str]) -> str:
    """The kernel of an optimizer node: ``prologue`` once, then per tensor j and element i: load the
    ``reads`` (one name per input group, as doubles), run ``body``, store each of ``writes`` (one
    expression per output group)."""
    n = tensor_count(ctx.node)
    lines = ["const double R = (double)in0[0];", "const int64_t T = in1[0];", *prologue]
    for j in range(n):
        x = ctx.ins[2 + j]
        lines += ["{", f"const int64_t n = {x.numel()};", "for (int64_t i = 0; i < n; i++) {"]
        lines += [f"    const double {name} = (double)in{2 + g * n + j}[i];" for g, name in enumerate(reads)]
        lines += [f"    {s}" for s in body]
        lines += [f"    out{g * n + j}[i] = ({x.ctype})({w});" for g, w in enumerate(writes)]
        lines += ["}", "}"]
    lines.append("(void)R; (void)T;\nreturn 0;")
    return "\n".join(lines)


@kernel("Adagrad", domain=TRAINING_DOMAIN, types=FLOATS, typed="in2")  # the optimized tensors
def adagrad(ctx: KernelCtx) -> str:
    nc, decay, eps = _attr(ctx, "norm_coefficient", 0.0), _attr(ctx, "decay_factor", 0.0), _attr(ctx, "epsilon", 1e-6)
    return _optimizer(
        ctx, [f"const double r = R / (1.0 + (double)T * {decay});"], ["x", "g", "h"],
        [f"const double gr = {nc} * x + g;", "const double hn = h + gr * gr;",
         f"const double xn = x - r * gr / (sqrt(hn) + {eps});"],
        ["xn", "hn"])


@kernel("Adam", domain=TRAINING_DOMAIN, types=FLOATS, typed="in2")  # the optimized tensors
def adam(ctx: KernelCtx) -> str:
    alpha, beta = _attr(ctx, "alpha", 0.9), _attr(ctx, "beta", 0.999)
    eps, nc, ncp = _attr(ctx, "epsilon", 1e-6), _attr(ctx, "norm_coefficient", 0.0), \
        _attr(ctx, "norm_coefficient_post", 0.0)
    return _optimizer(
        ctx, [f"const double ra = T > 0 ? R * sqrt(1.0 - pow({beta}, (double)T)) / (1.0 - pow({alpha}, (double)T)) "
              ": R;"],
        ["x", "g", "v", "h"],
        [f"const double gr = {nc} * x + g;",
         f"const double vn = {alpha} * v + (1.0 - {alpha}) * gr;",
         f"const double hn = {beta} * h + (1.0 - {beta}) * (gr * gr);",
         f"const double xn = x - ra * (vn / (sqrt(hn) + {eps}));"],
        [f"(1.0 - {ncp}) * xn", "vn", "hn"])


@kernel("Momentum", domain=TRAINING_DOMAIN, types=FLOATS, typed="in2")  # the optimized tensors
def momentum(ctx: KernelCtx) -> str:
    alpha, beta, nc = _attr(ctx, "alpha"), _attr(ctx, "beta"), _attr(ctx, "norm_coefficient")
    step = "gr + a * vn" if momentum_mode(ctx.node) == "nesterov" else "vn"
    return _optimizer(
        ctx, [f"const double a = {alpha}, b = T > 0 ? {beta} : 1.0;"], ["x", "g", "v"],
        [f"const double gr = {nc} * x + g;", "const double vn = a * v + b * gr;",
         f"const double xn = x - R * ({step});"],
        ["xn", "vn"])


# -- BatchNormalization, training mode ------------------------------------------------------------

def bn_training(node: Node) -> bool:
    """Whether a BatchNormalization node normalizes with the batch's own statistics (opset >= 14,
    training_mode=1)."""
    return node.version >= 14 and bool(node.attr("training_mode", 0))


def batch_norm_training(ctx: KernelCtx) -> str:
    """Y from the batch mean and (biased) variance per channel over N and the spatial axes; the running
    statistics become ``input * momentum + batch * (1 - momentum)``. Float/double operands (half ones
    arrive converted by half.via_float32)."""
    x = ctx.ins[0]
    dt = x.dtype
    if dt not in (DType.FLOAT, DType.DOUBLE):
        raise NotImplementedError(f"training-mode BatchNormalization on {dt.short} tensors is not supported")
    eps = float(ctx.attr("epsilon", 1e-5))
    mom = float(ctx.attr("momentum", 0.9))
    s = c_product(x.dims[2:]) if x.rank > 2 else "1"
    head = [f"const int64_t N = {x.dims[0]}, C = {x.dims[1]}, S = {s};", "const double cnt = (double)(N * S);"]
    lines = head + [f"if (({ctx.ins[i].dims[0]}) != C) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: input {i} must "
                    f"have C = %lld elements\", {ds.who(ctx)}, (long long)C);"
                    for i in range(1, 5) if ctx.ins[i].dims[0] != x.dims[1]]
    body = ["    double sum = 0, sq = 0;",
            "    for (int64_t n = 0; n < N; n++) {",
            f"        const {dt.c} *restrict xs = in0 + (n * C + c) * S;",
            "        for (int64_t j = 0; j < S; j++) sum += (double)xs[j];",
            "    }",
            "    const double mean = sum / cnt;",
            "    for (int64_t n = 0; n < N; n++) {",
            f"        const {dt.c} *restrict xs = in0 + (n * C + c) * S;",
            "        for (int64_t j = 0; j < S; j++) { const double d = (double)xs[j] - mean; sq += d * d; }",
            "    }",
            "    const double var = sq / cnt;",
            f"    const double a = (double)in1[c] / sqrt(var + {eps!r}), b = (double)in2[c] - mean * a;",
            "    for (int64_t n = 0; n < N; n++) {",
            f"        const {dt.c} *restrict xs = in0 + (n * C + c) * S;",
            f"        {dt.c} *restrict ys = out0 + (n * C + c) * S;",
            f"        for (int64_t j = 0; j < S; j++) ys[j] = ({dt.c})((double)xs[j] * a + b);",
            "    }"]
    for k, (src, stat) in ((1, ("in3", "mean")), (2, ("in4", "var"))):
        if len(ctx.outs) > k:
            t = ctx.outs[k].dtype.c
            body.append(f"    out{k}[c] = ({t})((double){src}[c] * {mom!r} + {stat} * (1.0 - {mom!r}));")
    lines += par_for(ctx, "c", "C", body, work="N * C * S", head=head)
    lines.append("return 0;")
    return "\n".join(lines)
