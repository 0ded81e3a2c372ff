"""The C compiler driver: one command line turns a C file into a plain shared library."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from onnxc.ir import CompileError


def runtime_dir() -> Path:
    """Folder holding the shipped C runtime headers (package data)."""
    return Path(str(resources.files("onnxc.runtime_c")))


def default_cc() -> str:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang") or "cc"


@dataclass(frozen=True)
class CompilerConfig:
    """How C is compiled. ``flags`` replace the default optimization flags when given."""

    cc: str = field(default_factory=default_cc)
    flags: tuple[str, ...] = ("-O3", "-march=native")
    openmp: bool = True

    def object_command(self, src: Path, out: Path, include: Path | None = None) -> list[str]:
        """Compile ``src`` into the position-independent object ``out`` (``include``: a header read
        first, the precompiled runtime headers, codegen/runtime_lib.py)."""
        cmd = [*shlex.split(self.cc), "-std=gnu11", *self.flags, "-fPIC", "-fno-strict-aliasing",
               "-I", str(runtime_dir()), *(("-include", str(include)) if include else ())]
        if self.openmp and has_openmp(self.cc):
            cmd.append("-fopenmp")
        return [*cmd, "-c", "-o", str(out), str(src)]

    def link_command(self, objs: list[Path], out: Path, libs: tuple[Path, ...] = ()) -> list[str]:
        """Link objects (and the runtime objects or archives ``libs``) into the shared library ``out``."""
        cmd = [*shlex.split(self.cc), *self.flags, "-fPIC", "-shared"]
        if self.openmp and has_openmp(self.cc):
            cmd.append("-fopenmp")
        return [*cmd, "-o", str(out), *map(str, objs), *map(str, libs), "-lm"]

    def command(self, src: Path, out: Path, libs: tuple[Path, ...] = (), include: Path | None = None) -> list[str]:
        """Compile ``src`` into the shared library ``out``, linking the runtime objects ``libs`` (the
        runtime library, codegen/runtime_lib.py); ``include`` as in object_command."""
        cmd = [*shlex.split(self.cc), "-std=gnu11", *self.flags, "-fPIC", "-shared", "-fno-strict-aliasing",
               "-I", str(runtime_dir()), *(("-include", str(include)) if include else ())]
        if self.openmp and has_openmp(self.cc):
            cmd.append("-fopenmp")
        return [*cmd, "-o", str(out), str(src), *map(str, libs), "-lm"]


@lru_cache(maxsize=8)
def compiler_version(cc: str) -> str:
    try:
        r = subprocess.run([*shlex.split(cc), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"no working C compiler: running {cc!r} failed ({e}); install gcc or set CC") from e
    return r.stdout.strip().splitlines()[0] if r.stdout else cc


@lru_cache(maxsize=8)
def has_openmp(cc: str) -> bool:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "omp.c"
        src.write_text("#include <omp.h>\nint f(void){return omp_get_max_threads();}\n")
        try:
            r = subprocess.run([*shlex.split(cc), "-fopenmp", "-fPIC", "-shared", "-o", str(Path(d) / "omp.so"),
                                str(src)], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        return r.returncode == 0


def compile_shared(src: Path, out: Path, cfg: CompilerConfig, libs: tuple[Path, ...] = (),
                   include: Path | None = None) -> None:
    """Compile ``src`` into the shared library ``out`` (linking ``libs``); CompileError carries the
    compiler's message."""
    run_compiler(cfg.command(src, out, libs, include))


def compile_units(srcs: list[Path], out: Path, cfg: CompilerConfig, libs: tuple[Path, ...] = (),
                  include: Path | None = None, jobs: int | None = None) -> None:
    """Compile several translation units at once (``jobs``, default: all cores) and link them, with
    ``libs``, into the shared library ``out``. One unit is compiled and linked in one command."""
    if len(srcs) == 1:
        compile_shared(srcs[0], out, cfg, libs, include)
        return
    objs = [s.with_suffix(".o") for s in srcs]
    with ThreadPoolExecutor(max_workers=max(1, min(len(srcs), jobs or os.cpu_count() or 1))) as pool:
        list(pool.map(lambda so: run_compiler(cfg.object_command(*so, include)), zip(srcs, objs)))
    run_compiler(cfg.link_command(objs, out, libs))


def run_compiler(cmd: list[str]) -> None:
    """Run one compiler command; CompileError carries the compiler's message."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler ({shlex.join(cmd)}): {e}") from e
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()
        if len(msg) > 4000:
            msg = msg[:4000] + "\n..."
        raise CompileError(f"C compilation failed ({shlex.join(cmd)}):\n{msg}")
