"""The full performance report of issue #5, written to ``benchmarks/RESULTS.md`` (the README quotes it).

    python -m benchmarks.report [--models a,b] [--out benchmarks/RESULTS.md] [--seconds 3]

Runs, each in its own process so one engine's threads or memory never leak into the next measurement:
``benchmarks.run`` at 1 and at 2 threads (latency ratios, peak memory, compile times; JSON beside the
report), at 2 threads again while one other CPU-bound process spins (``--busy 1``: latency ratios only),
``benchmarks.call_overhead`` and ``benchmarks/gemm_bench.py``. The report opens with each target
of the issue next to the measured figure, then quotes every tool's output verbatim.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _run(args: list[str], env: dict | None = None) -> str:
    """stdout of ``python args...`` from the repo root; a failure is reported in the text, not raised."""
    print("$ python " + " ".join(args), flush=True)
    r = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    out = r.stdout
    if r.returncode != 0:
        out += f"\n[exit {r.returncode}]\n{r.stderr[-3000:]}"
    print(out, flush=True)
    return out


def _gflops(gemm_out: str) -> tuple[float, float] | None:
    """(numpy, onnxc) GFLOP/s of the 1024 x 1024 x 1024 line of gemm_bench's table."""
    for line in gemm_out.splitlines():
        cells = line.split()
        if cells[:5] == ["1024", "x", "1024", "x", "1024"]:
            return float(cells[5]), float(cells[6])
    return None


def _overhead(call_out: str) -> tuple[float, float] | None:
    """(onnxc call, onnxruntime run) µs per call from call_overhead's output."""
    vals = {}
    for line in call_out.splitlines():
        for key in ("onnxc call", "onnxruntime run"):
            if line.startswith(key):
                vals[key] = float(line[len(key):].split()[0])
    return (vals["onnxc call"], vals["onnxruntime run"]) if len(vals) == 2 else None


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def targets(runs: dict[int, dict], gemm: tuple[float, float] | None, call: tuple[float, float] | None,
            busy: dict | None = None) -> list[str]:
    """Markdown rows: target of the issue, measured value, met or not."""
    rows = ["| target | measured | met |", "|---|---|---|"]

    def row(what: str, value: str, ok: bool | None) -> None:
        rows.append(f"| {what} | {value} | {'yes' if ok else ('no' if ok is not None else 'n/a')} |")

    for t, data in sorted(runs.items()):
        ratios = {m["model"]: m.get("ratio") for m in data["models"]}
        g = data.get("geomean_ratio")
        row(f"geomean ratio onnxc/onnxruntime, {t} thread(s) <= 1.0", _fmt(g, ".3f"), None if g is None else g <= 1.0)
        worst = max(((r, m) for m, r in ratios.items() if r is not None), default=None)
        row(f"no model above 1.5, {t} thread(s)", "n/a" if worst is None else f"max {worst[0]:.2f} ({worst[1]})",
            None if worst is None else worst[0] <= 1.5)
        for m in ("mlp", "lstm"):
            if m in ratios:
                r = ratios[m]
                row(f"{m} ratio <= 0.5, {t} thread(s)", _fmt(r, ".2f"), None if r is None else r <= 0.5)
        over = [(m["model"], m["onnxc_peak_mb"], m["ort_peak_mb"]) for m in data["models"]
                if m.get("onnxc_peak_mb") is not None and m.get("ort_peak_mb") is not None]
        bad = [f"{n} {a:.0f}/{b:.0f} MB" for n, a, b in over if a > b]
        row(f"peak memory <= onnxruntime's, {t} thread(s)",
            f"{len(over) - len(bad)}/{len(over)} models" + (f"; above: {', '.join(bad)}" if bad else ""),
            None if not over else not bad)
        if t == 1:
            for m in data["models"]:
                if m["model"] == "resnet50" and m.get("compile_cold_s") is not None:
                    row("ResNet-50 cold compile <= 20 s", f"{m['compile_cold_s']:.1f} s", m["compile_cold_s"] <= 20)
                    row("ResNet-50 cached re-compile <= 0.5 s", f"{m['compile_warm_s']:.2f} s",
                        m["compile_warm_s"] <= 0.5)
    if busy:
        g = busy.get("geomean_ratio")
        row("geomean ratio, 2 threads, one busy process <= 1.0", _fmt(g, ".3f"), None if g is None else g <= 1.0)
        worst = max(((m["ratio"], m["model"]) for m in busy["models"] if m.get("ratio") is not None), default=None)
        row("no model above 1.5, 2 threads, one busy process",
            "n/a" if worst is None else f"max {worst[0]:.2f} ({worst[1]})", None if worst is None else worst[0] <= 1.5)
    if gemm:
        row("GEMM 1024^3 >= 80% of numpy sgemm (1 thread)", f"{gemm[1]:.0f} vs {gemm[0]:.0f} GFLOP/s "
            f"({gemm[1] / gemm[0]:.0%})", gemm[1] >= 0.8 * gemm[0])
    if call:
        row("Python call overhead, one-Add model <= 3 µs", f"{call[0]:.2f} µs (onnxruntime {call[1]:.2f} µs)",
            call[0] <= 3.0)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated subset (default: every benchmark model)")
    ap.add_argument("--seconds", default="3", help="seconds per model and engine (benchmarks.run --seconds)")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="the report file")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    texts, runs = {}, {}
    for t in (1, 2):
        js = out.with_name(f"results-threads{t}.json")
        cmd = ["-m", "benchmarks.run", "--threads", str(t), "--seconds", args.seconds, "--json", str(js)]
        if args.models:
            cmd += ["--models", args.models]
        texts[f"benchmarks.run --threads {t}"] = _run(cmd)
        if js.exists():
            runs[t] = json.loads(js.read_text())
    js = out.with_name("results-threads2-busy.json")
    cmd = ["-m", "benchmarks.run", "--threads", "2", "--busy", "1", "--no-memory", "--seconds", args.seconds,
           "--json", str(js)] + (["--models", args.models] if args.models else [])
    texts["benchmarks.run --threads 2 --busy 1"] = _run(cmd)
    busy = json.loads(js.read_text()) if js.exists() else None
    call_out = _run(["-m", "benchmarks.call_overhead"])
    gemm_out = _run(["benchmarks/gemm_bench.py"])
    texts["benchmarks.call_overhead"], texts["benchmarks/gemm_bench.py"] = call_out, gemm_out
    env = next(iter(runs.values()))["environment"] if runs else {}
    lines = ["# onnxc performance report", "",
             f"Written by `python -m benchmarks.report` on {time.strftime('%Y-%m-%d %H:%M')}: {env.get('cpu', '?')}, "
             f"{env.get('cores', '?')} cores, onnxruntime {env.get('onnxruntime', '?')}, {env.get('cc', '?')}. "
             "Ratios are onnxc / onnxruntime latency medians of interleaved runs in one process (lower is better "
             "for onnxc); peak memory is what a fresh process adds to load and run the model.", "",
             *targets(runs, _gflops(gemm_out), _overhead(call_out), busy), ""]
    for name, text in texts.items():
        lines += [f"## python -m {name}" if not name.endswith(".py") else f"## python {name}", "", "```",
                  text.rstrip(), "```", ""]
    out.write_text("\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
