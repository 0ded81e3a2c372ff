"""Measure onnxc against onnxruntime on one model: ``onnxc bench`` and the pieces ``benchmarks/run.py`` uses.

Both engines get the same thread count (onnxruntime: intra-op N, inter-op 1, sequential execution, its
default spinning workers, as onnxc's pool workers spin briefly between jobs too), the same inputs, warm-up runs, then alternating
runs (onnxc, onnxruntime, onnxc, ...) until enough runs and time have passed; the medians and their
ratio are reported, with the largest output difference relative to the output's magnitude. Peak
memory is measured in a child process per engine (``ru_maxrss`` after loading and running the model,
minus the value after imports). onnxruntime is optional: without it only onnxc is timed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnxc.pipeline import resolve_threads


@dataclass(frozen=True)
class Budget:
    """How long to time a model: stop once ``min_runs`` runs AND ``seconds`` have passed, or after
    ``max_seconds`` (with at least 3 runs), or at ``max_runs``."""

    min_runs: int = 20
    seconds: float = 3.0
    max_seconds: float = 30.0
    max_runs: int = 10000
    warmup: int = 2


QUICK = Budget(min_runs=3, seconds=0.05, max_seconds=2.0, max_runs=50, warmup=1)


def have_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def ort_session(model: str | os.PathLike, threads: int, profile_prefix: str | None = None):
    """An onnxruntime CPU session configured like onnxc: N intra-op threads, sequential, onnxruntime's
    default thread spinning (with ``profile_prefix``: writing its per-node profile there, see onnxc/ort_profile.py)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])


BLOCK_SECONDS = 0.1  # a turn of one engine lasts at least this long (see interleaved)
# an untimed pause before each turn: onnxruntime's workers spin about 40 ms of CPU after a run (onnxc's pool
# 0.3 ms), and in one process that spinning would take the cores the other engine's next turn runs on
QUIET_SECONDS = 0.06


def interleaved(fns: list[Callable[[], object]], budget: Budget, block: float = BLOCK_SECONDS) -> list[list[float]]:
    """Seconds per run of each function, run in turns (f0 block, f1 block, f0 block, ...) after warm-up,
    so slow drifts of a shared machine hit all of them alike.

    Both engines' thread pools keep spinning for a while after a run (onnxruntime's workers about 40 ms,
    onnxc's 0.3 ms): in one process that tail would take the cores of the other engine's next run,
    penalizing whichever runs second rather than timing either. So each turn starts after an untimed
    pause of QUIET_SECONDS, and a function faster than ``block`` seconds runs a block of repeated runs
    per turn whose first run is not recorded. Slower functions run once per turn."""
    per_run = []
    for f in fns:
        t = time.perf_counter()
        for _ in range(budget.warmup):
            f()
        per_run.append((time.perf_counter() - t) / max(budget.warmup, 1))
    reps = [1 if t >= block else min(1 + math.ceil(block / max(t, 1e-7)), 1000) for t in per_run]
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    while True:
        for f, ts, k in zip(fns, times, reps):
            if len(fns) > 1:
                time.sleep(QUIET_SECONDS)
            for i in range(k):
                t = time.perf_counter()
                f()
                if i or k == 1:
                    ts.append(time.perf_counter() - t)
        n, elapsed = min(len(ts) for ts in times), time.perf_counter() - start
        if (n >= budget.min_runs and elapsed >= budget.seconds) or n >= budget.max_runs \
                or (n >= 3 and elapsed >= budget.max_seconds):
            return times


def _maps_as_array(v: object) -> object:
    """A sequence of maps (ZipMap's list of {label: probability} dicts) as ``(values, keys)``: the
    values a 2-D array with the sorted keys as columns, so they compare like a tensor. Anything else
    comes back unchanged; maps whose keys differ from one another come back as an array of their key
    lists (not a tuple), which max_rel_error treats as a mismatch."""
    if not (isinstance(v, list) and v and all(isinstance(d, dict) for d in v)):
        return v
    keys = sorted(v[0])
    if any(sorted(d) != keys for d in v):
        return np.array([repr(sorted(d)) for d in v], dtype=object)
    return np.array([[d[k] for k in keys] for d in v]), keys


