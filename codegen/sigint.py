"""Ctrl-C during a native run: the SIGINT hook, and the cancel counter the main thread's runs poll.

CPython's SIGINT handler only sets a flag that the main thread reads between bytecodes, so a call
into native code ignored Ctrl-C until it returned (a Loop of 10^15 iterations: never). A model
library can chain a C handler in front of CPython's (``onnxc_sigint_watch``, runtime_c/onnxc_process.c):
it increments one process-wide counter, then calls CPython's handler as before. Runs started from
the main thread get the counter (``cancel_ptr``) and stop at their next step or loop iteration
with status 6 once it moved; the caller raises KeyboardInterrupt (``status_error``): CPython's
pending handler raises it already at the first bytecode after the call, so a ``except Exception``
around a call never swallows Ctrl-C. Runs in other threads get no counter: Python delivers
KeyboardInterrupt to the main thread only.

The hook is installed (or put back) when a model library is opened (``watch``: a ``sigaction``
query, about 0.3 us, never per call), and only while Python's SIGINT handler is
``signal.default_int_handler``, the one that raises KeyboardInterrupt: a handler of the program's
own may not want runs stopped. ``signal.signal(SIGINT, ...)`` puts CPython's C handler back in
place of the hook (``asyncio.run`` does, until it returns): runs ignore Ctrl-C again until the next
model is compiled or loaded.
"""

from __future__ import annotations

import signal
import threading

import cffi

_ffi = cffi.FFI()
COUNTER = _ffi.new("unsigned int[1]")  # incremented by the hook on each SIGINT; never freed
_lock = threading.Lock()
_installer = None  # the ``<prefix>_watch_sigint`` of the first library that has one (kept loaded)


def watch(lib, prefix: str) -> None:
    """Install the SIGINT hook through ``lib`` (a model library, ``<prefix>_watch_sigint``) unless one
    is in place already; libraries from before the hook existed have no such function."""
    global _installer
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    with _lock:
        if _installer is None:
            _installer = getattr(lib, f"{prefix}_watch_sigint", None)
        if _installer is not None:
            _installer(COUNTER)


def cancel_ptr():
    """The cancel counter for a run started by the calling thread: the SIGINT counter on the main
    thread, else NULL (no counter: the run is not cancelled)."""
    return COUNTER if threading.current_thread() is threading.main_thread() else _ffi.NULL
