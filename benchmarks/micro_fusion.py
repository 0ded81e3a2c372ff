"""Micro benchmarks of the elementwise hot path against onnxruntime (1 thread each, interleaved medians).

    python -m benchmarks.micro_fusion [--cases a,b] [--seconds S] [--threads N] [--cpu] [--skip PASS,...]

Cases:
- ``encoder``: one BERT-style encoder layer (batch 1, seq 128, hidden 768, 12 heads: MatMul + bias,
  attention with Softmax, LayerNormalization, Erf-form GELU), as exporters write it;
- ``chain6``: six elementwise ops on 1M floats (Mul, Add, Sigmoid, Mul by the input, Erf, Relu);
- ``softmax``: Softmax over the last axis of a [128, 12, 128, 128] tensor;
- ``gelu``: the Erf-form GELU pattern (five ops) on [128, 3072];
- ``layernorm``: LayerNormalization of [128, 768];
- ``convbn``: Conv 3x3 (64 -> 64, 56x56) + BatchNormalization + Relu.

Prints one line per case: onnxruntime ms, onnxc ms and their ratio (onnxc / onnxruntime). ``--cpu``
times each run by process CPU time instead of wall time (steadier on a loaded machine; both engines
run one thread). ``--skip fuse_elementwise,fold_batchnorm`` leaves those pipeline steps out of onnxc's
compile, to measure what they bring.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxc  # noqa: E402
from onnxc.bench import Budget, max_rel_error, ort_session, summary  # noqa: E402
from onnxc.passes import pipeline  # noqa: E402

F32 = TensorProto.FLOAT


class _B:
    """Tiny graph builder: fresh names, initializers, nodes."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def c(self, a) -> str:
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def op(self, op: str, ins: list[str], **attrs) -> str:
        self.k += 1
        out = f"{op.lower()}{self.k}"
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def model(self, inputs: list, out: str, opset: int = 17) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "y"
        g = helper.make_graph(self.nodes, "micro", inputs, [helper.make_tensor_value_info("y", F32, None)],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def encoder_layer(b: _B, x: str, mask: str, h: int, heads: int, ff: int) -> str:
    """One BERT-style encoder layer on ``x`` [1, seq, h] as exporters write it: MatMul + bias projections,
    attention with an additive ``mask`` and Softmax, residual + LayerNormalization, Erf-form GELU."""
    dh = h // heads

    def w(*shape):
        return b.c((b.rng.standard_normal(shape) * 0.02).astype(np.float32))

    def dense(x, cin, cout):
        return b.op("Add", [b.op("MatMul", [x, w(cin, cout)]), w(cout)])

    def ln(x):
        return b.op("LayerNormalization", [x, b.c(np.ones(h, np.float32)), b.c(np.zeros(h, np.float32))],
                    axis=-1, epsilon=1e-12)

    split = b.c(np.array([0, 0, heads, dh], np.int64))
    merge = b.c(np.array([0, 0, h], np.int64))
    q = b.op("Transpose", [b.op("Reshape", [dense(x, h, h), split])], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [dense(x, h, h), split])], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [dense(x, h, h), split])], perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.c(np.float32(math.sqrt(dh)))])
    p = b.op("Softmax", [b.op("Add", [s, mask])], axis=-1)
    ctx = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3]), merge])
    x = ln(b.op("Add", [dense(ctx, h, h), x]))
    f = dense(x, h, ff)
    erf = b.op("Erf", [b.op("Div", [f, b.c(np.float32(math.sqrt(2.0)))])])
    f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [erf, b.c(np.float32(1.0))])]), b.c(np.float32(0.5))])
    return ln(b.op("Add", [dense(f, ff, h), x]))


