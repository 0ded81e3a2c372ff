"""The quantized-model suite (issue #17): ``python -m benchmarks.run --suite quant [options]``.

Every variant of ``benchmarks/quant`` (a real-suite float model quantized by onnxruntime: static QDQ,
static QOperator, dynamic int8, 4-bit MatMulNBits) at batch 1 and one larger batch. Per row, three
things are timed in alternating blocks with the harness of ``onnxc.bench`` (``interleaved``, the same
thread count on every side): onnxc on the quantized model, onnxruntime on it (all graph
optimizations, as deployed), and onnxc's float32 build of the source model. Reported: the medians, the
ratio onnxc / onnxruntime, onnxc's int8 speedup over its own float32 build, and the accuracy:

- deviations in quantization steps (``benchmarks/quant/accuracy.py``) from onnxruntime as deployed
  ("ort") and from onnxruntime with graph optimizations disabled ("ref", ORT_DISABLE_ALL: the graph as
  written); onnxruntime's own spread between the two; the int8 error, onnxruntime's quantized outputs
  against its float32 outputs of the source model (what quantization itself costs); max abs / rel
  error against "ort";
- for the classifiers, top-1 agreement of onnxc with onnxruntime over 100 random inputs.

A row is within tolerance when onnxc is at most ``max(--tol-steps (1), spread)`` steps from one of the
onnxruntime runs. Beyond that it is MISMATCH, unless the deviation is still within the int8 error: then
the row notes a drift. A drift is what one rounding flip does (a value that lands on a .5 boundary after
a float op computed in another order, quantized one step apart): in one BERT run, one element of one
DynamicQuantizeLinear differing by 1 in the first layer grows through four layers to 1.6 output steps,
while onnxruntime's two runs agree exactly (they share their float kernels). A model that fails to
quantize, compile or run is a row saying so; the other engines are still timed. The table ends with
per-format geomeans; ``--json`` writes every number, ``--md`` a Markdown page.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import onnxc
from benchmarks.busy import BusyLoad
from benchmarks.quant.accuracy import deviation, output_steps, top1_agreement
from benchmarks.run import _one_line, environment
from onnxc.bench import QUICK, Budget, fmt, geomean, interleaved, ort_session, summary

SLACK = 1e-3  # relative: a deviation of exactly one step comes out as 1.0000001 steps in float


@dataclass(frozen=True)
class Options:
    """How to run the rows: thread count, timing budget, top-1 inputs, tolerance, where caches go."""

    threads: int = 1
    budget: Budget = QUICK
    top1: int = 100
    tol_steps: float = 1.0
    busy: int = 0
    work: Path = Path(tempfile.gettempdir())
    runtime: Path | None = None  # a cache's runtime folder that the fresh caches share


def ort_reference(model: str | os.PathLike, threads: int):
    """An onnxruntime session with graph optimizations disabled: it runs the graph as written."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = threads, 1, 3
    return ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])


def error_text(e: BaseException) -> str:
    """An error on one line: compiler output as benchmarks.run does; a list (unsupported operators)
    as its first line and each item up to its first ';' or '('."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    if len(lines) < 2 or type(e).__name__ == "CompileError":
        return _one_line(e)
    items = [x.split(";")[0].split(" (")[0] for x in lines[1:6]]
    return f"{type(e).__name__}: {lines[0]} {', '.join(items)}"[:300]


def _cache(work: Path, name: str, runtime: Path | None) -> Path:
    d = work / name.replace("/", "-")
    d.mkdir(parents=True, exist_ok=True)
    if runtime is not None and not (d / "runtime").exists():
        os.symlink(runtime, d / "runtime")
    return d


def compile_timed(path: str | os.PathLike, threads: int, cache: Path) -> tuple[object | None, float | None, str | None]:
    """(compiled model, compile seconds, None) or (None, None, the error on one line)."""
    try:
        t = time.perf_counter()
        m = onnxc.compile(path, threads=threads, cache_dir=cache)
        return m, time.perf_counter() - t, None
    except Exception as e:  # unsupported op, compiler error...: a row, not a crash
        return None, None, error_text(e)


def _ort_run(sess, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _top1_logits(run, out: str, feeds_fn, n: int, symbolic_batch: bool) -> np.ndarray:
    """Output ``out`` (logits) for ``n`` seeded random inputs: one batch of ``n`` when the batch dim is
    symbolic, else ``n`` runs of the model's own batch."""
    rng = np.random.default_rng(7)
    if symbolic_batch:
        return run(feeds_fn(rng, n))[out]
    return np.concatenate([run(feeds_fn(rng, 1))[out] for _ in range(n)])


