"""onnxruntime's fused Conv / Gemm / MatMul forms (domain ``com.microsoft``, opset 1) as expansions.

onnxruntime's graph optimizer writes these when a session saves its optimized model: at the extended
level Conv + activation, Gemm + activation, MatMul + Transpose / scale; at the layout level also
Conv + Add (+ activation). onnxruntime.transformers' optimizer writes NhwcConv. Each becomes the standard ops in the order
passes/fuse_epilogues.py folds into the product's epilogue (product, then the residual Add, then the
activation), so the fused form runs as one kernel again:

- FusedConv (X, W, B?, Z?): ``activation(Conv(X, W, B) + Z)``; Z must have the output's shape.
  ``activation`` as onnxruntime's CPU kernel (MLAS) reads it: absent (identity), Relu, Tanh, Sigmoid,
  Silu, LeakyRelu (activation_params [alpha]), Clip ([min, max]), HardSigmoid ([alpha, beta]).
- NhwcFusedConv: FusedConv with X, Z and Y channels-last ([N, D1.., C]) and W as [M, k1.., C/group].
- NhwcConv (X, W, B?): Conv in that channels-last layout (the form fusion_nhwc_conv.py writes: W is the
  OIHW weight transposed by [0, 2, 3, 1]). Lowered as Transpose -> Conv -> Transpose.
- FusedGemm (A, B, C?): ``activation(Gemm(A, B, C))``; the activation is required and named as an ONNX
  activation op whose attributes carry an ``activation_`` prefix (Elu, HardSigmoid, LeakyRelu, Relu,
  Selu, Sigmoid, Softplus, Softsign, Tanh, ThresholdedRelu, ParametricSoftplus, ScaledTanh); like
  onnxruntime, a missing parameter is an error, not the ONNX default.
- FusedMatMul (A, B): ``alpha * op(A) @ op(B)`` with numpy.matmul broadcasting; TransposeMatMul is its
  older name without the batch transposes. See :func:`fused_matmul` for the transposes.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Value
from onnxc.ir.dims import is_static
from onnxc.passes.shapes.conv import kernel_shape
from onnxc.passes.shapes.spatial import window

from .builder import Builder
from .registry import expansion

TYPES = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16)  # what the schemas allow and onnxruntime's CPU runs
CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
SWISH_OPSET = 24  # the first ai.onnx opset with Swish

# activation -> names of its parameters, as FusedConv's activation_params lists them (MLAS)
CONV_ACTIVATIONS = {"Relu": (), "Tanh": (), "Sigmoid": (), "Silu": (), "LeakyRelu": ("alpha",),
                    "Clip": ("min", "max"), "HardSigmoid": ("alpha", "beta")}
# activation -> its attributes, which FusedGemm carries as activation_<name> (all required)
GEMM_ACTIVATIONS = {"Elu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "LeakyRelu": ("alpha",),
                    "Relu": (), "Selu": ("alpha", "gamma"), "Sigmoid": (), "Softplus": (), "Softsign": (),
                    "Tanh": (), "ThresholdedRelu": ("alpha",), "ParametricSoftplus": ("alpha", "beta"),
                    "ScaledTanh": ("alpha", "beta")}
_PLAIN = ("Relu", "Tanh", "Sigmoid", "Softplus", "Softsign")


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _bound(v: float, dt: DType) -> float:
    """A Clip bound in ``dt``: float32's extremes (onnxruntime's defaults) become infinities in float16."""
    return v if dt != DType.FLOAT16 or abs(v) <= float(np.finfo(np.float16).max) else float(np.sign(v) * np.inf)


def _activate(b: Builder, name: str, x: Value, p: dict[str, float], dt: DType, out: Value) -> Value:
    """``name(x)`` with parameters ``p`` into ``out``, as the one op fuse_epilogues folds when it can."""
    if name in _PLAIN:
        return b.op(name, x, out=out)
    if name == "Silu":
        return b.op("Swish", x, out=out, version=SWISH_OPSET)
    if name == "Clip":
        return b.op("Clip", x, b.scalar(_bound(p["min"], dt), dt), b.scalar(_bound(p["max"], dt), dt), out=out)
    if name in ("ParametricSoftplus", "ScaledTanh"):  # alpha * f(beta * x)
        inner = b.op("Softplus" if name == "ParametricSoftplus" else "Tanh", b.op("Mul", x, b.scalar(p["beta"], dt)))
        return b.op("Mul", inner, b.scalar(p["alpha"], dt), out=out)
    return b.op(name, x, out=out, **p)  # Elu, LeakyRelu, ThresholdedRelu, HardSigmoid, Selu


def _conv_activation(b: Builder) -> tuple[str | None, dict[str, float]]:
    """FusedConv's activation and its named parameters; errors as onnxruntime's kernel gives them."""
    name = b.attr("activation")
    if name is None:
        return None, {}
    name = _text(name)
    if name not in CONV_ACTIVATIONS:
        raise b.unsupported(f"activation {name!r} is not supported (supported: {', '.join(CONV_ACTIVATIONS)})")
    names = CONV_ACTIVATIONS[name]
    if not names:
        return name, {}
    params = b.attr("activation_params")
    if params is None or len(params) != len(names):
        raise b.fail(f"activation {name} needs activation_params [{', '.join(names)}], got {params}")
    return name, dict(zip(names, (float(v) for v in params)))


def _check_z(b: Builder, nhwc: bool) -> None:
    """Z must have the convolution's output shape (onnxruntime adds it without broadcasting)."""
    x, w, zs = b.shape(0), b.shape(1), b.shape(3)
    if nhwc:
        x, w, zs = ((s[0], s[-1], *s[1:-1]) for s in (x, w, zs))
    out = (x[0], w[0], *window(b.node, tuple(x[2:]), kernel_shape(b.node, w)).out)
    bad = len(zs) != len(out) or any(
        zd != od and ((is_static(zd) and is_static(od)) or 1 in (zd, od)) for zd, od in zip(zs, out))
    if bad:
        shown = (out[0], *out[2:], out[1]) if nhwc else out
        raise b.fail(f"Z must have the output's shape {list(shown)}, got {list(b.shape(3))}")


