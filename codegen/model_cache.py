"""The model cache: a compiled model found from the bytes of its ONNX file, without parsing the file.

``codegen/cache.py`` is keyed by the generated C source, so a hit there still costs the frontend, the
passes, the lowering and the emission, and holds the weights several times over. This cache sits in
front of it. Its key is the sha256 of:

- the model's bytes (a file is streamed; a stat memo spares re-hashing an unchanged file),
- the compile options that change the result (threads, compiler command line and version, profile),
- a digest of onnxc's own code (every .py file, template and runtime header of the package), so an
  edited onnxc never serves a stale result.

An entry is a folder ``<cache>/models/<key[:2]>/<key>/`` in the layout of an AOT artifact
(``onnxc.json`` manifest, library, ``model.weights`` checked by size and checksum; see
``codegen/artifact.py`` and ``onnxc.aot.open_artifact``) plus ``model.c``, the source. The manifest's
``jit`` section records the library's sha256 and the external data files the model read (checked on
every hit). Entries are written into a temporary folder (while the C compiler runs) and renamed into
place, so concurrent processes never see half-written entries; an entry that fails any check is
discarded and rebuilt. A hit marks the entry as used (its manifest's modification time); the folder is
kept under a size bound with the C cache's libraries (codegen/cache_prune.py, ``ONNXC_CACHE_MAX_MB``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from onnxc.ir import CompileError, ModelError

from .artifact import FORMAT, MANIFEST, checksum, type_from_json, type_json
from .cache_prune import prune, touch

FORMAT_VERSION = "1"
CHUNK = 1 << 20
# packages whose files decide what a compile produces (the CLI, bench and examples are included too:
# simpler than telling them apart, and they rarely change alone)
_PACKAGES = ("onnxc", "onnxc.frontend", "onnxc.ir", "onnxc.passes", "onnxc.codegen", "onnxc.runtime_c")
_CODE_SUFFIXES = (".py", ".j2", ".h", ".c", ".proto")
# environment switches read while generating code (they change the C without being compile options)
CODEGEN_ENV = ("ONNXC_WINOGRAD", "ONNXC_IMPLICIT_CONV")
_RACY_SECONDS = 2.0  # a file modified this recently may change again within one timestamp tick


class EntryError(Exception):
    """A cache entry that is missing, incomplete, corrupted or stale (the caller recompiles)."""


@dataclass(frozen=True)
class Entry:
    """A cache entry that passed the cheap checks; the weights are checked when read."""

    dir: Path
    manifest: dict

    @property
    def source_path(self) -> Path:
        return self.dir / self.manifest["jit"]["source"]


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the files of onnxc's packages (names and contents), computed once per process."""
    h = hashlib.sha256(FORMAT_VERSION.encode())
    for pkg in _PACKAGES:
        spec = importlib.util.find_spec(pkg)
        for loc in sorted(spec.submodule_search_locations or []) if spec else []:
            root = Path(loc)
            for p in sorted(root.rglob("*")):
                if p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts and p.is_file():
                    h.update(f"{pkg}/{p.relative_to(root).as_posix()}\0".encode())
                    h.update(p.read_bytes())
                    h.update(b"\0")
    return h.hexdigest()


def _stat_key(path: str, st: os.stat_result) -> str:
    text = f"{path}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def file_digest(path: str | os.PathLike, root: Path | None = None) -> str:
    """sha256 of a file's contents, streamed. With ``root`` (the cache folder), the digest is memoized
    under the file's identity and stat (device, inode, size, mtime, ctime): an unchanged file is not
    read again. Files modified in the last seconds are not memoized (a change within the same
    timestamp tick would go unnoticed)."""
    path = os.path.abspath(os.fspath(path))
    memo = None
    st = os.stat(path)
    if root is not None:
        memo = root / "models" / "stat" / _stat_key(path, st)[:40]
        try:
            text = memo.read_text()
            if len(text) == 64:
                return text
        except OSError:
            pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
    digest = h.hexdigest()
    if memo is not None and os.stat(path) == st and time.time() - st.st_mtime > _RACY_SECONDS:
        _write_atomic(memo, digest.encode())
    return digest


