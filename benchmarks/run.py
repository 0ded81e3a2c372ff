"""onnxc vs onnxruntime on the benchmark model set (``benchmarks/models.py``), side by side.

    python -m benchmarks.run [--threads 1|2] [--models a,b] [--quick] [--json FILE] [--no-memory] [--busy N]
    python -m benchmarks.run --suite real [...]   (the real-model suite: benchmarks/real_suite.py)
    python -m benchmarks.run --suite quant [...]  (quantized models: benchmarks/quant_suite.py)

Per model: onnxc compile time (cold: a fresh cache folder, so the C compiler runs, sharing only the
runtime library, built once up front and timed on its own line; warm: the same compile again, a
cache hit), then both engines with the same thread count and inputs, warmed up and
timed alternately (onnxc, onnxruntime, onnxc, ...) until at least ``--runs`` runs and ``--seconds``
have passed; the medians, their ratio (onnxc / onnxruntime, lower is better for onnxc), the largest
output difference relative to the output's magnitude, and the peak memory each engine adds in a child
process. A model onnxc cannot compile is reported as such and timed with onnxruntime alone. The last
line is the geometric mean of the ratios. ``--busy N``: N other CPU-bound processes spin during the
models' timings (``benchmarks/busy.py``), as on a laptop or a shared server.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import onnxc  # noqa: E402
from benchmarks.busy import BusyLoad  # noqa: E402
from benchmarks.models import MODELS, make_feeds, model_path  # noqa: E402
from onnxc.bench import QUICK, Budget, compare, fmt, geomean, peak_memory_mb  # noqa: E402
from onnxc.codegen.cache import stats as cache_stats  # noqa: E402
from onnxc.codegen.compiler import CompilerConfig  # noqa: E402
from onnxc.codegen.runtime_lib import runtime_objects, runtime_sources  # noqa: E402

COLUMNS = ("model", "onnxruntime ms", "onnxc ms", "ratio", "ort MB", "onnxc MB", "compile s cold/warm",
           "max rel err", "note")


def _one_line(e: BaseException) -> str:
    """The error on one line: its first line, or for compiler output the first line saying "error"."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    errs = [x for x in lines[1:] if "error" in x.lower()]
    return f"{type(e).__name__}: {(errs or lines or [''])[0]}"[:300]


def bench_one(name: str, path: str | os.PathLike, feeds: dict[str, np.ndarray], threads: int,
              budget: Budget, memory: bool = True, tol: float = 1e-3, runtime: Path | None = None,
              cache_dir: str | os.PathLike | None = None) -> dict:
    """One row of the benchmark: compile times, timings of both engines, ratio, error and peak memory.
    ``runtime``: a cache folder's ``runtime`` folder (the runtime library) that the fresh cache shares.
    ``cache_dir``: compile into this cache folder instead of a fresh one (rows of one model at several
    input sizes share it, so only the first compile is cold)."""
    row: dict = {"model": name, "status": "ok", "error": None, "compile_cold_s": None, "compile_warm_s": None,
                 "warm_cache_hit": None,
                 "compile_timings": None, "onnxc_peak_mb": None, "ort_peak_mb": None}
    with tempfile.TemporaryDirectory(prefix="onnxc-bench-cache-") as fresh:
        cache = str(cache_dir) if cache_dir is not None else fresh
        if runtime is not None and not (Path(cache) / "runtime").exists():
            os.symlink(runtime, Path(cache) / "runtime")
        compiled = None
        try:
            t = time.perf_counter()
            compiled = onnxc.compile(path, threads=threads, cache_dir=cache)
            row["compile_cold_s"] = time.perf_counter() - t
            misses = cache_stats["misses"]
            t = time.perf_counter()
            compiled = onnxc.compile(path, threads=threads, cache_dir=cache)
            row["compile_warm_s"] = time.perf_counter() - t
            # a miss here means the generated C or the runtime headers changed in between
            row["warm_cache_hit"] = cache_stats["misses"] == misses
            row["compile_timings"] = compiled.timings
        except Exception as e:  # unsupported op, compiler error...: a row, not a crash
            row["status"], row["error"] = "onnxc failed", _one_line(e)
            compiled = None
        try:
            res = compare(path, feeds, threads, budget, compiled, tol=tol)
        except Exception as e:  # onnxc failing at run time
            row["status"], row["error"] = "onnxc run failed", _one_line(e)
            compiled = None
            res = compare(path, feeds, threads, budget, None, tol=tol)
        row.update(res)
        if res["ort_error"] and row["status"] == "ok":
            row["status"] = "onnxruntime failed"
        if res["mismatch"]:
            row["status"] = "MISMATCH"
        del compiled
        gc.collect()
        if memory:
            if row["onnxc"] is not None:
                row["onnxc_peak_mb"] = peak_memory_mb("onnxc", path, feeds, threads, cache)
            if row["onnxruntime"] is not None:
                row["ort_peak_mb"] = peak_memory_mb("onnxruntime", path, feeds, threads)
    return row


