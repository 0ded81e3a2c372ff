"""Ahead-of-time artifacts: a folder with a shared library, its C API header, weights, sources.

``write_sources`` renders everything a toolchain needs (model.c, api.c, weights.c, the runtime
headers, Makefile, CMakeLists.txt, example.c, README, the ``onnxc.json`` manifest) and
``build_library`` compiles them into ``lib<name>.so`` with the configured compiler. The model
translation unit is the one the JIT path compiles, with its functions prefixed ``<name>_model`` so
several models can be linked into one program; api.c wraps it in the context-based C API.
Weights are either embedded (the assembler's ``.incbin`` pulls ``<name>.weights`` into .rodata:
no C array literal, fast to compile) or a sidecar file checked by size and checksum.
Everything written is a pure function of the model, the options and the output folder's name (the
README's link lines name the folder): reproducible builds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from onnxc.ir import CompileError, DType, MapType, ModelError, OptionalType, SequenceType, TensorType
from onnxc.ir.dims import Sym, dmax, dmin, floordiv, free_symbols, mod, sym, to_c_checked

from .compiler import CompilerConfig, compiler_env, thread_flags
from .emit import emit_c
from .lower import Program
from .runtime_lib import runtime_files_for, runtime_objects
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


_CHECK_WORDS = 1 << 20  # words per block of the checksum: 8 MB, cache-friendly temporaries


def checksum(data) -> int:
    """Checksum of the weights (the C API recomputes it when loading a sidecar file): the length
    plus the sum of the little-endian 64-bit words times odd position weights, mod 2**64.
    Vectorizable, and it catches truncation, reordering and stale files. ``data`` is any bytes-like
    object; it is summed in blocks, so the temporaries stay small for any size."""
    import numpy as np

    raw = np.frombuffer(data, np.uint8)
    state = _Checksum()
    step = 8 * _CHECK_WORDS
    for start in range(0, raw.size, step):
        _add_range(state, raw, start, min(raw.size, start + step))
    return state.value(raw.size)


class _Checksum:
    """The running state of ``checksum`` over consecutive blocks of 8-byte words."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.total = np.uint64(0)
        self.words = 0
        self.odd = np.arange(_CHECK_WORDS, dtype=np.uint64) * np.uint64(2) + np.uint64(1)

    def add(self, block) -> None:
        """Add ``block`` (a uint8 array of whole words) as the next words."""
        np = self.np
        w = block.view("<u8")
        k = w.size
        with np.errstate(over="ignore"):
            # sum_j w[j] * (2 * (base + j) + 1) = sum_j w[j] * (2j + 1) + 2 * base * sum_j w[j]
            s = np.dot(w, self.odd[:k]) if k else np.uint64(0)
            s = np.uint64(s) + np.uint64(2 * self.words % 2**64) * np.sum(w, dtype=np.uint64)
            self.total = np.uint64(self.total + s)
        self.words += k

    def value(self, n: int) -> int:
        return int((int(self.total) + n) % 2**64)


def read_weights(path: Path, size: int, expected: int):
    """The weights file ``path`` mapped read-only (a uint8 array, page-aligned), its size and checksum
    verified (ModelError naming the file when they do not match). Mapped, not read: no copy and no
    fresh memory to fault in (measured on VGG-19's 550 MB: 0.3 s instead of 2 s to read into new
    memory), and every process using the model shares the page cache's pages. Like the library
    itself, the file must not be changed in place while in use (onnxc replaces files, never edits)."""
    import mmap

    import numpy as np

    bad = ModelError(f"{path}: size or checksum does not match the manifest")
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != size:
            raise bad
        if size == 0:
            buf = np.zeros(64, np.uint8)[:0]
        else:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            buf = np.frombuffer(mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ), np.uint8)
    if checksum(buf) != expected:
        raise bad
    return buf