def top1(compiled, ort_opt, ort_ref, feeds_fn, n: int) -> dict:
    """Top-1 agreement of the first output over ``n`` inputs: onnxc vs onnxruntime, and onnxruntime vs
    its graph as written."""
    sym = not isinstance(ort_opt.get_inputs()[0].shape[0], int)
    out = ort_opt.get_outputs()[0].name
    want = _top1_logits(lambda f: _ort_run(ort_opt, f), out, feeds_fn, n, sym)
    ref = _top1_logits(lambda f: _ort_run(ort_ref, f), out, feeds_fn, n, sym)
    res = {"top1": None, "top1_ort_ref": top1_agreement(want, ref), "top1_n": n, "top1_error": None}
    if compiled is not None:
        try:
            res["top1"] = top1_agreement(_top1_logits(compiled.run, out, feeds_fn, n, sym), want)
        except Exception as e:  # onnxc failing at that batch size
            res["top1_error"] = error_text(e)
    return res


def judge(row: dict, tol_steps: float) -> None:
    """Set MISMATCH, or a drift note, from the deviations in ``row`` (see the module docstring)."""
    dev = min(row["vs_ort"]["steps"], row["vs_ort_ref"]["steps"])
    row["tol_steps"] = tol = max(tol_steps, row["ort_spread"]["steps"])
    if dev <= tol * (1 + SLACK):
        return
    int8_err = (row.get("int8_err") or {}).get("steps")
    if int8_err is not None and dev <= int8_err * (1 + SLACK):
        row["drift"] = f"{dev:.1f} steps > {tol:.1f}, within the int8 error {int8_err:.1f}"
    else:
        row["status"] = "MISMATCH"


def measure(row: dict, q, f32: tuple, ort_opt, ort_ref, feeds: dict[str, np.ndarray], steps: dict,
            opts: Options) -> dict:
    """Fill ``row`` with the accuracy and the interleaved timings of onnxc int8, onnxruntime and onnxc
    f32; ``f32`` is (onnxc float32 model or None, onnxruntime float32 session or None)."""
    fns: dict[str, object] = {}
    want = ref = got = None
    try:
        want, ref = _ort_run(ort_opt, feeds), _ort_run(ort_ref, feeds)
        fns["onnxruntime"] = lambda: ort_opt.run(None, feeds)
        row["ort_spread"] = deviation(want, ref, steps)
        if f32[1] is not None:
            row["int8_err"] = deviation(want, _ort_run(f32[1], feeds), steps)
    except Exception as e:
        row["status"], row["error"] = "onnxruntime failed", error_text(e)
    if q is not None:
        try:
            got = q.run(feeds)
            fns["onnxc"] = lambda: q.run(feeds)
        except Exception as e:
            row["status"], row["error"] = "onnxc run failed", error_text(e)
    if got is not None and want is not None:
        row["vs_ort"], row["vs_ort_ref"] = deviation(got, want, steps), deviation(got, ref, steps)
        judge(row, opts.tol_steps)
    if f32[0] is not None:
        fns["onnxc_f32"] = lambda: f32[0].run(feeds)
    for name, ts in zip(fns, interleaved(list(fns.values()), opts.budget)):
        row[name] = summary(ts)
    ms = {k: (row.get(k) or {}).get("median_ms") for k in ("onnxc", "onnxruntime", "onnxc_f32")}
    row["ratio"] = ms["onnxc"] / ms["onnxruntime"] if ms["onnxc"] and ms["onnxruntime"] else None
    row["speedup"] = ms["onnxc_f32"] / ms["onnxc"] if ms["onnxc"] and ms["onnxc_f32"] else None
    return row


def new_row(name: str, v, batch: int) -> dict:
    return {"model": name, "variant": v.name, "format": v.fmt, "family": v.family, "source": v.source,
            "batch": batch, "status": "ok", "error": None, "onnxc": None, "onnxruntime": None, "onnxc_f32": None,
            "ratio": None, "speedup": None, "vs_ort": None, "vs_ort_ref": None, "ort_spread": None,
            "int8_err": None, "tol_steps": None, "drift": None, "top1": None, "top1_ort_ref": None,
            "compile_s": None, "f32_error": None}


