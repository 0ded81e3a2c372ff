"""RNN family: sequence taggers (embedding, bidirectional LSTM or GRU, linear over the tags per token)."""

from __future__ import annotations

from benchmarks.real.common import TorchSpec, tokens

VOCAB, SEQ, TAGS = 5000, 64, 20


def tagger(cell: str):
    def make():
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self, d: int = 128, hidden: int = 128):
                super().__init__()
                self.emb = nn.Embedding(VOCAB, d)
                self.rnn = getattr(nn, cell)(d, hidden, num_layers=1, batch_first=True, bidirectional=True)
                self.out = nn.Linear(2 * hidden, TAGS)

            def forward(self, input_ids):
                y, _ = self.rnn(self.emb(input_ids))
                return self.out(y)

        return Tagger()

    return make


SPECS = [
    TorchSpec(f"{cell.lower()}_tagger", "RNN", f"{cell} tagger: embedding 128, bidirectional {cell} hidden 128, "
              f"{TAGS} tags, seq {SEQ}", tagger(cell), tokens(VOCAB, SEQ), {"input_ids": {0: "batch", 1: "seq"}},
              sizes=(1, 8))
    for cell in ("LSTM", "GRU")
]
