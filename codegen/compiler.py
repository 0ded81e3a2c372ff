"""The C compiler driver: one command line turns a C file into a plain shared library."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from onnxc import progress
from onnxc.ir import CompileError


def runtime_dir() -> Path:
    """Folder holding the shipped C runtime headers (package data)."""
    return Path(str(resources.files("onnxc.runtime_c")))


def default_cc() -> str:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang") or "cc"


_SANITIZER = re.compile(r"[a-z][a-z0-9-]*")


def sanitize_flags(spec: str | None = None) -> tuple[str, ...]:
    """The sanitizer flags of ``ONNXC_SANITIZE`` (or ``spec``): a comma list of sanitizers passed to
    ``-fsanitize=`` (e.g. ``address,undefined``), with frame pointers kept for the reports and
    undefined behaviour made fatal. Empty when unset. Every model library, runtime object and AOT
    artifact is then compiled and linked with them (and cached apart: the flags are in every cache
    key). A library built with ``address`` needs the ASan runtime loaded first: run Python through
    ``python -m tests.sanitize`` (which sets ``LD_PRELOAD`` and ``ASAN_OPTIONS``)."""
    spec = os.environ.get("ONNXC_SANITIZE", "") if spec is None else spec
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        return ()
    bad = [n for n in names if not _SANITIZER.fullmatch(n)]
    if bad:
        raise CompileError(f"ONNXC_SANITIZE={spec!r}: {bad[0]!r} is not a sanitizer name (expected a comma list "
                           "such as 'address,undefined')")
    return (f"-fsanitize={','.join(names)}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-g1")


def compiler_env() -> dict[str, str]:
    """The environment of compiler processes: this one's without a sanitizer runtime in ``LD_PRELOAD``
    (python -m tests.sanitize preloads the ASan runtime for Python; the compiler does not need it and
    runs about 20% slower under it)."""
    env = dict(os.environ)
    pre = env.get("LD_PRELOAD", "")
    keep = [p for p in pre.replace(":", " ").split() if not re.match(r"lib[a-z]*san\.so", os.path.basename(p))]
    if keep:
        env["LD_PRELOAD"] = " ".join(keep)
    else:
        env.pop("LD_PRELOAD", None)
    return env


@dataclass(frozen=True)
class CompilerConfig:
    """How C is compiled. ``flags`` replace the default optimization flags when given; ``sanitize``
    (default: from ``ONNXC_SANITIZE``, see sanitize_flags) is added to every compile and link."""

    cc: str = field(default_factory=default_cc)
    flags: tuple[str, ...] = ("-O3", "-march=native")
    sanitize: tuple[str, ...] = field(default_factory=sanitize_flags)

    def object_command(self, src: Path, out: Path, include: Path | None = None) -> list[str]:
        """Compile ``src`` into the position-independent object ``out`` (``include``: a header read
        first, the precompiled runtime headers, codegen/runtime_lib.py)."""
        cmd = [*shlex.split(self.cc), "-std=gnu11", *self.flags, *self.sanitize, "-fPIC", "-fno-strict-aliasing",
               "-I", str(runtime_dir()), *(("-include", str(include)) if include else ())]
        return [*cmd, *thread_flags(self.cc), "-c", "-o", str(out), str(src)]

    def link_command(self, objs: list[Path], out: Path, libs: tuple[Path, ...] = ()) -> list[str]:
        """Link objects (and the runtime objects or archives ``libs``) into the shared library ``out``."""
        cmd = [*shlex.split(self.cc), *self.flags, *self.sanitize, "-fPIC", "-shared"]
        return [*cmd, *thread_flags(self.cc), "-o", str(out), *map(str, objs), *map(str, libs), "-lm"]

    def command(self, src: Path, out: Path, libs: tuple[Path, ...] = (), include: Path | None = None) -> list[str]:
        """Compile ``src`` into the shared library ``out``, linking the runtime objects ``libs`` (the
        runtime library, codegen/runtime_lib.py); ``include`` as in object_command."""
        cmd = [*shlex.split(self.cc), "-std=gnu11", *self.flags, *self.sanitize, "-fPIC", "-shared",
               "-fno-strict-aliasing",
               "-I", str(runtime_dir()), *(("-include", str(include)) if include else ())]
        return [*cmd, *thread_flags(self.cc), "-o", str(out), str(src), *map(str, libs), "-lm"]


@lru_cache(maxsize=8)
def compiler_version(cc: str) -> str:
    try:
        r = subprocess.run([*shlex.split(cc), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"no working C compiler: running {cc!r} failed ({e}); install gcc or set CC") from e
    return r.stdout.strip().splitlines()[0] if r.stdout else cc


@lru_cache(maxsize=8)
def thread_flags(cc: str) -> tuple[str, ...]:
    """The threading flags of every compile and link: ``-pthread`` (the runtime's pool,
    runtime_c/onnxc_pool.h) and ``-fopenmp-simd`` where the compiler has it: ``#pragma omp simd`` vectorizes
    loops; there is no OpenMP runtime (libgomp) and no ``omp parallel`` region."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "simd.c"
        src.write_text("int f(float *x, int n) {\n#pragma omp simd\n for (int i = 0; i < n; i++) x[i] += 1;\n return 0; }\n")
        try:
            r = subprocess.run([*shlex.split(cc), "-fopenmp-simd", "-Werror", "-fPIC", "-c", "-o", str(Path(d) / "simd.o"),
                                str(src)], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return ("-pthread",)
        return ("-pthread", "-fopenmp-simd") if r.returncode == 0 else ("-pthread",)


def compile_shared(src: Path, out: Path, cfg: CompilerConfig, libs: tuple[Path, ...] = (),
                   include: Path | None = None) -> None:
    """Compile ``src`` into the shared library ``out`` (linking ``libs``); CompileError carries the
    compiler's message."""
    run_compiler(cfg.command(src, out, libs, include))


def compile_units(srcs: list[Path], out: Path, cfg: CompilerConfig, libs: tuple[Path, ...] = (),
                  include: Path | None = None, jobs: int | None = None) -> None:
    """Compile several translation units at once (``jobs``, default: all cores) and link them, with
    ``libs``, into the shared library ``out``. One unit is compiled and linked in one command. Each
    finished unit is reported to the running compile's progress (onnxc/progress.py)."""
    rep = progress.current()
    rep.units(len(srcs))

    def one(src: Path, obj: Path | None) -> None:
        t0 = time.perf_counter()
        if obj is None:
            compile_shared(src, out, cfg, libs, include)
        else:
            run_compiler(cfg.object_command(src, obj, include))
        rep.unit_done(src.name, time.perf_counter() - t0)

    if len(srcs) == 1:
        one(srcs[0], None)
        return
    objs = [s.with_suffix(".o") for s in srcs]
    with ThreadPoolExecutor(max_workers=max(1, min(len(srcs), jobs or os.cpu_count() or 1))) as pool:
        list(pool.map(one, srcs, objs))
    run_compiler(cfg.link_command(objs, out, libs))


def run_compiler(cmd: list[str]) -> None:
    """Run one compiler command; CompileError carries the compiler's message."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=compiler_env())
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler ({shlex.join(cmd)}): {e}") from e
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()
        if len(msg) > 4000:
            msg = msg[:4000] + "\n..."
        raise CompileError(f"C compilation failed ({shlex.join(cmd)}):\n{msg}")
