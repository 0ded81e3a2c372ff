"""The ``onnxc`` command: run a model, show what the compiler made of it, list supported operators.

    onnxc run MODEL [--input NAME=FILE ...] [--dim NAME=SIZE ...] [--output-dir DIR]
    onnxc info MODEL [--dump-after STEP|all] [--emit-c FILE] [--html FILE] [--profile --dim NAME=SIZE ...]
    onnxc ops [--json] [--internal] [--domain DOMAIN]
    onnxc bench MODEL [--threads N] [--runs N] [--profile] [--dim NAME=SIZE ...]

Every failure exits non-zero with one line on stderr (``--debug`` shows the traceback instead).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from onnxc.ir import Dim, InputError, ModelError, OnnxcError, UnsupportedOpError
from onnxc.pipeline import resolve_threads

from .op_table import INTERNAL_DOMAIN, supported_ops


class UsageError(OnnxcError):
    """A command-line argument is malformed or names something that does not exist."""


# --------------------------------------------------------------------------------------------- run

def _parse_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{what} {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


def load_array(path: str) -> np.ndarray:
    """An input array from a ``.npy`` file or a serialized ONNX TensorProto (``.pb``)."""
    if not os.path.isfile(path):
        raise UsageError(f"input file {path!r} does not exist")
    if path.endswith(".pb"):
        from onnxc.frontend import load_tensor

        return load_tensor(path)
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {path!r} as a .npy array: {e}") from None


def random_input(info, dims: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    """Seeded random data for a model input whose dims are static or bound with --dim."""
    shape = []
    for d in info.shape:
        if isinstance(d, int):
            shape.append(d)
        elif d in dims:
            shape.append(dims[d])
        else:
            raise UsageError(f"input {info.name!r} has symbolic dim {d!r}; pass --input {info.name}=FILE "
                             f"or --dim {d}=SIZE")
    dt = np.dtype(info.dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 10, shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    raise UsageError(f"cannot make random data of type {dt} for input {info.name!r}; pass --input "
                     f"{info.name}=FILE")


def summarize_value(v, n: int = 3) -> str:
    """A short description of a non-tensor value: None, a list (its first items) or a dict."""
    if v is None:
        return "(empty optional)"
    if isinstance(v, dict):
        items = list(v.items())
        return "{" + ", ".join(f"{k!r}: {summarize_value(x)}" for k, x in items[:n]) + (", ...}" if len(items) > n else "}")
    if isinstance(v, list):
        head = "; ".join(summarize_value(x) for x in v[:n])
        return f"{len(v)} item(s)" + (f": {head}" if v else "") + ("; ..." if len(v) > n else "")
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)} {summarize(v)}"
    return f"{v:.5g}" if isinstance(v, float) else repr(v)


def summarize(a: np.ndarray, n: int = 6) -> str:
    """A short description of an array's values."""
    if a.size == 0:
        return "(empty)"
    flat = a.reshape(-1)
    fmt = (lambda x: f"{x:.5g}") if a.dtype.kind in "fc" else repr
    head = "[" + ", ".join(fmt(x.item() if hasattr(x, "item") else x) for x in flat[:n]) + \
        (", ...]" if flat.size > n else "]")
    if a.dtype.kind == "b":
        return f"{int(flat.sum())}/{flat.size} true  {head}"
    if a.dtype.kind in "fiu":
        with np.errstate(all="ignore"):
            f = flat.astype(np.float64)
            stats = f"min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  mean {np.nanmean(f):.6g}" \
                if not np.all(np.isnan(f)) else "all NaN"
        nan = int(np.isnan(f).sum())
        return f"{stats}{f'  {nan} NaN' if nan else ''}  {head}"
    return head


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "output"


