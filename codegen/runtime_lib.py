"""The runtime library: the reusable kernels of runtime_c/*.c, each compiled once into an object.

A model's translation unit holds only its own code (schedule, shape code, fused loops) and calls the
runtime through the declarations in runtime_c/*.h; its shared library links, statically, the runtime
objects its C needs (``sources_for``: the ``.c`` beside every runtime header its includes reach).
Each object is compiled the first time a model needs it for a (compiler, compiler version, flags,
runtime sources) combination, several at once (the "runtime" step of onnxc/progress.py), and cached under
``<cache>/runtime/<key>/``: later models reuse it. ``runtime_objects(cfg, runtime_sources())``
builds them all (benchmarks.compile_time times that).

Runtime functions are declared ``ONNXC_RT_API`` (hidden visibility, runtime_c/onnxc.h), so they are
local to each model library: two models or AOT artifacts in one process never clash. With GCC the
folder also holds a precompiled header of the public runtime headers (``runtime_pch``).

Every object, the header and its precompiled form have an integrity record (codegen/cache_integrity.py)
and are checked before each link: a truncated or damaged one is discarded with a CacheWarning and built
again, instead of failing every later link.

``sources_for(text)`` lists the runtime sources a piece of C needs, also for the artifact folders of
``onnxc build --emit-c`` and for tests that compile C programs directly.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from onnxc import progress
from onnxc.ir import CompileError

from . import cache_integrity as integrity
from .compiler import (
    CompilerConfig,
    compile_shared,
    compiler_env,
    compiler_version,
    runtime_dir,
    thread_flags,
)

FORMAT_VERSION = "4"
PCH = "onnxc_pch.h"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_HEADER_NAME = re.compile(r'"(onnxc(?:_[a-z0-9_]+)?\.h)"')


def runtime_sources() -> list[Path]:
    """Every runtime source file (runtime_c/*.c)."""
    return sorted(runtime_dir().glob("*.c"))


@lru_cache(maxsize=1)
def runtime_digest() -> str:
    """sha256 over the names and contents of the shipped runtime sources and headers."""
    h = hashlib.sha256()
    for p in sorted(runtime_dir().glob("*.[ch]")):
        h.update(p.name.encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def public_headers() -> tuple[str, ...]:
    """The runtime headers generated model code may include: those the code generator names
    (codegen/*.py, codegen/kernels/*.py, codegen/templates/*.j2)."""
    root = Path(__file__).resolve().parent
    names: set[str] = set()
    for f in [*root.glob("*.py"), *root.glob("kernels/*.py"), *root.glob("templates/*.j2")]:
        names.update(_HEADER_NAME.findall(f.read_text(errors="replace")))
    return tuple(sorted(n for n in names if (runtime_dir() / n).is_file()))


def pch_text() -> str:
    """The precompiled header: every public runtime header. A model translation unit is compiled with
    ``-include`` of it, so with GCC the compiler loads the parsed headers (system headers such as
    immintrin.h included) instead of parsing them again: a tiny model's compile drops from about 0.3 s
    to 0.1 s. Without a usable .gch (another compiler, other flags) the text is read instead, with
    the same meaning: runtime headers come first in every model unit anyway (codegen/emit.py)."""
    return "/* onnxc: the runtime headers of model code, precompiled (codegen/runtime_lib.py) */\n" + "".join(
        f'#include "{h}"\n' for h in public_headers())


def object_command(cfg: CompilerConfig, src: Path, out: Path, flags: tuple[str, ...] | None = None) -> list[str]:
    """The command compiling one runtime source into a position-independent object (``flags``: instead
    of ``cfg.flags``; the sanitizer flags ``cfg.sanitize`` are always added)."""
    cmd = [*shlex.split(cfg.cc), "-std=gnu11", *(cfg.flags if flags is None else flags), *cfg.sanitize, "-fPIC",
           "-fno-strict-aliasing", "-I", str(runtime_dir())]
    return [*cmd, *thread_flags(cfg.cc), "-c", str(src), "-o", str(out)]


