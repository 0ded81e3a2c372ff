"""onnxc with precision="bf16" against onnxc float32: speed and the accuracy change of the outputs.

    python benchmarks/bf16_speed.py [--threads 1] [--runs 20] [--models resnet50,bert] [--json FILE] [--md FILE]

Models (random seeded weights, exported with torch's legacy exporter, benchmarks/real/export.py):
- ResNet-50 (bottleneck blocks 3-4-6-3, 224x224, batch-norm folded by onnxc), batch 1 and 4;
- the BERT-style encoder of the real suite (benchmarks/real/transformer.py: hidden 256, 4 layers, seq 64),
  batch 1 and 8.
Each model is compiled twice with the same thread count; the two are timed interleaved (one run of each in
turn, ``--runs`` pairs after a warm-up) and the medians reported, with their speedup fp32 / bf16. With one
thread the clock is the calling thread's CPU time (the model runs on it), so a machine shared with other
work lengthens nothing but the wall clock; with more threads it is the wall clock (``--clock`` overrides).
Accuracy, per output, of bf16 against fp32 on the same inputs: max relative error = max |y16 - y32| /
max |y32| and mean relative error = mean |y16 - y32| / mean |y32| (the worst over the outputs).
The bf16 kernel in use (avx512bf16 or portable) is printed; ONNXC_ISA caps it as for the other kernels.

What bounds the speedup (2-core Zen 4, 2026-11-27): VDPBF16PS does 32 multiply-adds per instruction where
VFMADD231PS does 16, so 2x is the ceiling of the products alone. The bf16 GEMM reaches 215-225 GFLOP/s on
one core with packed operands (onnxc's float32 GEMM about 100-110 in these models), and 150-210 in the
models' layers, where packing the activations, short K (64) and 7x7 maps (49 positions in 32-wide panels)
cost. ResNet-50's float32 build runs its 3x3 stride-1 convolutions on 56x56 and 28x28 maps with Winograd
F(4x4, 3x3) (4x fewer multiplies), as fast as the bf16 direct ones; Winograd on bf16 operands would err
by about 5% (max) of a layer's output in a numpy simulation, so bf16 keeps the direct product. Elementwise
ops, normalizations, attention's activation products and batch-4 activations that leave the cache stay
float32-speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import onnxc  # noqa: E402
from benchmarks.real.common import images, seeded  # noqa: E402
from benchmarks.real.export import export  # noqa: E402
from benchmarks.real.transformer import BERT_SEQ, BERT_VOCAB, bert  # noqa: E402
from onnxc.codegen.kernels.bf16 import cpu_flags  # noqa: E402

MODELS = ("resnet50", "bert")


def resnet50():
    """ResNet-50: the stem, bottleneck stages of 3, 4, 6, 3 blocks (expansion 4), average pool, FC."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            cout = 4 * width
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


