"""Benchmark of a weight-only int8 word-embedding table (MiniLM-like): onnxc before / after
passes/fold_weight_dequant.py against onnxruntime, interleaved medians in one process.

    python -m benchmarks.int8_embedding [--cases a,b] [--seconds S] [--threads N] [--cpu]

Every case is a 30522 x 384 table (MiniLM's vocabulary and hidden size) stored narrow, dequantized
by standard ops, read by a Gather of token ids [1, 128], then LayerNormalization over the hidden axis:

- ``cast_mul``: int8 table -> Cast -> Mul(per-tensor scale) (what some exporters write);
- ``cast_sub_mul``: uint8 table -> Cast -> Sub(zero point per row [30522, 1]) -> Mul(scale per row);
- ``dq_axis``: DequantizeLinear(int8 table, scale per hidden channel [384], axis 1).

Prints per case: onnxruntime ms, onnxc ms without the pass ("before": the whole table is converted to
float on every call), onnxc ms with it ("after": 128 narrow rows are gathered, then dequantized), both
ratios to onnxruntime, and the largest relative error of "after" against onnxruntime.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from benchmarks.micro_fusion import _B, pass_main  # noqa: E402

PASS = "fold_weight_dequant"
VOCAB, HIDDEN, SEQ = 30522, 384, 128


def _embedding(b: _B, table: str) -> tuple[onnx.ModelProto, dict]:
    """Gather(table, ids) -> LayerNormalization; ids [1, SEQ] int64."""
    g = b.op("Gather", [table, "ids"])
    ln = [b.c(np.ones(HIDDEN, np.float32)), b.c(np.zeros(HIDDEN, np.float32))]
    b.op("LayerNormalization", [g, *ln], axis=-1, epsilon=1e-12)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, SEQ])
    m = b.model([ids], "y", opset=21)
    return m, {"ids": b.rng.integers(0, VOCAB, (1, SEQ)).astype(np.int64)}


def _table(b: _B, dt) -> str:
    info = np.iinfo(dt)
    return b.c(b.rng.integers(info.min, info.max + 1, (VOCAB, HIDDEN)).astype(dt))


def cast_mul() -> tuple[onnx.ModelProto, dict]:
    b = _B(1)
    x = b.op("Cast", [_table(b, np.int8)], to=TensorProto.FLOAT)
    return _embedding(b, b.op("Mul", [x, b.c(np.float32(0.02))]))


def cast_sub_mul() -> tuple[onnx.ModelProto, dict]:
    b = _B(2)
    x = b.op("Cast", [_table(b, np.uint8)], to=TensorProto.FLOAT)
    zp = b.rng.integers(100, 156, (VOCAB, 1)).astype(np.float32)
    x = b.op("Sub", [x, b.c(zp)])
    return _embedding(b, b.op("Mul", [x, b.c(b.rng.uniform(0.01, 0.03, (VOCAB, 1)).astype(np.float32))]))


def dq_axis() -> tuple[onnx.ModelProto, dict]:
    b = _B(3)
    s = b.c(b.rng.uniform(0.01, 0.03, HIDDEN).astype(np.float32))
    return _embedding(b, b.op("DequantizeLinear", [_table(b, np.int8), s], axis=1))


CASES = {"cast_mul": cast_mul, "cast_sub_mul": cast_sub_mul, "dq_axis": dq_axis}


def main(argv: list[str] | None = None) -> int:
    return pass_main(CASES, PASS, __doc__, argv, runs=20)


if __name__ == "__main__":
    raise SystemExit(main())
