"""The pass contract and the pass manager.

A pass takes a model and returns it with a flag saying whether it changed (``PassResult``); the flag
must be true exactly when the IR changed (tests/passes/test_pipeline.py holds every pass to that on a
model none of them applies to). The ``PassManager`` runs named steps in order and uses the flags:

- a *fixed-point group* (consecutive steps where a later one may enable an earlier one) repeats until
  every step of the group has run once since the last change; each pass is assumed to reach its own
  fixed point in one run, so a step that changed the IR does not run again right away. A group that
  still changes after ``MAX_ROUNDS`` rounds is an onnxc bug: FixedPointError names the steps.
- with ``check`` the IR checker runs after every step (typed once the step that types values ran);
- ``dump_after`` prints the IR after the named steps (or "all"), marked ``(unchanged)`` when the step
  changed nothing;
- every run is recorded in ``trace`` as (where, step, changed), ``where`` naming the graph: "" for the
  main graph, the node and attribute of a control-flow body otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TextIO

from onnxc.ir import Graph, Model, OnnxcError
from onnxc.ir.checker import check_model


@dataclass
class PassResult:
    model: Model
    changed: bool


Pass = Callable[[Model], PassResult]


class Step(NamedTuple):
    """A named pass of the pipeline (unpacks as ``name, fn``)."""

    name: str
    fn: Pass


class FixedPointError(OnnxcError):
    """A fixed-point group of passes kept changing the IR (a bug in onnxc, not in the model)."""


MAX_ROUNDS = 8  # rounds of a fixed-point group before FixedPointError


@dataclass
class PassManager:
    """Runs steps with the settings of one optimization: checker, dumps, trace (see the top)."""

    check: bool = False
    dump_after: set[str] | str | None = None
    out: TextIO = sys.stderr
    typing_step: str = "infer_shapes"  # from this step on, the checker requires types
    trace: list[tuple[str, str, bool]] = field(default_factory=list)

    def run(self, model: Model, steps: Sequence[Step], groups: Sequence[tuple[str, ...]] = (),
            where: str = "") -> Model:
        """Run ``steps`` in order; ``groups``: runs of consecutive step names repeated to a fixed point."""
        starts = {g[0]: g for g in groups}
        typed = [False]
        i = 0
        while i < len(steps):
            group = starts.get(steps[i].name, (steps[i].name,))
            if tuple(s.name for s in steps[i:i + len(group)]) != group:
                raise FixedPointError(f"fixed-point group {group} is not a run of consecutive pipeline steps")
            model = self._fixed_point(model, steps[i:i + len(group)], where, typed)
            i += len(group)
        return model

    def _fixed_point(self, model: Model, group: Sequence[Step], where: str, typed: list[bool]) -> Model:
        n, runs, quiet = len(group), 0, 0
        while runs < n or quiet < n - 1:
            if runs >= n * MAX_ROUNDS:
                raise FixedPointError(f"passes {', '.join(s.name for s in group)} still change the IR after "
                                      f"{MAX_ROUNDS} rounds{_at(where)}")
            model, changed = self.run_step(model, group[runs % n], where, typed)
            runs += 1
            quiet = 0 if changed else quiet + 1
        return model

    def run_step(self, model: Model, step: Step, where: str, typed: list[bool]) -> tuple[Model, bool]:
        res = step.fn(model)
        self.trace.append((where, step.name, res.changed))
        typed[0] |= step.name == self.typing_step
        if self.check:
            check_model(res.model, typed=typed[0])
        if self.dump_after and (self.dump_after == "all" or step.name in self.dump_after):
            mark = "" if res.changed else " (unchanged)"
            print(f"--- IR after {step.name}{_at(where)}{mark} ---\n{res.model.graph!r}", file=self.out)
        return res.model, res.changed


def _at(where: str) -> str:
    return f" in {where}" if where else ""


def in_subgraphs(g: Graph, fn: Callable[[Graph], bool]) -> bool:
    """Run a graph rewrite ``fn`` on every graph held by ``g``'s nodes (If/Loop/Scan bodies; ``fn`` recurses
    further itself); True when any of them changed."""
    changed = False
    for node in list(g.nodes):
        for sg in node.subgraphs():
            changed |= fn(sg)
    return changed
