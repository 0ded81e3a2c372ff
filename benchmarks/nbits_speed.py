"""4-bit weights (com.microsoft MatMulNBits) in a decoder-like stack: onnxc against onnxruntime, interleaved
medians in one process, and the memory the weights take.

    python -m benchmarks.nbits_speed [--layers 2] [--rows 1,128] [--threads 1,2] [--seconds 3] [--no-memory]
                                     [--before]

Each layer is TinyLlama-shaped (hidden 2048, intermediate 5632, block size 32, asymmetric: packed zero
points), every projection a MatMulNBits: q, o 2048 x 2048; k, v 2048 x 256; gate, up 2048 x 5632; down
5632 x 2048; residual adds and a gate * up product between them. A is [rows, 2048]: rows 1 is a decoding
step (the GEMV of runtime_c/onnxc_nbits.h), 128 a prefill (dequantized slices through the float GEMM).

onnxruntime runs the same model with accuracy_level 0 (the attribute's default: float arithmetic, what
onnxc computes) and 4 (A quantized to int8 per block, integer dot products: faster where the CPU has
VNNI, but not the float product). Prints per rows and threads: the medians in ms, the ratios
onnxc / onnxruntime, and onnxc's largest error relative to the output's range against accuracy_level 0.
Then the weights: onnxc's blob bytes against the float32 weights (what the weights cost before, folded
to float), and the peak resident memory of a fresh process loading and running the model in each engine.
``--before`` also times onnxc without the 4-bit kernel (MatMulNBits expanded to DequantizeLinear ->
MatMul, the weights folded to float32: the path before runtime_c/onnxc_nbits.h).
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
from onnxc.bench import Budget, interleaved, max_rel_error, ort_session, peak_memory_mb, summary  # noqa: E402
from onnxc.frontend import load_model  # noqa: E402
from onnxc.passes import fold_weight_dequant  # noqa: E402
from onnxc.passes.expansions import ms_nbits  # noqa: E402

HIDDEN, INTER, KV, BLOCK = 2048, 5632, 256, 32
MS = "com.microsoft"


class _Stack:
    """Builds the model: MatMulNBits projections with random 4-bit weights, and the ops between them."""

    def __init__(self, level: int, seed: int = 0):
        self.rng, self.level = np.random.default_rng(seed), level
        self.nodes: list = []
        self.inits: list = []
        self.weights = 0

    def name(self, base: str) -> str:
        return f"{base}{len(self.nodes)}"

    def op(self, op: str, ins: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def proj(self, x: str, k: int, n: int) -> str:
        nb = k // BLOCK
        tag = self.name("w")
        b = self.rng.integers(0, 256, (n, nb, BLOCK // 2), dtype=np.uint8)
        s = self.rng.uniform(0.002, 0.02, (n, nb)).astype(np.float32)
        z = self.rng.integers(0, 256, (n, -(-nb // 2)), dtype=np.uint8)
        self.inits += [numpy_helper.from_array(b, f"{tag}_b"), numpy_helper.from_array(s, f"{tag}_s"),
                       numpy_helper.from_array(z, f"{tag}_z")]
        self.weights += k * n
        out = self.name("mm")
        self.nodes.append(helper.make_node("MatMulNBits", [x, f"{tag}_b", f"{tag}_s", f"{tag}_z"], [out], domain=MS,
                                           K=k, N=n, bits=4, block_size=BLOCK, accuracy_level=self.level))
        return out

    def layer(self, x: str, extra: list[str]) -> str:
        q = self.proj(x, HIDDEN, HIDDEN)
        extra += [self.proj(x, HIDDEN, KV), self.proj(x, HIDDEN, KV)]  # k, v: outputs (a cache would keep them)
        h = self.op("Add", [x, self.proj(q, HIDDEN, HIDDEN)])
        gate, up = self.proj(h, HIDDEN, INTER), self.proj(h, HIDDEN, INTER)
        return self.op("Add", [h, self.proj(self.op("Mul", [gate, up]), INTER, HIDDEN)])

    def model(self, layers: int) -> onnx.ModelProto:
        x, extra = "x", []
        for _ in range(layers):
            x = self.layer(x, extra)
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in [x, *extra]]
        g = helper.make_graph(self.nodes, "nbits_stack",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", HIDDEN])], outs,
                              self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def build(folder: Path, layers: int) -> tuple[Path, Path, int]:
    """The stack with accuracy_level 0 and 4 (same weights) saved in ``folder``; and its weight count."""
    paths = []
    for level in (0, 4):
        st = _Stack(level)
        paths.append(folder / f"stack_level{level}.onnx")
        onnx.save(st.model(layers), str(paths[-1]))
    return paths[0], paths[1], st.weights


def compile_before(path: Path, threads: int) -> onnxc.CompiledModel:
    """onnxc's build without the 4-bit kernel. It is given the IR, which the model cache does not serve
    (the cache keys a model by its bytes and onnxc's code, not by this switch)."""
    keep = ms_nbits._kernel_case, fold_weight_dequant.nbits_block
    ms_nbits._kernel_case = fold_weight_dequant.nbits_block = lambda *a: None
    try:
        return onnxc.compile(load_model(str(path)), threads=threads)
    finally:
        ms_nbits._kernel_case, fold_weight_dequant.nbits_block = keep


def time_case(path0: Path, path4: Path, rows: int, threads: int, budget: Budget, before: bool) -> dict:
    cm = onnxc.compile(str(path0), threads=threads)
    s0, s4 = ort_session(path0, threads), ort_session(path4, threads)
    feeds = {"x": np.random.default_rng(1).standard_normal((rows, HIDDEN)).astype(np.float32)}
    names = [o.name for o in s0.get_outputs()]
    err = max_rel_error(cm.run(feeds), dict(zip(names, s0.run(None, feeds))))
    fns = [lambda: cm.run(feeds), lambda: s0.run(None, feeds), lambda: s4.run(None, feeds)]
    if before:
        old = compile_before(path0, threads)
        fns.append(lambda: old.run(feeds))
    ms = [summary(t)["median_ms"] for t in interleaved(fns, budget)]
    return {"rows": rows, "threads": threads, "onnxc_ms": ms[0], "ort0_ms": ms[1], "ort4_ms": ms[2],
            "before_ms": ms[3] if before else None, "err": err,
            "blob": len(memoryview(cm.program.weights).cast("B")) if rows == 1 and threads == 1 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rows", default="1,128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-RSS measurement (two fresh processes)")
    ap.add_argument("--before", action="store_true", help="also time onnxc with the weights folded to float32")
    args = ap.parse_args(argv)
    budget = Budget(min_runs=args.runs, seconds=args.seconds, max_seconds=10 * args.seconds)
    with tempfile.TemporaryDirectory(prefix="onnxc-nbits-") as d:
        p0, p4, nweights = build(Path(d), args.layers)
        print(f"{args.layers} layers, {nweights / 1e6:.1f}M 4-bit weights (block {BLOCK}, zero points)")
        print(f"{'rows':>4} {'thr':>3} {'onnxc ms':>9} {'ort lvl0':>9} {'ort lvl4':>9} {'/lvl0':>6} {'/lvl4':>6} "
              f"{'rel err':>8}" + (f" {'float32 ms':>10}" if args.before else ""))
        blob = None
        for threads in map(int, args.threads.split(",")):
            for rows in map(int, args.rows.split(",")):
                r = time_case(p0, p4, rows, threads, budget, args.before)
                blob = r["blob"] or blob
                print(f"{rows:4d} {threads:3d} {r['onnxc_ms']:9.3f} {r['ort0_ms']:9.3f} {r['ort4_ms']:9.3f} "
                      f"{r['onnxc_ms'] / r['ort0_ms']:6.2f} {r['onnxc_ms'] / r['ort4_ms']:6.2f} {r['err']:8.1e}"
                      + (f" {r['before_ms']:10.3f}" if args.before else ""), flush=True)
        if blob is not None:
            print(f"onnxc weights blob: {blob / 2**20:.1f} MiB ({8 * blob / nweights:.2f} bits per weight); "
                  f"as float32: {4 * nweights / 2**20:.1f} MiB")
        if not args.no_memory:
            feeds = {"x": np.zeros((1, HIDDEN), np.float32)}
            for engine in ("onnxc", "onnxruntime"):
                mb = peak_memory_mb(engine, p0, feeds, 1)
                print(f"peak RSS added by loading + 3 runs at rows 1, {engine}: "
                      f"{'failed' if mb is None else f'{mb:.0f} MiB'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
