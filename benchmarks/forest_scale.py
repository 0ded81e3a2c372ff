"""Compile time and run time of onnxc on large tree ensembles (issue #21: "forests as data").

    python -m benchmarks.forest_scale [--sizes small,large] [--threads 1] [--repeat 1] [--json FILE]

Builds LightGBM-like models with onnx.helper: a TreeEnsembleClassifier (ai.onnx.ml opset 1, as
onnxmltools writes them: BRANCH_LEQ nodes in trees of one class each, most nodes tracking missing values
to the true side, float thresholds) followed by a ZipMap, with random but valid trees generated level by
level with numpy over all trees at once. ``large`` has about 10,000 trees of about 500 nodes (~5 M nodes),
11 classes and 30 features; ``small`` 300 trees of about 200 nodes.

Per model it reports: the ONNX file size, a cold ``onnxc.compile`` (in a new process with a fresh cache
folder that shares only the prebuilt runtime library; wall and CPU seconds) split as
``CompiledModel.timings`` gives it (load, passes, codegen = lowering + C rendering, build = C compiler), the size of the generated C, the time
onnxruntime takes to create its session (also in a new process, alternating with the compiles), the peak
memory of both (peak RSS, raw and net of the process's peak after its import) and their ratios, and the run time of both at batch 1 and 256 (same thread count,
interleaved, median), after checking that labels and probabilities match onnxruntime's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: python benchmarks/forest_scale.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ML = "ai.onnx.ml"
SIZES = {  # trees, leaves per tree (about), features, classes
    "small": (300, 100, 30, 11),
    "large": (10_000, 250, 30, 11),
}
_PEAK = """
def peak_mb():  # this process's peak RSS: VmHWM (ru_maxrss would carry the parent's peak across fork + exec)
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""
_CHILD = """
import json, resource, sys, time
import onnxc
""" + _PEAK + """
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + r.ru_utime + r.ru_stime
base = peak_mb()
t, c = time.perf_counter(), cpu()
m = onnxc.compile(sys.argv[1], threads=int(sys.argv[3]), cache_dir=sys.argv[2])
wall, c = time.perf_counter() - t, cpu() - c
print(json.dumps({"seconds": wall, "cpu_s": c, "c_bytes": len(m.c_source.encode()),
                  "peak_mb": peak_mb(), "base_mb": base,
                  **{k: float(v) for k, v in m.timings.items()}}))
"""
_ORT_CHILD = """
import json, resource, sys, time
import onnxruntime as ort
""" + _PEAK + """
base = peak_mb()
so = ort.SessionOptions()
so.intra_op_num_threads, so.inter_op_num_threads = int(sys.argv[2]), 1
t, c = time.perf_counter(), time.process_time()
sess = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
wall, c = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": wall, "cpu_s": c, "peak_mb": peak_mb(), "base_mb": base}))
"""
_RUNTIME = """
import sys
from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.runtime_lib import runtime_objects, runtime_sources
runtime_objects(CompilerConfig(), runtime_sources(), sys.argv[1])
"""


def _branch_probs(leaves: int) -> list[float]:
    """Per depth the chance that a node splits, giving trees of about ``leaves`` leaves."""
    full = max(1, int(np.log2(leaves)) - 2)
    return [1.0] * full + [0.95, 0.8, 0.65, 0.45, 0.25, 0.1]


def tree_shapes(rng: np.random.Generator, n_trees: int, leaves: int) -> dict[str, np.ndarray]:
    """Random binary trees, level by level over all trees at once. Per node (grouped by tree, root first):
    tree, node id, whether it is a branch, and the node ids of its children (0 for leaves)."""
    tree, parent, side = [np.arange(n_trees)], [np.full(n_trees, -1)], [np.zeros(n_trees, np.int8)]
    branch, start = [], 0
    for p in _branch_probs(leaves) + [0.0]:
        n = len(tree[-1])
        b = rng.random(n) < p
        branch.append(b)
        idx = np.flatnonzero(b) + start
        start += n
        if not len(idx):
            break
        tree.append(np.repeat(tree[-1][b], 2))
        parent.append(np.repeat(idx, 2))
        side.append(np.tile(np.array([0, 1], np.int8), len(idx)))
    tree, parent, side = (np.concatenate(a[:len(branch)]) for a in (tree, parent, side))
    branch = np.concatenate(branch)
    order = np.argsort(tree, kind="stable")  # grouped by tree, each tree in level order (root first)
    pos = np.empty_like(order)
    pos[order] = np.arange(len(order))
    first = np.searchsorted(tree[order], np.arange(n_trees))
    nodeid = pos - first[tree]
    kids = np.zeros((len(tree), 2), np.int64)
    child = parent >= 0
    kids[parent[child], side[child]] = nodeid[child]
    return {"tree": tree[order], "nodeid": nodeid[order], "branch": branch[order], "true": kids[order, 0],
            "false": kids[order, 1]}


