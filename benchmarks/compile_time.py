"""Cold compile time of onnxc on four exporter-style models (``benchmarks/compile_models.py``).

    python -m benchmarks.compile_time [--models a,b] [--repeat 3] [--json FILE]

Each measurement runs ``onnxc.compile(path, threads=1, cache_dir=<fresh folder>)`` in a new Python
process, so nothing is cached on disk or in memory; only the runtime library (codegen/runtime_lib.py,
built once up front into an empty folder, which is timed and reported) is shared, linked into each
fresh folder. The time is taken
inside the child around ``onnxc.compile`` (interpreter start-up and ``import onnxc`` excluded).
Prints a Markdown table: ONNX node count, median/min/max seconds, and the median split of the
compile as onnxc reports it in ``CompiledModel.timings``: frontend + passes (load, passes), code
generation (lowering and C rendering) and the C compiler (build).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/compile_time.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.compile_models import BUILDERS, model_path  # noqa: E402

_CHILD = """
import json, sys, time
import onnxc
t = time.perf_counter()
m = onnxc.compile(sys.argv[1], threads=1, cache_dir=sys.argv[2])
wall = time.perf_counter() - t
print(json.dumps({"seconds": wall, **{k: float(v) for k, v in m.timings.items()}}))
"""
_RUNTIME = """
import sys, time
from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.runtime_lib import runtime_objects, runtime_sources
t = time.perf_counter()
runtime_objects(CompilerConfig(), runtime_sources(), sys.argv[1])
print(time.perf_counter() - t)
"""


def _run(code: str, *args: str) -> str:
    """Run ``code`` in a new interpreter; its stdout, or RuntimeError with the last lines of stderr."""
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" | ".join(r.stderr.strip().splitlines()[-3:])[:600])
    return r.stdout


def measure(path: Path, shared: Path) -> dict:
    """One cold compile of ``path`` in a child process with a fresh cache folder."""
    with tempfile.TemporaryDirectory(prefix="onnxc-ct-") as cache:
        if (shared / "runtime").is_dir():
            os.symlink(shared / "runtime", Path(cache) / "runtime")
        return json.loads(_run(_CHILD, str(path), cache).strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(BUILDERS), help=f"comma-separated, from {','.join(BUILDERS)}")
    ap.add_argument("--repeat", type=int, default=3, help="cold compiles per model (the median is reported)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(BUILDERS)}")
    import onnx

    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-ct-shared-") as shared:
        try:  # the runtime library, built once (timed: its one-time cost)
            runtime_s = float(_run(_RUNTIME, shared).strip().splitlines()[-1])
        except (RuntimeError, ValueError) as e:
            runtime_s = None
            print(f"warning: the runtime library build failed, nothing shared: {e}", file=sys.stderr)
        for name in names:
            path = model_path(name)
            row: dict = {"model": name, "nodes": len(onnx.load(str(path), load_external_data=False).graph.node),
                         "runs": [], "error": None}
            try:
                for _ in range(args.repeat):
                    row["runs"].append(measure(path, Path(shared)))
            except (RuntimeError, ValueError) as e:
                row["error"] = str(e)
            secs = [r["seconds"] for r in row["runs"]]
            if secs:
                row.update(median_s=statistics.median(secs), min_s=min(secs), max_s=max(secs))
                for key, parts in (("frontend_passes_s", ("load", "passes")), ("codegen_s", ("codegen",)),
                                   ("cc_s", ("build",))):
                    row[key] = statistics.median(sum(r.get(p, 0.0) for p in parts) for r in row["runs"])
            rows.append(row)
            print(f"{name}: {row.get('median_s', float('nan')):.2f} s" + (f" ({row['error']})" if row["error"] else ""),
                  file=sys.stderr, flush=True)
    cols = ("model", "nodes", "median s", "min s", "max s", "frontend+passes s", "codegen s", "C compiler s")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        nums = [r.get(k) for k in ("median_s", "min_s", "max_s", "frontend_passes_s", "codegen_s", "cc_s")]
        cells = [r["model"], str(r["nodes"]), *("-" if x is None else f"{x:.2f}" for x in nums)]
        print("| " + " | ".join(cells) + " |")
    for r in rows:
        if r["error"]:
            print(f"\n{r['model']}: onnxc FAILED after {len(r['runs'])} run(s): {r['error']}")
    print(f"\n(threads=1, {args.repeat} cold compile(s) per model, each in a new process with a fresh cache folder "
          f"sharing the runtime library; its one-time build took "
          f"{'-' if runtime_s is None else f'{runtime_s:.1f}'} s with {os.cpu_count()} jobs)")
    if args.json:
        Path(args.json).write_text(json.dumps({"repeat": args.repeat, "runtime_build_s": runtime_s, "rows": rows},
                                              indent=1))
    return rows


if __name__ == "__main__":
    main()
