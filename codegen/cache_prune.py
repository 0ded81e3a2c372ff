"""A size bound for the on-disk caches (codegen/cache.py libraries, codegen/model_cache.py entries).

Both caches share one folder. Every hit refreshes its entry's modification time (``touch``: a library's
record ``<key>.so.sum``, a model entry's manifest; never a file whose stat is checked); after a
store, ``prune`` removes the least recently used entries once the folder holds more than
``ONNXC_CACHE_MAX_MB`` (default DEFAULT_MAX_MB; 0 = no bound), down to PRUNE_TO of the bound.

- An entry used or written within the last MIN_AGE_S seconds is never removed: another process may
  have just found it and be about to load it. (A library that is already loaded, or weights already
  mapped, survive removal anyway: unlinking keeps an open file alive.)
- Walking a large cache takes a while, so a store prunes at most once per INTERVAL_S per cache (a
  stamp file records the last walk).
- Model entries are renamed aside before they are deleted (model_cache.discard), so a concurrent
  lookup sees a whole entry or none; a library is one file, removed with its source and lock.
- Runtime folders (``runtime/<key>``: the runtime objects and precompiled header of one compiler and
  flags, codegen/runtime_lib.py) do not count toward the bound, one per combination in use: a walk
  removes those unused for RUNTIME_MAX_AGE_S.
Failures (a read-only or vanished cache, a racing process) are ignored: pruning is best effort.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .artifact import MANIFEST

DEFAULT_MAX_MB = 4096
PRUNE_TO = 0.8
MIN_AGE_S = 600.0
INTERVAL_S = 300.0
STAMP = ".pruned"
RUNTIME_MAX_AGE_S = 14 * 86400.0


def max_bytes() -> int:
    """The bound from ONNXC_CACHE_MAX_MB (0: none); a malformed value means the default."""
    raw = os.environ.get("ONNXC_CACHE_MAX_MB", "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return max(0, int(mb * (1 << 20)))


def touch(path: Path) -> None:
    """Mark an entry as just used."""
    try:
        os.utime(path)
    except OSError:
        pass


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _entries(root: Path) -> list[tuple[float, int, str, Path]]:
    """(last use, bytes, kind, path) of every entry: kind "lib" (path = the .so) or "model" (its folder)."""
    out = []
    for sub in root.glob("[0-9a-f][0-9a-f]"):
        for lib in sub.glob("*.so"):
            try:
                st = lib.stat()
            except OSError:
                continue
            try:  # a hit marks the library's record (the library itself keeps its mtime: it is checked)
                used = lib.with_name(lib.name + ".sum").stat().st_mtime
            except OSError:
                used = st.st_mtime
            out.append((used, st.st_size + _size(lib.with_suffix(".c")), "lib", lib))
    for d in root.glob("models/[0-9a-f][0-9a-f]/*"):
        if d.name.startswith("."):
            continue  # being written or being discarded
        try:
            used = (d / MANIFEST).stat().st_mtime
        except OSError:
            continue
        out.append((used, sum(_size(f) for f in d.iterdir()), "model", d))
    return out


def _remove(kind: str, path: Path) -> None:
    if kind == "model":
        from .model_cache import discard

        discard(path.parent.parent.parent, path.name)
        return
    for p in (path, path.with_name(path.name + ".sum"), path.with_suffix(".c"), path.with_suffix(".lock")):
        try:
            p.unlink()
        except OSError:
            pass


def _prune_runtime(root: Path, now: float) -> None:
    """Remove runtime folders unused for RUNTIME_MAX_AGE_S (renamed aside first, so a concurrent build or
    link sees a whole folder or none)."""
    for d in root.glob("runtime/[0-9a-f]*"):
        try:
            if now - d.stat().st_mtime < RUNTIME_MAX_AGE_S:
                continue
            aside = d.with_name(f".{d.name}.{os.getpid()}.removed")
            os.replace(d, aside)
        except OSError:
            continue
        shutil.rmtree(aside, ignore_errors=True)


def prune(root: Path, *, limit: int | None = None, now: float | None = None, force: bool = False) -> int:
    """Remove least recently used entries of the cache in ``root`` while it is over ``limit`` bytes
    (default: max_bytes()); returns the bytes removed. Skipped when a walk ran within INTERVAL_S,
    unless ``force``."""
    limit = max_bytes() if limit is None else limit
    now = time.time() if now is None else now
    if limit <= 0 or not root.is_dir():
        return 0
    stamp = root / STAMP
    try:
        if not force and now - stamp.stat().st_mtime < INTERVAL_S:
            return 0
    except OSError:
        pass
    try:
        stamp.touch(mode=0o600)
        os.utime(stamp, (now, now))
    except OSError:
        return 0
    _prune_runtime(root, now)
    entries = _entries(root)
    total = sum(e[1] for e in entries)
    removed = 0
    if total <= limit:
        return 0
    for used, size, kind, path in sorted(entries, key=lambda e: e[0]):
        if total - removed <= limit * PRUNE_TO:
            break
        if now - used < MIN_AGE_S:
            continue
        _remove(kind, path)
        removed += size
    return removed
