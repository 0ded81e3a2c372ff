"""Transformer encoder family: ViT-tiny, a BERT-style text encoder and a Conformer-style audio encoder.
Attention is written out (MatMul, Softmax) as eager Hugging Face models do, except ViT, which uses
``scaled_dot_product_attention`` as newer models do."""

from __future__ import annotations

import math

import numpy as np

from benchmarks.real.common import TorchSpec, images, tokens

BERT_VOCAB, BERT_SEQ = 8000, 64


def _mha(dim: int, heads: int):
    from torch import nn

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
            self.h, self.d = heads, dim // heads

        def forward(self, x, bias=None):
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, self.h, self.d).transpose(1, 2)  # noqa: E731
            s = split(self.q(x)) @ split(self.k(x)).transpose(-1, -2) / math.sqrt(self.d)
            if bias is not None:
                s = s + bias
            ctx = (s.softmax(-1) @ split(self.v(x))).transpose(1, 2).reshape(b, t, self.h * self.d)
            return self.o(ctx)

    return MHA()


def bert():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, h: int, heads: int, ff: int):
            super().__init__()
            self.att, self.ln1, self.ln2 = _mha(h, heads), nn.LayerNorm(h), nn.LayerNorm(h)
            self.ff = nn.Sequential(nn.Linear(h, ff), nn.GELU(), nn.Linear(ff, h))

        def forward(self, x, bias):
            x = self.ln1(x + self.att(x, bias))
            return self.ln2(x + self.ff(x))

    class Bert(nn.Module):
        def __init__(self, h: int = 256, layers: int = 4, heads: int = 4):
            super().__init__()
            self.tok, self.pos, self.typ = nn.Embedding(BERT_VOCAB, h), nn.Embedding(512, h), nn.Embedding(2, h)
            self.ln = nn.LayerNorm(h)
            self.layers = nn.ModuleList(Layer(h, heads, 4 * h) for _ in range(layers))
            self.pool = nn.Linear(h, h)

        def forward(self, input_ids, attention_mask):
            pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids)))
            bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            for layer in self.layers:
                x = layer(x, bias)
            return x, torch.tanh(self.pool(x[:, 0]))

    return Bert()


def vit():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int, heads: int):
            super().__init__()
            self.n1, self.n2, self.qkv, self.proj = nn.LayerNorm(d), nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.h = heads

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            a = nn.functional.scaled_dot_product_attention(q, k, v)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.n2(x))

    class ViT(nn.Module):
        def __init__(self, d: int = 192, depth: int = 12, heads: int = 3, patch: int = 16, image: int = 224):
            super().__init__()
            self.patch = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
            self.pos = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, d))
            self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(depth)))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    return ViT()


def conformer():
    """Conv subsampling (two stride-2 Conv2d), then Conformer blocks: half FFN, self-attention, conv
    module (pointwise, GLU, depthwise, BatchNorm, SiLU, pointwise), half FFN, LayerNorm."""
    from torch import nn

    class ConvModule(nn.Module):
        def __init__(self, d: int, k: int = 15):
            super().__init__()
            self.ln, self.pw1, self.dw = nn.LayerNorm(d), nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, k, padding=k // 2, groups=d)
            self.bn, self.pw2 = nn.BatchNorm1d(d), nn.Conv1d(d, d, 1)

        def forward(self, x):
            y = nn.functional.glu(self.pw1(self.ln(x).transpose(1, 2)), dim=1)
            return x + self.pw2(nn.functional.silu(self.bn(self.dw(y)))).transpose(1, 2)

    def ffn(d: int):
        return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))

    class Block(nn.Module):
        def __init__(self, d: int, heads: int):
            super().__init__()
            self.ff1, self.ff2, self.ln_att, self.att = ffn(d), ffn(d), nn.LayerNorm(d), _mha(d, heads)
            self.conv, self.ln = ConvModule(d), nn.LayerNorm(d)

        def forward(self, x):
            x = x + 0.5 * self.ff1(x)
            x = x + self.att(self.ln_att(x))
            x = self.conv(x)
            return self.ln(x + 0.5 * self.ff2(x))

    class Conformer(nn.Module):
        def __init__(self, mels: int = 80, d: int = 144, layers: int = 4, heads: int = 4):
            super().__init__()
            self.sub = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
            self.proj = nn.Linear(d * (((mels - 1) // 2 - 1) // 2), d)
            self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))

        def forward(self, features):
            x = self.sub(features.unsqueeze(1))
            b, c, t, f = x.shape
            return self.blocks(self.proj(x.transpose(1, 2).reshape(b, t, c * f)))

    return Conformer()


def _mels(frames: int):
    return lambda rng, b: {"features": rng.standard_normal((b, frames, 80), dtype=np.float32)}


SPECS = [
    TorchSpec("vit_tiny", "transformer encoder", "ViT-tiny: 224x224, patch 16, dim 192, 12 layers, 3 heads, SDPA",
              vit, images("input", 224), {"input": {0: "batch"}}),
    TorchSpec("bert", "transformer encoder", "BERT-style encoder: hidden 256, 4 layers, 4 heads, seq 64",
              bert, tokens(BERT_VOCAB, BERT_SEQ, mask=True),
              {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
              outputs=("last_hidden_state", "pooler_output"), sizes=(1, 8)),
    TorchSpec("conformer", "transformer encoder", "Conformer-style audio encoder: 80 mels x 400 frames, conv "
              "subsampling x4, dim 144, 4 blocks", conformer, _mels(400), {"features": {0: "batch", 1: "frames"}}),
]
