"""onnxruntime's activation ops (com.microsoft, version 1), as the standard Gelu / Swish and adds.

- Gelu: the erf form, ``0.5 * x * (1 + erf(x / sqrt(2)))`` = ai.onnx Gelu-20.
- FastGelu: ``X (+ bias)`` through the tanh form ``0.5 * x * (1 + tanh(0.797885 * x + 0.035677 * x^3))``,
  which is Gelu-20 ``approximate="tanh"`` (0.797885 = sqrt(2 / pi), 0.035677 = 0.044715 * sqrt(2 / pi)).
- BiasGelu: ``Gelu(A + B)``, erf form.
- QuickGelu: ``x * sigmoid(alpha * x)`` (alpha defaults to 1.702) = ai.onnx Swish-24.
- BiasAdd: ``X + bias + skip``; X and skip (N, S, C), bias (C).
- BiasSplitGelu: ``(X + bias)`` cut into two halves along the last axis, ``left * Gelu(right)``;
  X (N, S, D) with D even, bias (D); the output is (N, S, D / 2).

Biases are 1-D over the last axis, as onnxruntime checks. A bias add followed by the activation is
the chain passes/fuse_epilogues.py folds into a preceding MatMul or Gemm. onnxruntime 1.32 has CPU
kernels for the first four (float, double, float16); BiasAdd and BiasSplitGelu are CUDA-only there
(float, float16).
"""

from __future__ import annotations

from onnxc.ir import DType

from .builder import Builder
from .registry import expansion

MS = "com.microsoft"
TYPES = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16)
GPU_TYPES = (DType.FLOAT, DType.FLOAT16)


def _checked(b: Builder, n_inputs: int, types=TYPES) -> DType:
    """The element type shared by the first ``n_inputs`` inputs (an input rank of at least 1)."""
    b.require_types(range(n_inputs), types)
    dt = b.dtype(0)
    for i in range(1, n_inputs):
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, but input 0 has {dt.short}")
    if b.rank(0) < 1:
        raise b.fail("the input must have rank >= 1")
    return dt


def _bias(b: Builder, i: int, name: str) -> None:
    """Input ``i`` must be 1-D of the size of the last axis of input 0."""
    last, s = b.shape(0)[-1], b.shape(i)
    if len(s) != 1 or (isinstance(s[0], int) and isinstance(last, int) and s[0] != last):
        raise b.fail(f"{name} must be 1-D of the size of the input's last axis ({last}), got shape {list(s)}")


@expansion("Gelu", domain=MS)
def gelu(b: Builder) -> None:
    _checked(b, 1)
    b.op("Gelu", b.input(0), approximate="none", version=20, out=b.output(0))


@expansion("FastGelu", domain=MS)
def fast_gelu(b: Builder) -> None:
    _checked(b, 2)
    x = b.input(0)
    if b.input(1) is not None:
        _bias(b, 1, "bias")
        x = b.op("Add", x, b.input(1))
    b.op("Gelu", x, approximate="tanh", version=20, out=b.output(0))


@expansion("BiasGelu", domain=MS)
def bias_gelu(b: Builder) -> None:
    _checked(b, 2)
    _bias(b, 1, "B")
    b.op("Gelu", b.op("Add", b.input(0), b.input(1)), approximate="none", version=20, out=b.output(0))


@expansion("QuickGelu", domain=MS)
def quick_gelu(b: Builder) -> None:
    _checked(b, 1)
    b.op("Swish", b.input(0), alpha=float(b.attr("alpha", 1.702)), version=24, out=b.output(0))


@expansion("BiasAdd", domain=MS)
def bias_add(b: Builder) -> None:
    _checked(b, 3, GPU_TYPES)
    xs, ss = b.shape(0), b.shape(2)
    if len(xs) != 3:
        raise b.fail(f"X must be 3-D (N, S, C), got shape {list(xs)}")
    _bias(b, 1, "bias")
    if len(ss) != 3 or any(isinstance(p, int) and isinstance(q, int) and p != q for p, q in zip(ss, xs)):
        raise b.fail(f"skip must have the shape of X {list(xs)}, got {list(ss)}")
    b.op("Add", b.op("Add", b.input(0), b.input(1)), b.input(2), out=b.output(0))


@expansion("BiasSplitGelu", domain=MS)
def bias_split_gelu(b: Builder) -> None:
    _checked(b, 2, GPU_TYPES)
    xs = b.shape(0)
    if len(xs) != 3:
        raise b.fail(f"X must be 3-D (N, S, D), got shape {list(xs)}")
    _bias(b, 1, "bias")
    d = xs[2]
    if not isinstance(d, int):
        raise b.unsupported(f"the hidden size D must be static, got {d}")
    if d % 2:
        raise b.fail(f"the hidden size D must be even, got {d}")
    left, right = b.op("Split", b.op("Add", b.input(0), b.input(1)), b.ints([d // 2, d // 2]), axis=-1, n_out=2)
    gated = b.op("Gelu", right, approximate="none", version=20)
    b.op("Mul", left, gated, out=b.output(0))