def _add_range(state: _Checksum, buf, start: int, end: int) -> None:
    """Add bytes ``start:end`` of ``buf`` (``start`` a multiple of 8; a partial word only at the end)."""
    import numpy as np

    whole = end - (end - start) % 8
    if whole > start:
        state.add(buf[start:whole])
    if whole < end:
        tail = np.zeros(8, np.uint8)
        tail[:end - whole] = buf[whole:end]
        state.add(tail)


def dim_json(d):
    """A Dim as JSON: an int, or an expression's terms ``[[[atom, power], ...], coeff]`` where an atom
    is ``{"sym": name}`` or ``{"fn": kind, "args": [dims]}`` (exact, unlike its text)."""
    if isinstance(d, int):
        return d
    return {"terms": [[[[_atom_json(a), p] for a, p in mono], c] for mono, c in d.terms]}


def _atom_json(a) -> dict:
    if isinstance(a, Sym):
        return {"sym": a.name}
    return {"fn": a.kind, "args": [dim_json(x) for x in a.args]}


def dim_from_json(j):
    """The Dim that ``dim_json`` encoded (rebuilt by arithmetic, so it is canonical)."""
    if isinstance(j, int):
        return j
    total = 0
    for mono, c in j["terms"]:
        term = c
        for a, p in mono:
            atom = _atom_from_json(a)
            for _ in range(p):
                term = term * atom
        total = total + term
    return total


_FNS = {"floordiv": floordiv, "mod": mod, "min": dmin, "max": dmax}


def _atom_from_json(a: dict):
    if "sym" in a:
        return sym(a["sym"])
    x, y = (dim_from_json(v) for v in a["args"])
    return _FNS[a["fn"]](x, y)


def type_json(t) -> dict:
    if isinstance(t, TensorType):
        j = {"tensor": int(t.dtype),
             "shape": None if t.shape is None else [d if isinstance(d, int) else str(d) for d in t.shape]}
        if t.shape is not None and any(not isinstance(d, int) for d in t.shape):
            j["exprs"] = [dim_json(d) for d in t.shape]  # the exact dims, e.g. 2*N (the shape is text)
        return j
    if isinstance(t, SequenceType):
        return {"sequence": type_json(t.elem)}
    if isinstance(t, OptionalType):
        return {"optional": type_json(t.elem)}
    if isinstance(t, MapType):
        return {"map": int(t.key), "value": type_json(t.value)}
    raise CompileError(f"type {t} cannot cross the artifact's API")


def type_from_json(j: dict):
    """The IR type ``type_json`` wrote (exact dims when the manifest has them, else from their names)."""
    if "tensor" in j:
        shape = j["shape"]
        if "exprs" in j:
            dims = tuple(dim_from_json(d) for d in j["exprs"])
        else:
            dims = None if shape is None else tuple(d if isinstance(d, int) else sym(d) for d in shape)
        return TensorType(DType(j["tensor"]), dims)
    if "sequence" in j:
        return SequenceType(type_from_json(j["sequence"]))
    if "optional" in j:
        return OptionalType(type_from_json(j["optional"]))
    if "map" in j:
        return MapType(DType(j["map"]), type_from_json(j["value"]))
    raise ModelError(f"unknown type in manifest: {j}")


def _describe(t) -> str:
    if isinstance(t, TensorType):
        return f"{t.dtype.short}[{', '.join(str(d) for d in t.shape or ())}]"
    return str(t)


def _entries(p: Program, types: list, kind: str) -> list[dict]:
    rows = p.inputs if kind == "input" else [(n, b) for n, b, _ in p.outputs]
    shapes = [b.shape for _, b in p.inputs] if kind == "input" else [s for _, _, s in p.outputs]
    late = set(p.dimvars[p.n_input_dims:])  # not bindable by name: the C API reports them as data-dependent
    out = []
    for (name, b), shape, t in zip(rows, shapes, types):
        needs = sorted({p.dimvars.index(s) for d in shape for s in free_symbols(d)})
        out.append({"name": name, "c_name": c_string(name), "name_comment": _comment(name),
                    "type_comment": _comment(_describe(t)), "dtype": 1000 if b.is_value else int(b.dtype),
                    "rank": len(shape), "dims": [c_string(str(d)) for d in shape],
                    "dim_exprs": [to_c_checked(d, p.sym_c) for d in shape], "needs": needs,
                    "data_dependent": b.is_value or any(free_symbols(d) & late for d in shape)})
    return out


