"""The compile driver: one list of named steps from a model to native code, shared by ``compile()``,
``build()`` and ``onnxc info``.

    load -> support_check -> optimize -> lower -> emit -> build

- ``load``: the frontend parses a path, bytes or ModelProto (an IR Model passes through); inputs given
  in ``constants`` are bound (passes/bind_constants.py).
- ``support_check``: every op has a kernel or an expansion, checked before any pass (onnxc/support.py).
- ``optimize``: the passes (passes/pipeline.py) on the main graph and every control-flow body, with the
  IR checker (``check_ir``, default ``$ONNXC_CHECK_IR``) and IR dumps (``dump_ir``).
- ``lower``: the IR becomes a Program (codegen/lower.py), buffer lifetimes included;
- ``emit``: C text; the memory plan places the arena there (codegen/emit.py). ``build()`` emits its
  artifact sources instead (``Options.emit``).
- ``build``: the C compiler, through the driver's ``Options.build`` (compile(): the compile and model
  caches; build(): the artifact library).

Each step starts its progress phase (onnxc/progress.py: load, passes, codegen, cc) and is timed.
A driver that prints between steps (``onnxc info``) runs ``compile_pipeline(..., until=step)`` and
then ``resume``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

from onnxc.codegen.emit import emit_c
from onnxc.codegen.lower import Program, lower
from onnxc.ir import Model
from onnxc.passes.base import PassManager
from onnxc.passes.bind_constants import bind_constants
from onnxc.passes.pipeline import optimize

from . import progress
from .support import check_supported


def resolve_threads(threads: int | None) -> int:
    """The threads a model runs with: ``threads``, else every core."""
    return threads or os.cpu_count() or 1


@dataclass
class Options:
    """What a compile is asked for (see the top for the steps that read each)."""

    threads: int | None = None
    check_ir: bool | None = None
    dump_ir: str | set[str] | None = None
    dump_to: TextIO | None = None  # None: stderr
    constants: Mapping[str, object] | None = None
    base_dir: str | None = None  # the folder of the model file (external data is found there)
    profile: bool = False
    units: int = 1  # translation units of the emitted C
    emit: Callable[[Compilation], None] | None = None  # None: emit_c into Compilation.source
    build: Callable[[Compilation], None] | None = None
    precision: str = "fp32"  # "bf16": float GEMM/Conv weights in bfloat16 (codegen/kernels/bf16.py)


@dataclass
class Compilation:
    """The state the steps hand on: what each made, which ran, and their times."""

    given: object
    options: Options
    threads: int
    model: Model | None = None
    program: Program | None = None
    source: str | None = None
    externals: list[str] = field(default_factory=list)  # external data files the model was read from
    done: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # step -> seconds
    passes: PassManager | None = None  # the optimize step's manager (its trace: every pass run)

    def seconds(self, *steps: str) -> float:
        return sum(self.timings.get(s, 0.0) for s in steps)


def load(c: Compilation) -> None:
    if isinstance(c.given, Model):
        c.model = c.given
    else:
        from onnxc.frontend import load_model

        c.model = load_model(c.given, base_dir=c.options.base_dir)
        c.externals = c.model.data_files
    c.given = None  # (a protobuf or its bytes is let go here)
    if c.options.constants:
        bind_constants(c.model, c.options.constants)


def support_check(c: Compilation) -> None:
    check_supported(c.model)


def optimize_step(c: Compilation) -> None:
    o = c.options
    check = o.check_ir if o.check_ir is not None else os.environ.get("ONNXC_CHECK_IR", "") not in ("", "0")
    c.passes = PassManager(check=check, dump_after=o.dump_ir, out=o.dump_to or sys.stderr)
    c.model = optimize(c.model, manager=c.passes)


def lower_step(c: Compilation) -> None:
    c.program = lower(c.model, c.threads, c.options.precision)


def emit(c: Compilation) -> None:
    if c.options.emit is not None:
        c.options.emit(c)
    else:
        c.source = emit_c(c.program, profile=c.options.profile, units=c.options.units)


def build(c: Compilation) -> None:
    if c.options.build is None:
        raise ValueError("compile_pipeline: the build step needs Options.build (stop earlier with until=)")
    c.options.build(c)


STEPS: list[tuple[str, str, Callable[[Compilation], None]]] = [  # (step, progress phase, function)
    ("load", "load", load),
    ("support_check", "passes", support_check),
    ("optimize", "passes", optimize_step),
    ("lower", "codegen", lower_step),
    ("emit", "codegen", emit),
    ("build", "cc", build),
]
STEP_NAMES = [name for name, _, _ in STEPS]


def compile_pipeline(model, options: Options | None = None, until: str = "build") -> Compilation:
    """Run the steps on ``model`` (path, bytes, ModelProto or IR Model) up to ``until`` (inclusive)."""
    opts = options or Options()
    return resume(Compilation(model, opts, resolve_threads(opts.threads)), until)


def resume(c: Compilation, until: str = "build") -> Compilation:
    """Run the steps after the last one ``c`` ran, up to ``until`` (inclusive)."""
    if until not in STEP_NAMES:
        raise ValueError(f"compile_pipeline: no step {until!r}; the steps are {', '.join(STEP_NAMES)}")
    rep = progress.current()  # (idle outside a compile() or build())
    for name, phase, fn in STEPS[len(c.done):STEP_NAMES.index(until) + 1]:
        rep.phase(phase)
        t = time.perf_counter()
        fn(c)
        c.timings[name] = time.perf_counter() - t
        c.done.append(name)
    return c
