"""Ahead-of-time artifacts: a folder with a shared library, its C API header, weights, sources.

``write_sources`` renders everything a toolchain needs (model.c, api.c, weights.c, the runtime
headers, Makefile, CMakeLists.txt, example.c, README, the ``onnxc.json`` manifest) and
``build_library`` compiles them into ``lib<name>.so`` with the configured compiler. The model
translation unit is the one the JIT path compiles, with its functions prefixed ``<name>_model`` so
several models can be linked into one program; api.c wraps it in the context-based C API.
Weights are either embedded (the assembler's ``.incbin`` pulls ``<name>.weights`` into .rodata:
no C array literal, fast to compile) or a sidecar file checked by size and checksum.
Everything written is a pure function of the model and options (reproducible builds).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from onnxc.ir import CompileError, OptionalType, SequenceType, TensorType
from onnxc.ir.dims import free_symbols

from .compiler import CompilerConfig, has_openmp, runtime_dir
from .emit import emit_c
from .lower import Program
from .templating import c_string, render

TARGETS = {
    "native": ("-march=native",),
    "portable": (),
    "x86-64-v2": ("-march=x86-64-v2",),
    "x86-64-v3": ("-march=x86-64-v3",),
    "x86-64-v4": ("-march=x86-64-v4",),
    "aarch64": ("-march=armv8-a",),
}
MANIFEST = "onnxc.json"
FORMAT = 1


def check_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise CompileError(f"artifact name {name!r} must be a C identifier (letters, digits, _; not starting "
                           "with a digit)")
    return name


def checksum(data: bytes) -> int:
    """Checksum of the weights (the C API recomputes it when loading a sidecar file): the length
    plus the sum of the little-endian 64-bit words times odd position weights, mod 2**64.
    Vectorizable, and it catches truncation, reordering and stale files."""
    import numpy as np

    n = len(data)
    words = np.frombuffer(data + b"\0" * (-n % 8), dtype="<u8")
    weights = np.arange(len(words), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int((np.uint64(n) + np.sum(words * weights, dtype=np.uint64)) & np.uint64(0xFFFFFFFFFFFFFFFF))


def type_json(t) -> dict:
    if isinstance(t, TensorType):
        return {"tensor": int(t.dtype),
                "shape": None if t.shape is None else [d if isinstance(d, int) else str(d) for d in t.shape]}
    if isinstance(t, SequenceType):
        return {"sequence": type_json(t.elem)}
    if isinstance(t, OptionalType):
        return {"optional": type_json(t.elem)}
    raise CompileError(f"type {t} cannot cross the artifact's API")


def _describe(t) -> str:
    if isinstance(t, TensorType):
        return f"{t.dtype.short}[{', '.join(str(d) for d in t.shape or ())}]"
    return str(t)


def _entries(p: Program, types: list, kind: str) -> list[dict]:
    rows = p.inputs if kind == "input" else [(n, b) for n, b, _ in p.outputs]
    shapes = [b.shape for _, b in p.inputs] if kind == "input" else [s for _, _, s in p.outputs]
    late = set(p.dimvars[p.n_bound:])
    out = []
    for (name, b), shape, t in zip(rows, shapes, types):
        needs = sorted({p.dimvars.index(s) for d in shape for s in free_symbols(d)})
        out.append({"name": name, "c_name": c_string(name), "name_comment": _comment(name),
                    "type_comment": _comment(_describe(t)), "dtype": 1000 if b.is_value else int(b.dtype),
                    "rank": len(shape), "dims": [c_string(str(d)) for d in shape],
                    "dim_exprs": [p.dim_c(d) for d in shape], "needs": needs,
                    "data_dependent": b.is_value or any(free_symbols(d) & late for d in shape)})
    return out


def _comment(text: str) -> str:
    safe = "".join(ch if (ch.isascii() and ch.isprintable()) else "?" for ch in text)
    return safe.replace("*/", "* /")


def write_sources(p: Program, in_types: list, out_types: list, out_dir: Path, name: str, *, embed: bool = True,
                  target: str = "native", threads: int = 1) -> dict:
    """Write the artifact's sources into ``out_dir``; returns the manifest."""
    check_name(name)
    if target not in TARGETS:
        raise CompileError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = f"{name}_model"
    weights = p.weights
    wsum = checksum(weights)
    ins, outs = _entries(p, in_types, "input"), _entries(p, out_types, "output")
    dim_names = p.dimvars[:p.n_bound]
    common = dict(name=name, prefix=prefix, inputs=ins, outputs=outs, n_inputs=len(ins), n_outputs=len(outs),
                  n_inputs_alloc=max(1, len(ins)), n_outputs_alloc=max(1, len(outs)),
                  dim_names=[c_string(d) for d in dim_names], n_bound=p.n_bound,
                  ndim_alloc=max(1, p.n_bound), embedded=embed, weights_file=f"{name}.weights",
                  weights_size=len(weights), weights_sum=wsum, version=_version(),
                  target_flags=" ".join(TARGETS[target]), openmp=True, dir_hint=name,
                  dim_names_plain=[d for d in dim_names if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", d)],
                  dimvars_comment=_comment(", ".join(dim_names) or "none"),
                  guard=f"ONNXC_{name.upper()}_H",
                  sources_extra="weights.c " if embed else "", objects_extra="weights.c " if embed else "")
    files = {
        "model.c": emit_c(p, prefix),
        "api.c": render("aot/api.c.j2", **common),
        f"{name}.h": render("aot/api.h.j2", **common),
        "example.c": render("aot/example.c.j2", **common),
        "Makefile": render("aot/Makefile.j2", **common),
        "CMakeLists.txt": render("aot/CMakeLists.txt.j2", **common),
        "README": render("aot/README.j2", **common),
    }
    if embed:
        files["weights.c"] = render("aot/weights.c.j2", **common)
    for fname, text in files.items():
        (out_dir / fname).write_text(text)
    (out_dir / f"{name}.weights").write_bytes(weights)
    for h in sorted(runtime_dir().glob("*.h")):
        shutil.copyfile(h, out_dir / h.name)
    manifest = {"format": FORMAT, "name": name, "prefix": prefix, "library": f"lib{name}.so",
                "target": target, "threads": threads,
                "weights": {"mode": "embedded" if embed else "file", "file": f"{name}.weights",
                            "size": len(weights), "checksum": wsum},
                "inputs": [{"name": n, "type": type_json(t)} for (n, _), t in zip(p.inputs, in_types)],
                "outputs": [{"name": n, "type": type_json(t), "early": not p.is_dynamic(b)}
                            for (n, b, _), t in zip(p.outputs, out_types)]}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _version() -> str:
    from onnxc import __version__

    return __version__


def build_command(out_dir: Path, name: str, cfg: CompilerConfig, target: str, embed: bool) -> list[str]:
    flags = [f for f in cfg.flags if not f.startswith("-march")] + list(TARGETS[target])
    cmd = [*shlex.split(cfg.cc), "-std=gnu11", *flags, "-fPIC", "-shared", "-fno-strict-aliasing",
           "-I", str(out_dir), f"-Wa,-I{out_dir}", f"-Wl,-soname,lib{name}.so"]
    if cfg.openmp and has_openmp(cfg.cc):
        cmd.append("-fopenmp")
    srcs = [out_dir / "model.c", out_dir / "api.c"] + ([out_dir / "weights.c"] if embed else [])
    return [*cmd, "-o", str(out_dir / f"lib{name}.so"), *map(str, srcs), "-lm"]


def build_library(out_dir: Path, name: str, cfg: CompilerConfig, target: str, embed: bool) -> Path:
    """Compile the written sources into ``lib<name>.so``; CompileError carries the compiler's output."""
    cmd = build_command(out_dir, name, cfg, target, embed)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler ({shlex.join(cmd)}): {e}") from e
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()[:4000]
        raise CompileError(f"building lib{name}.so failed ({shlex.join(cmd)}):\n{msg}")
    return out_dir / f"lib{name}.so"