def _c_text(s: str, width: int = 64) -> str:
    """``s`` as C string literal(s): adjacent literals of ``width`` characters, one per line, when long
    (a doc string of pages stays readable); every byte outside safe ASCII is escaped by c_string."""
    if len(s) <= width:
        return c_string(s)
    return "\n    ".join(c_string(s[i:i + width]) for i in range(0, len(s), width))


def _c_int64(v: int) -> str:
    if not -(2**63) <= v < 2**63:
        raise CompileError(f"model_version {v} does not fit in int64")
    return "(-INT64_MAX - 1)" if v == -(2**63) else f"INT64_C({v})"


def _about_values(about: dict | None) -> dict:
    """What the model says of itself (``onnxc.api.model_about``) as C literals for api.c."""
    a = about or {}
    meta = a.get("metadata") or {}
    return {"metadata": [(_c_text(str(k)), _c_text(str(v))) for k, v in meta.items()], "n_metadata": len(meta),
            "producer": _c_text(str(a.get("producer") or "")), "doc_string": _c_text(str(a.get("doc_string") or "")),
            "graph_name": _c_text(str(a.get("graph_name") or "")),
            "model_version": _c_int64(int(a.get("model_version") or 0))}


def _link_values(out_dir: Path, name: str) -> dict:
    """The README's folder name (the actual output folder's) and its link lines: the library's folder
    as an rpath that holds from any working directory, absolute (the shell fills it in) or relative
    to the program (``$ORIGIN``)."""
    folder = out_dir.resolve().name or name
    q = shlex.quote(folder)

    def rpath(word: str) -> str:  # -Wl splits at commas; -Xlinker passes the path whole
        return f"-Xlinker -rpath -Xlinker {word}" if "," in folder else f"-Wl,-rpath,{word}"

    base, absolute = f"cc -I{q} -o app app.c -L{q} -l{name}", '"$(cd ' + q + ' && pwd)"'
    return {"folder": folder, "folder_sh": q, "folder_py": repr(folder), "link_abs": f"{base} {rpath(absolute)}",
            "link_origin": f"{base} {rpath(shlex.quote('$ORIGIN/' + folder))}"}


def _comment(text: str) -> str:
    safe = "".join(ch if (ch.isascii() and ch.isprintable()) else "?" for ch in text)
    return safe.replace("*/", "* /")


