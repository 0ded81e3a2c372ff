"""Content-addressed on-disk cache of compiled model libraries.

Key = sha256 of (format version, C source, full compiler command line, compiler version, the key of
the runtime library it links (codegen/runtime_lib.py: runtime sources, their flags and compiler)). Entries live at ``<cache>/<key[:2]>/<key>.so``; writes go to a temp file and are
renamed into place under a per-key lock, so concurrent processes never see half-written libraries.
``ONNXC_FAIL_ON_COMPILE=1`` turns any cache miss into a CompileError (tests use it to prove a
compile was not needed). Counters record hits and misses for tests: ``hits``/``misses`` count
libraries found / compiled (a model-cache hit, codegen/model_cache.py, counts as a hit);
``model_hits``/``model_misses`` count the model cache's lookups. A hit marks the entry as used; the
cache is kept under a size bound (``ONNXC_CACHE_MAX_MB``, least recently used entries go first;
codegen/cache_prune.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import tempfile
from pathlib import Path

from onnxc.ir import CompileError

from .cache_prune import prune, touch
from .compiler import CompilerConfig, compile_units, compiler_version
from .emit import split_units
from .runtime_lib import archive_key, runtime_objects, runtime_pch, sources_for

FORMAT_VERSION = "2"
stats = {"hits": 0, "misses": 0, "model_hits": 0, "model_misses": 0}


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    d = override or os.environ.get("ONNXC_CACHE_DIR") or Path.home() / ".cache" / "onnxc"
    return Path(d)


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
    """Path of the shared library for ``source``, compiling it only on a cache miss."""
    root = cache_dir(cache)
    key = cache_key(source, cfg)
    final = root / key[:2] / f"{key}.so"
    if final.exists():
        stats["hits"] += 1
        touch(final)
        return final
    objects = tuple(runtime_objects(cfg, sources_for(source), cache))
    if fail_on_compile():
        raise CompileError(f"compilation needed (cache miss for key {key[:16]}) but ONNXC_FAIL_ON_COMPILE is set")
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if final.exists():
                stats["hits"] += 1
                return final
            stats["misses"] += 1
            with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{key[:8]}-") as tmp:
                srcs = []
                for i, text in enumerate(split_units(source)):
                    srcs.append(Path(tmp) / (f"model_{i}.c" if i else "model.c"))
                    srcs[-1].write_text(text)
                out = Path(tmp) / "model.so"
                compile_units(srcs, out, cfg, objects, runtime_pch(cfg, cache))
                (final.parent / f"{key}.c").write_text(source)
                os.replace(out, final)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    prune(root)
    return final
