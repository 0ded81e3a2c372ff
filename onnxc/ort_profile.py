"""onnxruntime's own per-node profile, for ``onnxc bench --profile`` to show beside onnxc's.

onnxruntime writes a Chrome-trace JSON when ``SessionOptions.enable_profiling`` is set: one ``Node``
event per kernel run, named ``<node>_kernel_time`` with the operator in ``args.op_name``. Its
optimizer fuses nodes (Conv + activation -> FusedConv, ...) and onnxc fuses others, so the two are
compared per operator family and per node name where both kept a node.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OrtProfile:
    runs: int
    by_node: dict[str, tuple[str, float]]  # node name -> (op, seconds summed over the runs)

    @property
    def step_sum(self) -> float:
        return sum(s for _, s in self.by_node.values())

    def by_op(self) -> list[tuple[str, int, float]]:
        """(op, nodes, seconds) per operator, slowest first."""
        acc: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for op, s in self.by_node.values():
            acc[op][0] += 1
            acc[op][1] += s
        return sorted(((op, n, s) for op, (n, s) in acc.items()), key=lambda r: -r[2])

    def format(self, top: int | None = None) -> str:
        per = 1e3 / max(self.runs, 1)
        total = self.step_sum
        lines = [f"onnxruntime profile: {len(self.by_node)} nodes, {self.runs} run(s), {total * per:.3f} ms per run "
                 "in kernels", "by operator:"]
        for op, n, s in self.by_op()[:top]:
            lines.append(f"  {op:<26} {n:>3} node(s) {s * per:>11.3f} ms/run {100 * s / total if total else 0:>7.2f}%")
        return "\n".join(lines)


def ort_profile(model: str | os.PathLike, feeds: dict[str, np.ndarray], threads: int, runs: int) -> OrtProfile:
    """Run ``model`` ``runs`` times (after one warm-up) in a profiling session and sum each node's time."""
    from .bench import ort_session

    with tempfile.TemporaryDirectory(prefix="onnxc-ort-profile-") as tmp:
        sess = ort_session(model, threads, profile_prefix=os.path.join(tmp, "ort"))
        sess.run(None, feeds)
        for _ in range(runs):
            sess.run(None, feeds)
        path = sess.end_profiling()
        events = json.loads(open(path).read())
    by_node: dict[str, list] = {}
    seen: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        seen[name] += 1
        entry = by_node.setdefault(name, [e.get("args", {}).get("op_name", "?"), 0.0])
        entry[1] += e.get("dur", 0) * 1e-6
    # the warm-up run is profiled too: scale each node's sum to ``runs`` runs
    out = {k: (op, s * runs / max(seen[k], 1)) for k, (op, s) in by_node.items()}
    return OrtProfile(runs, out)


def _match(description: str, by_node: dict) -> tuple[str, float] | None:
    """onnxruntime's entry for an onnxc step: by node name, else by an output's name (onnxruntime names
    nodes it rewrote after their output, with a suffix such as ``_nchwc``)."""
    for name in description.split("'")[1::2]:
        for key in (name, f"{name}_nchwc"):
            if key in by_node:
                return by_node[key]
    return None


def side_by_side(steps: list, ort: OrtProfile, onnxc_runs: int, top: int | None = None) -> str:
    """onnxc's slowest steps with onnxruntime's time for the same node, where both kept it."""
    per_c, per_o = 1e3 / max(onnxc_runs, 1), 1e3 / max(ort.runs, 1)
    lines = ["per node, slowest onnxc steps first (ms/run):", f"  {'onnxc':>9} {'ort':>9} {'ratio':>6}  node"]
    for s in sorted(steps, key=lambda s: -s.seconds)[:top]:
        hit = _match(s.node, ort.by_node)
        o = "-" if hit is None else f"{hit[1] * per_o:.3f}"
        r = "-" if not hit or not hit[1] else f"{s.seconds * per_c / (hit[1] * per_o):.2f}"
        lines.append(f"  {s.seconds * per_c:>9.3f} {o:>9} {r:>6}  {s.node}")
    return "\n".join(lines)