def archive_key(cfg: CompilerConfig, flags: tuple[str, ...] | None = None) -> str:
    h = hashlib.sha256()
    cmd = object_command(cfg, Path("x.c"), Path("x.o"), flags)
    for part in (FORMAT_VERSION, runtime_digest(), shlex.join(cmd), compiler_version(cfg.cc), pch_text()):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def _fail_on_compile() -> bool:
    return os.environ.get("ONNXC_FAIL_ON_COMPILE", "") not in ("", "0", "false", "False")


def _compile_one(cmd: list[str]) -> str | None:
    """Run one compile; the compiler's message on failure, else None."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=compiler_env())
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not run the C compiler ({shlex.join(cmd)}): {e}"
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()
        return f"({shlex.join(cmd)}):\n{msg[:4000]}"
    return None


def _build_objects(cfg: CompilerConfig, srcs: list[Path], folder: Path, flags: tuple[str, ...] | None,
                   jobs: int | None = None) -> None:
    """Compile ``srcs`` into ``folder/<stem>.o`` (``jobs`` at once, default: all cores), each written
    atomically. Raises CompileError with the compiler's message."""
    tmps = [folder / f".{s.stem}.{os.getpid()}.o" for s in srcs]
    cmds = [object_command(cfg, s, o, flags) for s, o in zip(srcs, tmps)]
    order = sorted(range(len(cmds)), key=lambda i: -srcs[i].stat().st_size)  # the slowest starts first
    rep = progress.current()

    def one(i: int) -> str | None:
        t0 = time.perf_counter()
        error = _compile_one(cmds[i])
        rep.unit_done(srcs[i].name, time.perf_counter() - t0)
        return error

    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        errors = [e for e in pool.map(one, order) if e]
    if errors:
        for t in tmps:
            t.unlink(missing_ok=True)
        raise CompileError("building the onnxc runtime library failed " + errors[0])
    for s, t in zip(srcs, tmps):
        integrity.store(t, folder / f"{s.stem}.o")