def max_rel_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """Largest |got - want| over all outputs, relative to the largest |want| of that output (a scale
    that stays meaningful for outputs near zero); inf when shapes or non-float values differ.
    Sequences of maps (ZipMap outputs) compare by their keys, then their values as a tensor."""
    worst = 0.0
    for name, b in want.items():
        a = got.get(name)
        a, b = _maps_as_array(a), _maps_as_array(b)
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or a[1] != b[1]:
                return float("inf")
            a, b = a[0], b[0]
        if a is None or np.shape(a) != np.shape(b):
            return float("inf")
        a, b = np.asarray(a), np.asarray(b)
        if b.size == 0:
            continue
        if b.dtype.kind not in "fc":
            if not np.array_equal(a, b):
                return float("inf")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(a64), np.isnan(b64)):
            return float("inf")
        ok = ~np.isnan(b64)
        if not ok.any():
            continue
        scale = float(np.max(np.abs(b64[ok])))
        err = float(np.max(np.abs(a64[ok] - b64[ok])))
        worst = max(worst, err / scale if scale > 0 else err)
    return worst


def peak_memory_mb(engine: str, model: str | os.PathLike, feeds: dict[str, np.ndarray], threads: int,
                   cache_dir: str | os.PathLike | None = None, timeout: float = 900,
                   precision: str = "fp32") -> float | None:
    """Peak resident memory (MB) a fresh process adds to load ``model`` with ``engine`` ("onnxc" or
    "onnxruntime") and run it three times: the peak RSS at the end minus the RSS after the imports (the
    peak is reset there; see ``_rss_kb``). onnxc loads through ``onnxc.compile`` (the cache in
    ``cache_dir`` spares the C compiler; ``precision`` as compile()). None on failure."""
    with tempfile.TemporaryDirectory(prefix="onnxc-bench-") as tmp:
        path = Path(tmp) / "feeds.npz"
        np.savez(path, **feeds)
        cmd = [sys.executable, "-m", "onnxc.bench", "--peak-child", engine, str(model), str(path), str(threads),
               str(cache_dir or ""), precision]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        try:
            d = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None
        return (d["peak_kb"] - d["baseline_kb"]) / 1024.0


