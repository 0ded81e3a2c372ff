"""A CPU-bound load for benchmarks: child processes that spin while the timing runs.

    with BusyLoad(1):      # one other process wants a whole core, as on a laptop or a shared server
        ...time things...

Each child is a plain Python process spinning in a tight loop (no sleep, no I/O, no pinning: the
scheduler places it as it would any other program). Both engines of a comparison are timed in
alternating blocks while the load runs, so they share it. A child stops when the load is stopped, when
the benchmark exits (atexit) and, should the benchmark be killed, when it notices its parent is gone.
"""

from __future__ import annotations

import atexit
import subprocess
import sys
import time

# the child: spin, and every few million iterations check that the parent still exists
_SPIN = ("import os\nppid = os.getppid()\nwhile True:\n    for _ in range(2_000_000): pass\n"
         "    if os.getppid() != ppid: break\n")


class BusyLoad:
    """``n`` spinning child processes while in use (``start``/``stop`` or ``with``)."""

    def __init__(self, n: int = 1) -> None:
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def start(self) -> BusyLoad:
        for _ in range(self.n - len(self.procs)):
            self.procs.append(subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.DEVNULL))
        atexit.register(self.stop)
        time.sleep(0.2)  # let the children reach their loop before anything is timed
        return self

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs.clear()

    def __enter__(self) -> BusyLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

