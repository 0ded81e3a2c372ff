"""The real-model suite of issue #16: architectures people deploy, exported by the tools they use.

PyTorch models (random weights, written here in plain ``torch.nn``) are exported with both of
PyTorch's exporters; scikit-learn pipelines go through skl2onnx. Nothing is downloaded: every model is
built on first use into ``benchmarks/.models/real`` (not committed). ``MODELS`` lists them in family
order; ``model_path(name)`` builds one and returns its file. Building needs the ``bench`` extra
(torch, scikit-learn, skl2onnx); a model whose tools are missing fails to build with ImportError.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.real import classic, cnn, decoder, detector, mobile, rnn, transformer
from benchmarks.real.common import FAMILIES, RealModel, torch_models

GEN_VERSION = 2  # bump when a builder changes: cached files carry it in their name
CACHE = Path(__file__).resolve().parent.parent / ".models" / "real"

MODELS: dict[str, RealModel] = {
    m.name: m
    for m in sorted(torch_models(cnn.SPECS + mobile.SPECS + detector.SPECS + transformer.SPECS + decoder.SPECS
                                 + rnn.SPECS) + classic.MODELS, key=lambda m: FAMILIES.index(m.family))
}


def model_path(name: str, cache: str | os.PathLike | None = None) -> Path:
    """The ONNX file of real-suite model ``name``, built into ``cache`` on first use (atomic write)."""
    if name not in MODELS:
        raise KeyError(f"unknown real-suite model {name!r}; known: {', '.join(MODELS)}")
    root = Path(cache) if cache is not None else CACHE
    path = root / f"{name.replace('/', '-')}-v{GEN_VERSION}.onnx"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    data = MODELS[name].build()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
