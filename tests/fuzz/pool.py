"""A pool of fuzz worker processes (``python -m tests.fuzz.child --serve``), reused across examples.

``submit`` hands an example to an idle worker (waiting for one while all are busy) and returns at
once; ``drain`` waits for the rest. Every finished example goes to the ``on_result`` callback as
``(task, outcome)``: the child's dict (tests/fuzz/child.py ``check``), or for a worker that died
``{"status": "crash", ...}`` with its exit status or signal and ``previous``: the tasks it ran before
(a memory error of an earlier example may only show when the heap is next used), or for one that did not answer within
``timeout`` seconds ``{"status": "hang", ...}`` with its Python stacks (it is then killed). A dead or killed worker is replaced.
Each worker's stderr goes to a log file in ``log_dir``; a crash or hang outcome carries the log's
tail written while that example ran (faulthandler traces, UBSan reports) and its ASan report file.
"""

from __future__ import annotations

import collections
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120.0
HISTORY = 8  # examples a worker ran before the current one, handed back with a crash


@dataclass
class _Worker:
    proc: subprocess.Popen
    log: Path
    task: object = None
    started: float = 0.0
    log_offset: int = 0
    buf: bytearray = field(default_factory=bytearray)
    history: collections.deque = field(default_factory=lambda: collections.deque(maxlen=HISTORY))


class WorkerPool:
    def __init__(self, size: int, timeout: float, log_dir: Path, env: dict[str, str],
                 on_result: Callable[[object, dict], None]):
        self.size, self.timeout, self.log_dir, self.env = size, timeout, log_dir, env
        self.on_result = on_result
        self.workers: list[_Worker] = []
        self.spawned = 0
        log_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(size):
            self.workers.append(self._spawn())

    # ------------------------------------------------------------------------------------ workers
    def _spawn(self) -> _Worker:
        self.spawned += 1
        log = self.log_dir / f"worker-{self.spawned}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.child", "--serve"], cwd=ROOT, env=self.env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        w = _Worker(proc, log)
        ready, _, _ = select.select([proc.stdout], [], [], STARTUP_TIMEOUT)
        if not ready or os.read(proc.stdout.fileno(), 1) != b"R":
            self._kill(w)
            raise RuntimeError(f"a fuzz worker did not start; its log:\n{self._tail(w, 0)}")
        return w

    def _kill(self, w: _Worker) -> None:
        try:
            os.killpg(w.proc.pid, signal.SIGKILL)  # the worker and its compiler processes
        except (ProcessLookupError, PermissionError):
            pass
        w.proc.wait()
        for f in (w.proc.stdin, w.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    @staticmethod
    def _tail(w: _Worker, offset: int, limit: int = 12000) -> str:
        try:
            with open(w.log, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-limit:]

    def _asan_report(self, pid: int) -> str:
        """The ASan report file of worker ``pid`` when ASAN_OPTIONS sends reports to files (python -m
        tests.sanitize does)."""
        m = re.search(r"(?:^|:)log_path=([^:]+)", self.env.get("ASAN_OPTIONS", ""))
        if not m:
            return ""
        try:
            return "\n" + Path(f"{m.group(1)}.{pid}").read_text(errors="replace")[-12000:]
        except OSError:
            return ""

    def _replace(self, w: _Worker) -> None:
        self._kill(w)
        self.workers[self.workers.index(w)] = self._spawn()

    # -------------------------------------------------------------------------------------- tasks
    def submit(self, task, data: bytes, seed: int | None = None) -> None:
        """Run ``data`` on an idle worker; ``task`` is handed back with the outcome."""
        while True:
            idle = [w for w in self.workers if w.task is None]
            if idle:
                break
            self._poll()
        w = idle[0]
        msg = pickle.dumps((data, seed))
        w.task, w.started, w.buf = task, time.monotonic(), bytearray()
        w.history.append((task, data))
        w.log_offset = w.log.stat().st_size if w.log.exists() else 0
        try:
            w.proc.stdin.write(struct.pack("<Q", len(msg)) + msg)
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._finish_dead(w)

    def drain(self) -> None:
        while any(w.task is not None for w in self.workers):
            self._poll()

    def close(self) -> None:
        for w in self.workers:
            try:
                w.proc.stdin.close()
            except OSError:
                pass
            try:
                w.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill(w)

    def _poll(self) -> None:
        busy = [w for w in self.workers if w.task is not None]
        now = time.monotonic()
        wait = max(0.0, min(w.started + self.timeout - now for w in busy)) if busy else 0.1
        ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], min(wait, 1.0))
        for w in busy:
            if w.proc.stdout in ready:
                chunk = os.read(w.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    self._finish_dead(w)
                    continue
                w.buf += chunk
                if len(w.buf) >= 8:
                    n = struct.unpack("<Q", w.buf[:8])[0]
                    if len(w.buf) >= 8 + n:
                        outcome = pickle.loads(bytes(w.buf[8:8 + n]))
                        outcome["seconds"] = time.monotonic() - w.started
                        self._done(w, outcome)
            elif time.monotonic() - w.started > self.timeout:
                task = w.task
                try:  # the worker's Python stacks into its log (faulthandler), then it is killed
                    os.kill(w.proc.pid, signal.SIGUSR1)
                    time.sleep(1.0)
                except ProcessLookupError:
                    pass
                tail = self._tail(w, w.log_offset)
                self._replace(w)
                self.on_result(task, {"status": "hang", "error": f"no answer in {self.timeout:.0f} s",
                                      "message": "", "trace": tail, "compiled": False, "ran": False,
                                      "seconds": self.timeout})

    def _done(self, w: _Worker, outcome: dict) -> None:
        task = w.task
        w.task = None
        self.on_result(task, outcome)

    def _finish_dead(self, w: _Worker) -> None:
        task = w.task
        w.proc.wait()
        rc = w.proc.returncode
        what = f"killed by {_signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
        tail = self._tail(w, w.log_offset) + self._asan_report(w.proc.pid)
        seconds = time.monotonic() - w.started
        self._replace(w)
        previous = [t for t, _ in list(w.history)[:-1]]
        self.on_result(task, {"status": "crash", "error": what, "message": "", "trace": tail,
                              "compiled": False, "ran": False, "seconds": seconds, "previous": previous})


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