def _nchw(b: Builder, v: Value) -> Value:
    """A channels-last tensor [N, D1.., C] (or weight [M, k1.., C/g]) as channels-first."""
    r = len(v.type.shape)
    return b.transpose(v, [0, r - 1, *range(1, r - 1)])


def _conv(b: Builder, nhwc: bool, fused: bool) -> None:
    """``activation(Conv(X, W, B) + Z)``, channels-last around it when ``nhwc``."""
    b.require_types([0, 1, 2, 3] if fused else [0, 1, 2], TYPES)
    r = b.rank(0)
    if r < 3 or b.rank(1) != r:
        raise b.fail(f"X and W must have the same rank >= 3, got {list(b.shape(0))} and {list(b.shape(1))}")
    name, params = _conv_activation(b) if fused else (None, {})
    x, w = b.input(0), b.input(1)
    if nhwc:
        x, w = _nchw(b, x), _nchw(b, w)
    attrs = {k: b.attr(k) for k in CONV_ATTRS}
    z = b.input(3) if fused else None
    last = name is None and z is None and not nhwc
    y = b.op("Conv", x, w, b.input(2), out=b.output(0) if last else None, **attrs)
    if z is not None:
        _check_z(b, nhwc)
        last = name is None and not nhwc
        y = b.op("Add", y, _nchw(b, z) if nhwc else z, out=b.output(0) if last else None)
    if name is not None:
        y = _activate(b, name, y, params, b.dtype(0), out=None if nhwc else b.output(0))
    if nhwc:
        b.transpose(y, [0, *range(2, r), 1], out=b.output(0))


@expansion("FusedConv", domain="com.microsoft")
def fused_conv(b: Builder) -> None:
    _conv(b, nhwc=False, fused=True)


@expansion("NhwcFusedConv", domain="com.microsoft")
def nhwc_fused_conv(b: Builder) -> None:
    _conv(b, nhwc=True, fused=True)


@expansion("NhwcConv", domain="com.microsoft")
def nhwc_conv(b: Builder) -> None:
    _conv(b, nhwc=True, fused=False)


