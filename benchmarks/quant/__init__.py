"""The quantized-model suite's models (issue #17): real-suite float models quantized by onnxruntime.

Each ``QuantVariant`` is one float model of ``benchmarks/real`` (``source``) run through one of
onnxruntime's quantizers (``method``, see ``benchmarks/quant/build.py``): the CNNs as static QDQ,
static QOperator and dynamic int8; BERT as dynamic int8 and static QDQ; the Llama-style decoder as
4-bit MatMulNBits weights and dynamic int8. ``quantized_path(name)`` builds a variant on first use
into ``benchmarks/.models/quant`` (not committed), calibrated on a few seeded random inputs of the
source model's own ``feeds``; nothing is downloaded.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.quant.build import FORMATS, calibration, quantize

QUANT_GEN = 1  # bump when a builder changes: cached files carry it in their name
CACHE = Path(__file__).resolve().parent.parent / ".models" / "quant"


@dataclass(frozen=True)
class QuantVariant:
    """One quantized model: ``source`` (a real-suite model) quantized with ``method``."""

    name: str
    family: str
    source: str
    method: str  # a key of build.FORMATS
    feeds: Callable[[np.random.Generator, int], dict[str, np.ndarray]]
    sizes: tuple[int, ...] = (1, 4)
    classifier: bool = False  # its first output is [batch, classes] logits: top-1 agreement is measured

    @property
    def fmt(self) -> str:
        return FORMATS[self.method]


_PLAN = (  # (short name, family, real-suite source, classifier, methods)
    ("resnet18", "CNN", "resnet18/legacy", True, ("qdq", "qoperator", "dynamic")),
    ("mobilenet_v2", "CNN", "mobilenet_v2/legacy", True, ("qdq", "qoperator", "dynamic")),
    ("bert", "transformer encoder", "bert/legacy", False, ("dynamic", "qdq")),
    ("llama", "decoder", "llama/legacy", False, ("nbits4", "dynamic")),
)


def _variants() -> dict[str, QuantVariant]:
    from benchmarks.real import MODELS as REAL  # torch-free until a model is built

    out = {}
    for short, family, source, classifier, methods in _PLAN:
        real = REAL[source]
        for method in methods:
            name = f"{short}/{method}"
            out[name] = QuantVariant(name, family, source, method, real.feeds, real.sizes, classifier)
    return out


VARIANTS: dict[str, QuantVariant] = _variants()


def float_path(name: str) -> Path:
    """The float ONNX file variant ``name`` is quantized from (built by benchmarks.real on first use)."""
    from benchmarks.real import model_path

    return model_path(VARIANTS[name].source)


def quantized_path(name: str, cache: str | os.PathLike | None = None) -> Path:
    """The quantized ONNX file of variant ``name``, built into ``cache`` on first use (atomic write)."""
    if name not in VARIANTS:
        raise KeyError(f"unknown quant-suite model {name!r}; known: {', '.join(VARIANTS)}")
    v = VARIANTS[name]
    src = float_path(name)
    root = Path(cache) if cache is not None else CACHE
    path = root / f"{src.stem}-{v.method}-q{QUANT_GEN}.onnx"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".quant-", dir=root) as tmp:
        out = Path(tmp) / path.name
        quantize(v.method, src, out, calibration(v.feeds))
        os.replace(out, path)
    return path