def cmd_run(args: argparse.Namespace) -> int:
    import onnxc

    given = _parse_pairs(args.input, "--input")
    dims = {k: _int(v, f"--dim {k}") for k, v in _parse_pairs(args.dim, "--dim").items()}
    arrays = {name: load_array(path) for name, path in given.items()}
    model = onnxc.compile(args.model, threads=args.threads, constants=_consts(args),
                          quiet=getattr(args, "quiet", False), precision=args.precision)
    names = [i.name for i in model.inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f"unknown input(s) {unknown}; the model's inputs are {names}")
    known = {str(d) for i in model.inputs if i.name not in given for d in (i.shape or ()) if isinstance(d, str)}
    stray = sorted(set(dims) - known)
    if stray:
        raise UsageError(f"--dim {', '.join(stray)}: no such symbolic dim among the random inputs' "
                         f"({', '.join(sorted(known)) or 'they have none'})")
    rng = np.random.default_rng(args.seed)
    feeds = {}
    for info in model.inputs:
        if info.name in given:
            feeds[info.name] = arrays[info.name]
            how = f"from {given[info.name]}"
        else:
            feeds[info.name] = random_input(info, dims, rng)
            how = f"random (seed {args.seed})"
        a = feeds[info.name]
        print(f"input  {info.name}  {a.dtype}  {list(a.shape)}  {how}")
    t0 = time.perf_counter()
    outs = model.run(feeds)
    dt = time.perf_counter() - t0
    out_dir = Path(args.output_dir) if args.output_dir else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    types = {o.name: o.type for o in model.outputs}
    for name, a in outs.items():
        if not isinstance(a, np.ndarray):  # a sequence (list), map (dict) or empty optional (None)
            print(f"output {name}  {types.get(name)}  {summarize_value(a)}")
            if out_dir is not None:
                path = out_dir / f"{_safe_name(name)}.pkl"
                path.write_bytes(pickle.dumps(a))
                print(f"       saved {path} (pickle)")
            continue
        print(f"output {name}  {a.dtype}  {list(a.shape)}  {summarize(a)}")
        if out_dir is not None:
            path = out_dir / f"{_safe_name(name)}.npy"
            np.save(path, a)
            print(f"       saved {path}")
    print(f"compiled in {model.timings.get('total', 0.0):.3f} s, ran in {dt * 1e3:.3f} ms")
    return 0


def _int(text: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"{what}: expected an integer, got {text!r}") from None
    if v < 0:
        raise UsageError(f"{what}: expected a size >= 0, got {v}")
    return v


# -------------------------------------------------------------------------------------------- info

def _type(v) -> str:
    return str(v.type) if v.type is not None else "?"


def print_graph(g, indent: str = "  ", out=None) -> None:
    """Every node with its output types; subgraphs (If/Loop/Scan bodies) nested below their node."""
    out = out or sys.stdout
    for n in g.nodes:
        outs = ", ".join(f"%{o.name}: {_type(o)}" for o in n.outputs)
        ins = ", ".join("%" + v.name if v is not None else "_" for v in n.inputs)
        attrs = [repr(a) for a in n.attrs.values() if a.kind != "GRAPH"]
        dom = f"{n.domain}::" if n.domain else ""
        print(f"{indent}{outs} = {dom}{n.op_type}({ins}){' {' + ', '.join(attrs) + '}' if attrs else ''}",
              file=out)
        for sub in n.subgraphs():
            print(f"{indent}  subgraph {sub.name}({', '.join(f'%{v.name}: {_type(v)}' for v in sub.inputs)}):",
                  file=out)
            print_graph(sub, indent + "    ", out)
            print(f"{indent}    return {', '.join('%' + v.name for v in sub.outputs)}", file=out)


