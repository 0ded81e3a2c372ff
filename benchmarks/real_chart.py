"""A PNG of the real suite's ratios per model, one bar per thread count (matplotlib, the bench extra).

    python -m benchmarks.real_chart benchmarks/results-real-threads1.json benchmarks/results-real-threads2.json \\
        [--out benchmarks/real_ratios.png]

Reads the ``--json`` files of ``python -m benchmarks.run --suite real``; the rows (model @ batch) go top
to bottom in suite order, grouped by family, with the ratio onnxc / onnxruntime on a log axis (left of
1 is onnxc faster). A row with no ratio (failed to export, compile or run) is marked with its status;
a row whose outputs differ from onnxruntime's is marked MISMATCH.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(files: list[str]) -> list[dict]:
    """The runs, each {"threads", "rows", "geomean"}, in the order given."""
    runs = []
    for f in files:
        d = json.loads(Path(f).read_text())
        runs.append({"threads": d["environment"]["threads"], "rows": d["models"], "geomean": d.get("geomean_ratio")})
    return runs


def chart(runs: list[dict], out: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []
    family: dict[str, str] = {}
    for run in runs:
        for r in run["rows"]:
            if r["model"] not in family:
                names.append(r["model"])
                family[r["model"]] = r.get("family", "")
    n, k = len(names), len(runs)
    height = 0.8 / max(k, 1)
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.22 * n * max(1, k / 2)))
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for j, run in enumerate(runs):
        by = {r["model"]: r for r in run["rows"]}
        ys, xs, notes = [], [], []
        for i, name in enumerate(names):
            r = by.get(name)
            y = i + (j - (k - 1) / 2) * height
            if r is None:
                continue
            if r.get("ratio"):
                ys.append(y)
                xs.append(r["ratio"])
                if r["status"] == "MISMATCH":
                    notes.append((y, r["ratio"], "MISMATCH"))
            else:
                notes.append((y, 1.0, r["status"]))
        g = run["geomean"]
        ax.barh(ys, xs, height=height, color=colors[j % len(colors)],
                label=f"{run['threads']} thread(s), geomean {g:.2f}" if g else f"{run['threads']} thread(s)")
        for y, x, text in notes:
            ax.text(x, y, f" {text}", va="center", fontsize=6, color="red")
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    prev = None
    for i, name in enumerate(names):  # a line and a label where a family starts
        if family[name] != prev:
            ax.axhline(i - 0.5, color="grey", linewidth=0.5)
            ax.text(1.0, i - 0.45, f" {family[name]}", fontsize=7, color="grey", va="top",
                    transform=ax.get_yaxis_transform())
            prev = family[name]
    ax.set_xlabel("onnxc / onnxruntime median latency (log scale; < 1: onnxc faster)")
    ax.set_title("Real-model suite: onnxc vs onnxruntime per model @ batch")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.real_chart", description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="--json files of `python -m benchmarks.run --suite real`")
    ap.add_argument("--out", default=str(HERE / "real_ratios.png"), help="the PNG (default benchmarks/real_ratios.png)")
    args = ap.parse_args(argv)
    print(f"wrote {chart(load(args.json), args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