def _bert_feeds(rng: np.random.Generator, b: int) -> dict[str, np.ndarray]:
    ids = rng.integers(0, BERT_VOCAB, (b, BERT_SEQ)).astype(np.int64)
    mask = np.ones((b, BERT_SEQ), np.int64)
    mask[:, BERT_SEQ - BERT_SEQ // 8:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def build(name: str) -> tuple[bytes, object, tuple[int, ...]]:
    """(ONNX bytes, feeds(rng, batch), batch sizes) of a model."""
    import torch

    if name == "resnet50":
        feeds = images("input", 224)
        args = (torch.from_numpy(feeds(np.random.default_rng(0), 2)["input"]),)
        onnx_bytes = export(seeded(resnet50), args, ["input"], ["output"], {"input": {0: "batch"}}, "legacy")
        return onnx_bytes, feeds, (1, 4)
    if name == "bert":
        f = _bert_feeds(np.random.default_rng(0), 2)
        args = tuple(torch.from_numpy(v) for v in f.values())
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        onnx_bytes = export(seeded(bert), args, list(f), ["last_hidden_state", "pooler_output"], dyn, "legacy")
        return onnx_bytes, _bert_feeds, (1, 8)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def errors(ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> tuple[float, float]:
    """(max, mean) relative error of ``got`` against ``ref``, the worst over the outputs (see the top)."""
    mx = mean = 0.0
    for k, r in ref.items():
        r, d = r.astype(np.float64), np.abs(got[k].astype(np.float64) - r.astype(np.float64))
        mx = max(mx, float(d.max() / max(np.abs(r).max(), 1e-30)))
        mean = max(mean, float(d.mean() / max(np.abs(r).mean(), 1e-30)))
    return mx, mean


def interleaved(fns: list, runs: int, clock=time.perf_counter) -> list[float]:
    """Median seconds of each function, timed in turn ``runs`` times after one warm-up call each."""
    for f in fns:
        f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for f, t in zip(fns, times):
            t0 = clock()
            f()
            t.append(clock() - t0)
    return [statistics.median(t) for t in times]


def measure(name: str, threads: int, runs: int, clock: str) -> list[dict]:
    onnx_bytes, feeds, sizes = build(name)
    m32 = onnxc.compile(onnx_bytes, threads=threads, quiet=True)
    m16 = onnxc.compile(onnx_bytes, threads=threads, quiet=True, precision="bf16")
    rows = []
    for batch in sizes:
        x = feeds(np.random.default_rng(1), batch)
        y32, y16 = m32.run(x), m16.run(x)
        emax, emean = errors(y32, y16)
        t32, t16 = interleaved([partial(m32.run, x), partial(m16.run, x)], runs,
                               time.thread_time if clock == "cpu" else time.perf_counter)
        rows.append({"model": name, "batch": batch, "threads": threads, "clock": clock, "fp32_ms": t32 * 1e3,
                     "bf16_ms": t16 * 1e3,
                     "speedup": t32 / t16, "max_rel_err": emax, "mean_rel_err": emean})
        r = rows[-1]
        print(f"{name:<9} {batch:>5} {r['fp32_ms']:>9.2f} {r['bf16_ms']:>9.2f} {r['speedup']:>8.2f} "
              f"{emax:>12.2e} {emean:>12.2e}", flush=True)
    return rows


def kernel_note() -> str:
    """Which bf16 micro-kernel the models run: from the CPU's flags and the ONNXC_ISA cap (onnxc_isa.h)."""
    flags = cpu_flags() or set()
    cap = os.environ.get("ONNXC_ISA", "")
    fast = "avx512_bf16" in flags and cap in ("", "avx512bf16")
    return f"bf16 kernel: {'avx512bf16 (VDPBF16PS)' if fast else 'portable C'}" + (f", ONNXC_ISA={cap}" if cap else "")


def markdown(rows: list[dict], note: str) -> str:
    """The rows as a Markdown table (generated by this script's --md; not edited by hand)."""
    lines = ["<!-- generated by benchmarks/bf16_speed.py --md; do not edit -->", "",
             f"onnxc float32 against precision=\"bf16\", {rows[0]['threads'] if rows else 1} thread(s); {note}. "
             "Medians of interleaved runs; errors of the bf16 outputs against the float32 ones "
             "(max |d| / max |y|, mean |d| / mean |y|, worst output).", "",
             "| model | batch | fp32 ms | bf16 ms | speedup | max rel err | mean rel err |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['batch']} | {r['fp32_ms']:.2f} | {r['bf16_ms']:.2f} | {r['speedup']:.2f}x | "
              f"{r['max_rel_err']:.2e} | {r['mean_rel_err']:.2e} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads of both builds (default 1)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs of each build per batch size (default 20)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--clock", choices=("cpu", "wall"), help="cpu: the calling thread's CPU time (default with "
                    "one thread), wall: elapsed time (default with more)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--md", metavar="FILE", help="also write the table as Markdown")
    args = ap.parse_args(argv)
    clock = args.clock or ("cpu" if args.threads == 1 else "wall")
    note = f"{kernel_note()}; clock: {'calling thread CPU time' if clock == 'cpu' else 'wall'}"
    print(note)
    print(f"{'model':<9} {'batch':>5} {'fp32 ms':>9} {'bf16 ms':>9} {'speedup':>8} {'max rel err':>12} "
          f"{'mean rel err':>12}")
    rows = [r for name in args.models.split(",") for r in measure(name.strip(), args.threads, args.runs, clock)]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(rows, note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