def folded_summary(g) -> str:
    """One line: how many shape-computing nodes (of ``g`` and its subgraphs) were replaced by
    compile-time values, by op, most frequent first."""
    descs = list(g.folded)
    for n in g.walk():
        for sg in n.subgraphs():
            descs += sg.folded
    if not descs:
        return "folded: no shape-computation nodes"
    ops = Counter(d.split(" ", 1)[0] for d in descs)
    parts = ", ".join(f"{op} x{k}" for op, k in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"folded: {len(descs)} shape-computation node{'s' if len(descs) != 1 else ''} ({parts})"


def _size_dim(shape: tuple, itemsize: int) -> Dim:
    """Bytes of a buffer of ``shape``: a simplified Dim (ir/dims.py keeps products canonical)."""
    n: Dim = itemsize
    for d in shape:
        n = n * d
    return n


FORMULA_CHARS = 240  # a longer arena formula shows its leading terms and how many it leaves out


def _short_formula(d: Dim) -> str:
    """``d`` as text, highest-degree terms first; past FORMULA_CHARS the rest is counted, not shown."""
    from onnxc.ir.dims import Expr

    text = str(d)
    if not isinstance(d, Expr) or len(text) <= FORMULA_CHARS:
        return text.removeprefix("(").removesuffix(")") if isinstance(d, Expr) else text
    terms = [str(Expr.make({m: c})) for m, c in reversed(d.terms)]
    shown = terms[0]
    for k, t in enumerate(terms[1:], 1):
        if len(shown) + len(t) > FORMULA_CHARS:
            return f"{shown} + ... ({len(terms) - k} more terms)"
        shown += (" - " + t[1:]) if t.startswith("-") else (" + " + t)
    return shown


def arena_summary(program, dims: dict[str, int] | None = None) -> str:
    """The memory plan of the intermediates: arena bytes (static), or for a run-time plan the bytes
    without reuse as a formula of the dims plus the planned arena at an example size: ``dims``
    (onnxc info --dim), 1 for every dimension variable not given."""
    from onnxc.codegen.memory_plan import Slot, static_plan
    from onnxc.ir.dims import evaluate

    temps = [b for b in program.buffers.values() if b.kind == "temp"]
    if not temps:
        return "no intermediate buffers"
    sizes = [_size_dim(b.shape, b.dtype.itemsize) for b in temps]
    if all(isinstance(s, int) for s in sizes):
        _, total = static_plan([Slot(b.id, s, b.first, b.last) for b, s in zip(temps, sizes)])
        return (f"{total} bytes for {len(temps)} intermediate buffers (planned at compile time; "
                f"{sum(sizes)} bytes without reuse)")
    total: Dim = 0
    for s in sizes:
        total = total + s
    head = f"planned at run time for {len(temps)} intermediate buffers; {_short_formula(total)} bytes without reuse"
    env = {name: (dims or {}).get(name, 1) for name in program.dimvars}
    try:
        at = [max(evaluate(s, env), 0) for s in sizes]
        _, planned = static_plan([Slot(b.id, n, b.first, b.last) for b, n in zip(temps, at)])
    except (KeyError, ZeroDivisionError, OnnxcError):
        return head
    given = ", ".join(f"{k}={v}" for k, v in env.items() if k in (dims or {}))
    ones = [k for k in env if k not in (dims or {})]
    where = ", ".join(filter(None, [given, f"{', '.join(ones)} = 1" if ones else ""]))
    return f"{head}; {planned} bytes at {where} ({sum(at)} without reuse)"


def cmd_info(args: argparse.Namespace) -> int:
    from onnxc.passes.pipeline import step_names
    from onnxc.pipeline import Options, compile_pipeline, resume

    if args.dump_after and args.dump_after != "all" and args.dump_after not in step_names():
        raise UsageError(f"--dump-after {args.dump_after!r}: not a pipeline step; the steps are "
                         f"{', '.join(step_names())} (or 'all')")
    dump = None if not args.dump_after else ("all" if args.dump_after == "all" else {args.dump_after})
    c = compile_pipeline(args.model, Options(args.threads, dump_ir=dump, dump_to=sys.stdout, constants=_consts(args),
                                             precision=args.precision), until="load")
    m = c.model
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(m.opset_imports.items()))
    print(f"model {args.model}: IR version {m.ir_version}, opsets {opsets}"
          + (f", producer {m.producer_name} {m.producer_version}".rstrip() if m.producer_name else ""))
    print("inputs:")
    for v in m.graph.inputs:
        print(f"  {v.name}: {_type(v)}")
    for name, a in m.bound.items():
        print(f"  {name}: bound to {a.tolist()} ({a.dtype}; folded into the model, not an input)")
    if m.model_version or m.doc:
        print(f"model version {m.model_version}" + (f", doc: {_short_text(m.doc)}" if m.doc else ""))
    if m.metadata:
        print("metadata:")
        for k, v in m.metadata.items():
            print(f"  {k}: {_short_text(v)}")
    print(f"nodes: {sum(1 for _ in m.graph.walk())}, initializers: {len(m.graph.initializers)}, "
          f"functions: {len(m.functions)}")
    try:
        resume(c, until="support_check")
    except UnsupportedOpError as e:
        print("unsupported:\n" + "\n".join("  " + line.strip() for line in str(e).splitlines()))
        raise
    m = resume(c, until="optimize").model
    print("outputs:")
    for v in m.graph.outputs:
        print(f"  {v.name}: {_type(v)}")
    print(folded_summary(m.graph))
    print(f"IR after passes ({len(m.graph.nodes)} nodes):")
    print_graph(m.graph)
    print(f"  return {', '.join(f'%{v.name}: {_type(v)}' for v in m.graph.outputs)}")
    program, source = resume(c, until="emit").program, c.source
    print(f"C source: {len(source.encode())} bytes, {source.count(chr(10))} lines, {len(program.steps)} kernels")
    print(f"weights: {len(program.weights)} bytes")
    bf16_kernels = source.count("onnxc_bgemm_ex(") + source.count("onnxc_bg_conv_rows(")  # one call per kernel
    print(f"precision: {args.precision}" + (f" ({bf16_kernels} distinct kernels on bfloat16 weights, the rest "
                                            "float32)" if args.precision == "bf16" else ""))
    print(f"dimension variables: {', '.join(program.dimvars) if program.dimvars else '(none)'}")
    if m.graph.contracts:
        print(f"checked at run time ({len(m.graph.contracts)}):")
        for c in m.graph.contracts.values():
            print(f"  {c.describe()}")
    example = {k: _int(v, f"--dim {k}") for k, v in _parse_pairs(args.dim, "--dim").items()}
    if set(example) - set(program.dimvars):
        raise UsageError(f"--dim {', '.join(sorted(set(example) - set(program.dimvars)))}: no such dimension "
                         f"variable ({', '.join(program.dimvars) or 'the model has none'})")
    print(f"arena: {arena_summary(program, example)}")
    if args.emit_c:
        Path(args.emit_c).write_text(source)
        print(f"wrote {args.emit_c}")
    if args.html or args.profile:
        _info_report(args, m, program)
    return 0