def write_sources(p: Program, in_types: list, out_types: list, out_dir: Path, name: str, *, embed: bool = True,
                  target: str = "native", threads: int = 1, about: dict | None = None) -> dict:
    """Write the artifact's sources into ``out_dir``; returns the manifest (``about``: what the model says
    of itself, metadata_props included, for onnxc.load)."""
    check_name(name)
    if target not in TARGETS:
        raise CompileError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = f"{name}_model"
    weights = p.weights
    wsum = checksum(weights)
    ins, outs = _entries(p, in_types, "input"), _entries(p, out_types, "output")
    dim_names = p.dimvars[:p.n_input_dims]
    common = dict(name=name, prefix=prefix, inputs=ins, outputs=outs, n_inputs=len(ins), n_outputs=len(outs),
                  n_inputs_alloc=max(1, len(ins)), n_outputs_alloc=max(1, len(outs)),
                  dim_names=[c_string(d) for d in dim_names], n_bound=p.n_input_dims,
                  ndim_alloc=max(1, p.n_input_dims), embedded=embed, weights_file=f"{name}.weights",
                  weights_size=len(weights), weights_sum=wsum, version=_version(),
                  target_flags=" ".join(TARGETS[target]), **_link_values(out_dir, name), **_about_values(about),
                  dim_names_plain=[d for d in dim_names if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", d)],
                  dimvars_comment=_comment(", ".join(dim_names) or "none"),
                  guard=f"ONNXC_{name.upper()}_H",
                  sources_extra="weights.c " if embed else "", objects_extra="weights.c " if embed else "")
    model_c, api_c = emit_c(p, prefix), render("aot/api.c.j2", **common)
    rt_headers, rt_sources = runtime_files_for(model_c + api_c)
    common["runtime_sources"] = [f.name for f in rt_sources]
    files = {
        "model.c": model_c,
        "api.c": api_c,
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
    for f in rt_headers + rt_sources:  # only the runtime files the model needs
        shutil.copyfile(f, out_dir / f.name)
    manifest = {"format": FORMAT, "name": name, "prefix": prefix, "library": f"lib{name}.so",
                "target": target, "threads": threads,
                "weights": {"mode": "embedded" if embed else "file", "file": f"{name}.weights",
                            "size": len(weights), "checksum": wsum},
                "inputs": [{"name": n, "type": type_json(t)} for (n, _), t in zip(p.inputs, in_types)],
                "outputs": [{"name": n, "type": type_json(t), "early": not p.is_dynamic(b)}
                            for (n, b, _), t in zip(p.outputs, out_types)],
                "model": about or {}}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _version() -> str:
    from onnxc import __version__

    return __version__


def target_flags(cfg: CompilerConfig, target: str) -> tuple[str, ...]:
    """The compiler flags of an artifact: the configured ones with the target's ISA flags (the
    sanitizer flags ``cfg.sanitize`` come on top, in build_command and in the runtime objects')."""
    return tuple(f for f in cfg.flags if not f.startswith("-march")) + tuple(TARGETS[target])


def build_command(out_dir: Path, name: str, cfg: CompilerConfig, target: str, embed: bool,
                  runtime: list[Path] | None = None) -> list[str]:
    """The command building ``lib<name>.so`` from the written sources; ``runtime``: the runtime objects
    (built for the same flags) linked statically, else the runtime sources in the folder are compiled."""
    flags = target_flags(cfg, target)
    cmd = [*shlex.split(cfg.cc), "-std=gnu11", *flags, *cfg.sanitize, "-fPIC", "-shared", "-fno-strict-aliasing",
           "-I", str(out_dir), "-Xassembler", f"-I{out_dir}", f"-Wl,-soname,lib{name}.so"]
    cmd += thread_flags(cfg.cc)
    srcs = [out_dir / "model.c", out_dir / "api.c"] + ([out_dir / "weights.c"] if embed else [])
    if runtime is None:
        srcs += [out_dir / f.name for f in runtime_files_for((out_dir / "model.c").read_text())[1]]
    else:
        srcs += runtime
    return [*cmd, "-o", str(out_dir / f"lib{name}.so"), *map(str, srcs), "-lm"]


def build_library(out_dir: Path, name: str, cfg: CompilerConfig, target: str, embed: bool,
                  cache: str | os.PathLike | None = None) -> Path:
    """Compile the written sources into ``lib<name>.so``, linking the cached runtime objects built for
    the artifact's flags; CompileError carries the compiler's output."""
    needed = runtime_files_for((out_dir / "model.c").read_text() + (out_dir / "api.c").read_text())[1]
    runtime = runtime_objects(cfg, needed, cache, target_flags(cfg, target))
    cmd = build_command(out_dir, name, cfg, target, embed, runtime)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=compiler_env())
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler ({shlex.join(cmd)}): {e}") from e
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()[:4000]
        raise CompileError(f"building lib{name}.so failed ({shlex.join(cmd)}):\n{msg}")
    return out_dir / f"lib{name}.so"
