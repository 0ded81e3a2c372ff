"""Real-suite models saved after onnxruntime's optimizers, compiled by onnxc and compared with onnxruntime.

    python -m benchmarks.optimized_exports [--models bert,gpt2,t5] [--md FILE]

Users often ship a model after ``onnxruntime.transformers.optimizer.optimize_model`` (as Hugging Face
Optimum does) or after an onnxruntime session saved its graph at the extended level
(``SessionOptions.optimized_model_filepath``): both write onnxruntime's contrib ops (com.microsoft). For
each torch model of the real suite (benchmarks/real, built on first use; needs the bench extra), this
makes those files, lists the contrib ops in them, compiles them with onnxc and compares the outputs with
onnxruntime running the same file, at two input sizes (two sequence lengths for token models, two batch
sizes for images). Then the same for the Hugging Face architectures of benchmarks/hf_models.py (RoBERTa,
DistilBERT, CLIP, T5, BART, Whisper; optimizer model types as ``HFModel.model_type``), whose patterns are the
ones the transformer optimizer's fusions look for. Needs ``sympy`` (the transformer optimizer's shape
inference) and, for the Hugging Face models, ``transformers``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

# architecture -> the transformer optimizer's (model_type, num_heads, hidden_size) (benchmarks/real's
# configurations; 0: the optimizer finds them); the others get the session's extended level only
TRANSFORMER_TYPES = {"bert": ("bert", 0, 0), "gpt2": ("gpt2", 4, 256), "vit_tiny": ("vit", 3, 192),
                     "llama": ("bert", 8, 256), "conformer": ("bert", 0, 0)}
FAMILIES = ("CNN", "mobile CNN", "detector", "transformer encoder", "decoder")
NOTE = ("Error: max |onnxc - onnxruntime| / max |onnxruntime| over the outputs, at two input sizes. \"vs. source\": "
        "onnxruntime has no CPU kernel for an op of the file (RelativePositionBias), so the reference is onnxruntime "
        "running the file before optimization. Hugging Face models: benchmarks/hf_models.py.")


def optimized(path: Path, arch: str, out: Path, transformer: tuple[str, int, int] | None = None) -> dict[str, Path]:
    """The optimized files of ``path``: the session's extended level and, for transformers (``arch`` in
    TRANSFORMER_TYPES, or ``transformer`` given as (model_type, num_heads, hidden_size)), the transformer
    optimizer with its fusions only, at its default level for the model type and at the extended level."""
    import onnxruntime as ort

    made = {}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(out / f"{path.stem}-extended.onnx")
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    made["session, extended level"] = Path(so.optimized_model_filepath)
    transformer = transformer or TRANSFORMER_TYPES.get(arch)
    if transformer:
        from onnxruntime.transformers.optimizer import MODEL_TYPES, optimize_model

        kind, heads, hidden = transformer
        default = MODEL_TYPES[kind][2]
        # its fusions alone (opt_level 0), its default for the model type (onnxruntime's basic or extended
        # graph optimizations first), and onnxruntime's extended level first
        for level, how in ((0, "fusions only"), (None, f"default level {default}"), (2, "extended level 2")):
            if level == 2 and default == 2:
                continue
            m = optimize_model(str(path), model_type=kind, num_heads=heads, hidden_size=hidden, opt_level=level)
            p = out / f"{path.stem}-transformers-{level}.onnx"
            m.save_model_to_file(str(p))
            made[f"transformers optimizer, {how}"] = p
    return made


def contrib_ops(path: Path) -> str:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    c = collections.Counter(n.op_type for n in m.graph.node if n.domain == "com.microsoft")
    return ", ".join(f"{op} x{k}" for op, k in sorted(c.items())) or "(none)"


def sizes(feeds: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The feeds, and a second set: token inputs cut to half their length, images doubled in batch."""
    second = {}
    for k, v in feeds.items():
        second[k] = v[:, : max(1, v.shape[1] // 2)] if v.dtype.kind in "iu" and v.ndim == 2 else np.concatenate([v, v])
    return [feeds, second]


def check(path: Path, feed_sets: list[dict[str, np.ndarray]], reference: Path | None = None) -> tuple[str, list[float]]:
    """("ok" or the failure, the max relative error per feed set) of onnxc against onnxruntime running ``path``,
    or ``reference`` (the file before optimization; the status is then "ok (vs. source)") when onnxruntime has
    no CPU kernel for an op of ``path`` (RelativePositionBias, which its optimizer writes for T5, has only a
    CUDA kernel)."""
    import onnxruntime as ort

    import onnxc

    try:
        cm = onnxc.compile(str(path))
    except Exception as e:  # noqa: BLE001 (reported in the table)
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}", []
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 (an op onnxruntime has no CPU kernel for: compare with the source file)
        if reference is None or "NOT_IMPLEMENTED" not in str(e):
            raise
        sess = ort.InferenceSession(str(reference), providers=["CPUExecutionProvider"])
        vs = " (vs. source)"
    else:
        vs = ""
    errs = []
    names = {i.name for i in sess.get_inputs()}
    for feeds in feed_sets:
        feeds = {k: v for k, v in feeds.items() if k in names}  # an exporter may drop an unused input
        want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        got = cm.run(feeds)
        errs.append(max(float(np.max(np.abs(got[k] - w)) / (np.max(np.abs(w)) + 1e-12)) for k, w in want.items()))
    return ("ok" if max(errs) <= 1e-3 else "mismatch") + vs, errs


def entries(only: str | None) -> list[tuple[str, Callable[[], Path], list, tuple[str, int, int] | None]]:
    """(name, a maker of its file, its two feed sets, the transformer optimizer's arguments or None) of
    the real suite's torch models and of the Hugging Face models, those whose names contain a part of ``only``."""
    from benchmarks import hf_models
    from benchmarks.real import MODELS, model_path

    def wanted(name: str) -> bool:
        return not only or any(p in name for p in only.split(","))

    out = [(n, functools.partial(model_path, n), sizes(MODELS[n].feeds(np.random.default_rng(0), 2)), None)
           for n, m in MODELS.items() if m.family in FAMILIES and m.source.startswith("torch") and wanted(n)]
    for n in hf_models.NAMES:
        arch = hf_models.MODELS[n.split("/")[0]]
        if wanted(n):
            out.append((n, functools.partial(hf_models.model_path, n), hf_models.feed_sets(arch.name),
                        (arch.model_type, hf_models.HEADS, hf_models.HIDDEN)))
    return out


def summary(done: dict[str, dict[str, str]], full: str | None) -> str:
    """One row per model: the result (and max relative error over both sizes) of each optimized file."""
    cols = ["session, extended", "transformers optimizer, fusions only", "transformers optimizer, default",
            "transformers optimizer, extended"]
    out = ["| model | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, got in done.items():
        same = "as default" if "transformers optimizer, default" in got else "-"  # (t5: its default is extended)
        out.append(f"| {name} | " + " | ".join(got.get(c, same if c.endswith("extended") and c != cols[0] else "-")
                                               for c in cols) + " |")
    n = sum(len(g) for g in done.values())
    ok = sum(v.startswith("ok") for g in done.values() for v in g.values())
    tail = f" (the contrib ops of each file: [{full}]({full}))" if full else ""
    return "\n".join(out) + f"\n\n{ok} of {n} optimized files of {len(done)} models compile and match{tail}."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.optimized_exports", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated parts of model names (default: every torch model of the real "
                                     f"suite's families {', '.join(FAMILIES)}, and every benchmarks/hf_models.py model)")
    ap.add_argument("--md", metavar="FILE", help="also write the table as markdown")
    ap.add_argument("--summary", metavar="FILE", help="also write one row per model as markdown (the README's table)")
    args = ap.parse_args(argv)
    done: dict[str, dict[str, str]] = {}
    lines = ["| model | optimized by | contrib ops in the file | onnxc | max rel. error (two sizes) |",
             "|---|---|---|---|---|"]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="onnxc-optimized-") as tmp:
        for name, make, feed_sets, transformer in entries(args.models):
            source = make()
            for how, p in optimized(source, name.split("/")[0], Path(tmp), transformer).items():
                status, errs = check(p, feed_sets, source)
                bad += not status.startswith("ok")
                lines.append(f"| {name} | {how} | {contrib_ops(p)} | {status} | "
                             f"{' / '.join(f'{e:.1e}' for e in errs) or '-'} |")
                done.setdefault(name, {})[how.split(",")[0] + (", " + how.split(", ")[1].split(" level")[0]
                                                              if ", " in how else "")] = \
                    f"{status} {max(errs):.0e}" if errs else status
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    if args.md:
        Path(args.md).write_text(f"Generated by `python -m benchmarks.optimized_exports --md {args.md}`. {NOTE}\n\n"
                                 f"{table}\n")
    if args.summary:
        Path(args.summary).write_text(summary(done, args.md) + "\n")
    print(f"{len(lines) - 2} optimized files, {bad} not ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