def _info_report(args: argparse.Namespace, m, program) -> None:
    """``onnxc info --profile`` (time per kernel step on random inputs) and ``--html FILE`` (onnxc/html_report.py)."""
    from onnxc.html_report import measure_profile, write_report

    dims = {k: _int(v, f"--dim {k}") for k, v in _parse_pairs(args.dim, "--dim").items()}  # checked by cmd_info
    profile = None
    if args.profile:
        if args.runs < 1:
            raise UsageError(f"--runs: expected at least 1, got {args.runs}")
        profile = measure_profile(args.model, resolve_threads(args.threads), dims, _consts(args), args.runs,
                                  quiet=getattr(args, "quiet", False))
        print(profile.format(top=20))
    if args.html:
        write_report(args.html, m, program, os.path.basename(args.model), dims, profile)
        print(f"wrote {args.html}")


# --------------------------------------------------------------------------------------------- ops

def cmd_ops(args: argparse.Namespace) -> int:
    rows = [r for r in supported_ops() if args.internal or r["domain"] != INTERNAL_DOMAIN]
    if args.domain:
        known = sorted({r["domain"] for r in rows})
        if args.domain not in known:
            raise UsageError(f"--domain {args.domain!r}: no operators in that domain; the domains are "
                             f"{', '.join(known)}" + ("" if args.internal else " (and 'onnxc' with --internal)"))
        rows = [r for r in rows if r["domain"] == args.domain]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = ("domain", "op", "opsets", "implementation", "element types")
    table = [(r["domain"], r["op"], r["opsets"] or "-", r["implementation"] + (" *" if r["restricted"] else ""),
              r["types_text"]) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
    for line in [head, *table]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    n_ok = sum(r["compiles"] for r in rows)
    print(f"\n{n_ok} operators compile ({len(rows)} known to a registry). opsets: the versions of the shape rule "
          "or expansion; element types: those the kernel computes, for the op's main type parameter (other "
          "inputs follow the spec); * the kernel also rejects some attribute values or input combinations "
          "(the error says which).")
    per = Counter(r["domain"] for r in rows if r["compiles"])
    print("by domain: " + ", ".join(f"{d} {k}" for d, k in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))
          + ("" if args.internal else f"; onnxc's own ops ('{INTERNAL_DOMAIN}', written by its passes) are listed "
             "with --internal"))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    import onnxc

    out = args.output or args.emit_c
    d = onnxc.build(args.model, out, name=args.name, embed_weights=args.weights == "embed", target=args.target,
                    threads=args.threads, emit_only=args.emit_c is not None, constants=_consts(args),
                    quiet=getattr(args, "quiet", False), precision=args.precision)
    what = "sources (run make there)" if args.emit_c else "library"
    print(f"onnxc: wrote the {what} to {d}")
    return 0


