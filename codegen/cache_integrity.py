"""Integrity of the files the caches hand to the linker and the loader, and private cache folders.

A damaged file in a cache used to fail every later compile until the cache was cleared by hand (a
truncated runtime object breaks the link; a truncated or garbage library fails ``dlopen`` or faults
with SIGBUS), and a swapped library served another model's results silently. So every cached file the
linker or the loader uses is checked before use: the C cache's libraries (codegen/cache.py), the model
cache's library, weights and source (codegen/model_cache.py) and the runtime objects and precompiled
header (codegen/runtime_lib.py).

- At store, a file gets a record: its size and sha256, and the stat it was hashed with (inode,
  mtime_ns). The C cache and the runtime folders keep it beside the file (``<file>.sum``, JSON); the
  model cache in its manifest.
- At use, the cheap check first: a file whose size, inode and mtime_ns are the recorded ones is the
  file that was hashed (writing into a file changes its mtime; a file renamed into place has another
  inode), so the hot path costs one stat. Any other stat costs a full sha256: a match refreshes the
  recorded stat, a mismatch makes the file bad.
- A bad file is reported with a ``CacheWarning`` naming it, discarded and built again.
- Nothing touches a checked file's mtime: the caches' last-use marks go to the records and manifests.

Cache folders are created private to the user (0700, ``private_dir``) and cached files are never group-
or world-writable (``seal``): a library that others can write is their code running in this process.
A cache root owned by another user or writable by everyone gets a warning, once per process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

from onnxc.ir import CacheWarning

CHUNK = 1 << 20
MISSING = "is missing"
_checked_roots: set[str] = set()


class BadFile(Exception):
    """A cached file that does not match its record (the message says how)."""


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file's contents, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def record(path: str | os.PathLike, sha256: str | None = None) -> dict:
    """The record of a file as it is now; ``sha256``: its digest when the caller already has it."""
    st = os.stat(path)
    return {"size": st.st_size, "sha256": sha256 or sha256_file(path), "ino": st.st_ino,
            "mtime_ns": st.st_mtime_ns}


def check(path: str | os.PathLike, rec: dict, st: os.stat_result | None = None) -> bool:
    """Check ``path`` against ``rec``: BadFile when it does not match; True when only its stat changed
    (``rec`` is then refreshed in place: the caller saves it), False when nothing changed."""
    try:
        size, sha, ino, mtime = int(rec["size"]), str(rec["sha256"]), int(rec["ino"]), int(rec["mtime_ns"])
    except (KeyError, TypeError, ValueError):
        raise BadFile(f"{path} has an invalid integrity record") from None
    try:
        st = st or os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise BadFile(f"{path} is not a regular file")
        if (st.st_size, st.st_ino, st.st_mtime_ns) == (size, ino, mtime):
            return False
        if st.st_size != size:
            raise BadFile(f"{path} has {st.st_size} bytes, {size} were stored")
        if sha256_file(path) != sha:
            raise BadFile(f"{path} does not match the sha256 recorded when it was stored")
    except FileNotFoundError:
        raise BadFile(f"{path} {MISSING}") from None
    except OSError as e:
        raise BadFile(f"{path} cannot be read: {e.strerror or e}") from None
    rec["ino"], rec["mtime_ns"] = st.st_ino, st.st_mtime_ns
    return True


def sidecar(path: Path) -> Path:
    """The record file of a cached file."""
    return path.with_name(path.name + ".sum")


def problem(path: Path) -> str | None:
    """What is wrong with ``path`` checked against its sidecar record: None when it is good, MISSING
    when there is no such file, else the reason (the file is bad). A record whose stat alone changed is
    refreshed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return MISSING
    except OSError as e:
        return f"{path} cannot be read: {e.strerror or e}"
    try:
        rec = json.loads(sidecar(path).read_text())
    except (OSError, ValueError):
        return f"{path} has no integrity record"
    try:
        if check(path, rec, st):
            write_atomic(sidecar(path), json.dumps(rec).encode())
    except BadFile as e:
        return str(e)
    return None


def store(tmp: Path, final: Path, sha256: str | None = None) -> None:
    """Move the finished file ``tmp`` into place at ``final`` (same folder), sealed, with its record
    (written first: whoever sees the file sees its record)."""
    seal(tmp)
    write_atomic(sidecar(final), json.dumps(record(tmp, sha256)).encode(), best_effort=False)
    os.replace(tmp, final)


def discard(path: Path, why: str, action: str = "building it again") -> None:
    """Warn about the bad cached file ``path`` and remove it with its record."""
    warnings.warn(f"onnxc cache: {why}; discarding it and {action}", CacheWarning, stacklevel=3)
    for p in (path, sidecar(path)):
        with contextlib.suppress(OSError):
            p.unlink()


def private_dir(path: Path) -> Path:
    """``path`` as a folder, the missing parts created private to the user (0700)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        private_dir(path.parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    return path


def seal(path: str | os.PathLike) -> None:
    """Take the group and world write permission off a file (a umask of 0 would leave it)."""
    mode = os.stat(path).st_mode
    if mode & 0o022:
        os.chmod(path, stat.S_IMODE(mode) & ~0o022)


def write_atomic(path: Path, data: bytes, best_effort: bool = True) -> None:
    """Write ``data`` to a temporary file (0600) and rename it into place; OSError ignored when
    ``best_effort``."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if not best_effort:
            raise


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the lock file ``path`` (created 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


def check_root(root: Path) -> None:
    """Warn, once per process, when the cache folder ``root`` is owned by another user or writable by
    everyone: whoever can write there can put code in the libraries this process loads."""
    key = str(root)
    if key in _checked_roots:
        return
    try:
        st = os.stat(root)
    except OSError:
        return  # (not there yet: it is created private)
    _checked_roots.add(key)
    why = []
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        why.append(f"owned by another user (uid {st.st_uid})")
    if st.st_mode & 0o002:
        why.append(f"writable by everyone (mode {stat.S_IMODE(st.st_mode):o})")
    if why:
        warnings.warn(f"onnxc cache: the cache folder {root} is {' and '.join(why)}; others could replace the "
                      "libraries onnxc loads from it. Use a private folder (ONNXC_CACHE_DIR or cache_dir=).",
                      CacheWarning, stacklevel=3)
