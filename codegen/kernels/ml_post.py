"""C helpers shared by the classic ai.onnx.ml kernels (trees_classic.py, svm.py) to match
onnxruntime's post transforms."""

from __future__ import annotations

from .base import KernelCtx

_ML_PROBIT = r"""
/* onnxruntime's probit: sqrt(2) erfinv(2p - 1) with Winitzki's erfinv approximation, in float. */
static double onnxc_ml_probit(double p) {
    float x = 2.0f * (float)p - 1.0f;
    const float sgn = x < 0 ? -1.0f : 1.0f;
    x = (1.0f - x) * (1.0f + x);
    const float lg = logf(x);
    const float v = 2.0f / ((float)3.14159265358979323846 * 0.147f) + 0.5f * lg;
    const float v2 = 1.0f / 0.147f * lg;
    const float v3 = -v + sqrtf(v * v - v2);
    return (double)((float)1.41421356237309504880 * (sgn * sqrtf(v3)));
}
"""


def use_probit(ctx: KernelCtx) -> str:
    """Declare ``onnxc_ml_probit`` in the kernel's translation unit; returns its name."""
    ctx.helper("onnxc_ml_probit", _ML_PROBIT)
    return "onnxc_ml_probit"