def float_engines(fpath: Path, opts: Options, floats: dict) -> dict:
    """onnxc's float32 build of ``fpath`` (model, seconds, error) and an onnxruntime session of it,
    made once per source model and kept in ``floats``."""
    if fpath not in floats:
        compiled = compile_timed(fpath, opts.threads, _cache(opts.work, f"f32-{fpath.stem}", opts.runtime))
        try:
            sess = ort_session(fpath, opts.threads)
        except Exception:  # then there is no int8 error to report; the rows say nothing more
            sess = None
        floats[fpath] = {"onnxc": compiled, "ort": sess}
    return floats[fpath]


def bench_variant(v, qpath: Path, fpath: Path, opts: Options, floats: dict,
                  sizes: tuple[int, ...] | None = None) -> list[dict]:
    """The rows of one variant (one per size): compile it (cold, fresh cache), reuse or build the
    float source's engines (``float_engines``), measure each size, then the classifiers' top-1."""
    q, q_s, q_err = compile_timed(qpath, opts.threads, _cache(opts.work, f"q-{v.name}", opts.runtime))
    fl = float_engines(fpath, opts, floats)
    sizes = v.sizes if sizes is None else sizes
    try:
        ort_opt, ort_ref = ort_session(qpath, opts.threads), ort_reference(qpath, opts.threads)
    except Exception as e:  # onnxruntime cannot load what its own quantizer wrote
        return [new_row(f"{v.name}@b{b}", v, b) | {"status": "onnxruntime failed", "error": error_text(e)} for b in sizes]
    steps = output_steps(qpath)
    rows = []
    with BusyLoad(opts.busy):
        for b in sizes:
            row = new_row(f"{v.name}@b{b}", v, b)
            if q is None:
                row["status"], row["error"] = "onnxc failed", q_err
            row["compile_s"] = q_s if not rows else None
            row["f32_error"] = fl["onnxc"][2]
            feeds = v.feeds(np.random.default_rng(1), b)
            rows.append(measure(row, q, (fl["onnxc"][0], fl["ort"]), ort_opt, ort_ref, feeds, steps, opts))
    if rows and v.classifier and opts.top1:
        rows[0].update(top1(q, ort_opt, ort_ref, v.feeds, opts.top1))
    return rows


COLUMNS = ("model", "format", "onnxc ms", "ort ms", "ratio", "onnxc f32 ms", "int8 speedup", "steps ort/ref",
           "ort spread", "int8 err", "max abs", "max rel", "top1", "compile s", "note")


def _note(r: dict) -> str:
    parts = [] if r["status"] == "ok" else [r["status"] + (f": {r['error']}" if r.get("error") else "")]
    parts += [f"drift {r['drift']}"] if r.get("drift") else []
    parts += [f"f32 failed: {r['f32_error']}"] if r.get("f32_error") else []
    parts += [f"top1: {r['top1_error']}"] if r.get("top1_error") else []
    return "; ".join(parts)[:140]


def table_row(r: dict) -> tuple[str, ...]:
    ms = {k: (r.get(k) or {}).get("median_ms") for k in ("onnxc", "onnxruntime", "onnxc_f32")}
    dev, ref = r.get("vs_ort") or {}, r.get("vs_ort_ref") or {}
    steps = "-" if not dev else f"{dev['steps']:.1f} / {ref['steps']:.1f}"
    top = "-" if r.get("top1") is None else f"{100 * r['top1']:.0f}%"
    return (r["model"], r["format"], fmt(ms["onnxc"], ".2f"), fmt(ms["onnxruntime"], ".2f"), fmt(r.get("ratio"), ".2f"),
            fmt(ms["onnxc_f32"], ".2f"), fmt(r.get("speedup"), ".2f"), steps,
            fmt((r.get("ort_spread") or {}).get("steps"), ".1f"), fmt((r.get("int8_err") or {}).get("steps"), ".1f"),
            fmt(dev.get("max_abs"), ".1e"), fmt(dev.get("max_rel"), ".1e"), top, fmt(r.get("compile_s"), ".1f"),
            _note(r))