def lightgbm_like(n_trees: int, leaves: int, n_features: int, n_classes: int, seed: int = 0,
                  missing: float = 0.7):
    """A TreeEnsembleClassifier + ZipMap model shaped like onnxmltools' LightGBM multiclass export."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    s = tree_shapes(rng, n_trees, leaves)
    n, br = len(s["tree"]), s["branch"]
    feat = np.where(br, rng.integers(0, n_features, n), 0)
    split = np.where(br, rng.standard_normal(n).astype(np.float32), 0.0)
    track = br & (rng.random(n) < missing)
    leaf = ~br
    node = helper.make_node(
        "TreeEnsembleClassifier", ["input"], ["label", "probabilities"], domain=ML,
        nodes_treeids=s["tree"].tolist(), nodes_nodeids=s["nodeid"].tolist(), nodes_featureids=feat.tolist(),
        nodes_modes=np.where(br, "BRANCH_LEQ", "LEAF").tolist(), nodes_values=split.tolist(),
        nodes_truenodeids=s["true"].tolist(), nodes_falsenodeids=s["false"].tolist(),
        nodes_missing_value_tracks_true=track.astype(np.int64).tolist(),
        class_treeids=s["tree"][leaf].tolist(), class_nodeids=s["nodeid"][leaf].tolist(),
        class_ids=(s["tree"][leaf] % n_classes).tolist(),
        class_weights=(rng.standard_normal(int(leaf.sum())) * 0.05).astype(np.float32).tolist(),
        classlabels_int64s=list(range(n_classes)), post_transform="SOFTMAX")
    zipmap = helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML,
                              classlabels_int64s=list(range(n_classes)))
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64,
                                                                     helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    g = helper.make_graph([node, zipmap], "forest",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", n_features])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
                           helper.make_value_info("output_probability", seq)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])


def _run(code: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" | ".join(r.stderr.strip().splitlines()[-3:])[:600])
    return r.stdout


def cold_compile(path: Path, cache: Path, shared: Path, threads: int) -> dict:
    """One cold compile in a new process; ``cache`` is fresh but for the shared runtime library."""
    if (shared / "runtime").is_dir() and not (cache / "runtime").exists():
        cache.mkdir(parents=True, exist_ok=True)
        os.symlink(shared / "runtime", cache / "runtime")
    return json.loads(_run(_CHILD, str(path), str(cache), str(threads)).strip().splitlines()[-1])


def ort_open(path: Path, threads: int) -> dict:
    """onnxruntime creating its session in a new process: wall seconds and peak RSS (MB, raw and after import)."""
    return json.loads(_run(_ORT_CHILD, str(path), str(threads)).strip().splitlines()[-1])


def _median_s(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def compare(cm, sess, x: np.ndarray) -> dict:
    """Labels equal, probabilities close: onnxc against onnxruntime on ``x``."""
    got = cm.run({"input": x})
    lab, probs = sess.run(None, {"input": x})
    p_got = np.array([[d[k] for k in sorted(d)] for d in got["output_probability"]], np.float64)
    p_ort = np.array([[d[k] for k in sorted(d)] for d in probs], np.float64)
    return {"label_mismatches": int((got["label"] != lab).sum()), "max_abs_prob_diff": float(np.abs(p_got - p_ort).max())}


def run_times(cm, sess, x: np.ndarray, batches=(1, 256), rounds: int = 5) -> dict:
    """Median seconds per call of onnxc and onnxruntime at each batch size, interleaved."""
    out = {}
    for b in batches:
        xb = x[:b]
        reps = max(3, min(200, int(2000 / b)))
        cm.run({"input": xb}), sess.run(None, {"input": xb})  # warm up
        mine, theirs = [], []
        for _ in range(rounds):
            mine.append(_median_s(lambda xb=xb: cm.run({"input": xb}), reps))
            theirs.append(_median_s(lambda xb=xb: sess.run(None, {"input": xb}), reps))
        out[b] = {"onnxc_ms": statistics.median(mine) * 1e3, "ort_ms": statistics.median(theirs) * 1e3}
    return out


def measure(name: str, folder: Path, shared: Path, threads: int, repeat: int) -> dict:
    import onnx
    import onnxruntime as ort

    import onnxc

    trees, leaves, n_features, n_classes = SIZES[name]
    t = time.perf_counter()
    model = lightgbm_like(trees, leaves, n_features, n_classes)
    path = folder / f"forest_{name}.onnx"
    onnx.save(model, str(path))
    nodes = next(len(a.ints) for a in model.graph.node[0].attribute if a.name == "nodes_treeids")
    del model
    row = {"model": name, "trees": trees, "nodes": nodes, "file_mb": path.stat().st_size / 1e6,
           "build_model_s": time.perf_counter() - t}
    cache = folder / f"cache_{name}"
    runs, opens = [], []
    for k in range(repeat):  # interleaved, so both see the same load on a shared machine
        runs.append(cold_compile(path, folder / f"cache_{name}_{k}", shared, threads))
        opens.append(ort_open(path, threads))
    row["compile"] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    row["ort"] = {key: statistics.median(r[key] for r in opens) for key in opens[0]}
    c, o = row["compile"], row["ort"]
    row["time_ratio"] = c["seconds"] / o["seconds"]
    row["mem_ratio"] = (c["peak_mb"] - c["base_mb"]) / max(o["peak_mb"] - o["base_mb"], 1e-9)
    cache = folder / f"cache_{name}_0"  # the model cache holds it now: this compile is a hit
    cm = onnxc.compile(str(path), threads=threads, cache_dir=cache)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, n_features)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    row["match"] = compare(cm, sess, x)
    row["run"] = run_times(cm, sess, x)
    return row


def report(rows: list[dict], threads: int) -> str:
    lines = ["| model | trees | nodes | file MB | compile s | CPU s | load | passes | codegen | cc | C KB | ORT open s "
             "| compile/ORT | peak MB (net) | ORT peak MB (net) | mem ratio | b1 onnxc/ORT ms | b256 onnxc/ORT ms "
             "| match |", "|" + "---|" * 19]
    for r in rows:
        c, o, run = r["compile"], r["ort"], r["run"]
        ok = "ok" if r["match"]["label_mismatches"] == 0 and r["match"]["max_abs_prob_diff"] < 1e-4 else str(r["match"])
        lines.append(f"| {r['model']} | {r['trees']} | {r['nodes']} | {r['file_mb']:.1f} | {c['seconds']:.2f} | {c['cpu_s']:.2f} "
                     f"| {c['load']:.2f} | {c['passes']:.2f} | {c['codegen']:.2f} | {c['build']:.2f} "
                     f"| {c['c_bytes'] / 1e3:.0f} | {o['seconds']:.2f} | {r['time_ratio']:.2f} "
                     f"| {c['peak_mb']:.0f} ({c['peak_mb'] - c['base_mb']:.0f}) "
                     f"| {o['peak_mb']:.0f} ({o['peak_mb'] - o['base_mb']:.0f}) | {r['mem_ratio']:.2f} | "
                     + " | ".join(f"{run[b]['onnxc_ms']:.3f} / {run[b]['ort_ms']:.3f}" for b in (1, 256))
                     + f" | {ok} |")
    lines.append(f"\n(threads={threads}; compile: cold, in a new process with a fresh cache folder sharing the "
                 "runtime library, wall and CPU seconds (the C compiler's included: robust to a busy machine); "
                 "ORT open: its session created in a new process, interleaved with the compiles; peak MB: the "
                 "process's peak RSS (VmHWM), net of the peak after importing onnxc / onnxruntime; mem ratio: net / net; "
                 "run: median of interleaved rounds)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="small,large", help=f"comma-separated, from {','.join(SIZES)}")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="cold compiles per model (the median is reported)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    names = [n for n in args.sizes.split(",") if n]
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {unknown}; known: {', '.join(SIZES)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-forest-") as tmp:
        folder = Path(tmp)
        _run(_RUNTIME, str(folder / "shared"))
        for name in names:
            rows.append(measure(name, folder, folder / "shared", args.threads, args.repeat))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(report(rows, args.threads))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
