"""The run-time helpers of the ai.onnx.ml kernels (trees.py, trees_classic.py, svm.py): post transforms
matching onnxruntime and the reference. Their C is runtime_c/onnxc_ml.c, compiled once into the runtime
library; a kernel includes runtime_c/onnxc_ml.h."""

from __future__ import annotations

from .base import KernelCtx


def use(ctx: KernelCtx) -> None:
    """Declare the ml helpers (runtime_c/onnxc_ml.h) in the kernel's translation unit."""
    ctx.include("onnxc_ml.h")


def use_probit(ctx: KernelCtx) -> str:
    """Declare ``onnxc_ml_probit`` (onnxruntime's probit) in the kernel's translation unit; returns its name."""
    use(ctx)
    return "onnxc_ml_probit"