def table_row(r: dict) -> tuple[str, ...]:
    ort_ms = r["onnxruntime"]["median_ms"] if r.get("onnxruntime") else None
    c_ms = r["onnxc"]["median_ms"] if r.get("onnxc") else None
    comp = "-" if r["compile_cold_s"] is None else f"{r['compile_cold_s']:.1f} / {r['compile_warm_s']:.2f}" + ("" if r.get("warm_cache_hit") else "*")
    err = r.get("max_rel_err")
    note = "" if r["status"] == "ok" else r["status"] + (f": {r['error']}" if r.get("error") else "")
    if r.get("ort_error") and not r.get("error"):
        note += f": {r['ort_error']}"
    return (r["model"], fmt(ort_ms, ".2f"), fmt(c_ms, ".2f"), fmt(r.get("ratio"), ".2f"),
            fmt(r.get("ort_peak_mb"), ".0f"), fmt(r.get("onnxc_peak_mb"), ".0f"), comp,
            fmt(err, ".1e"), note[:120])


def format_table(rows: list[dict]) -> str:
    """The result table, then the geometric mean of the ratios."""
    body = [table_row(r) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(COLUMNS, *body)]
    right = {1, 2, 3, 4, 5, 6, 7}
    lines = []
    for line in [COLUMNS, *body]:
        cells = [x.rjust(w) if i in right else x.ljust(w) for i, (x, w) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    g = geomean([r.get("ratio") for r in rows])
    n = sum(1 for r in rows if r.get("ratio"))
    lines.append(f"geomean ratio onnxc/onnxruntime over {n} model(s): {fmt(g, '.3f')}")
    if any(r["compile_warm_s"] is not None and not r.get("warm_cache_hit") for r in rows):
        lines.append("* the warm compile missed the cache: sources or runtime headers changed during the run")
    return "\n".join(lines)


def environment(threads: int) -> dict:
    """What the numbers were measured on."""
    import onnx

    from onnxc.codegen.compiler import compiler_version, default_cc

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import onnxruntime

        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = None
    return {"threads": threads, "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "onnx": onnx.__version__, "onnxruntime": ort_version, "cc": compiler_version(default_cc()),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def main(argv: list[str] | None = None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--suite", choices=("default", "real", "quant"), default="default")
    ns, rest = pre.parse_known_args(argv)
    if ns.suite == "real":
        from benchmarks.real_suite import main as real_main

        return real_main(rest)
    if ns.suite == "quant":
        from benchmarks.quant_suite import main as quant_main

        return quant_main(rest)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("default", "real", "quant"), default="default",
                    help="the model set: this one (default), the real-model suite (see --suite real --help) or "
                    "the quantized models (--suite quant --help)")
    ap.add_argument("--threads", type=int, default=1, help="threads of both engines (default 1)")
    ap.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)}")
    ap.add_argument("--quick", action="store_true", help="few runs (smoke test), no memory measurement")
    ap.add_argument("--runs", type=int, default=20, help="at least this many timed runs per engine (default 20)")
    ap.add_argument("--seconds", type=float, default=3.0, help="and at least this many seconds per model (default 3)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    ap.add_argument("--tol", type=float, default=1e-3, help="max rel error above which outputs are flagged")
    ap.add_argument("--cache", metavar="DIR", help="where the models are built (default benchmarks/.models)")
    ap.add_argument("--json", metavar="FILE", help="write every number as JSON")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="N CPU-bound processes spin meanwhile")
    args = ap.parse_args(argv)
    names = list(MODELS) if not args.models else [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    budget = QUICK if args.quick else Budget(min_runs=args.runs, seconds=args.seconds)
    memory = not (args.no_memory or args.quick)
    env = environment(args.threads)
    env["busy"] = args.busy
    print(f"onnxc vs onnxruntime {env['onnxruntime']}, {args.threads} thread(s), {env['cpu']}, "
          + (f"{args.busy} busy process(es), " if args.busy else "")
          + f"load average {', '.join(f'{x:.1f}' for x in env['load_average'] or ())}", flush=True)
    rows = []
    shared = tempfile.TemporaryDirectory(prefix="onnxc-bench-runtime-")
    runtime = None
    if not args.quick:  # (a smoke test compiles only what it needs)
        t = time.perf_counter()
        runtime_objects(CompilerConfig(), runtime_sources(), shared.name)
        env["runtime_build_s"] = time.perf_counter() - t
        print(f"  runtime library (built once, shared by the cold compiles): {env['runtime_build_s']:.1f} s",
              flush=True)
        runtime = Path(shared.name) / "runtime"
    load = BusyLoad(args.busy).start()
    for name in names:
        path = model_path(name, args.cache)
        row = bench_one(name, path, make_feeds(name), args.threads, budget, memory, args.tol, runtime)
        row["description"] = MODELS[name].description
        rows.append(row)
        cells = dict(zip(COLUMNS, table_row(row)))
        print("  " + ", ".join(f"{k} {v}" if k != "model" else v for k, v in cells.items() if v and v != "-"),
              flush=True)
    load.stop()
    print()
    print(format_table(rows))
    if args.json:
        g = geomean([r.get("ratio") for r in rows])
        Path(args.json).write_text(json.dumps({"environment": env, "budget": vars(budget), "geomean_ratio": g,
                                               "models": rows}, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
