"""Ahead of time: ``build`` writes a standalone artifact folder, ``load`` calls one without a compiler.

``onnxc.build(model, "out/")`` compiles the model into ``out/lib<name>.so`` with a C API header,
weights (embedded or a checked sidecar file), an example program, a README, the sources with a
Makefile/CMakeLists.txt, and ``onnxc.json`` (the manifest). ``emit_only=True`` stops after writing
the sources (``onnxc build --emit-c``), e.g. to cross-compile with another toolchain. Weights beyond
EMBED_MAX_BYTES always go to the sidecar file: the linker's default code model cannot address a
read-only section of several gigabytes.
``onnxc.load("out/")`` reads the manifest and opens the library: the same ``CompiledModel`` API as
``onnxc.compile``, and no C compiler is involved.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

from onnxc.codegen.artifact import (
    MANIFEST,
    build_library,
    check_name,
    read_weights,
    type_from_json,
    write_sources,
)
from onnxc.codegen.kernels.bf16 import check_precision
from onnxc.codegen.native import NativeModel
from onnxc.ir import ModelError

from . import progress
from .api import CompiledModel, _info, compiler_config, model_about, native_types
from .pipeline import Compilation, Options, compile_pipeline, resolve_threads

EMBED_MAX_BYTES = 1 << 30  # larger weights are written beside the library (see the top)


def build(model, out_dir: str | os.PathLike, *, name: str | None = None, embed_weights: bool = True,
          target: str = "native", threads: int | None = None, cc: str | None = None,
          flags: tuple[str, ...] | None = None, emit_only: bool = False,
          constants: Mapping[str, object] | None = None, quiet: bool = False, precision: str = "fp32") -> Path:
    """Compile ``model`` (path, bytes or ModelProto) into the artifact folder ``out_dir``.

    ``name``: C identifier used for the library, header and API prefix (default: from the file name,
    else "model"). ``embed_weights``: weights inside the library, else ``<name>.weights`` beside it.
    ``target``: ISA level (native, portable, x86-64-v2/v3/v4, aarch64). ``emit_only``: write sources
    and build files without compiling. ``constants``: inputs bound to fixed values, as in compile().
    ``quiet``: no status line on stderr, as in compile() (onnxc/progress.py). ``precision``: "fp32" or
    "bf16", as in compile(). Returns the folder.
    """
    with progress.session(quiet) as rep:
        rep.phase("load")
        return _build(model, out_dir, name, embed_weights, target, threads, cc, flags, emit_only, constants,
                      check_precision(precision))


def _build(model, out_dir: str | os.PathLike, name: str | None, embed_weights: bool, target: str,
           threads: int | None, cc: str | None, flags: tuple[str, ...] | None, emit_only: bool,
           constants: Mapping[str, object] | None, precision: str = "fp32") -> Path:
    """build() within its progress session (phases: load, passes, codegen, cc): the compile pipeline
    (onnxc/pipeline.py) with the artifact's sources as its emit step and its library as its build step."""
    out = Path(out_dir)
    name = check_name(name or _default_name(model))
    embed = [embed_weights]

    def emit(c: Compilation) -> None:
        m, program = c.model, c.program
        if embed[0] and len(program.weights) > EMBED_MAX_BYTES:
            warnings.warn(f"onnxc build: {len(program.weights) / 2**30:.1f} GiB of weights are written to "
                          f"{name}.weights beside the library, not embedded (above {EMBED_MAX_BYTES >> 30} GiB)",
                          stacklevel=7)  # (the caller of build())
            embed[0] = False
        write_sources(program, [v.type for v in m.graph.inputs], [v.type for v in m.graph.outputs], out, name,
                      embed=embed[0], target=target, threads=c.threads, about=model_about(m))

    def build(c: Compilation) -> None:
        build_library(out, name, compiler_config(cc, flags), target, embed[0])

    compile_pipeline(model, Options(threads, constants=constants, emit=emit, build=build, precision=precision),
                     until="emit" if emit_only else "build")
    return out


def _default_name(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(model).stem)
        if stem and not stem[0].isdigit():
            return stem
    return "model"


def load(path: str | os.PathLike, *, threads: int | None = None) -> CompiledModel:
    """Open an artifact written by ``build``; runs without a C compiler."""
    d = Path(path)
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except FileNotFoundError:
        raise ModelError(f"{d}: not an onnxc artifact (no {MANIFEST})") from None
    except ValueError as e:
        raise ModelError(f"{d / MANIFEST}: invalid manifest: {e}") from e
    return open_artifact(d, manifest, threads)


def open_artifact(d: Path, manifest: dict, threads: int | None = None) -> CompiledModel:
    """The CompiledModel of the artifact folder ``d`` described by ``manifest`` (an AOT artifact, or an
    entry of the model cache, codegen/model_cache.py). A weights file is read once into aligned memory
    and checked against the manifest's size and checksum; ModelError when anything does not match."""
    try:
        lib = d / manifest["library"]
        if not lib.exists():
            raise ModelError(f"{d}: {manifest['library']} is missing (built with --emit-c? run make there)")
        w = manifest["weights"]
        weights = None
        if w["mode"] == "file":
            weights = read_weights(d / w["file"], w["size"], w["checksum"])
        ins = [_info(e["name"], type_from_json(e["type"])) for e in manifest["inputs"]]
        outs = [_info(e["name"], type_from_json(e["type"])) for e in manifest["outputs"]]
        prefix = manifest["prefix"]
        early = [e.get("early") for e in manifest["outputs"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"{d / MANIFEST}: invalid manifest: {e!r}") from None
    except OSError as e:
        raise ModelError(f"{d}: cannot read the artifact: {e}") from None
    out_types, in_types = native_types(ins, outs)
    nthreads = resolve_threads(threads or manifest.get("threads"))
    native = NativeModel(lib, weights, out_types, nthreads, in_types, prefix=prefix)
    return CompiledModel(native, ins, outs, early=early if all(isinstance(x, bool) for x in early) else None,
                         about=manifest.get("model") if isinstance(manifest.get("model"), dict) else None)


__all__ = ["build", "load"]
