"""Progress of one compile: log records for everyone, a live status line for people at a terminal.

A compile of a large model takes tens of seconds (loading, passes, C generation, the C compiler on
several translation units, the one-time runtime build); without a sign of life it looks hung. The
driver (onnxc/api.py ``compile``, onnxc/aot.py ``build``) opens a ``session`` for the duration of
one compile; the code doing the work reports into ``current()`` wherever it is:

- ``phase(name)``: the previous top-level phase ends, ``name`` starts (load, passes, codegen, cc).
- ``step(name)``: a phase nested in the current one (``runtime``: building runtime objects, inside
  ``cc``; its time counts in both).
- ``units(n)`` / ``unit_done(label, seconds)``: the current phase works through n units (translation
  units, runtime sources); ``unit_done`` may be called from worker threads.

Every finished phase is one INFO record of the logger ``"onnxc"`` (``"passes: 3.10 s"``, with the
attributes ``onnxc_phase`` and ``onnxc_seconds``); every finished unit is a DEBUG record. Python users
see them with ``logging.basicConfig(level=logging.INFO)``.

The status line goes to stderr only when stderr is a terminal, the compile is not ``quiet`` and has
run for ``ONNXC_PROGRESS_AFTER`` seconds (default 1): phase, unit i/n, elapsed time, redrawn in
place and erased when the compile ends. A compile that finishes sooner writes nothing. Its redraw
runs on one daemon thread, started only when the line may be shown: the work it reports on blocks in
the C compiler or in long passes for seconds, and the line must appear and its clock move meanwhile.
One status line at a time: a session opened while another one draws (another thread) only logs.

This module uses the standard library only, so every layer (codegen included) may report into it.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

log = logging.getLogger("onnxc")

LABELS = {"load": "loading the model", "passes": "optimizing", "codegen": "generating C", "cc": "compiling C",
          "runtime": "building the runtime library"}
UNIT_WORDS = {"cc": ("unit", "units"), "runtime": ("source", "sources")}
REFRESH_S = 0.1


def _units(phase: str, n: int) -> str:
    one, many = UNIT_WORDS.get(phase, ("unit", "units"))
    return one if n == 1 else many


def show_after() -> float:
    """Seconds a compile runs before its status line appears: ``ONNXC_PROGRESS_AFTER`` (default 1)."""
    text = os.environ.get("ONNXC_PROGRESS_AFTER", "")
    try:
        return max(0.0, float(text)) if text else 1.0
    except ValueError:
        return 1.0


class _Phase:
    __slots__ = ("name", "t0", "total", "done")

    def __init__(self, name: str) -> None:
        self.name, self.t0, self.total, self.done = name, time.perf_counter(), 0, 0


class Reporter:
    """Where one compile reports its phases and units (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, active: bool = True) -> None:
        """``stream``: where the status line is drawn (None: nowhere); ``active``: False for the idle
        reporter, which ignores everything (no compile is running)."""
        self._active = active
        self._stream = stream
        self._lock = threading.Lock()
        self._stack: list[_Phase] = []
        self._t0 = time.perf_counter()
        self._shown = False
        self._screen_lock = threading.Lock()  # the status line is erased before a log record is written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reporting
    def phase(self, name: str) -> None:
        """End the running phases; start the top-level phase ``name`` (when it is not the one running)."""
        if not self._active:
            return
        with self._lock:
            if len(self._stack) == 1 and self._stack[0].name == name:
                return
            while self._stack:
                self._finish(self._stack.pop())
            self._stack.append(_Phase(name))

    @contextmanager
    def step(self, name: str, units: int = 0) -> Iterator[None]:
        """A phase nested in the running one, logged when the block ends (when an exception ends it:
        dropped, with a DEBUG record)."""
        if not self._active:
            yield
            return
        p = _Phase(name)
        p.total = units
        with self._lock:
            self._stack.append(p)
        try:
            yield
        except BaseException:
            self._drop(p)
            raise
        with self._lock:
            while p in self._stack:
                self._finish(self._stack.pop())

    def units(self, n: int) -> None:
        """The running phase works through ``n`` units."""
        if self._active and self._stack:
            with self._lock:
                self._stack[-1].total, self._stack[-1].done = n, 0

    def unit_done(self, label: str, seconds: float | None = None) -> None:
        """One unit of the running phase finished (callable from any thread); a DEBUG record."""
        if not self._active or not self._stack:
            return
        with self._lock:
            p = self._stack[-1]
            p.done += 1
            done, total = p.done, p.total
        took = "" if seconds is None else f" in {seconds:.2f} s"
        self._log(logging.DEBUG, f"{p.name}: {label} {done}/{total}{took}",
                  {"onnxc_phase": p.name, "onnxc_unit": label, "onnxc_seconds": seconds})

    def end(self) -> None:
        """End every running phase (each logged)."""
        if self._active:
            with self._lock:
                while self._stack:
                    self._finish(self._stack.pop())

    def _drop(self, until: _Phase | None = None) -> None:
        """Forget the running phases (down to ``until``) without INFO records: they failed."""
        with self._lock:
            while self._stack:
                p = self._stack.pop()
                self._log(logging.DEBUG, f"{p.name}: failed after {time.perf_counter() - p.t0:.2f} s",
                          {"onnxc_phase": p.name})
                if p is until:
                    break

    def _finish(self, p: _Phase) -> None:
        dt = time.perf_counter() - p.t0
        what = f" ({p.done} {_units(p.name, p.done)})" if p.total else ""
        self._log(logging.INFO, f"{p.name}: {dt:.2f} s{what}", {"onnxc_phase": p.name, "onnxc_seconds": dt})

    def _log(self, level: int, msg: str, extra: dict) -> None:
        """A record of the "onnxc" logger; a shown status line is erased first (a handler writing to the
        same terminal would otherwise append to it), the next redraw brings it back."""
        if not log.isEnabledFor(level):
            return
        with self._screen_lock:
            if self._shown:
                self._erase()
            log.log(level, msg, extra=extra)

    # -- the status line
    def status(self) -> str:
        """The text of the status line now: ``onnxc: compiling C 2/4 units  3.1 s``."""
        with self._lock:
            p = self._stack[-1] if self._stack else None
            count = f" {p.done}/{p.total} {_units(p.name, p.total)}" if p is not None and p.total else ""
        label = LABELS.get(p.name, p.name) if p is not None else "starting"
        return f"onnxc: {label}{count}  {time.perf_counter() - self._t0:.1f} s"

    def _start_display(self) -> None:
        if self._stream is not None:
            self._thread = threading.Thread(target=self._draw_loop, name="onnxc-progress", daemon=True)
            self._thread.start()

    def _draw_loop(self) -> None:
        if self._stop.wait(show_after()):
            return
        while True:
            if self._stack:  # (a phase has started)
                self._draw(self.status())
            if self._stop.wait(REFRESH_S):
                return

    def _draw(self, text: str) -> None:
        try:
            width = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            width = 0
        width = width or 80  # (a terminal of unknown size reports 0 columns)
        with self._screen_lock:
            try:
                self._stream.write("\r" + text[:max(1, width - 1)] + "\x1b[K")
                self._stream.flush()
                self._shown = True
            except (OSError, ValueError):  # the terminal went away: stop drawing
                self._stop.set()

    def _erase(self) -> None:
        self._shown = False
        try:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def _close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self._shown:
                self._erase()