def format_summary(rows: list[dict]) -> list[dict]:
    """Per format (in row order): rows, timed rows, failures, mismatches, geomean ratio and speedup."""
    out: dict[str, dict] = {}
    for r in rows:
        f = out.setdefault(r["format"], {"format": r["format"], "rows": 0, "timed": 0, "failed": 0, "mismatch": 0,
                                         "ratios": [], "speedups": []})
        f["rows"] += 1
        f["timed"] += bool(r.get("ratio"))
        f["mismatch"] += r["status"] == "MISMATCH"
        f["failed"] += r["status"] not in ("ok", "MISMATCH")
        f["ratios"].append(r.get("ratio"))
        f["speedups"].append(r.get("speedup"))
    for f in out.values():
        f["geomean_ratio"], f["geomean_speedup"] = geomean(f.pop("ratios")), geomean(f.pop("speedups"))
    return list(out.values())


SUMMARY = ("format", "rows", "timed", "failed", "mismatch", "geomean ratio", "geomean int8 speedup")


def _summary_cells(rows: list[dict]) -> list[tuple[str, ...]]:
    cells = [(f["format"], str(f["rows"]), str(f["timed"]), str(f["failed"]), str(f["mismatch"]),
              fmt(f["geomean_ratio"], ".3f"), fmt(f["geomean_speedup"], ".2f")) for f in format_summary(rows)]
    mismatch = sum(r["status"] == "MISMATCH" for r in rows)
    failed = sum(r["status"] != "ok" for r in rows) - mismatch
    return cells + [("all", str(len(rows)), str(sum(bool(r.get("ratio")) for r in rows)), str(failed), str(mismatch),
                     fmt(geomean([r.get("ratio") for r in rows]), ".3f"),
                     fmt(geomean([r.get("speedup") for r in rows]), ".2f"))]