def _rss_kb(field: str) -> int | None:
    """VmRSS / VmHWM of this process from /proc (Linux), in kB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the peak-RSS mark to the current RSS (Linux >= 4.0: writing 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_child(argv: list[str]) -> int:
    """Child side of ``peak_memory_mb``: prints {"baseline_kb", "peak_kb"} as JSON. The peak comes from
    VmHWM reset after the imports; ``ru_maxrss`` is the fallback, though it may keep the high mark of
    the imports or of the process image before exec."""
    import gc
    import resource

    engine, model, feeds_file, threads, cache, precision = argv
    if engine == "onnxruntime":
        import onnxruntime  # noqa: F401
    else:
        import onnxc
    with np.load(feeds_file) as z:
        feeds = {k: z[k] for k in z.files}
    gc.collect()
    use_proc = _reset_peak() and _rss_kb("VmRSS") is not None
    base = _rss_kb("VmRSS") if use_proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if engine == "onnxruntime":
        sess = ort_session(model, int(threads))

        def run() -> object:
            return sess.run(None, feeds)
    else:
        compiled = onnxc.compile(model, threads=int(threads), cache_dir=cache or None, precision=precision)

        def run() -> object:
            return compiled.run(feeds)
    for _ in range(3):
        run()
    peak = _rss_kb("VmHWM") if use_proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_kb": base, "peak_kb": peak}))
    return 0


def summary(ts: list[float]) -> dict:
    """Median and spread of run times, in ms."""
    ms = sorted(1e3 * t for t in ts)
    q = (lambda f: ms[min(len(ms) - 1, int(f * len(ms)))]) if ms else (lambda f: float("nan"))
    return {"median_ms": statistics.median(ms) if ms else float("nan"), "p10_ms": q(0.1), "p90_ms": q(0.9),
            "runs": len(ms)}


def compare(model: str | os.PathLike, feeds: dict[str, np.ndarray], threads: int, budget: Budget = Budget(),
            compiled=None, with_ort: bool = True, tol: float = 1e-3) -> dict:
    """Time ``compiled`` (an onnxc CompiledModel of ``model``) against onnxruntime on ``feeds``.
    Returns a dict with ``onnxc`` / ``onnxruntime`` timing summaries (None when absent), ``ratio``,
    ``max_rel_err``, ``mismatch`` and ``ort_error`` (why onnxruntime could not run it)."""
    res: dict = {"onnxc": None, "onnxruntime": None, "ratio": None, "max_rel_err": None, "mismatch": False,
                 "ort_error": None}
    fns, names = [], []
    if compiled is not None:
        fns.append(lambda: compiled.run(feeds))
        names.append("onnxc")
    sess = None
    if with_ort and have_onnxruntime():
        try:
            sess = ort_session(model, threads)
            want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        except Exception as e:  # onnxruntime rejects the model or the inputs
            res["ort_error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            sess = None
        if sess is not None:
            fns.append(lambda: sess.run(None, feeds))
            names.append("onnxruntime")
            if compiled is not None:
                err = max_rel_error(compiled.run(feeds), want)
                res["max_rel_err"] = err
                res["mismatch"] = not err <= tol
    elif with_ort:
        res["ort_error"] = "onnxruntime is not installed"
    if not fns:
        return res
    for name, ts in zip(names, interleaved(fns, budget)):
        res[name] = summary(ts)
    if res["onnxc"] and res["onnxruntime"]:
        res["ratio"] = res["onnxc"]["median_ms"] / res["onnxruntime"]["median_ms"]
    return res


QUANT_OPS = frozenset({"QuantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
                       "MatMulInteger", "MatMulNBits"})
QUANT_TOL = 1 / 64  # relative to an output's largest value: about two quantization steps of an 8-bit output
BF16_TOL = 1 / 32  # relative, with precision="bf16": operands carry 8 significant bits (a 2^-9 relative rounding)


def is_quantized(compiled) -> bool:
    """Whether the compiled model computes with quantized integers (its outputs then differ from
    onnxruntime's by the roundings of two integer pipelines, not by float rounding)."""
    ir = getattr(compiled, "ir", None)
    graph = getattr(ir, "graph", None)
    return graph is not None and any(n.op_type in QUANT_OPS for n in graph.walk())


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and np.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def fmt(x: float | None, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


# ----------------------------------------------------------------------------------- onnxc bench

def cmd_bench(args) -> int:
    """``onnxc bench MODEL``: compile, time against onnxruntime (when installed), optionally profile."""
    import onnxc
    from onnxc.cli import UsageError, _int, _parse_pairs, random_input

    threads = resolve_threads(args.threads)
    dims = {k: _int(v, f"--dim {k}") for k, v in _parse_pairs(args.dim, "--dim").items()}
    budget = Budget(min_runs=args.runs, seconds=args.seconds, max_seconds=max(args.seconds * 10, 30.0))
    if args.runs < 1:
        raise UsageError(f"--runs: expected at least 1, got {args.runs}")
    compiled = onnxc.compile(args.model, threads=threads, precision=args.precision)
    t = compiled.timings
    print(f"model {args.model}: {threads} thread(s)" + (", precision bf16" if args.precision == "bf16" else ""))
    print(f"onnxc compile: {t.get('total', 0):.3f} s (load {t.get('load', 0):.3f}, passes {t.get('passes', 0):.3f}, "
          f"codegen {t.get('codegen', 0):.3f}, C compiler/cache {t.get('build', 0):.3f})")
    rng = np.random.default_rng(args.seed)
    feeds = {i.name: random_input(i, dims, rng) for i in compiled.inputs}
    for name, a in feeds.items():
        print(f"input  {name}  {a.dtype}  {list(a.shape)}  random (seed {args.seed})")
    quantized = is_quantized(compiled)
    res = compare(args.model, feeds, threads, budget, compiled, with_ort=not args.no_ort,
                  tol=QUANT_TOL if quantized else BF16_TOL if args.precision == "bf16" else 1e-3)
    print(f"{'engine':<12} {'median ms':>10} {'p10':>9} {'p90':>9} {'runs':>6}")
    for name in ("onnxruntime", "onnxc"):
        s = res[name]
        if s is not None:
            print(f"{name:<12} {s['median_ms']:>10.3f} {s['p10_ms']:>9.3f} {s['p90_ms']:>9.3f} {s['runs']:>6}")
    if res["ratio"] is not None:
        flag = "MISMATCH" if res["mismatch"] else "outputs agree"
        if quantized:
            flag += f" for a quantized model (tolerance {QUANT_TOL:.2g}: two engines' integer roundings)"
        elif args.precision == "bf16":
            flag += f" for bf16 weights (tolerance {BF16_TOL:.2g})"
        print(f"ratio onnxc/onnxruntime: {res['ratio']:.3f}  (max rel error {res['max_rel_err']:.2e}, {flag})")
    elif res["ort_error"]:
        print(f"onnxruntime: not compared ({res['ort_error']})")
    if args.memory:
        cache = None  # the default cache holds the library compiled above
        res["peak_mb"] = {"onnxc": peak_memory_mb("onnxc", args.model, feeds, threads, cache,
                                                   precision=args.precision)}
        if res["onnxruntime"] is not None:
            res["peak_mb"]["onnxruntime"] = peak_memory_mb("onnxruntime", args.model, feeds, threads)
        print("peak MB: " + ", ".join(f"{k} {fmt(v, '.1f')}" for k, v in res["peak_mb"].items()))
    if args.profile:
        from onnxc.profile import read_profile, reset_profile

        prof_model = onnxc.compile(args.model, threads=threads, profile=True, precision=args.precision)
        n = max(res["onnxc"]["runs"] if res["onnxc"] else args.runs, 1)
        prof_model.run(feeds)
        reset_profile(prof_model)
        for _ in range(min(n, 1000)):
            prof_model.run(feeds)
        p = read_profile(prof_model)
        print(p.format(top=args.top or None))
        res["profile"] = {"runs": p.runs, "total_s": p.total,
                          "steps": [{"index": s.index, "node": s.node, "seconds": s.seconds} for s in p.steps]}
        if res["onnxruntime"] is not None:
            from onnxc.ort_profile import ort_profile, side_by_side

            op = ort_profile(args.model, feeds, threads, min(n, 1000))
            print(op.format(top=args.top or None))
            print(side_by_side(p.steps, op, p.runs, args.top or None))
            res["ort_profile"] = {"runs": op.runs, "nodes": {k: {"op": o, "seconds": s} for k, (o, s) in op.by_node.items()}}
    if args.json:
        Path(args.json).write_text(json.dumps({"model": str(args.model), "threads": threads,
                                               "compile_s": t, **res}, indent=1))
        print(f"wrote {args.json}")
    return 1 if res["mismatch"] else 0


def add_bench_parser(sub, common) -> None:
    """The ``bench`` subcommand's arguments (called from onnxc.cli.build_parser)."""
    b = sub.add_parser("bench", parents=[common], help="time a model against onnxruntime, optionally per kernel",
                       description="Compile MODEL, fill its inputs with seeded random data, and time onnxc "
                       "against onnxruntime (when installed) with the same thread count: warm-up, then "
                       "alternating runs, medians and their ratio, and the largest output difference. "
                       "--profile adds the time per kernel step, slowest first.")
    b.add_argument("model", help="the .onnx file")
    b.add_argument("--threads", type=int, default=None, help="threads of both engines (default: all cores)")
    b.add_argument("--runs", type=int, default=20, help="at least this many timed runs per engine (default 20)")
    b.add_argument("--seconds", type=float, default=3.0, help="and at least this much time (default 3)")
    b.add_argument("--dim", "-d", action="append", metavar="NAME=SIZE", help="size of a symbolic dimension")
    b.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    b.add_argument("--profile", action="store_true", help="also time every kernel step (a profiling build)")
    b.add_argument("--top", type=int, default=0, help="steps listed by --profile (default 0: all)")
    b.add_argument("--memory", action="store_true", help="also measure peak memory, in a child process per engine")
    b.add_argument("--no-ort", action="store_true", help="time onnxc only")
    b.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: Conv/MatMul/Gemm weights in bfloat16, float32 accumulation (default fp32)")
    b.add_argument("--json", metavar="FILE", help="write the results as JSON")
    b.set_defaults(func=cmd_bench)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--peak-child":
        sys.exit(_peak_child(sys.argv[2:]))
    sys.exit(2)
