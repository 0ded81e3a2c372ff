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
``jit`` section records the integrity of the entry's files (size, sha256 and stat of the library, the
weights and the source: codegen/cache_integrity.py; one stat each on a hit, a full hash when a stat
changed) and the external data files the model read (``Model.data_files``, found again on every hit
through the frontend's confined resolver, which the caller passes in). Entries are written into a
temporary folder (while the C compiler runs) and renamed into place, so concurrent processes never see
half-written entries; an entry that fails any check is discarded (the caller warns) and rebuilt. A hit
marks the entry as used (its manifest's modification time); the folder is kept under a size bound with
the C cache's libraries (codegen/cache_prune.py, ``ONNXC_CACHE_MAX_MB``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from onnxc.ir import CompileError, ModelError, OnnxcError

from . import cache_integrity as integrity
from .artifact import FORMAT, MANIFEST, checksum, type_from_json, type_json
from .cache_prune import prune, touch

FORMAT_VERSION = "2"
# packages whose files decide what a compile produces (the CLI, bench and examples are included too:
# simpler than telling them apart, and they rarely change alone)
_PACKAGES = ("onnxc", "onnxc.frontend", "onnxc.ir", "onnxc.passes", "onnxc.codegen", "onnxc.runtime_c")
_CODE_SUFFIXES = (".py", ".j2", ".h", ".c", ".proto")
# environment switches read while generating code (they change the C without being compile options)
CODEGEN_ENV = ("ONNXC_WINOGRAD", "ONNXC_IMPLICIT_CONV", "ONNXC_DIRECT_CONV", "ONNXC_WEIGHT_GROWTH", "ONNXC_DWPW", "ONNXC_DWPW_EXPAND", "ONNXC_INPUT_SCALE", "ONNXC_DWPW_PHASED_OW",
               "ONNXC_IG_Q4")
_RACY_SECONDS = 2.0  # a file modified this recently may change again within one timestamp tick


class EntryError(Exception):
    """A cache entry that is missing, incomplete or corrupted (the caller warns and recompiles)."""


class StaleEntry(EntryError):
    """A sound entry that no longer applies: an external data file changed (the caller recompiles)."""


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
    digest = integrity.sha256_file(path)
    if memo is not None and _stat_key(path, os.stat(path)) == _stat_key(path, st) \
            and time.time() - st.st_mtime > _RACY_SECONDS:  # (not os.stat equality: reading updates st_atime)
        try:
            integrity.private_dir(memo.parent)
        except OSError:
            return digest
        integrity.write_atomic(memo, digest.encode())
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


def lookup(root: Path, key: str, resolve: Callable[[str], str | None] | None = None) -> Entry | None:
    """The entry of ``key`` if one exists; EntryError when it exists but fails a check (the integrity of
    the library, weights and source, the external data files the model read). ``resolve`` finds an
    external data file from its location (the frontend's confined resolver for the folder of the model
    file: the same bytes in another folder may name other data; it raises for a location it refuses,
    gives None for a file that is not there).
    A model not read from a file (``resolve`` None) cannot use an entry with external data: None."""
    d = entry_dir(root, key)
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EntryError(f"{d / MANIFEST}: unreadable manifest: {e}") from None
    try:
        jit = manifest["jit"]
        if jit["key"] != key:
            raise EntryError(f"{d / MANIFEST}: the manifest belongs to another key")
        files = jit["files"]
        needed = {manifest["library"], manifest["weights"]["file"], jit["source"]}
        if not needed <= set(files) or manifest["weights"]["size"] != files[manifest["weights"]["file"]]["size"] \
                or any(os.path.basename(name) != name or name in ("", ".", "..") for name in files):
            raise EntryError(f"{d / MANIFEST}: the integrity records do not cover the entry's files")
        refreshed = False
        for name, rec in files.items():
            refreshed |= integrity.check(d / name, rec)
        for ext in jit["external"]:
            if resolve is None:
                return None
            try:
                p = resolve(ext["location"])
            except OnnxcError as e:
                raise EntryError(f"{d / MANIFEST}: external data file: {e}") from None
            if p is None:
                raise StaleEntry(f"{d}: external data file {ext['location']!r} is gone")
            if os.stat(p).st_size != ext["size"] or file_digest(p, root) != ext["sha256"]:
                raise StaleEntry(f"{d}: external data file {p} changed since the model was compiled")
    except integrity.BadFile as e:
        raise EntryError(str(e)) from None
    except (KeyError, TypeError, AttributeError) as e:
        raise EntryError(f"{d / MANIFEST}: incomplete manifest ({e!r})") from None
    except OSError as e:
        raise EntryError(f"{d}: {e}") from None
    if refreshed:  # (a file's stat changed, not its contents: the next hit is one stat again)
        integrity.write_atomic(d / MANIFEST, _manifest_text(manifest))
    else:
        touch(d / MANIFEST)
    return Entry(d, manifest)


def _manifest_text(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


class PendingEntry:
    """An entry being written while the C compiler runs: a thread writes the source and the weights
    into a temporary folder, with their integrity records and the records of the external data files;
    ``commit`` adds the library and renames the folder into place (atomic: concurrent processes see
    a whole entry or none); ``abandon`` removes it. Failing to write (a full disk, a read-only cache)
    is not an error: the entry is simply not stored."""

    def __init__(self, root: Path, key: str, manifest: dict, source: str, weights, external: list[str],
                 base_dir: str | None = None):
        """``manifest``: from ``manifest()``; ``weights``: a bytes-like object nobody writes to;
        ``external``: the external data files the model read (``Model.data_files``: real paths inside
        ``base_dir``, the folder of the model file)."""
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
            integrity.private_dir(self.final.parent)
            self.tmp = Path(tempfile.mkdtemp(dir=self.final.parent, prefix=f".{self.key[:8]}-"))
            files = {}
            src = self.tmp / "model.c"
            src.write_text(source)
            w = self.manifest["weights"]
            with open(self.tmp / w["file"], "wb") as f:
                f.write(weights)
            w["checksum"] = checksum(weights)
            for p, sha in ((src, None), (self.tmp / w["file"], hashlib.sha256(weights).hexdigest())):
                integrity.seal(p)
                files[p.name] = integrity.record(p, sha)
            self.manifest["jit"] = {
                "key": self.key, "source": "model.c", "files": files,
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
                integrity.seal(lib)
            self.manifest["jit"]["files"][lib.name] = integrity.record(lib)
            (tmp / MANIFEST).write_bytes(_manifest_text(self.manifest))
            integrity.seal(tmp / MANIFEST)
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


def manifest(inputs: list[tuple[str, object]], outputs: list[tuple[str, object, bool]], weights,
             threads: int, about: dict | None = None) -> dict | None:
    """The artifact manifest of a JIT-compiled model (``codegen/artifact.py`` format, JIT library
    ``model.so`` with the ``onnxc_model`` prefix, weights in ``model.weights``; ``PendingEntry`` adds
    the weights' checksum and the ``jit`` section), or None when an input/output type would not come
    back exactly from JSON (such models are not cached). ``about``: what the model says of itself
    (onnxc/api.py model_about: metadata_props, producer...), given back by CompiledModel.about on a hit."""
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
            "outputs": [{"name": n, "type": type_json(t), "early": bool(e)} for n, t, e in outputs],
            "model": about or {}}
