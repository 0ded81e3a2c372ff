"""Per-kernel timing of a model compiled with ``onnxc.compile(..., profile=True)``.

A profiling build wraps every step of the generated run function (shape function, run-time
allocations and kernel call of one node) in a monotonic clock and sums the seconds per step over all
runs; ``read_profile`` reads those sums back with the step descriptions, so a user sees where the time
goes. Steps of If/Loop/Scan bodies count toward their node's step.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import cffi

from onnxc.codegen.native import open_library
from onnxc.ir import OnnxcError

_CDEF = """
int onnxc_model_profile(double *out, int n);
const char *onnxc_model_profile_name(int i);
void onnxc_model_profile_reset(void);
"""
_ffi = cffi.FFI()
_ffi.cdef(_CDEF)


@dataclass(frozen=True)
class StepTime:
    """One step of the run function: its position, the node it runs and its summed seconds."""

    index: int
    node: str
    seconds: float

    @property
    def op(self) -> str:
        """The node's operator (with its domain, if any), from the description."""
        return self.node.split(" ", 1)[0]


@dataclass(frozen=True)
class Profile:
    """Summed step times over ``runs`` runs; ``total`` is the time spent in the run function."""

    steps: list[StepTime]
    total: float
    runs: int

    @property
    def step_sum(self) -> float:
        return sum(s.seconds for s in self.steps)

    def by_op(self) -> list[tuple[str, int, float]]:
        """(op, steps, seconds) per operator, slowest first."""
        acc: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for s in self.steps:
            acc[s.op][0] += 1
            acc[s.op][1] += s.seconds
        return sorted(((op, n, t) for op, (n, t) in acc.items()), key=lambda r: -r[2])

    def format(self, top: int | None = None) -> str:
        """A table of the steps, slowest first, with ms per run, % of the run time and the node; then
        the time per operator."""
        runs = max(self.runs, 1)
        total = self.total if self.total > 0 else max(self.step_sum, 1e-12)
        rows = sorted(self.steps, key=lambda s: -s.seconds)
        shown = rows if top is None else rows[:top]
        lines = [f"profile: {len(self.steps)} steps, {runs} run(s), {1e3 * self.total / runs:.3f} ms per run "
                 f"({100 * self.step_sum / total:.1f}% inside steps)",
                 f"{'step':>5}  {'ms/run':>9}  {'%':>6}  {'cum %':>6}  node"]
        cum = 0.0
        for s in shown:
            cum += s.seconds
            lines.append(f"{s.index:>5}  {1e3 * s.seconds / runs:>9.3f}  {100 * s.seconds / total:>6.2f}  "
                         f"{100 * cum / total:>6.1f}  {s.node}")
        if len(shown) < len(rows):
            rest = sum(s.seconds for s in rows[len(shown):])
            lines.append(f"{'':>5}  {1e3 * rest / runs:>9.3f}  {100 * rest / total:>6.2f}  {'':>6}  "
                         f"({len(rows) - len(shown)} more steps)")
        lines.append("by operator:")
        for op, n, t in self.by_op():
            lines.append(f"  {op:<24} {n:>4} step(s)  {1e3 * t / runs:>9.3f} ms/run  {100 * t / total:>6.2f}%")
        return "\n".join(lines)


def _lib(model):
    native = getattr(model, "_native", None)
    if native is None:
        raise OnnxcError("not a compiled model: expected the result of onnxc.compile(..., profile=True)")
    lib = open_library(native.path, _ffi)
    try:
        lib.onnxc_model_profile  # noqa: B018 - probes the symbol
    except AttributeError:
        raise OnnxcError("the model was compiled without profiling: use onnxc.compile(..., profile=True)") from None
    return lib


def read_profile(model) -> Profile:
    """The summed step times of ``model`` (a CompiledModel built with ``profile=True``) so far."""
    lib = _lib(model)
    n = lib.onnxc_model_profile(_ffi.NULL, 0)
    buf = _ffi.new("double[]", n + 2)
    lib.onnxc_model_profile(buf, n + 2)
    steps = [StepTime(i, _ffi.string(lib.onnxc_model_profile_name(i)).decode("utf-8", "replace"), buf[i])
             for i in range(n)]
    return Profile(steps, buf[n], int(buf[n + 1]))


def reset_profile(model) -> None:
    """Zero the step sums of ``model`` (e.g. after warm-up runs)."""
    _lib(model).onnxc_model_profile_reset()


__all__ = ["Profile", "StepTime", "read_profile", "reset_profile"]