_IDLE = Reporter(active=False)
_current: contextvars.ContextVar[Reporter] = contextvars.ContextVar("onnxc_progress", default=_IDLE)
_screen = threading.Lock()  # held by the session that draws the status line


def current() -> Reporter:
    """The reporter of the compile running in this thread (an idle one, ignoring all, when none is)."""
    return _current.get()


def _terminal(quiet: bool) -> TextIO | None:
    err = sys.stderr
    try:
        tty = err is not None and err.isatty()
    except (AttributeError, ValueError):
        tty = False
    return err if tty and not quiet else None


@contextmanager
def session(quiet: bool = False) -> Iterator[Reporter]:
    """The reporter of one compile, current in this thread until the block ends (which ends its
    phases and erases its status line). Inside another session, that one is reused: a compile that
    calls another driver step reports as one compile. ``quiet``: never draw the status line."""
    outer = _current.get()
    if outer is not _IDLE:
        yield outer
        return
    stream = _terminal(quiet)
    if stream is not None and not _screen.acquire(blocking=False):
        stream = None  # another thread's compile draws the line
    rep = Reporter(stream)
    token = _current.set(rep)
    try:
        rep._start_display()
        yield rep
        rep.end()
    except BaseException:
        rep._drop()
        raise
    finally:
        _current.reset(token)
        rep._close()
        if stream is not None:
            _screen.release()


__all__ = ["Reporter", "current", "session", "show_after", "log"]
