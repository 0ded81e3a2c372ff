"""Benchmark of a weight-only int8 sentence encoder (MiniLM-like) against onnxruntime and against onnxc's
float32 build of the same encoder (issue #21: "weight-only int8 and int4 patterns in standard ops").

    python -m benchmarks.int8_weights_encoder [--layers 6] [--seq 128] [--threads 1] [--seconds S]

The float encoder is built in code: a word-embedding table of MiniLM's vocabulary (30522 x 384) read by
Gather of token ids, plus position embeddings and LayerNormalization, then ``--layers`` BERT-style layers
(hidden 384, 12 heads, feed-forward 1536; benchmarks/micro_fusion.py ``encoder_layer``). Its int8 twin
stores every weight of 4096 entries or more as int8, dequantized by standard ops as some exporters write
it: ``Cast(int8 -> float) -> Mul(scale)``, the scale per output column for MatMul weights and per tensor
for the embedding table (symmetric, round to nearest).

Prints, per model, onnxc and onnxruntime medians (interleaved in one process, benchmarks/run.py
``bench_one``), their ratio and the largest relative output error, then the two figures the issue asks
for: int8 onnxc / int8 onnxruntime (target at most 0.8) and int8 onnxc / float onnxc (at most 1.0), the
latter from the two onnxc builds timed in turns in one process.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxc  # noqa: E402
from benchmarks.micro_fusion import _B, F32, encoder_layer  # noqa: E402
from benchmarks.run import bench_one  # noqa: E402
from onnxc.bench import Budget, interleaved, summary  # noqa: E402

VOCAB, HIDDEN, HEADS, FF = 30522, 384, 12, 1536
MIN_ENTRIES = 4096  # weights at least this large are stored as int8


def float_encoder(layers: int, seq: int) -> tuple[onnx.ModelProto, dict]:
    b = _B(7)
    table = b.c((b.rng.standard_normal((VOCAB, HIDDEN)) * 0.05).astype(np.float32))
    pos = b.c((b.rng.standard_normal((1, seq, HIDDEN)) * 0.05).astype(np.float32))
    x = b.op("Add", [b.op("Gather", [table, "ids"]), pos])
    x = b.op("LayerNormalization", [x, b.c(np.ones(HIDDEN, np.float32)), b.c(np.zeros(HIDDEN, np.float32))],
             axis=-1, epsilon=1e-12)
    for _ in range(layers):
        x = encoder_layer(b, x, "mask", HIDDEN, HEADS, FF)
    m = b.model([helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq]),
                 helper.make_tensor_value_info("mask", F32, [1, 1, 1, seq])], "y")
    mask = np.zeros((1, 1, 1, seq), np.float32)
    mask[..., seq - seq // 8:] = -10000.0
    return m, {"ids": b.rng.integers(0, VOCAB, (1, seq)).astype(np.int64), "mask": mask}


def int8_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float initializer of MIN_ENTRIES entries or more read by a MatMul (as B) or a
    Gather (as data) stored as int8 and dequantized by Cast -> Mul."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    readers = {(i, n.op_type) for n in g.node for i in n.input[:2]}
    out, nodes = [], []
    for init in g.initializer:
        w = numpy_helper.to_array(init)
        kind = "MatMul" if (init.name, "MatMul") in readers else "Gather" if (init.name, "Gather") in readers else None
        if kind is None or w.dtype != np.float32 or w.size < MIN_ENTRIES:
            out.append(init)
            continue
        amax = np.abs(w).max(axis=0, keepdims=True) if kind == "MatMul" and w.ndim == 2 else np.abs(w).max()
        scale = (np.maximum(amax, 1e-12) / 127.0).astype(np.float32)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        out += [numpy_helper.from_array(q, f"{init.name}_q"), numpy_helper.from_array(scale, f"{init.name}_s")]
        nodes += [helper.make_node("Cast", [f"{init.name}_q"], [f"{init.name}_f"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"{init.name}_f", f"{init.name}_s"], [init.name])]
    del g.initializer[:]
    g.initializer.extend(out)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    return m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="timing budget per model and engine")
    args = ap.parse_args(argv)
    fm, feeds = float_encoder(args.layers, args.seq)
    qm = int8_weights(fm)
    budget = Budget(min_runs=10, seconds=args.seconds, max_seconds=4 * args.seconds)
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for name, model in (("float32 weights", fm), ("int8 weights", qm)):
            path = Path(d) / f"{name.split()[0]}.onnx"
            onnx.save(model, str(path))
            rows[name] = r = bench_one(name, path, feeds, args.threads, budget, memory=False)
            c_ms, o_ms = (r[e]["median_ms"] if r.get(e) else float("nan") for e in ("onnxc", "onnxruntime"))
            err = r["max_rel_err"] if r.get("max_rel_err") is not None else float("nan")
            print(f"{name:16s} {path.stat().st_size / 1e6:6.1f} MB  onnxruntime {o_ms:8.2f} ms  onnxc {c_ms:8.2f} ms  "
                  f"ratio {c_ms / o_ms:.2f}  max rel err {err:.1e}  [{r['status']}]")
        # the two onnxc builds against each other, in turns in one process (the rows above time each
        # build against onnxruntime in its own blocks, so their onnxc figures differ by drift too)
        builds = [onnxc.compile(Path(d) / f"{n}.onnx", threads=args.threads, cache_dir=Path(d) / "cache")
                  for n in ("float32", "int8")]
        f_ts, q_ts = interleaved([lambda m=m: m.run(feeds) for m in builds], budget)
    ms = {name: {e: r[e]["median_ms"] for e in ("onnxc", "onnxruntime")} for name, r in rows.items()}
    q = ms["int8 weights"]
    f_ms, q_ms = summary(f_ts)["median_ms"], summary(q_ts)["median_ms"]
    print(f"onnxc float32 {f_ms:.2f} ms vs int8 {q_ms:.2f} ms, in turns")
    print(f"int8 onnxc / int8 onnxruntime: {q['onnxc'] / q['onnxruntime']:.2f} (target <= 0.8); "
          f"int8 onnxc / float32 onnxc: {q_ms / f_ms:.2f} (target <= 1.0); "
          f"{args.layers} layers, seq {args.seq}, {args.threads} thread(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
