"""The real-model suite (issue #16): ``python -m benchmarks.run --suite real [options]``.

Every model of ``benchmarks/real`` (PyTorch architectures through both exporters, scikit-learn pipelines
through skl2onnx) at batch 1 and one larger batch, timed against onnxruntime with the harness of
``benchmarks/run.py`` (``bench_one``: compile, alternating timed blocks, medians, max relative error,
peak memory). A model that fails to export, compile or run is a row saying so. The table is grouped by
family, with each family's geometric mean of the ratios and the overall one; ``--json`` writes every
number, which ``python -m benchmarks.real_report`` turns into a PNG chart and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.busy import BusyLoad
from benchmarks.run import _one_line, bench_one, environment, format_table
from onnxc.bench import QUICK, Budget, fmt, geomean
from onnxc.codegen.cache import cache_dir
from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.runtime_lib import runtime_objects, runtime_sources


def _select(models: dict, names: str | None, families: str | None) -> list[str]:
    """Models whose name contains one of the comma-separated ``names`` and whose family is listed."""
    picked = list(models)
    if names:
        keys = [k.strip() for k in names.split(",") if k.strip()]
        picked = [n for n in picked if any(k == n or k in n for k in keys)]
    if families:
        fams = {f.strip().lower() for f in families.split(",")}
        picked = [n for n in picked if models[n].family.lower() in fams]
    return picked


def _failed_row(name: str, status: str, error: str) -> dict:
    return {"model": name, "status": status, "error": error, "compile_cold_s": None, "compile_warm_s": None,
            "warm_cache_hit": None, "onnxc": None, "onnxruntime": None, "ratio": None, "max_rel_err": None}


def family_summary(rows: list[dict]) -> list[dict]:
    """Per family (in suite order): rows, rows with a ratio, failures, mismatches and the geomean."""
    out: dict[str, dict] = {}
    for r in rows:
        f = out.setdefault(r["family"], {"family": r["family"], "rows": 0, "timed": 0, "failed": 0,
                                         "mismatch": 0, "ratios": []})
        f["rows"] += 1
        if r.get("ratio"):
            f["timed"] += 1
            f["ratios"].append(r["ratio"])
        if r["status"] == "MISMATCH":
            f["mismatch"] += 1
        elif r["status"] != "ok":
            f["failed"] += 1
    for f in out.values():
        f["geomean"] = geomean(f.pop("ratios"))
    return list(out.values())


def report(rows: list[dict]) -> str:
    """Per family: its table and geomean; then the family geomeans and the overall one."""
    parts = []
    for fam in family_summary(rows):
        parts.append(f"== {fam['family']}")
        parts.append(format_table([r for r in rows if r["family"] == fam["family"]]))
        parts.append("")
    parts.append("family                   rows  timed  failed  mismatch  geomean")
    for f in family_summary(rows):
        parts.append(f"{f['family']:<22} {f['rows']:>6} {f['timed']:>6} {f['failed']:>7} {f['mismatch']:>9}  "
                     f"{fmt(f['geomean'], '.3f')}")
    n = sum(1 for r in rows if r.get("ratio"))
    parts.append(f"overall geomean ratio onnxc/onnxruntime over {n} row(s): "
                 f"{fmt(geomean([r.get('ratio') for r in rows]), '.3f')}")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.real import MODELS, model_path

    ap = argparse.ArgumentParser(prog="python -m benchmarks.run --suite real", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads of both engines (default 1)")
    ap.add_argument("--models", help="comma-separated names or parts of names (e.g. resnet18,dynamo)")
    ap.add_argument("--families", help="comma-separated families (e.g. 'CNN,decoder')")
    ap.add_argument("--sizes", choices=("all", "small", "large"), default="all",
                    help="batch 1 (small), the larger batch (large) or both (default)")
    ap.add_argument("--quick", action="store_true", help="few runs, no memory measurement")
    ap.add_argument("--runs", type=int, default=20, help="at least this many timed runs per engine (default 20)")
    ap.add_argument("--seconds", type=float, default=3.0, help="and at least this many seconds per row (default 3)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    ap.add_argument("--tol", type=float, default=1e-3, help="max rel error above which outputs are flagged")
    ap.add_argument("--cache", metavar="DIR", help="where the models are built (default benchmarks/.models/real)")
    ap.add_argument("--json", metavar="FILE", help="write every number as JSON")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="N CPU-bound processes spin while the models are timed (benchmarks/busy.py)")
    args = ap.parse_args(argv)
    if args.list:
        for m in MODELS.values():
            print(f"{m.name:<28} {m.family:<20} batch {'/'.join(map(str, m.sizes)):<7} {m.description}")
        return 0
    names = _select(MODELS, args.models, args.families)
    if not names:
        ap.error(f"no model matches; known: {', '.join(MODELS)}")
    budget = QUICK if args.quick else Budget(min_runs=args.runs, seconds=args.seconds)
    memory = not (args.no_memory or args.quick)
    env = environment(args.threads)
    env["suite"] = "real"
    env["busy"] = args.busy
    print(f"real suite: onnxc vs onnxruntime {env['onnxruntime']}, {args.threads} thread(s), {env['cpu']}, "
          + (f"{args.busy} busy process(es), " if args.busy else "") + f"load average {', '.join(f'{x:.1f}' for x in env['load_average'] or ())}", flush=True)
    # the runtime library of the user's cache (built once per machine), shared by every model's fresh cache
    t = time.perf_counter()
    runtime_objects(CompilerConfig(), runtime_sources())
    env["runtime_build_s"] = time.perf_counter() - t
    runtime = cache_dir(None) / "runtime"
    rows = []
    for name in names:
        m = MODELS[name]
        sizes = {"all": m.sizes, "small": m.sizes[:1], "large": m.sizes[1:]}[args.sizes]
        base = {"family": m.family, "source": m.source, "description": m.description}
        try:
            t = time.perf_counter()
            path = model_path(name, args.cache)
            base["build_s"] = time.perf_counter() - t
        except Exception as e:  # the exporter refuses, or the bench extra is not installed
            for b in sizes:
                rows.append({**_failed_row(f"{name}@b{b}", "export failed", _one_line(e)), **base, "batch": b})
                print(f"  {rows[-1]['model']}: export failed: {rows[-1]['error']}", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="onnxc-bench-cache-") as cache, BusyLoad(args.busy):
            for b in sizes:  # the first size compiles cold; the next ones reuse its cache
                feeds = m.feeds(np.random.default_rng(1), b)
                row = bench_one(f"{name}@b{b}", path, feeds, args.threads, budget, memory, args.tol, runtime,
                                cache_dir=cache)
                row.update(base, batch=b)
                if b != sizes[0]:  # its compiles hit the first size's cache: not a compile time
                    row["compile_cold_s"] = row["compile_warm_s"] = None
                rows.append(row)
                print(f"  {row['model']}: ratio {fmt(row.get('ratio'), '.3f')}  onnxc "
                      f"{fmt((row.get('onnxc') or {}).get('median_ms'), '.3f')} ms  onnxruntime "
                      f"{fmt((row.get('onnxruntime') or {}).get('median_ms'), '.3f')} ms  max rel err "
                      f"{fmt(row.get('max_rel_err'), '.1e')}  {'' if row['status'] == 'ok' else row['status']} "
                      f"{row.get('error') or row.get('ort_error') or ''}".rstrip(), flush=True)
    print()
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env, "budget": vars(budget), "geomean_ratio": geomean([r.get("ratio") for r in rows]),
            "families": family_summary(rows), "models": rows}, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0
