"""Quantizing a float ONNX model with onnxruntime.quantization, one function per format.

Every method first runs onnxruntime's ``quant_pre_process`` (symbolic shape inference and its basic
graph optimizations, as onnxruntime's docs recommend before quantizing), then:

- ``qdq``: ``quantize_static``, QuantFormat.QDQ, per-channel weights, the default int8 types, MinMax
  calibration on the given inputs (QuantizeLinear / DequantizeLinear pairs around float ops);
- ``qoperator``: the same calibration as QuantFormat.QOperator (QLinearConv, QLinearMatMul and the
  com.microsoft QLinearAdd / QGemm / QLinearGlobalAveragePool ...), per-channel weights;
- ``dynamic``: ``quantize_dynamic`` with its defaults (int8 weights; activations quantized at run time
  by DynamicQuantizeLinear feeding MatMulInteger / ConvInteger);
- ``nbits4``: ``MatMulNBitsQuantizer`` with ``DefaultWeightOnlyQuantConfig``: 4-bit symmetric weights in
  blocks of 32 along K (com.microsoft MatMulNBits; needs the ``onnx-ir`` package).

The functions take plain paths and calibration feeds, so the suite's test quantizes a model made with
the onnx helper through the very same code.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

FORMATS = {"qdq": "static QDQ", "qoperator": "static QOperator", "dynamic": "dynamic int8",
           "nbits4": "MatMulNBits 4-bit"}
CALIBRATION_SAMPLES = 8
NBITS_BLOCK = 32


def calibration(feeds: Callable[[np.random.Generator, int], dict[str, np.ndarray]], n: int = CALIBRATION_SAMPLES,
                seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``n`` batch-1 inputs from the model's own ``feeds`` under a fixed seed."""
    rng = np.random.default_rng(seed)
    return [feeds(rng, 1) for _ in range(n)]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The quantizers log every node at INFO (and warn that QOperator is slow on x64): silence them."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def _reader(calib: list[dict[str, np.ndarray]]):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    return Reader()


def _static(src: Path, dst: Path, calib: list[dict[str, np.ndarray]], fmt: str) -> None:
    from onnxruntime.quantization import QuantFormat, quantize_static

    qf = QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator
    quantize_static(str(src), str(dst), _reader(calib), quant_format=qf, per_channel=True)


def _dynamic(src: Path, dst: Path, calib: list[dict[str, np.ndarray]]) -> None:
    from onnxruntime.quantization import quantize_dynamic

    quantize_dynamic(str(src), str(dst))


def _nbits4(src: Path, dst: Path, calib: list[dict[str, np.ndarray]]) -> None:
    import onnx
    from onnxruntime.quantization import matmul_nbits_quantizer as mnq  # imports onnx_ir

    cfg = mnq.DefaultWeightOnlyQuantConfig(block_size=NBITS_BLOCK, is_symmetric=True, bits=4)
    q = mnq.MatMulNBitsQuantizer(onnx.load(str(src)), algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(dst), False)


_METHODS = {"qdq": lambda s, d, c: _static(s, d, c, "qdq"), "qoperator": lambda s, d, c: _static(s, d, c, "qop"),
            "dynamic": _dynamic, "nbits4": _nbits4}


def quantize(method: str, src: str | Path, dst: str | Path, calib: list[dict[str, np.ndarray]]) -> Path:
    """Write ``src`` quantized with ``method`` (a key of FORMATS) to ``dst``, after quant_pre_process."""
    if method not in _METHODS:
        raise ValueError(f"unknown quantization method {method!r}; expected one of {', '.join(_METHODS)}")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with _quiet(), tempfile.TemporaryDirectory(prefix="onnxc-quant-") as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(src), str(pre))
        _METHODS[method](pre, Path(dst), calib)
    return Path(dst)
