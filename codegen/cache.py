"""Content-addressed on-disk cache of compiled model libraries.

Key = sha256 of (format version, C source, full compiler command line, compiler version, the key of
the runtime library it links (codegen/runtime_lib.py: runtime sources, their flags and compiler)). Entries live at ``<cache>/<key[:2]>/<key>.so``; writes go to a temp file and are
renamed into place under a per-key lock, so concurrent processes never see half-written libraries.
``ONNXC_FAIL_ON_COMPILE=1`` turns any cache miss into a CompileError (tests use it to prove a
compile was not needed). Counters record hits and misses for tests: ``hits``/``misses`` count
libraries found / compiled (a model-cache hit, codegen/model_cache.py, counts as a hit);
``model_hits``/``model_misses`` count the model cache's lookups. A hit marks the entry as used (its
record's modification time); the cache is kept under a size bound (``ONNXC_CACHE_MAX_MB``, least
recently used entries go first; codegen/cache_prune.py).

Each library has a record beside it (``<key>.so.sum``: size, sha256, stat; codegen/cache_integrity.py)
and is checked against it on every hit: one stat while the file is unchanged, a full hash when its stat
changed; a damaged or swapped library is discarded with a CacheWarning and compiled again. Folders are
created private to the user.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from pathlib import Path

from onnxc.ir import CompileError

from . import cache_integrity as integrity
from .cache_prune import prune, touch
from .compiler import CompilerConfig, compile_units, compiler_version
from .emit import split_units
from .runtime_lib import archive_key, runtime_objects, runtime_pch, sources_for

FORMAT_VERSION = "3"
stats = {"hits": 0, "misses": 0, "model_hits": 0, "model_misses": 0}


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    d = Path(override or os.environ.get("ONNXC_CACHE_DIR") or Path.home() / ".cache" / "onnxc")
    integrity.check_root(d)
    return d


def cache_key(source: str, cfg: CompilerConfig) -> str:
    h = hashlib.sha256()
    cmd = cfg.command(Path("model.c"), Path("model.so"))
    for part in (FORMAT_VERSION, source, shlex.join(cmd), compiler_version(cfg.cc), archive_key(cfg)):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def fail_on_compile() -> bool:
    return os.environ.get("ONNXC_FAIL_ON_COMPILE", "") not in ("", "0", "false", "False")


def build_cached(source: str, cfg: CompilerConfig, cache: str | os.PathLike | None = None) -> Path:
    """Path of the shared library for ``source``, compiling it only on a cache miss (or when the cached
    library fails its integrity check: it is then discarded with a CacheWarning)."""
    root = cache_dir(cache)
    key = cache_key(source, cfg)
    final = root / key[:2] / f"{key}.so"
    if integrity.problem(final) is None:
        stats["hits"] += 1
        touch(integrity.sidecar(final))
        return final
    objects = tuple(runtime_objects(cfg, sources_for(source), cache))
    if fail_on_compile():
        raise CompileError(f"compilation needed (cache miss for key {key[:16]}) but ONNXC_FAIL_ON_COMPILE is set")
    integrity.private_dir(final.parent)
    with integrity.locked(final.parent / f"{key}.lock"):
        why = integrity.problem(final)
        if why is None:
            stats["hits"] += 1
            return final
        if why != integrity.MISSING:
            integrity.discard(final, f"the compiled library {why}", "compiling it again")
        stats["misses"] += 1
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{key[:8]}-") as tmp:
            srcs = []
            for i, text in enumerate(split_units(source)):
                srcs.append(Path(tmp) / (f"model_{i}.c" if i else "model.c"))
                srcs[-1].write_text(text)
            out = Path(tmp) / "model.so"
            compile_units(srcs, out, cfg, objects, runtime_pch(cfg, cache))
            srcs[0].write_text(source)
            integrity.seal(srcs[0])
            os.replace(srcs[0], final.with_suffix(".c"))
            integrity.store(out, final)
    prune(root)
    return final
