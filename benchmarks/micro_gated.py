"""Micro benchmark of gated activations after a product: onnxc before / after passes/name_activations.py
against onnxruntime, 1 thread each, interleaved medians in one process.

    python -m benchmarks.micro_gated [--cases a,b] [--seconds S] [--threads N] [--cpu]

Cases (made with onnx.helper, random weights, as exporters write them):
- ``yolo``: a YOLO-style backbone piece at 1x3x640x640 (the detectors' input size): Conv (3x3, stride 2) + BatchNormalization +
  SiLU written ``x * Sigmoid(x)``, six times (3 -> 16 -> 32 -> 32 -> 64 -> 64 -> 64 channels; 3x3 and 1x1);
- ``effnet``: an EfficientNet-style MBConv block at 1x24x56x56: 1x1 expansion to 144 + BN + SiLU,
  depthwise 3x3 + BN + SiLU, squeeze-excite (GlobalAveragePool, 1x1 to 6 + SiLU, 1x1 to 144 + Sigmoid,
  Mul), 1x1 projection to 24 + BN, residual Add;
- ``ffn``: a transformer feed-forward layer at 1x128x384: MatMul + bias + erf-form GELU (five ops) +
  MatMul + bias.

Prints per case: onnxruntime ms, onnxc ms without the pass ("before": the gates run as loops of their
own after the product), onnxc ms with it ("after": folded into the epilogue), both ratios to
onnxruntime, and the largest relative error of "after" against onnxruntime.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

from benchmarks.micro_fusion import _B, F32, pass_main  # noqa: E402

PASS = "name_activations"


def _conv_bn(b: _B, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
    w = (b.rng.standard_normal((cout, cin // group, k, k)) * math.sqrt(2 / (k * k * cin // group)))
    y = b.op("Conv", [x, b.c(w.astype(np.float32))], kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4, group=group)
    stats = [b.rng.uniform(0.8, 1.2, cout), b.rng.standard_normal(cout) * 0.1, b.rng.standard_normal(cout) * 0.1,
             b.rng.uniform(0.5, 1.5, cout)]
    return b.op("BatchNormalization", [y, *(b.c(s.astype(np.float32)) for s in stats)], epsilon=1e-3)


def _silu(b: _B, x: str) -> str:
    return b.op("Mul", [x, b.op("Sigmoid", [x])])


def yolo(hw: int = 640) -> tuple[onnx.ModelProto, dict]:
    b = _B(1)
    y = "x"
    for cin, cout, k, s in [(3, 16, 3, 2), (16, 32, 3, 2), (32, 32, 1, 1), (32, 64, 3, 2), (64, 64, 1, 1),
                            (64, 64, 3, 1)]:
        y = _silu(b, _conv_bn(b, y, cin, cout, k, s))
    return b.model([helper.make_tensor_value_info("x", F32, [1, 3, hw, hw])], y), \
        {"x": b.rng.standard_normal((1, 3, hw, hw)).astype(np.float32)}


def effnet(c: int = 24, expand: int = 6, hw: int = 56) -> tuple[onnx.ModelProto, dict]:
    b = _B(2)
    e = c * expand
    y = _silu(b, _conv_bn(b, "x", c, e, 1))
    y = _silu(b, _conv_bn(b, y, e, e, 3, group=e))
    s = b.op("GlobalAveragePool", [y])
    w1 = b.c((b.rng.standard_normal((c // 4, e, 1, 1)) * 0.1).astype(np.float32))
    w2 = b.c((b.rng.standard_normal((e, c // 4, 1, 1)) * 0.1).astype(np.float32))
    s = _silu(b, b.op("Conv", [s, w1, b.c(np.zeros(c // 4, np.float32))]))
    s = b.op("Sigmoid", [b.op("Conv", [s, w2, b.c(np.zeros(e, np.float32))])])
    y = b.op("Mul", [y, s])
    y = _conv_bn(b, y, e, c, 1)
    b.op("Add", [y, "x"])
    return b.model([helper.make_tensor_value_info("x", F32, [1, c, hw, hw])], "y"), \
        {"x": b.rng.standard_normal((1, c, hw, hw)).astype(np.float32)}


def ffn(seq: int = 128, h: int = 384, ff: int = 1536) -> tuple[onnx.ModelProto, dict]:
    b = _B(3)

    def dense(x, cin, cout):
        w = b.c((b.rng.standard_normal((cin, cout)) * 0.05).astype(np.float32))
        return b.op("Add", [b.op("MatMul", [x, w]), b.c((b.rng.standard_normal(cout) * 0.02).astype(np.float32))])

    t = dense("x", h, ff)
    g = b.op("Erf", [b.op("Div", [t, b.c(np.float32(math.sqrt(2)))])])
    g = b.op("Mul", [b.op("Mul", [t, b.op("Add", [g, b.c(np.float32(1))])]), b.c(np.float32(0.5))])
    dense(g, ff, h)
    return b.model([helper.make_tensor_value_info("x", F32, [1, seq, h])], "y"), \
        {"x": b.rng.standard_normal((1, seq, h)).astype(np.float32)}


CASES = {"yolo": yolo, "effnet": effnet, "ffn": ffn}


def main(argv: list[str] | None = None) -> int:
    return pass_main(CASES, PASS, __doc__, argv, runs=10)


if __name__ == "__main__":
    raise SystemExit(main())