def _consts(args: argparse.Namespace) -> dict:
    """The --const NAME=VALUE pairs (passes/bind_constants.py)."""
    from onnxc.passes.bind_constants import parse_const

    out = {}
    for text in getattr(args, "const", None) or ():
        try:
            name, value = parse_const(text)
        except ModelError as e:
            raise UsageError(str(e)) from None
        out[name] = value
    return out


def _short_text(v: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters."""
    v = " ".join(str(v).split())
    return v if len(v) <= limit else v[:limit - 3] + "..."



CONST_HELP = ("bind input NAME to a fixed VALUE (a number, or comma-separated numbers), folded into the "
              "compiled model, which no longer takes it; repeatable")
PRECISION_ARG = dict(choices=("fp32", "bf16"), default="fp32",
                     help="bf16: Conv/MatMul/Gemm weights in bfloat16, float32 accumulation (default fp32)")


# -------------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback on errors")
    common.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress line on stderr while compiling (shown only on a terminal, after 1 s)")
    p = argparse.ArgumentParser(prog="onnxc", description="Compile ONNX models to C for CPUs.",
                                parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", parents=[common], help="compile a model and run it once",
                       description="Compile MODEL, run it once and print each output's name, dtype, shape "
                       "and a value summary. Inputs not given with --input are filled with seeded random "
                       "data (normal floats, ints in [0, 10), random bools) when all their dims are static "
                       "or bound with --dim.")
    r.add_argument("model", help="the .onnx file")
    r.add_argument("--input", "-i", action="append", metavar="NAME=FILE",
                   help="an input from a .npy file (or a TensorProto .pb); repeatable")
    r.add_argument("--dim", "-d", action="append", metavar="NAME=SIZE",
                   help="size of a symbolic dimension for random inputs; repeatable")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--threads", type=int, default=None, help="threads of the compiled model")
    r.add_argument("--output-dir", "-o", metavar="DIR", help="save each output as DIR/<name>.npy")
    r.add_argument("--const", "-c", action="append", metavar="NAME=VALUE", help=CONST_HELP)
    r.add_argument("--precision", **PRECISION_ARG)
    r.set_defaults(func=cmd_run)

    i = sub.add_parser("info", parents=[common], help="inputs, outputs, the IR after passes, C and memory plan",
                       description="Show MODEL's inputs and outputs (symbolic shapes), every node of the IR "
                       "after the optimization passes with its output types, the size of the generated C "
                       "and the memory plan. Does not run the C compiler unless --profile is given. --html "
                       "FILE writes the same as one self-contained page (no network needed).")
    i.add_argument("model", help="the .onnx file")
    i.add_argument("--dump-after", metavar="STEP", help="also print the IR after pipeline step STEP (or 'all')")
    i.add_argument("--emit-c", metavar="FILE", help="write the generated C source to FILE")
    i.add_argument("--threads", type=int, default=None, help="thread count the code is generated for")
    i.add_argument("--const", "-c", action="append", metavar="NAME=VALUE", help=CONST_HELP)
    i.add_argument("--precision", **PRECISION_ARG)
    i.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page of the optimized graph: "
                   "steps with fused groups, shapes, the arena and (with --profile) the time per step")
    i.add_argument("--profile", action="store_true", help="compile a profiling build, run it on seeded random "
                   "inputs and show the time per kernel step (compiles the model: needs a C compiler)")
    i.add_argument("--dim", "-d", action="append", metavar="NAME=SIZE",
                   help="size of a symbolic input dimension for --profile's inputs and the arena's example bytes")
    i.add_argument("--runs", type=int, default=10, help="timed runs of --profile (default 10)")
    i.set_defaults(func=cmd_info)

    b = sub.add_parser("build", parents=[common], help="compile a model into a standalone library + C API",
                       description="Compile MODEL ahead of time into DIR: lib<name>.so, <name>.h (C API), "
                       "weights, example.c, README, sources with Makefile/CMakeLists.txt and onnxc.json "
                       "(for onnxc.load). With --emit-c only the sources and build files are written.")
    b.add_argument("model", help="the .onnx file")
    dest = b.add_mutually_exclusive_group(required=True)
    dest.add_argument("--output", "-o", metavar="DIR", help="build the artifact into DIR")
    dest.add_argument("--emit-c", metavar="DIR", help="write sources, headers, Makefile and CMakeLists.txt only")
    b.add_argument("--name", help="C identifier for the library and API prefix (default: the model file's name)")
    b.add_argument("--weights", choices=("embed", "file"), default="embed",
                   help="weights inside the library (default) or in <name>.weights beside it, checksummed")
    b.add_argument("--target", default="native",
                   help="ISA: native (default), portable, x86-64-v2, x86-64-v3, x86-64-v4, aarch64")
    b.add_argument("--threads", type=int, default=None, help="default thread count of the library")
    b.add_argument("--const", "-c", action="append", metavar="NAME=VALUE", help=CONST_HELP)
    b.add_argument("--precision", **PRECISION_ARG)
    b.set_defaults(func=cmd_build)

    o = sub.add_parser("ops", parents=[common], help="operators onnxc supports, from its registries",
                       description="List the operators onnxc compiles with their ONNX domain (ai.onnx, "
                       "ai.onnx.ml, ai.onnx.preview.training, onnxruntime's com.microsoft contrib ops), the "
                       "opset versions, how each is implemented (kernel, view, expansion into other ops, "
                       "fold-only) and the element types its kernel computes. onnxc's own fused ops are "
                       "hidden unless --internal.")
    o.add_argument("--json", action="store_true", help="machine-readable output")
    o.add_argument("--internal", action="store_true",
                   help="also list onnxc's own ops (domain 'onnxc'), which only its passes write")
    o.add_argument("--domain", metavar="DOMAIN",
                   help="only the operators of DOMAIN (ai.onnx, ai.onnx.ml, ai.onnx.preview.training, com.microsoft)")
    o.set_defaults(func=cmd_ops)

    from onnxc.bench import add_bench_parser  # onnxc bench: the subparser and cmd_bench live in bench.py

    add_bench_parser(sub, common)
    return p


def one_line(e: BaseException) -> str:
    """The message on one line; unsupported-operator lists without their node lists."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if isinstance(e, UnsupportedOpError) and len(lines) > 1:
        lines = [lines[0]] + [re.sub(r"; used by .*$", "", x) + ("," if i < len(lines) - 2 else "")
                              for i, x in enumerate(lines[1:])]
    text = " ".join(lines)
    return text or type(e).__name__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``onnxc`` script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2, already printed by argparse)
        return e.code if isinstance(e.code, int) else 2
    debug = getattr(args, "debug", False)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("onnxc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `onnxc ops | head`
        sys.stderr.close()
        return 0
    except Exception as e:
        if debug:
            raise
        if isinstance(e, OnnxcError):
            msg = f"onnxc: error: {one_line(e)}"
        elif isinstance(e, OSError):
            msg = f"onnxc: error: {e.strerror or e}{f': {e.filename}' if e.filename else ''}"
        else:
            msg = f"onnxc: internal error: {type(e).__name__}: {one_line(e)} (rerun with --debug for the traceback)"
        print(msg, file=sys.stderr)
        return 1


__all__ = ["main", "build_parser", "supported_ops", "folded_summary", "UsageError", "InputError"]


if __name__ == "__main__":
    sys.exit(main())
