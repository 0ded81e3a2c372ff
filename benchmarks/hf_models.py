"""Hugging Face ``transformers`` architectures with random weights, for benchmarks/optimized_exports.py.

onnxruntime's transformer optimizer recognizes the graph patterns of Hugging Face's model classes, so
these are those classes built from small configurations in code (nothing is downloaded) and exported
with both of PyTorch's exporters (``benchmarks.real.export``). They are not part of the timed real suite.
Each model takes its inputs at two sizes (``HFModel.lengths``: a sequence length, or for fixed-size
inputs such as images and mel frames, a batch size); the files are built on first use into
``benchmarks/.models/hf`` (not committed), named with the transformers version. Needs the ``bench`` extra
(torch, transformers). The extra pins transformers 4.46: the optimizer's T5 and Whisper fusions (Attention,
RelativePositionBias) match the graphs of transformers 4; on those of transformers 5 they fuse only the norms.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.real.export import EXPORTERS, export

GEN_VERSION = 1  # bump when a builder changes: cached files carry it in their name
CACHE = Path(__file__).resolve().parent / ".models" / "hf"
VOCAB, HIDDEN, HEADS, LAYERS, FFN = 100, 64, 4, 2, 128
Feeds = dict[str, np.ndarray]
TOKEN_IDS = dict(bos_token_id=0, pad_token_id=1, eos_token_id=2)  # inside the small vocabulary; ids drawn from 3 up


@dataclass(frozen=True)
class HFModel:
    """One architecture: ``make()`` a torch module (random weights, tensors in and out), ``feeds(rng, n)``
    its inputs at size ``n`` (one of ``lengths``), the dynamic dims of its inputs, and the optimizer's
    ``model_type`` (onnxruntime.transformers.optimizer.MODEL_TYPES)."""

    name: str
    model_type: str
    description: str
    make: Callable[[], object]
    feeds: Callable[[np.random.Generator, int], Feeds]
    dynamic: dict[str, dict[int, str]]
    outputs: tuple[str, ...]
    lengths: tuple[int, int] = (16, 7)


def _tokens(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    return rng.integers(3, VOCAB, size=(batch, n)).astype(np.int64)


def _mask(batch: int, n: int) -> np.ndarray:
    """Ones, with the last row padded (its final third masked): the padding path is exercised."""
    m = np.ones((batch, n), np.int64)
    m[-1, n - n // 3:] = 0
    return m


def _wrap(forward: Callable, module, names: list[str]) -> object:
    """A torch module whose forward is ``forward(module, *tensors)``: plain tensors in and out for export.
    Its signature names the inputs (torch.export matches dynamic shapes to parameters, not to ``*args``)."""
    import inspect

    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self, *args):
            return forward(self.m, *args)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    Wrapped.forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", kind)] + [inspect.Parameter(n, kind) for n in names])
    return Wrapped()


def _encoder(cls_name: str, config_name: str, pooled: bool, **cfg) -> Callable[[], object]:
    """A text encoder (RoBERTa, DistilBERT, CLIP text): (input_ids, attention_mask) -> hidden states[, pooled]."""

    def make():
        import transformers

        config = getattr(transformers, config_name)(vocab_size=VOCAB, attn_implementation="eager", **cfg)
        model = getattr(transformers, cls_name)(config)

        def forward(m, ids, mask):
            out = m(input_ids=ids, attention_mask=mask)
            return (out.last_hidden_state, out.pooler_output) if pooled else out.last_hidden_state

        return _wrap(forward, model, list(TEXT_DYNAMIC))

    return make


def _text_feeds(rng: np.random.Generator, n: int) -> Feeds:
    return {"input_ids": _tokens(rng, 2, n), "attention_mask": _mask(2, n)}


def _seq2seq(cls_name: str, config_name: str, **cfg) -> Callable[[], object]:
    """An encoder-decoder (T5, BART) run whole: (input_ids, attention_mask, decoder_input_ids) -> decoder states."""

    def make():
        import transformers

        model = getattr(transformers, cls_name)(getattr(transformers, config_name)(
            vocab_size=VOCAB, attn_implementation="eager", **cfg))

        def forward(m, ids, mask, dec):
            return m(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, use_cache=False).last_hidden_state

        return _wrap(forward, model, list(SEQ2SEQ_DYNAMIC))

    return make


def _seq2seq_feeds(rng: np.random.Generator, n: int) -> Feeds:
    return {**_text_feeds(rng, n), "decoder_input_ids": _tokens(rng, 2, max(1, n // 2))}


SEQ2SEQ_DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                   "decoder_input_ids": {0: "batch", 1: "dec_seq"}}
TEXT_DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}

# Whisper: mel frames are fixed by the model (2 x max_source_positions)
MELS, SOURCE = 16, 16


def _whisper_config():
    import transformers

    return transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=MELS, d_model=HIDDEN, encoder_layers=LAYERS,
                                      decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                                      decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
                                      max_source_positions=SOURCE, max_target_positions=64,
                                      attn_implementation="eager", decoder_start_token_id=0, **TOKEN_IDS)


def _whisper_encoder():
    import transformers

    model = transformers.WhisperModel(_whisper_config()).get_encoder()
    return _wrap(lambda m, x: m(input_features=x).last_hidden_state, model, ["input_features"])


def _whisper_decoder():
    """One decoding step with past key/values: (input_ids, encoder_hidden_states, then per layer the past
    self-attention K, V and cross-attention K, V) -> (hidden states, then per layer the present self K, V)."""
    import transformers

    model = transformers.WhisperModel(_whisper_config()).get_decoder()

    def forward(m, ids, enc, *past):
        layers = [tuple(past[4 * i: 4 * i + 4]) for i in range(LAYERS)]
        out = m(input_ids=ids, encoder_hidden_states=enc, past_key_values=_cache(layers), use_cache=True)
        return (out.last_hidden_state, *_self_attention_kv(out.past_key_values))

    return _wrap(forward, model, ["input_ids", "encoder_hidden_states", *_past_names()])


def _cache(layers: list[tuple]):
    """An EncoderDecoderCache of per-layer (self K, self V, cross K, cross V), in transformers 4 or 5."""
    from transformers.cache_utils import EncoderDecoderCache

    legacy = getattr(EncoderDecoderCache, "from_legacy_cache", None)
    return legacy(tuple(layers)) if legacy is not None else EncoderDecoderCache(layers)


def _self_attention_kv(cache) -> list:
    """The self-attention K, V of every layer of an EncoderDecoderCache, in transformers 4 or 5."""
    c = cache.self_attention_cache
    if hasattr(c, "layers"):
        return [t for layer in c.layers for t in (layer.keys, layer.values)]
    return [t for k, v in zip(c.key_cache, c.value_cache) for t in (k, v)]


def _past_names() -> list[str]:
    return [f"past_{kind}_{kv}_{i}" for i in range(LAYERS) for kind in ("self", "cross") for kv in ("key", "value")]


def _whisper_decoder_feeds(rng: np.random.Generator, n: int) -> Feeds:
    """``n`` past tokens, 3 new tokens (n odd: the exported size, as torch.export fixes dims of size 1) or 1
    (n even); the cross K/V cover the SOURCE encoder frames."""
    batch, head = 2, HIDDEN // HEADS
    feeds = {"input_ids": _tokens(rng, batch, 1 + 2 * (n % 2)),
             "encoder_hidden_states": rng.standard_normal((batch, SOURCE, HIDDEN)).astype(np.float32)}
    for name in _past_names():
        length = n if "_self_" in name else SOURCE
        feeds[name] = rng.standard_normal((batch, HEADS, length, head)).astype(np.float32)
    return feeds


def _whisper_decoder_dynamic() -> dict[str, dict[int, str]]:
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "encoder_hidden_states": {0: "batch", 1: "frames"}}
    for name in _past_names():
        dyn[name] = {0: "batch", 2: "past_seq" if "_self_" in name else "frames"}
    return dyn


def _clip_vision():
    import transformers

    config = transformers.CLIPVisionConfig(hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                                           num_attention_heads=HEADS, image_size=32, patch_size=8,
                                           attn_implementation="eager")
    model = transformers.CLIPVisionModel(config)
    return _wrap(lambda m, x: (lambda o: (o.last_hidden_state, o.pooler_output))(m(pixel_values=x)), model,
                 ["pixel_values"])


ENCODER_CFG = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN)
MODELS: dict[str, HFModel] = {m.name: m for m in [
    HFModel("roberta", "bert", "RoBERTa encoder: hidden 64, 2 layers, 4 heads",
            _encoder("RobertaModel", "RobertaConfig", False, **ENCODER_CFG), _text_feeds, TEXT_DYNAMIC,
            ("last_hidden_state",)),
    HFModel("distilbert", "bert", "DistilBERT encoder: dim 64, 2 layers, 4 heads",
            _encoder("DistilBertModel", "DistilBertConfig", False, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
                     hidden_dim=FFN), _text_feeds, TEXT_DYNAMIC, ("last_hidden_state",)),
    HFModel("clip_text", "clip", "CLIP text encoder (causal): hidden 64, 2 layers, 4 heads",
            _encoder("CLIPTextModel", "CLIPTextConfig", True, **ENCODER_CFG, **TOKEN_IDS), _text_feeds, TEXT_DYNAMIC,
            ("last_hidden_state", "pooler_output")),
    HFModel("clip_vision", "clip", "CLIP vision encoder: 32x32 images, patch 8, hidden 64, 2 layers; two batch sizes",
            _clip_vision, lambda rng, n: {"pixel_values": rng.standard_normal((n, 3, 32, 32)).astype(np.float32)},
            {"pixel_values": {0: "batch"}}, ("last_hidden_state", "pooler_output"), lengths=(2, 3)),
    HFModel("t5", "t5", "T5 encoder-decoder with relative position buckets: d_model 64, 2+2 layers, 4 heads",
            _seq2seq("T5Model", "T5Config", d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                     num_heads=HEADS), _seq2seq_feeds, SEQ2SEQ_DYNAMIC, ("last_hidden_state",)),
    HFModel("bart", "bart", "BART encoder-decoder: d_model 64, 2+2 layers, 4 heads",
            _seq2seq("BartModel", "BartConfig", d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                     encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                     decoder_ffn_dim=FFN), _seq2seq_feeds, SEQ2SEQ_DYNAMIC, ("last_hidden_state",)),
    HFModel("whisper_encoder", "bart", f"Whisper encoder: {MELS} mels x {2 * SOURCE} frames, d_model 64, "
            "2 layers; two batch sizes", _whisper_encoder,
            lambda rng, n: {"input_features": rng.standard_normal((n, MELS, 2 * SOURCE)).astype(np.float32)},
            {"input_features": {0: "batch"}}, ("last_hidden_state",), lengths=(2, 3)),
    HFModel("whisper_decoder", "bart", "Whisper decoder step: cross-attention, past self/cross key/values "
            "(past lengths 7 and 16)", _whisper_decoder, _whisper_decoder_feeds, _whisper_decoder_dynamic(),
            ("last_hidden_state",) + tuple(f"present_{kv}_{i}" for i in range(LAYERS) for kv in ("key", "value")),
            lengths=(7, 16)),
]}
NAMES = [f"{m}/{e}" for m in MODELS for e in EXPORTERS]


def model_path(name: str, cache: str | os.PathLike | None = None) -> Path:
    """The ONNX file of ``arch/exporter`` (one of ``NAMES``), built into ``cache`` on first use (atomic write)."""
    arch, _, exporter = name.partition("/")
    if arch not in MODELS or exporter not in EXPORTERS:
        raise KeyError(f"unknown Hugging Face model {name!r}; known: {', '.join(NAMES)}")
    import torch
    import transformers

    root = Path(cache) if cache is not None else CACHE
    path = root / f"{arch}-{exporter}-tf{transformers.__version__}-v{GEN_VERSION}.onnx"
    if path.exists():
        return path

    spec = MODELS[arch]
    torch.manual_seed(0)
    feeds = spec.feeds(np.random.default_rng(0), spec.lengths[0])
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    data = export(spec.make(), args, list(feeds), list(spec.outputs), spec.dynamic, exporter)
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def feed_sets(arch: str) -> list[Feeds]:
    """The inputs of ``arch`` at its two sizes (seeded)."""
    spec = MODELS[arch]
    return [spec.feeds(np.random.default_rng(i), n) for i, n in enumerate(spec.lengths)]