@lru_cache(maxsize=8)
def _is_gcc(cc: str) -> bool:
    """GCC itself (not clang, which defines __GNUC__ too but reads other precompiled headers)."""
    try:
        r = subprocess.run([*shlex.split(cc), "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "#define __GNUC__ " in r.stdout and "__clang__" not in r.stdout


def build_pch(cfg: CompilerConfig, folder: Path, flags: tuple[str, ...] | None = None) -> None:
    """Write ``folder/onnxc_pch.h`` and, with GCC, its precompiled form ``onnxc_pch.h.gch`` (compiled
    with the flags of model units). A failure leaves no .gch: models then read the header text."""
    h = folder / PCH
    tmp_h = folder / f".{PCH}.{os.getpid()}"
    tmp_h.write_text(pch_text())
    integrity.store(tmp_h, h)
    if not _is_gcc(cfg.cc):
        return
    tmp = folder / f".{PCH}.{os.getpid()}.gch"
    cmd = object_command(cfg, h, tmp, flags)
    cmd[cmd.index("-c")] = "-x"
    cmd.insert(cmd.index("-x") + 1, "c-header")
    if _compile_one(cmd) is None:
        integrity.store(tmp, folder / f"{PCH}.gch")
    else:
        tmp.unlink(missing_ok=True)


def runtime_folder(cfg: CompilerConfig, cache: str | os.PathLike | None = None,
                   flags: tuple[str, ...] | None = None) -> Path:
    """The folder of the runtime objects (and precompiled header) for ``cfg`` and ``flags``."""
    from .cache import cache_dir

    return cache_dir(cache) / "runtime" / archive_key(cfg, flags)[:24]


def runtime_objects(cfg: CompilerConfig, sources: list[Path], cache: str | os.PathLike | None = None,
                    flags: tuple[str, ...] | None = None) -> list[Path]:
    """The objects of the runtime ``sources`` for ``cfg`` (and ``flags``, default ``cfg.flags``), the
    missing ones compiled now, and the precompiled header made on first use.

    Concurrent processes wait on the folder's lock, so each object is built once; waiting and building
    are the "runtime" step of the compile's progress (onnxc/progress.py; a session of its own when no
    compile runs). Objects and header are checked against their integrity records:
    a damaged one is discarded with a CacheWarning and built again. ``ONNXC_FAIL_ON_COMPILE=1`` makes a
    missing object an error."""
    from .cache_prune import touch

    folder = runtime_folder(cfg, cache, flags)
    objs = [folder / f"{s.stem}.o" for s in sources]
    pch = [folder / PCH, folder / f"{PCH}.gch"]  # (no .gch with another compiler than GCC, or when it failed)
    if all(_usable(p) for p in objs + pch[:1]) and _usable(pch[1], optional=True):
        touch(folder)
        return objs
    if _fail_on_compile():
        missing = [o.name for o in objs + pch if not _usable(o, o == pch[1])]
        raise CompileError(f"runtime objects must be built ({', '.join(missing)}, folder {folder.name}) but "
                           "ONNXC_FAIL_ON_COMPILE is set")
    integrity.private_dir(folder)
    with progress.session() as rep, rep.step("runtime"), integrity.locked(folder / "build.lock"):
        bad = {p: why for p in objs + pch if (why := integrity.problem(p)) not in (None, integrity.MISSING)}
        for p, why in bad.items():
            integrity.discard(p, f"the runtime file {why}", "compiling it again")
        if not (folder / PCH).exists() or pch[1] in bad:
            build_pch(cfg, folder, flags)
        todo = [s for s, o in zip(sources, objs) if not o.exists()]
        if todo:
            rep.units(len(todo))
            _build_objects(cfg, todo, folder, flags)
    touch(folder)
    return objs


def _usable(path: Path, optional: bool = False) -> bool:
    """``path`` is there and matches its integrity record (or, when ``optional``, is not there)."""
    why = integrity.problem(path)
    return why is None or (optional and why == integrity.MISSING)


def runtime_pch(cfg: CompilerConfig, cache: str | os.PathLike | None = None,
                flags: tuple[str, ...] | None = None) -> Path | None:
    """The header to ``-include`` first in model units: the precompiled public runtime headers (None
    when none was written; runtime_objects writes it)."""
    h = runtime_folder(cfg, cache, flags) / PCH
    return h if h.is_file() else None


def compile_with_runtime(src: Path, out: Path, cfg: CompilerConfig, cache: str | os.PathLike | None = None) -> None:
    """Compile ``src`` into the shared library ``out`` linked with the runtime objects it needs (for C
    that calls runtime functions outside a model: benchmarks and tests)."""
    compile_shared(src, out, cfg, tuple(runtime_objects(cfg, sources_for(src.read_text()), cache)))


def _includes(path: Path) -> list[str]:
    try:
        return _INCLUDE.findall(path.read_text(errors="replace"))
    except OSError:
        return []


def runtime_files_for(text: str) -> tuple[list[Path], list[Path]]:
    """(headers, sources) of the runtime that C ``text`` needs: the runtime headers its quoted
    includes reach, transitively, and for each a ``.c`` of the same name when there is one (whose
    own includes are followed too)."""
    rt = runtime_dir()
    headers: set[str] = set()
    sources: set[str] = set()
    todo = list(_INCLUDE.findall(text))
    while todo:
        name = todo.pop()
        if name in headers or not (rt / name).is_file():
            continue
        headers.add(name)
        todo.extend(_includes(rt / name))
        c = Path(name).with_suffix(".c").name
        if c not in sources and (rt / c).is_file():
            sources.add(c)
            todo.extend(_includes(rt / c))
    return [rt / h for h in sorted(headers)], [rt / s for s in sorted(sources)]


def sources_for(text: str) -> list[Path]:
    """The runtime sources (runtime_c/*.c) that C ``text`` needs; see runtime_files_for."""
    return runtime_files_for(text)[1]
