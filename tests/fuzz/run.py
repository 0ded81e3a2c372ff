"""One fuzz run: its settings (environment), a private compile cache, the worker pool, the counts and
the reproducers of failures.

Settings:

- ``ONNXC_FUZZ_EXAMPLES``: examples per run, split between byte and structure mutations (default
  DEFAULT_EXAMPLES, the CI size; e.g. 10000 for a long run).
- ``ONNXC_FUZZ_SEED``: hypothesis seed (default 0: CI sees the same examples every time).
- ``ONNXC_FUZZ_TIMEOUT``: seconds one example may take, compile included (default 60; 180 under
  ``ONNXC_SANITIZE``).
- ``ONNXC_FUZZ_WORKERS``: worker processes (default 1).
- ``ONNXC_FUZZ_REPROS``: folder of reproducers (default ``<tmp>/onnxc-fuzz-repros``).
- ``ONNXC_FUZZ_REPORT``: when set, the counts of each run are written there as JSON.

An example passes when its worker answered in time with no exception or an ``OnnxcError`` subclass.
It fails on a crash (a signal or an exit: segfault, abort, sanitizer report), a hang past the limit,
another exception type, or generated C the compiler rejects. Each failure's model is saved as
``<category>-<error>-<sha>.onnx`` beside a ``.txt`` holding what was mutated, the message, the traceback
or the worker's last output and the command that replays it (for a crash, with the examples the worker
ran before it, saved as ``.prevN.onnx``: heap damage done by one shows later); at most MAX_PER_SIGNATURE per distinct
(category, error, onnxc frame). ``IRCheckError`` (a pass left the IR inconsistent: onnxc's fault, though
an OnnxcError) passes but is counted and saved as ``suspect-*``.

The compile cache is a temporary folder of the run (``ONNXC_CACHE_MAX_MB`` bounded), removed at the end;
before the first example it gets a copy of every runtime object, built if needed in this process's cache.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .pool import ROOT, WorkerPool

DEFAULT_EXAMPLES = 500
MAX_PER_SIGNATURE = 3
PROGRESS_EVERY = 500  # a progress line on stderr (seen with pytest -s)
FAILURES = ("crash", "hang", "internal", "c-compile")
# OnnxcErrors that pass but say onnxc itself is at fault: counted and saved (``suspect-*``), not failed
SUSPECT_ERRORS = ("IRCheckError",)
_FRAME = re.compile(r'File "[^"]*/((?:frontend|ir|passes|codegen|onnxc|runtime_c)/[^"]+)", line (\d+)')


def examples() -> int:
    return int(os.environ.get("ONNXC_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))


def seed() -> int:
    return int(os.environ.get("ONNXC_FUZZ_SEED", "0"))


def timeout() -> float:
    default = "180" if os.environ.get("ONNXC_SANITIZE") else "60"
    return float(os.environ.get("ONNXC_FUZZ_TIMEOUT", default))


def repro_dir() -> Path:
    return Path(os.environ.get("ONNXC_FUZZ_REPROS") or Path(tempfile.gettempdir()) / "onnxc-fuzz-repros")


_CRASH_REASONS = (re.compile(r"ERROR: AddressSanitizer: ([\w-]+)"), re.compile(r"runtime error: ([^\n]+)"),
                  re.compile(r"^((?:free|malloc|realloc)\(\)[^\n]*|corrupted [^\n]*|double free[^\n]*)", re.M),
                  re.compile(r"Fatal Python error: ([^\n]+)"))


def signature(outcome: dict) -> str:
    """What makes two failures the same: category, error and the innermost onnxc frame; for a crash
    the first sanitizer, allocator or interpreter message of the worker instead of a frame."""
    trace = outcome.get("trace", "")
    if outcome["status"] == "crash":
        for pattern in _CRASH_REASONS:
            m = pattern.search(trace)
            if m:
                reason = re.sub(r"'[^']*'", "'.'", re.sub(r"0x[0-9a-f]+|[0-9]+", "N", m.group(1)))
                return f"crash {outcome.get('error', '')}: {reason[:100]}"
    frames = _FRAME.findall(trace)
    where = f" at {frames[-1][0]}:{frames[-1][1]}" if frames else ""
    return f"{outcome['status']} {outcome.get('error', '')}{where}"


class FuzzRun:
    """The pool, counts and reproducers of one fuzz run (a context manager)."""

    def __init__(self, name: str, workers: int | None = None, prebuild: bool = True):
        self.name, self.prebuild = name, prebuild
        self.dir = Path(tempfile.mkdtemp(prefix=f"onnxc-fuzz-{name}-"))
        env = dict(os.environ)
        env.update(ONNXC_CACHE_DIR=str(self.dir / "cache"), ONNXC_CACHE_MAX_MB="256")
        env.pop("ONNXC_FAIL_ON_COMPILE", None)
        self.env = env
        self.workers = workers or int(os.environ.get("ONNXC_FUZZ_WORKERS", "1"))
        self.counts: collections.Counter = collections.Counter()
        self.clean: collections.Counter = collections.Counter()
        self.failures: dict[str, list[str]] = {}
        self.by_signature: collections.Counter = collections.Counter()
        self.suspects: collections.Counter = collections.Counter()
        self.t0 = time.monotonic()
        self.pool: WorkerPool | None = None

    def __enter__(self) -> FuzzRun:
        from onnxc.codegen.compiler import CompilerConfig
        from onnxc.codegen.runtime_lib import runtime_folder, runtime_objects, runtime_sources

        if self.prebuild:  # every runtime object up front: no example pays (and risks its time limit on) that
            cfg = CompilerConfig()  # compile; built once in this process's cache, copied into the run's
            runtime_objects(cfg, runtime_sources())
            shutil.copytree(runtime_folder(cfg), runtime_folder(cfg, self.dir / "cache"),
                            ignore=shutil.ignore_patterns("*.lock", ".*"))
        self.pool = WorkerPool(self.workers, timeout(), self.dir / "logs", self.env, self.record)
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def submit(self, data: bytes, notes: list[str]) -> None:
        self.pool.submit((data, notes), data)

    def drain(self) -> None:
        self.pool.drain()

    # ------------------------------------------------------------------------------------ results
    def record(self, task, outcome: dict) -> None:
        data, notes = task
        c = self.counts
        c["examples"] += 1
        c["compiled"] += outcome.get("compiled", False)
        c["ran"] += outcome.get("ran", False)
        c[outcome["status"]] += 1
        if outcome["status"] == "clean":
            self.clean[outcome["error"]] += 1
            if outcome["error"] in SUSPECT_ERRORS:
                shape = re.sub(r"'[^']*'", "'.'", re.sub(r"[0-9]+", "N", outcome.get("message", "")))
                sig = f"suspect {outcome['error']}: {shape[:80]}"
                self.suspects[sig] += 1
                if self.suspects[sig] <= MAX_PER_SIGNATURE:
                    self.save(data, notes, {**outcome, "status": "suspect"})
        if c["examples"] % PROGRESS_EVERY == 0:
            print(f"fuzz {self.name}: {c['examples']} examples, {c['compiled']} compiled, {c['ran']} ran, "
                  f"{sum(self.by_signature.values())} failures, {time.monotonic() - self.t0:.0f} s",
                  file=sys.stderr, flush=True)
        if outcome["status"] in FAILURES:
            sig = signature(outcome)
            self.by_signature[sig] += 1
            saved = self.failures.setdefault(sig, [])
            if len(saved) < MAX_PER_SIGNATURE:
                path = str(self.save(data, notes, outcome))
                if path not in saved:
                    saved.append(path)

    def save(self, data: bytes, notes: list[str], outcome: dict) -> Path:
        folder = repro_dir()
        folder.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9]+", "_", outcome.get("error", ""))[:40].strip("_")
        path = folder / f"{outcome['status']}-{slug}-{hashlib.sha256(data).hexdigest()[:12]}.onnx"
        if path.exists():  # the same model failed the same way before
            return path
        path.write_bytes(data)
        before = []
        for k, (prev_data, _) in enumerate(reversed(outcome.get("previous", [])), 1):
            before.insert(0, path.with_suffix(f".prev{k}.onnx"))
            before[0].write_bytes(prev_data)
        replay = " ".join(map(str, [*before, path]))
        path.with_suffix(".txt").write_text(
            f"fuzz run: {self.name}; {outcome['status']}: {outcome.get('error', '')}\n"
            f"replay: cd {ROOT} && python -m tests.fuzz.child {replay}\n"
            + ("(the worker ran the .prevN models before this one, in this order: a memory error of one of them "
               "may be what broke)\n" if before else "") +
            "mutations:\n" + "".join(f"  {n}\n" for n in notes) +
            f"stage: {outcome.get('stage', '?')}; compiled: {outcome.get('compiled')}; "
            f"seconds: {outcome.get('seconds', 0):.1f}\n"
            f"message:\n{outcome.get('message', '')}\n\ntrace / worker output:\n{outcome.get('trace', '')}\n")
        return path

    def summary(self) -> dict:
        return {"run": self.name, "examples": self.counts["examples"], "compiled": self.counts["compiled"],
                "ran": self.counts["ran"], "ok": self.counts["ok"], "clean_errors": dict(self.clean.most_common()),
                "harness_skips": self.counts["harness"], "suspects": dict(self.suspects.most_common()),
                "failures": {k: self.counts[k] for k in FAILURES if self.counts[k]},
                "failure_signatures": {s: {"count": n, "reproducers": self.failures.get(s, [])}
                                       for s, n in self.by_signature.most_common()},
                "seconds": round(time.monotonic() - self.t0, 1), "workers": self.workers,
                "worker_starts": self.pool.spawned if self.pool else 0}

    def report(self) -> str:
        s = self.summary()
        path = os.environ.get("ONNXC_FUZZ_REPORT")
        if path:
            p = Path(path)
            doc = json.loads(p.read_text()) if p.exists() else {}
            doc[self.name] = s
            p.write_text(json.dumps(doc, indent=1) + "\n")
        lines = [f"fuzz {self.name}: {s['examples']} examples, {s['compiled']} compiled, {s['ran']} ran, "
                 f"{sum(self.clean.values())} clean errors, {sum(s['failures'].values())} failures "
                 f"({s['seconds']:.0f} s)",
                 "  clean errors: " + ", ".join(f"{k} {v}" for k, v in s["clean_errors"].items())]
        lines += [f"  {sig} (x{n}, reproducers saved as suspect-*)" for sig, n in s["suspects"].items()]
        for sig, v in s["failure_signatures"].items():
            lines.append(f"  FAILURE x{v['count']}: {sig}")
            lines += [f"    reproducer: {r}" for r in v["reproducers"]]
        return "\n".join(lines)