def _aligned(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    lines = ["  ".join(x.ljust(w) if i in (0, 1, len(header) - 1) else x.rjust(w)
                       for i, (x, w) in enumerate(zip(line, widths))).rstrip() for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_table(rows: list[dict]) -> str:
    """The rows, then the per-format geomeans (ratio onnxc / onnxruntime; onnxc f32 ms / onnxc int8 ms)."""
    return "\n".join(_aligned(COLUMNS, [table_row(r) for r in rows]) + [""]
                     + _aligned(SUMMARY, _summary_cells(rows)))


def markdown(rows: list[dict], env: dict) -> str:
    """A Markdown page of the run: what it ran on, the rows and the per-format geomeans."""
    def md(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                + ["| " + " | ".join(esc(c) for c in line) + " |" for line in body])

    busy = f", {env['busy']} busy process(es)" if env.get("busy") else ""
    head = [f"# Quantized models: onnxc vs onnxruntime {env.get('onnxruntime')}", "",
            "Generated by `python -m benchmarks.run --suite quant --md FILE` (or `--render JSON... --md FILE` from "
            "saved runs); do not edit by hand.", "",
            f"{env.get('threads')} thread(s){busy}, {env.get('cpu')}, {env.get('cc')}, {env.get('date')}. ratio = onnxc ms / onnxruntime ms (lower is "
            "better for onnxc); int8 speedup = onnxc float32 ms / onnxc quantized ms; steps = max deviation in "
            "the output's quantization steps from onnxruntime as deployed / with graph optimizations disabled; "
            "ort spread = the steps between those two; int8 err = the steps between onnxruntime's quantized "
            "and float32 outputs; top1 = arg-max agreement with onnxruntime over random inputs. "
            "Tolerance and drift: see benchmarks/quant_suite.py.", ""]
    return "\n".join(head + md(COLUMNS, [table_row(r) for r in rows]) + [""] + md(SUMMARY, _summary_cells(rows))) + "\n"


def _progress(r: dict) -> str:
    cells = dict(zip(COLUMNS, table_row(r)))
    return "  " + ", ".join(f"{k} {v}" if k != "model" else v for k, v in cells.items() if v and v != "-")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.quant import VARIANTS, float_path, quantized_path
    from benchmarks.real_suite import _select
    from onnxc.codegen.cache import cache_dir
    from onnxc.codegen.compiler import CompilerConfig
    from onnxc.codegen.runtime_lib import runtime_objects, runtime_sources

    ap = argparse.ArgumentParser(prog="python -m benchmarks.run --suite quant", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads of every engine (default 1)")
    ap.add_argument("--models", help="comma-separated names or parts of names (e.g. resnet18,dynamic)")
    ap.add_argument("--sizes", choices=("all", "small", "large"), default="all",
                    help="batch 1 (small), the larger batch (large) or both (default)")
    ap.add_argument("--quick", action="store_true", help="few runs (smoke test)")
    ap.add_argument("--runs", type=int, default=20, help="at least this many timed runs per engine (default 20)")
    ap.add_argument("--seconds", type=float, default=3.0, help="and at least this many seconds per row (default 3)")
    ap.add_argument("--top1", type=int, default=100, help="random inputs for the classifiers' top-1 agreement (0: skip)")
    ap.add_argument("--tol-steps", type=float, default=1.0, help="quantization steps above which a row is MISMATCH")
    ap.add_argument("--cache", metavar="DIR", help="where the quantized models are built (default benchmarks/.models/quant)")
    ap.add_argument("--json", metavar="FILE", help="write every number as JSON")
    ap.add_argument("--md", metavar="FILE", help="write the table as Markdown (e.g. benchmarks/QUANT_RESULTS.md)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="N CPU-bound processes spin while timing")
    ap.add_argument("--render", nargs="+", metavar="JSON", help="no timing: write --md from these --json files "
                    "(one section per run, e.g. 1 and 2 threads)")
    args = ap.parse_args(argv)
    if args.render:
        if not args.md:
            ap.error("--render needs --md FILE")
        runs = [json.loads(Path(f).read_text()) for f in args.render]
        pages = [markdown(r["models"], r["environment"]) for r in runs]
        Path(args.md).write_text(pages[0] + "".join("\n" + p.split("\n", 4)[4] for p in pages[1:]))  # one title
        print(f"wrote {args.md}")
        return 0
    if args.list:
        for v in VARIANTS.values():
            print(f"{v.name:<24} {v.fmt:<18} from {v.source:<22} batch {'/'.join(map(str, v.sizes))}")
        return 0
    names = _select(VARIANTS, args.models, None)
    if not names:
        ap.error(f"no model matches; known: {', '.join(VARIANTS)}")
    env = environment(args.threads)
    env.update(suite="quant", busy=args.busy)
    print(f"quant suite: onnxc vs onnxruntime {env['onnxruntime']}, {args.threads} thread(s), {env['cpu']}, "
          + (f"{args.busy} busy process(es), " if args.busy else "")
          + f"load average {', '.join(f'{x:.1f}' for x in env['load_average'] or ())}", flush=True)
    runtime_objects(CompilerConfig(), runtime_sources())
    budget = QUICK if args.quick else Budget(min_runs=args.runs, seconds=args.seconds)
    rows: list[dict] = []
    floats: dict = {}
    with tempfile.TemporaryDirectory(prefix="onnxc-bench-quant-") as work:
        opts = Options(args.threads, budget, args.top1, args.tol_steps, args.busy, Path(work), cache_dir(None) / "runtime")
        for name in names:
            v = VARIANTS[name]
            sizes = {"all": v.sizes, "small": v.sizes[:1], "large": v.sizes[1:]}[args.sizes]
            try:
                t = time.perf_counter()
                qpath, fpath = quantized_path(name, args.cache), float_path(name)
                build_s = time.perf_counter() - t
            except Exception as e:  # the quantizer refuses, or onnx-ir / torch is missing
                new = [new_row(f"{name}@b{b}", v, b) | {"status": "quantize failed", "error": error_text(e)} for b in sizes]
            else:
                new = bench_variant(v, qpath, fpath, opts, floats, sizes)
                new[0]["build_s"] = build_s
            for r in new:
                print(_progress(r), flush=True)
            rows += new
        floats.clear()
    print()
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": env, "budget": vars(budget), "formats": format_summary(rows),
                                               "geomean_ratio": geomean([r.get("ratio") for r in rows]),
                                               "models": rows}, indent=1, default=str))
        print(f"wrote {args.json}")
    if args.md:
        Path(args.md).write_text(markdown(rows, env))
        print(f"wrote {args.md}")
    return 0