def model_key(model_digest: str, options: dict) -> str:
    """The cache key of a model (sha256 of its bytes) compiled with ``options`` (JSON-able values)."""
    h = hashlib.sha256()
    env = {k: os.environ[k] for k in CODEGEN_ENV if k in os.environ}
    for part in (FORMAT_VERSION, code_digest(), model_digest, json.dumps(options, sort_keys=True),
                 json.dumps(env, sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def bytes_digest(data) -> str:
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


def entry_dir(root: Path, key: str) -> Path:
    return root / "models" / key[:2] / key


def lookup(root: Path, key: str, base_dir: str | None = None) -> Entry | None:
    """The entry of ``key`` if one exists; EntryError when it exists but fails a check (the library's
    sha256, file sizes, the external data files the model read, found relative to ``base_dir``, the
    folder of the model file: the same bytes in another folder may name other data). A model not
    read from a file cannot use an entry with external data: None."""
    d = entry_dir(root, key)
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EntryError(f"{d}: unreadable manifest: {e}") from None
    try:
        jit = manifest["jit"]
        if jit["key"] != key:
            raise EntryError(f"{d}: the manifest belongs to another key")
        lib = d / manifest["library"]
        if file_digest(lib) != jit["library_sha256"]:
            raise EntryError(f"{d}: the library does not match its sha256")
        w = manifest["weights"]
        if (d / w["file"]).stat().st_size != w["size"] or not (d / jit["source"]).is_file():
            raise EntryError(f"{d}: the weights or source file is missing or has the wrong size")
        for ext in jit["external"]:
            if base_dir is None:
                return None
            p = Path(os.path.realpath(base_dir), ext["location"])
            if not p.is_file() or p.stat().st_size != ext["size"] or file_digest(p, root) != ext["sha256"]:
                raise EntryError(f"{d}: external data file {p} changed since the model was compiled")
    except (KeyError, TypeError) as e:
        raise EntryError(f"{d}: incomplete manifest ({e})") from None
    except OSError as e:
        raise EntryError(f"{d}: {e}") from None
    touch(d / MANIFEST)
    return Entry(d, manifest)


class PendingEntry:
    """An entry being written while the C compiler runs: a thread writes the source and the weights
    into a temporary folder, with their checksum and the records of the external data files;
    ``commit`` adds the library and renames the folder into place (atomic: concurrent processes see
    a whole entry or none); ``abandon`` removes it. Failing to write (a full disk, a read-only cache)
    is not an error: the entry is simply not stored."""

    def __init__(self, root: Path, key: str, manifest: dict, source: str, weights, external: list[str],
                 base_dir: str | None = None):
        """``manifest``: from ``manifest()``; ``weights``: a bytes-like object nobody writes to;
        ``external``: the external data files (``external_files``) of the model file in ``base_dir``."""
        self.base_dir = os.path.realpath(base_dir) if base_dir else None
        self.root, self.key, self.final = root, key, entry_dir(root, key)
        self.manifest = manifest
        self.tmp: Path | None = None
        self._args = (source, memoryview(weights).cast("B"), external)
        self._thread = threading.Thread(target=self._write, name="onnxc-model-cache", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        source, weights, external = self._args
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(dir=self.final.parent, prefix=f".{self.key[:8]}-"))
            (self.tmp / "model.c").write_text(source)
            w = self.manifest["weights"]
            with open(self.tmp / w["file"], "wb") as f:
                f.write(weights)
            w["checksum"] = checksum(weights)
            self.manifest["jit"] = {
                "key": self.key, "source": "model.c",
                "external": [{"location": os.path.relpath(p, self.base_dir), "size": os.stat(p).st_size,
                              "sha256": file_digest(p, self.root)} for p in external]}
        except Exception:  # (any failure, even MemoryError: the compile goes on without storing)
            self.manifest = None
        finally:
            self._args = None

    def commit(self, library: Path) -> Path | None:
        """Finish the entry with ``library`` (hard-linked when possible); its folder, or None."""
        self._thread.join()
        tmp = self.tmp
        if tmp is None or self.manifest is None:
            self.abandon()
            return None
        try:
            lib = tmp / self.manifest["library"]
            try:
                os.link(library, lib)
            except OSError:
                shutil.copyfile(library, lib)
            self.manifest["jit"]["library_sha256"] = file_digest(lib)
            (tmp / MANIFEST).write_text(json.dumps(self.manifest, indent=1, sort_keys=True) + "\n")
            os.rename(tmp, self.final)  # fails when another process stored the same entry first
            self.tmp = None
            prune(self.root)
            return self.final
        except OSError:
            self.abandon()
            return self.final if (self.final / MANIFEST).exists() else None

    def abandon(self) -> None:
        self._thread.join()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def discard(root: Path, key: str) -> None:
    """Remove a bad entry: renamed aside first, so other processes see it whole or not at all."""
    d = entry_dir(root, key)
    trash = d.parent / f".trash-{key[:8]}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(d, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def external_files(msg, base_dir: str) -> list[str]:
    """Absolute paths of the external data files a parsed ModelProto refers to (any TensorProto with
    ``data_location == EXTERNAL``, in graphs, subgraphs, attributes and functions)."""
    found: set[str] = set()
    stack = [msg]
    while stack:
        m = stack.pop()
        if m.DESCRIPTOR.name == "TensorProto":  # (its fields hold no tensors; raw_data is not copied out)
            if m.data_location == 1:
                loc = {e.key: e.value for e in m.external_data}.get("location")
                if loc:
                    found.add(os.path.realpath(os.path.join(base_dir, loc)))
            continue
        for fd, v in m.ListFields():
            if fd.message_type is None:
                continue
            if fd.is_repeated:
                stack.extend(v)
            else:
                stack.append(v)
    return sorted(p for p in found if os.path.isfile(p))


def _write_atomic(path: Path, data: bytes) -> None:
    """Best effort (a memo): write to a temporary file, rename into place."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def manifest(inputs: list[tuple[str, object]], outputs: list[tuple[str, object, bool]], weights,
             threads: int) -> dict | None:
    """The artifact manifest of a JIT-compiled model (``codegen/artifact.py`` format, JIT library
    ``model.so`` with the ``onnxc_model`` prefix, weights in ``model.weights``; ``PendingEntry`` adds
    the weights' checksum and the ``jit`` section), or None when an input/output type would not come
    back exactly from JSON (such models are not cached)."""
    types = [t for _, t in inputs] + [t for _, t, _ in outputs]
    try:
        if any(type_from_json(type_json(t)) != t for t in types):
            return None
    except (CompileError, ModelError, KeyError, TypeError, ValueError):
        return None
    return {"format": FORMAT, "name": "model", "prefix": "onnxc_model", "library": "model.so", "target": "native",
            "threads": threads,
            "weights": {"mode": "file", "file": "model.weights", "size": memoryview(weights).nbytes},
            "inputs": [{"name": n, "type": type_json(t)} for n, t in inputs],
            "outputs": [{"name": n, "type": type_json(t), "early": bool(e)} for n, t, e in outputs]}