@expansion("FusedGemm", domain="com.microsoft")
def fused_gemm(b: Builder) -> None:
    """``activation(alpha * op(A) @ op(B) + beta * C)``; the activation's attributes are required."""
    b.require_types([0, 1, 2], TYPES)
    name = b.attr("activation")
    if name is None:
        raise b.fail("attribute 'activation' is required (onnxruntime refuses a FusedGemm without one)")
    name = _text(name)
    if name not in GEMM_ACTIVATIONS:
        raise b.unsupported(f"activation {name!r} is not supported (supported: {', '.join(GEMM_ACTIVATIONS)})")
    params = {}
    for p in GEMM_ACTIVATIONS[name]:
        v = b.attr(f"activation_{p}")
        if v is None:
            raise b.fail(f"activation {name} needs the attribute 'activation_{p}'")
        params[p] = float(v)
    attrs = {k: b.attr(k) for k in ("alpha", "beta", "transA", "transB")}
    y = b.op("Gemm", b.input(0), b.input(1), b.input(2), **attrs)
    _activate(b, name, y, params, b.dtype(0), out=b.output(0))


def _matmul_perm(rank: int, trans: bool, trans_batch: bool) -> list[int] | None:
    """The Transpose that gives an operand its logical [batch.., rows, cols] form, or None (none needed).

    transBatch: the operand is stored [d0, b1.., d_last] and read as [b1.., d0, d_last] (its first axis
    is the matrix's first); trans then swaps the two matrix axes. A vector ignores both."""
    if rank < 2 or not (trans or trans_batch):
        return None
    perm = [*range(1, rank - 1), 0, rank - 1] if trans_batch else list(range(rank))
    if trans:
        perm[-2], perm[-1] = perm[-1], perm[-2]
    return perm


def _matmul(b: Builder, batch_attrs: bool) -> None:
    """``alpha * op(A) @ op(B)`` with onnxruntime's transposes (MatMulComputeHelper)."""
    b.require_types([0, 1], TYPES)
    ra, rb = b.rank(0), b.rank(1)
    if ra == 0 or rb == 0:
        raise b.fail(f"A and B must have rank >= 1, got {list(b.shape(0))} and {list(b.shape(1))}")
    ta, tb = bool(b.attr("transA", 0)), bool(b.attr("transB", 0))
    tba = bool(b.attr("transBatchA", 0)) if batch_attrs else False
    tbb = bool(b.attr("transBatchB", 0)) if batch_attrs else False
    if (tba or tbb) and not (ra == rb and ra > 2):
        raise b.fail(f"transBatchA/transBatchB need A and B of one rank >= 3, got {list(b.shape(0))} and "
                     f"{list(b.shape(1))}")
    if ta and ra >= 2 and rb == 1:
        raise b.unsupported("transA=1 with a 1-D B is not supported: onnxruntime's CPU kernel reads A "
                            "untransposed there, against numpy.matmul's definition")
    a, v = b.input(0), b.input(1)
    pa, pb = _matmul_perm(ra, ta, tba), _matmul_perm(rb, tb, tbb)
    a = a if pa is None else b.transpose(a, pa)
    v = v if pb is None else b.transpose(v, pb)
    alpha = float(b.attr("alpha", 1.0))
    dt = b.dtype(0)
    if alpha == 1.0:
        b.op("MatMul", a, v, out=b.output(0))
    elif b.input(1).const is not None and dt in (DType.FLOAT, DType.DOUBLE):
        b.op("MatMul", a, b.op("Mul", v, b.scalar(alpha, dt)), out=b.output(0))  # folded into the weight
    else:
        b.op("Mul", b.op("MatMul", a, v), b.scalar(alpha, dt), out=b.output(0))


@expansion("FusedMatMul", domain="com.microsoft")
def fused_matmul(b: Builder) -> None:
    """Transposes: transA/transB swap an operand's last two axes; transBatchA/transBatchB (A and B of one
    rank >= 3) read an operand stored [d0, b1.., d_last] as the batch [b1..] of [d0, d_last] matrices,
    before trans. A 1-D operand ignores trans (numpy's transpose of a vector)."""
    _matmul(b, batch_attrs=True)


@expansion("TransposeMatMul", domain="com.microsoft")
def transpose_matmul(b: Builder) -> None:
    _matmul(b, batch_attrs=False)

