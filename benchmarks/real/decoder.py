"""Decoder family: a GPT-2-style and a Llama-style decoder (RMSNorm, rotary embeddings, SwiGLU, grouped
KV heads), small, random weights, one full-sequence forward pass (prefill) with a causal mask."""

from __future__ import annotations

import math

from benchmarks.real.common import TorchSpec, tokens

VOCAB, SEQ = 8000, 64


def _causal(t: int):
    import torch

    return torch.full((t, t), float("-inf")).triu(1)


def gpt2():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int, heads: int):
            super().__init__()
            self.ln1, self.ln2, self.attn, self.proj = nn.LayerNorm(d), nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out, self.h = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), heads

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (y.view(b, t, self.h, d // self.h).transpose(1, 2) for y in self.attn(self.ln1(x)).split(d, 2))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.h) + _causal(t)
            x = x + self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self, d: int = 256, layers: int = 4, heads: int = 4):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(1024, d)
            self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))
            self.ln = nn.LayerNorm(d)

        def forward(self, input_ids):
            x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1]).unsqueeze(0))
            return self.ln(self.blocks(x)) @ self.wte.weight.t()

    return GPT2()


def llama():
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.w = nn.Parameter(1 + 0.1 * torch.randn(d))

        def forward(self, x):
            return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rotate(x, cos, sin):
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, kv: int, ff: int):
            super().__init__()
            self.hd, self.h, self.kv = d // heads, heads, kv
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, kv * self.hd, bias=False)
            self.v, self.o = nn.Linear(d, kv * self.hd, bias=False), nn.Linear(d, d, bias=False)
            self.gate, self.up, self.down = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

        def forward(self, x, cos, sin):
            b, t, d = x.shape
            y = self.n1(x)
            q = rotate(self.q(y).view(b, t, self.h, self.hd).transpose(1, 2), cos, sin)
            k = rotate(self.k(y).view(b, t, self.kv, self.hd).transpose(1, 2), cos, sin)
            v = self.v(y).view(b, t, self.kv, self.hd).transpose(1, 2)
            k, v = k.repeat_interleave(self.h // self.kv, 1), v.repeat_interleave(self.h // self.kv, 1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + _causal(t)
            x = x + self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
            y = self.n2(x)
            return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))

    class Llama(nn.Module):
        def __init__(self, d: int = 256, layers: int = 4, heads: int = 8, kv: int = 2, ff: int = 688):
            super().__init__()
            self.emb, self.norm, self.lm = nn.Embedding(VOCAB, d), RMSNorm(d), nn.Linear(d, VOCAB, bias=False)
            self.blocks = nn.ModuleList(Block(d, heads, kv, ff) for _ in range(layers))
            inv = 1.0 / 10000 ** (torch.arange(0, d // heads, 2).float() / (d // heads))
            self.register_buffer("inv", inv, persistent=False)

        def forward(self, input_ids):
            pos = torch.arange(input_ids.shape[1]).float()
            ang = torch.outer(pos, self.inv)
            ang = torch.cat([ang, ang], -1)
            cos, sin = ang.cos(), ang.sin()
            x = self.emb(input_ids)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.lm(self.norm(x))

    return Llama()


SPECS = [
    TorchSpec("gpt2", "decoder", "GPT-2-style decoder: dim 256, 4 layers, 4 heads, vocab 8000, seq 64, tied head",
              gpt2, tokens(VOCAB, SEQ), {"input_ids": {0: "batch", 1: "seq"}}, outputs=("logits",)),
    TorchSpec("llama", "decoder", "Llama-style decoder: dim 256, 4 layers, 8 heads / 2 KV heads, RMSNorm, rotary, "
              "SwiGLU 688, vocab 8000, seq 64", llama, tokens(VOCAB, SEQ), {"input_ids": {0: "batch", 1: "seq"}},
              outputs=("logits",)),
]
