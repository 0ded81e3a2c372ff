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

from ..cexpr import c_literal, c_product
from ..templating import render
from . import half, training
from .base import KernelCtx, kernel
from .nncommon import FLOATS, is_used, mfn, unsupported
from .parcall import par_call


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
    return render("norm_batch.c.j2", N=x.dims[0], C=x.dims[1], S=c_product(x.dims[2:]) if x.rank > 2 else "1",
                  T=dt.c, sqrt=mfn("sqrt", dt), eps=c_literal(eps, dt),
                  per_elem=ctx.ins[1].rank > 1, par=par_call(ctx))  # per_elem: spatial=0 (opset < 9)


@kernel("InstanceNormalization", types=FLOATS | half.HALF)
@half.via_float32
def instance_norm(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    eps = float(ctx.attr("epsilon", 1e-5))
    return render("norm_instance.c.j2", N=x.dims[0], C=x.dims[1], S=c_product(x.dims[2:]), T=x.dtype.c,
                  eps=repr(eps), par=par_call(ctx))


def _affine_index(ctx: KernelCtx, axis: int) -> dict[int, str]:
    """The C index of LayerNormalization's scale (1) and bias (2) at column ``j`` of a row."""
    x = ctx.ins[0]
    idx = {}
    for i in (1, 2):
        op = ctx.ins[i] if i < len(ctx.ins) else None
        if op is None:
            continue
        n = op.numel()
        if n == "1":
            idx[i] = "0"
        elif list(op.dims) == list(x.dims[x.rank - op.rank:]) and op.rank <= x.rank - axis:
            # same trailing dims: contiguous over the block's last c_product(op dims) elements
            idx[i] = "j" if op.rank == x.rank - axis else f"j % ({n})"
        else:
            raise unsupported(ctx, f"input {i} of shape {list(op.shape)} must match the normalized shape "
                                   f"{list(x.shape[axis:])} (other broadcasts are not supported yet)")
    return idx


@kernel("LayerNormalization", types=FLOATS | half.HALF)
@half.via_float32
def layer_norm(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    axis = int(ctx.attr("axis", -1))
    axis = axis + x.rank if axis < 0 else axis
    eps = float(ctx.attr("epsilon", 1e-5))
    idx = _affine_index(ctx, axis)
    # float rows: one pass (exact products in double); double rows keep the centered second pass
    return render("norm_layer.c.j2", rows=c_product(x.dims[:axis]) if axis > 0 else "1",
                  cols=c_product(x.dims[axis:]) if axis < x.rank else "1", T=dt.c, ST=stash_dtype(ctx.node).c,
                  one_pass=dt == DType.FLOAT, eps=repr(eps), scale=f"in1[{idx[1]}]",
                  shift=f" + in2[{idx[2]}]" if 2 in idx else "", stash_mean=len(ctx.outs) > 1,
                  stash_inv=len(ctx.outs) > 2, par=par_call(ctx))


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
    base = f"{c_literal(bias, dt)} + {c_literal(alpha / size, dt)} * y[j]"
    simd = "#pragma omp simd"
    if dt == DType.FLOAT:
        ctx.include("onnxc_vmath.h")
        scale = f"onnxc_vexpf({c_literal(-beta, dt)} * onnxc_vlogf({base}))"
        simd = "ONNXC_VM_SIMD"
    else:
        scale = f"pow({base}, {c_literal(-beta, dt)})"
    return render("norm_lrn.c.j2", N=x.dims[0], C=x.dims[1], S=c_product(x.dims[2:]), T=dt.c, size=size,
                  LO=(size - 1) // 2, HI=(size - 1) - (size - 1) // 2,  # channels before / after c in the window
                  simd=simd, scale=scale, par=par_call(ctx))