def encoder(seq: int = 128, h: int = 768, heads: int = 12, ff: int = 3072) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    encoder_layer(b, "x", "mask", h, heads, ff)
    m = b.model([helper.make_tensor_value_info("x", F32, [1, seq, h]),
                 helper.make_tensor_value_info("mask", F32, [1, 1, 1, seq])], "y")
    mask = np.zeros((1, 1, 1, seq), np.float32)
    mask[..., seq - seq // 8:] = -10000.0
    return m, {"x": b.rng.standard_normal((1, seq, h)).astype(np.float32), "mask": mask}


def chain6(n: int = 1 << 20) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    t = b.op("Mul", ["x", b.c(np.float32(0.5))])
    t = b.op("Add", [t, b.c(np.float32(0.25))])
    t = b.op("Sigmoid", [t])
    t = b.op("Mul", [t, "x"])
    t = b.op("Erf", [t])
    b.op("Relu", [t])
    return b.model([helper.make_tensor_value_info("x", F32, [n])], "y"), \
        {"x": b.rng.standard_normal(n).astype(np.float32)}


def softmax(shape=(128, 12, 128, 128)) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    b.op("Softmax", ["x"], axis=-1)
    return b.model([helper.make_tensor_value_info("x", F32, list(shape))], "y"), \
        {"x": b.rng.standard_normal(shape).astype(np.float32)}


def gelu(shape=(128, 3072)) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    erf = b.op("Erf", [b.op("Div", ["x", b.c(np.float32(math.sqrt(2.0)))])])
    b.op("Mul", [b.op("Mul", ["x", b.op("Add", [erf, b.c(np.float32(1.0))])]), b.c(np.float32(0.5))])
    return b.model([helper.make_tensor_value_info("x", F32, list(shape))], "y"), \
        {"x": b.rng.standard_normal(shape).astype(np.float32)}


def layernorm(shape=(128, 768)) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    h = shape[-1]
    b.op("LayerNormalization", ["x", b.c(b.rng.uniform(0.5, 1.5, h).astype(np.float32)),
                                b.c(b.rng.standard_normal(h).astype(np.float32))], axis=-1, epsilon=1e-5)
    return b.model([helper.make_tensor_value_info("x", F32, list(shape))], "y"), \
        {"x": b.rng.standard_normal(shape).astype(np.float32)}


def convbn(c: int = 64, hw: int = 56) -> tuple[onnx.ModelProto, dict]:
    b = _B()
    w = b.c((b.rng.standard_normal((c, c, 3, 3)) * math.sqrt(2 / (9 * c))).astype(np.float32))
    y = b.op("Conv", ["x", w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    stats = [b.rng.uniform(0.8, 1.2, c), b.rng.standard_normal(c) * 0.1, b.rng.standard_normal(c) * 0.1,
             b.rng.uniform(0.5, 1.5, c)]
    y = b.op("BatchNormalization", [y, *(b.c(s.astype(np.float32)) for s in stats)], epsilon=1e-5)
    b.op("Relu", [y])
    return b.model([helper.make_tensor_value_info("x", F32, [1, c, hw, hw])], "y"), \
        {"x": b.rng.standard_normal((1, c, hw, hw)).astype(np.float32)}


CASES = {"encoder": encoder, "chain6": chain6, "softmax": softmax, "gelu": gelu, "layernorm": layernorm,
         "convbn": convbn}


def timed(fns: list, budget: Budget, clock=time.perf_counter) -> list[list[float]]:
    """Seconds per run of each function by ``clock``, run in turn after warm-up (like
    onnxc.bench.interleaved, with a choice of clock)."""
    for f in fns:
        for _ in range(budget.warmup):
            f()
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    while True:
        for f, ts in zip(fns, times):
            t = clock()
            f()
            ts.append(clock() - t)
        n, elapsed = len(times[0]), time.perf_counter() - start
        if (n >= budget.min_runs and elapsed >= budget.seconds) or n >= budget.max_runs \
                or (n >= 3 and elapsed >= budget.max_seconds):
            return times


def run_case(name: str, threads: int, budget: Budget, cpu: bool = False, skip: frozenset = frozenset()) -> dict:
    model, feeds = CASES[name]()
    with tempfile.TemporaryDirectory(prefix="onnxc-micro-") as d:
        path = Path(d) / f"{name}.onnx"
        onnx.save(model, str(path))
        steps = pipeline.steps
        pipeline.steps = lambda: [st for st in steps() if st[0] not in skip]
        try:
            compiled = onnxc.compile(str(path), threads=threads)
        finally:
            pipeline.steps = steps
        sess = ort_session(path, threads)
        err = max_rel_error(compiled.run(feeds), dict(zip([o.name for o in sess.get_outputs()],
                                                           sess.run(None, feeds))))
        t_c, t_o = timed([lambda: compiled.run(feeds), lambda: sess.run(None, feeds)], budget,
                         time.process_time if cpu else time.perf_counter)
    c, o = summary(t_c)["median_ms"], summary(t_o)["median_ms"]
    return {"case": name, "ort_ms": o, "onnxc_ms": c, "ratio": c / o, "max_rel_err": err}


def compile_without(path: Path, threads: int, skip_pass: str | None):
    """onnxc's build of the model at ``path``, leaving the pipeline step ``skip_pass`` out (None: all
    steps). A build without the pass gets another doc string, so the model cache keeps the two apart."""
    steps = pipeline.steps
    if skip_pass:
        m = onnx.load(str(path))
        m.doc_string = f"compiled without {skip_pass}"
        path = path.with_suffix(".before.onnx")
        onnx.save(m, str(path))
        pipeline.steps = lambda: [st for st in steps() if st[0] != skip_pass]
    try:
        return onnxc.compile(str(path), threads=threads)
    finally:
        pipeline.steps = steps


def pass_case(model: onnx.ModelProto, feeds: dict, name: str, pass_name: str, threads: int, budget: Budget,
              cpu: bool = False) -> dict:
    """One case of a before / after benchmark of one pass: onnxruntime, onnxc without the pass ("before")
    and with it ("after"), timed in turn; medians, ratios and the largest relative error of "after"."""
    with tempfile.TemporaryDirectory(prefix="onnxc-pass-") as d:
        path = Path(d) / f"{name}.onnx"
        onnx.save(model, str(path))
        before, after = compile_without(path, threads, pass_name), compile_without(path, threads, None)
        sess = ort_session(path, threads)
        outs = [o.name for o in sess.get_outputs()]
        err = max_rel_error(after.run(feeds), dict(zip(outs, sess.run(None, feeds))))
        t_b, t_a, t_o = timed([lambda: before.run(feeds), lambda: after.run(feeds), lambda: sess.run(None, feeds)],
                              budget, time.process_time if cpu else time.perf_counter)
    o, bf, af = (summary(t)["median_ms"] for t in (t_o, t_b, t_a))
    return {"case": name, "ort_ms": o, "before_ms": bf, "after_ms": af, "before_ratio": bf / o,
            "after_ratio": af / o, "max_rel_err": err}


def pass_main(cases: dict, pass_name: str, doc: str, argv: list[str] | None, runs: int = 10) -> int:
    """The command line of a before / after benchmark of ``pass_name`` over ``cases`` (name -> builder)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--cases", default=",".join(cases))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--cpu", action="store_true", help="time by process CPU time")
    args = ap.parse_args(argv)
    budget = Budget(min_runs=args.runs, seconds=args.seconds, max_seconds=10 * args.seconds)
    w = max(len(c) for c in cases) + 1
    print(f"{'case':<{w}} {'ort ms':>8} {'before ms':>9} {'after ms':>9} {'before/ort':>10} {'after/ort':>9} "
          f"{'max rel err':>11}")
    for name in args.cases.split(","):
        model, feeds = cases[name]()
        r = pass_case(model, feeds, name, pass_name, args.threads, budget, args.cpu)
        print(f"{name:<{w}} {r['ort_ms']:8.3f} {r['before_ms']:9.3f} {r['after_ms']:9.3f} {r['before_ratio']:10.2f} "
              f"{r['after_ratio']:9.2f} {r['max_rel_err']:11.2e}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cpu", action="store_true", help="time by process CPU time")
    ap.add_argument("--skip", default="", help="pipeline steps to leave out of onnxc's compile")
    args = ap.parse_args(argv)
    skip = frozenset(filter(None, args.skip.split(",")))
    budget = Budget(min_runs=args.runs, seconds=args.seconds, max_seconds=10 * args.seconds)
    print(f"{'case':<10} {'ort ms':>9} {'onnxc ms':>9} {'ratio':>6} {'max rel err':>11}")
    for name in args.cases.split(","):
        r = run_case(name, args.threads, budget, args.cpu, skip)
        print(f"{name:<10} {r['ort_ms']:9.3f} {r['onnxc_ms']:9.3f} {r['ratio']:6.2f} {r['max_rel_err']:11.2e}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
