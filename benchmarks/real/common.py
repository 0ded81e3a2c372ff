"""Building blocks shared by the model families: a model entry, seeded weights, torch exports.

A ``RealModel`` says how to build its ONNX bytes (seeded: the same bytes on every machine with the same
exporter versions) and how to make inputs at a given batch size. Torch models are exported twice, once
per exporter (``export.EXPORTERS``), by ``torch_models``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmarks.real.export import EXPORTERS, export

FAMILIES = ("CNN", "mobile CNN", "detector", "transformer encoder", "decoder", "RNN", "classic ML")


@dataclass(frozen=True)
class RealModel:
    """One model of the real suite: ``build()`` gives ONNX bytes, ``feeds(rng, batch)`` its inputs."""

    name: str
    family: str
    source: str  # the exporter: "torch legacy", "torch dynamo", "skl2onnx"
    description: str
    build: Callable[[], bytes]
    feeds: Callable[[np.random.Generator, int], dict[str, np.ndarray]]
    sizes: tuple[int, ...] = (1, 4)


@dataclass(frozen=True)
class TorchSpec:
    """A torch architecture: its module factory, example inputs and dynamic dims (``export.export``)."""

    name: str
    family: str
    description: str
    make: Callable[[], object]  # () -> torch.nn.Module, random weights
    feeds: Callable[[np.random.Generator, int], dict[str, np.ndarray]]
    dynamic: dict[str, dict[int, str]]
    outputs: tuple[str, ...] = ("output",)
    sizes: tuple[int, ...] = (1, 4)


def seeded(make: Callable[[], object], seed: int = 0) -> object:
    """``make()`` under a fixed torch seed, in eval mode, with batch-norm statistics made non-trivial
    (so folding them is real work and a wrong fold shows in the outputs)."""
    import torch

    torch.manual_seed(seed)
    m = make()
    g = torch.Generator().manual_seed(seed + 1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            c = mod.num_features
            mod.running_mean.copy_(0.1 * torch.randn(c, generator=g))
            mod.running_var.copy_(0.5 + torch.rand(c, generator=g))
            mod.weight.data.copy_(0.8 + 0.4 * torch.rand(c, generator=g))
            mod.bias.data.copy_(0.1 * torch.randn(c, generator=g))
    return m.eval()


def _exported(spec: TorchSpec, exporter: str) -> Callable[[], bytes]:
    def build() -> bytes:
        import torch

        # traced at batch 2: torch.export specializes dims whose example size is 0 or 1 (an LSTM's initial
        # state then fixes the batch to 1), whatever the dynamic_shapes say
        feeds = spec.feeds(np.random.default_rng(0), 2)
        args = tuple(torch.from_numpy(v) for v in feeds.values())
        return export(seeded(spec.make), args, list(feeds), list(spec.outputs), spec.dynamic, exporter)

    return build


def torch_models(specs: list[TorchSpec]) -> list[RealModel]:
    """Each architecture once per exporter, named ``arch/exporter``."""
    return [RealModel(f"{s.name}/{e}", s.family, f"torch {e}", s.description, _exported(s, e), s.feeds, s.sizes)
            for s in specs for e in EXPORTERS]


def images(name: str, size: int, channels: int = 3) -> Callable[[np.random.Generator, int], dict[str, np.ndarray]]:
    """Inputs: one NCHW float image batch."""
    return lambda rng, b: {name: rng.standard_normal((b, channels, size, size), dtype=np.float32)}


def tokens(vocab: int, seq: int, mask: bool = False) -> Callable[[np.random.Generator, int], dict[str, np.ndarray]]:
    """Inputs: int64 token ids (and a 0/1 attention mask with a padded tail)."""
    def feeds(rng: np.random.Generator, b: int) -> dict[str, np.ndarray]:
        d = {"input_ids": rng.integers(0, vocab, (b, seq)).astype(np.int64)}
        if mask:
            m = np.ones((b, seq), np.int64)
            m[:, seq - seq // 8:] = 0
            d["attention_mask"] = m
        return d

    return feeds
