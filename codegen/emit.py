"""Render a lowered Program as one C translation unit (templates/model.c.j2)."""

from __future__ import annotations

import re

from onnxc.ir.dims import free_symbols

from .cexpr import include_line
from .entry_checks import checked_dims, describe, input_checks, size_check, value_types
from .kernels.base import WHO
from .lower import Buffer, Program
from .memory_plan import Slot, static_plan
from .templating import c_string, render

_PREFIX = "onnxc_model"


def emit_c(p: Program, prefix: str = _PREFIX, profile: bool = False, units: int = 1) -> str:
    """The complete C source of the model: exported ``<prefix>_run`` and ``<prefix>_free``.

    ``profile``: time every step with a monotonic clock into per-step sums, exported as
    ``<prefix>_profile(double *out, int n)``, ``<prefix>_profile_name(i)`` and ``<prefix>_profile_reset()``
    (read by ``onnxc.profile``). Off, the source is exactly the unprofiled one.
    ``units`` > 1 spreads the kernels over up to that many translation units, to be compiled in
    parallel: the text then holds the units one after the other, separated by UNIT_MARK lines
    (``split_units`` takes them apart); models with little kernel code stay one unit."""
    helpers = dict(p.helpers)
    if any(p.is_dynamic(b) for b in p.buffers.values()):
        _include(helpers, "onnxc_shape.h")
    _include(helpers, "onnxc_value.h")  # the ABI's value_free needs it
    _include(helpers, "onnxc_check.h")  # the entry checks
    # threads after fork, cancelling: the run function's, and every model library links onnxc_process.c
    _include(helpers, "onnxc_process.h")
    # runtime headers first, so a unit means the same whether they come from the precompiled header
    # (read before everything, codegen/runtime_lib.py) or from these lines
    # (an include registered under another key than its header's name still comes once)
    helpers = sorted(dict.fromkeys(helpers.values()), key=lambda h: not h.startswith('#include "onnxc'))
    if units > 1:
        unique = _unique_kernels(p, _kernel_names(p), "ONNXC_KERNEL", "")
        units = max(1, min(units, sum((st["body"] or "").count("\n") for st in unique) // UNIT_MIN_LINES))
    values = _program_values(p, prefix, profile, extern=units > 1)
    if units == 1:
        return render("model.c.j2", standalone=True, helpers=helpers, subprograms=p.subprograms, declarations=[],
                      units=1, **values)
    bins = _spread(values["steps"], units, len(values["run"]))
    steps = values.pop("steps")
    main = [st if i in bins[0] else {**st, "body": None, "shape_body": None} for i, st in enumerate(steps)]
    decls = [_prototype(st, shape) for i, st in enumerate(steps) if i not in bins[0]
             for shape in (True, False) if (st["shape_body"] if shape else st["body"]) is not None]
    texts = [render("model.c.j2", standalone=True, helpers=helpers, subprograms=p.subprograms, declarations=decls,
                    units=len(bins), steps=main, **values)]
    for u, b in enumerate(bins[1:], start=2):
        texts.append(render("model_unit.c.j2", unit=u, units=len(bins), helpers=helpers,
                            steps=[steps[i] for i in sorted(b)]))
    return UNIT_MARK.join(texts)


UNIT_MARK = "\n/* ==== onnxc: next translation unit ==== */\n"
UNIT_MIN_LINES = 400  # kernel lines per unit, at least: below that, a unit's fixed cost (headers) dominates


def split_units(source: str) -> list[str]:
    """The translation units of a source from emit_c."""
    return source.split(UNIT_MARK)


def _spread(steps: list[dict], units: int, main_lines: int) -> list[set[int]]:
    """Step indices per unit, the largest kernels first onto the least loaded unit (unit 0 starts with
    the run function's lines); empty units are dropped."""
    load = [main_lines] + [0] * (units - 1)
    bins: list[set[int]] = [set() for _ in range(units)]
    size = {i: (st["body"] or "").count("\n") + (st["shape_body"] or "").count("\n") for i, st in enumerate(steps)}
    for i in sorted((i for i in size if size[i]), key=lambda i: -size[i]):
        u = min(range(units), key=lambda k: load[k])
        bins[u].add(i)
        load[u] += size[i]
    return [bins[0]] + [b for b in bins[1:] if b]


def _prototype(st: dict, shape: bool) -> str:
    if shape:
        return f"{st['linkage']} int {st['shape_name']}(onnxc_rt *rt, int64_t *D{''.join(', ' + q for q in st['shape_params'])});"
    return f"{st['linkage']} int {st['name']}(onnxc_rt *rt, const int64_t *D{''.join(', ' + q for q in st['params'])});"


def _include(helpers: dict[str, str], header: str) -> None:
    """Request ``header`` under its name, the key ``KernelCtx.include`` uses."""
    helpers.setdefault(header, include_line(header))


def emit_subprogram(p: Program, prefix: str) -> str:
    """C of a body program (If branch, Loop/Scan body): a static ``<prefix>_run`` with the model ABI.
    Its helpers went into the enclosing program's dict; its own subprograms are listed there too."""
    _include(p.helpers, "onnxc_value.h")
    _include(p.helpers, "onnxc_check.h")
    if any(p.is_dynamic(b) for b in p.buffers.values()):
        _include(p.helpers, "onnxc_shape.h")
    return render("model.c.j2", standalone=False, helpers=[], subprograms=[], declarations=[], units=1,
                  **_program_values(p, prefix))


def _program_values(p: Program, prefix: str, profile: bool = False, extern: bool = False) -> dict:
    """What model.c.j2 renders of a program. ``extern``: kernels get external (hidden) linkage and
    names prefixed with ``prefix``, to be defined in other translation units."""
    pre = f"{prefix}_" if extern else ""
    names = _kernel_names(p, pre)
    temps = []
    dynamic = []  # buffers allocated at run time: after their producer's shape function, or by it
    for b in p.buffers.values():
        if b.kind in ("temp", "output") and p.is_dynamic(b):
            dynamic.append(b)
        elif b.kind == "temp":
            temps.append({"id": b.id, "first": b.first, "last": b.last, "ctype": b.dtype.c,
                          "static": all(isinstance(d, int) for d in b.shape)})
    # place big static buffers first: a better first-fit packing
    temps.sort(key=lambda t: (not t["static"], -_static_size(p.buffers[t["id"]])))
    plan = static_plan([Slot(t["id"], _static_size(p.buffers[t["id"]]) if t["static"] else None,
                             t["first"], t["last"]) for t in temps])
    if plan is not None:
        offsets, total = plan
        for t in temps:
            t["offset"] = offsets[t["id"]]
    else:  # sizes from run-time dims: overflow-checked, each named in its error
        for k, t in enumerate(temps):
            b = p.buffers[t["id"]]
            what = describe(f"the intermediate of {_comment(p.steps[b.first].node)}", b.shape)
            t["size"] = size_check(p, what, b.dtype.c, b.shape, f"sz[{k}]", "goto done;")
    arena_bytes = plan[1] if plan is not None else None
    outputs = []
    late = set(p.dimvars[p.n_bound:])
    for name, b, shape in p.outputs:
        early = b not in dynamic  # allocated before the kernels run (its buffer's size follows from the inputs)
        o = {"index": b.index, "rank": len(shape), "early": early, "name": c_string(name),
             "dtype": "ONNXC_VALUE_DTYPE" if b.is_value else int(b.dtype),
             "free": "onnxc_value_free" if b.is_value else "free", "dims": [p.dim_c(d) for d in shape], "sizes": [],
             # run_into takes the caller's buffer: its dims follow from the inputs (not a run-time Reshape's)
             "into": early and not any(free_symbols(d) & late for d in shape)}
        if early and not b.is_value:  # sized before any kernel runs
            o["sizes"] += _output_size(p, name, b, shape, o)
        outputs.append(o)
    prof: list[str] | None = [] if profile else None  # descriptions of the profiled steps, in order
    steps = _unique_kernels(p, names, "ONNXC_KERNEL_EXTERN" if extern else "ONNXC_KERNEL", pre)
    return dict(prefix=prefix, steps=steps,
                input_names=[c_string(n) for n, _ in p.inputs], value_types=value_types(p, prefix),
                dim_names=[c_string(n) for n in p.dimvars], ndim_alloc=max(1, len(p.dimvars)),
                input_checks=input_checks(p, prefix) + p.bind_checks, outputs=outputs, temps=temps,
                has_weights=len(p.weights) > 0,
                run=_run_lines(p, dynamic, names, prof, prefix), profile=None if prof is None else [c_string(n) for n in prof],
                dynamic=[{"id": b.id, "ctype": b.ctype, "free": "onnxc_value_free" if b.is_value else "free"}
                         for b in dynamic if b.kind == "temp"],
                arena_bytes=arena_bytes)


def _output_size(p: Program, name: str, b: Buffer, shape: tuple, o: dict) -> list[str]:
    """C computing ``on<j>_``, the bytes of early output ``j`` (and, when the caller may provide it,
    its dims ``od<j>_``, overflow-checked); an error names the output."""
    j = b.index
    what = describe(f"output '{name}'", shape)
    lines = [f"size_t on{j}_ = 0;"]
    if not o["into"]:
        return lines + size_check(p, what, b.dtype.c, b.shape, f"on{j}_", "return st;")
    o["dims"] = [f"od{j}_[{k}]" for k in range(len(shape))]
    lines += ["ovf_ = 0;", f"const int64_t od{j}_[{max(1, len(shape))}] = {{{', '.join(checked_dims(p, shape)) or '0'}}};"]
    if tuple(b.shape) == tuple(shape) and not all(isinstance(d, int) for d in shape):
        return lines + [f"if ((st = onnxc_check_size(rt, {c_string(what)}, ovf_, sizeof({b.dtype.c}), {len(shape)}, "
                        f"od{j}_, &on{j}_))) return st;"]
    return lines + size_check(p, what, b.dtype.c, b.shape, f"on{j}_", "return st;")


def _run_lines(p: Program, dynamic: list[Buffer], canon: dict[str, str], prof: list[str] | None = None,
               prefix: str = _PREFIX) -> list[str]:
    """The body of the run function after setup: per step its shape function, the allocation of the
    dynamic buffers it produces, the kernel call, and the release of dynamic temps read for the last time.
    With ``prof`` (a list to fill with step descriptions), each step's code is timed into its counter.
    Between steps, the run polls its cancel counter (runtime_c/onnxc_process.h)."""
    lines: list[str] = []
    ran = False  # whether a kernel or shape function came before this step
    for si, st in enumerate(p.steps):
        if ran and (st.body is not None or st.shape_body is not None):
            lines.append(f"if (onnxc_cancelled(rt)) {{ st = onnxc_cancel_fail(rt, {c_string(_comment(st.node))}); "
                         "goto done; }")
        ran = ran or st.body is not None or st.shape_body is not None
        start = len(lines)
        if st.shape_body is not None:
            args = "".join(", " + _ptr(p, p.buffers[bid], False) for _, bid in st.in_params)
            args += f", {c_string(st.node)}" if _uses_who(st.shape_body) else ""
            lines.append(f"if ((st = {canon.get(st.fn + '_shape', st.fn + '_shape')}(rt, D{args}))) goto done;")
        for b in dynamic:
            if b.first != si or b.owned:
                continue
            dst = f"out[{b.index}].data" if b.kind == "output" else f"b{b.id}"
            dims = ", ".join(checked_dims(p, b.shape)) or "0"
            what = c_string(describe(_comment(st.node), b.shape))
            lines.append(f"{{ ovf_ = 0; const int64_t dims_[{max(1, len(b.shape))}] = {{{dims}}}; size_t nb_ = 0;")
            lines.append(f"  if ((st = onnxc_check_size(rt, {what}, ovf_, sizeof({b.dtype.c}), {len(b.shape)}, dims_, "
                         "&nb_))) goto done;")
            lines.append(f"  {dst} = onnxc_alloc(nb_);")
            lines.append(f"  if (!{dst}) {{ st = onnxc_alloc_fail(rt, {c_string(_comment(st.node))}, "
                         f"{len(b.shape)}, dims_); goto done; }} }}")
        if st.body is not None and st.allocs is not None:
            lines.extend(_allocating_call(p, st, canon[st.fn]))
        elif st.body is not None:
            args = "".join(", " + _ptr(p, p.buffers[bid], out) for bid, out in st.args)
            args += f", {c_string(st.node)}" if _uses_who(st.body) else ""
            lines.append(f"if ((st = {canon[st.fn]}(rt, D{args}))) goto done;")
        lines.extend(st.checks)
        if prof is not None and len(lines) > start:
            lines.insert(start, f"prof_t_ = {prefix}_prof_now();")
            lines.append(f"{prefix}_prof_sec[{len(prof)}] += {prefix}_prof_now() - prof_t_;")
            prof.append(_comment(st.node))
        for b in dynamic:
            if b.kind == "temp" and b.last == si:
                lines.append(f"{'onnxc_value_free' if b.is_value else 'free'}(b{b.id}); b{b.id} = NULL;")
    return lines


def _allocating_call(p: Program, st, fn: str) -> list[str]:
    """Call a kernel that allocates its outputs (``fn``: the emitted function with its C), take them
    over, read back and check their dims."""
    n = len(st.allocs)
    args = "".join(", " + _ptr(p, p.buffers[bid], False) for bid, out in st.args if not out)
    args += "".join(f", &o_[{i}]" for i in range(n))
    args += f", {c_string(st.node)}" if _uses_who(st.body) else ""
    what = c_string(_comment(st.node))
    lines = [f"{{ onnxc_tensor o_[{n}]; memset(o_, 0, sizeof o_);",
             f"  if ((st = {fn}(rt, D{args}))) goto done;"]
    for i, a in enumerate(st.allocs):
        b = p.buffers[a.buffer]
        dst = f"out[{b.index}].data" if b.kind == "output" else f"b{b.id}"
        cast = "" if b.kind == "output" else f"({b.ctype} *)"
        lines.append(f"  {dst} = {cast}o_[{i}].data;")
    for i, a in enumerate(st.allocs):
        if a.rank is None:
            lines.append(f"  if (o_[{i}].dtype != ONNXC_VALUE_DTYPE) {{ st = onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                         f"\"%s: output %d is not a value\", {what}, {i}); goto done; }}")
            continue
        lines.append(f"  if (o_[{i}].rank != {a.rank}) {{ st = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: output %d "
                     f"has rank %d, expected %d\", {what}, {i}, (int)o_[{i}].rank, {a.rank}); goto done; }}")
        for ax, lv in a.defines:
            lines.append(f"  {lv} = o_[{i}].dims[{ax}];")
        for ax, expr in a.checks:
            lines.append(f"  if (o_[{i}].dims[{ax}] != ({expr})) {{ st = onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                         f"\"%s: output %d axis %d is %lld, expected %lld\", {what}, {i}, {ax}, "
                         f"(long long)o_[{i}].dims[{ax}], (long long)({expr})); goto done; }}")
    lines.append("}")
    return lines


def _uses_who(body: str | None) -> bool:
    """Whether kernel C reads the node's name through its ``who_`` parameter (KernelCtx.who)."""
    return body is not None and re.search(rf"\b{WHO}\b", body) is not None


def _signature(params: list[str], body: str | None) -> list[str]:
    return [*params, f"const char *{WHO}"] if _uses_who(body) else list(params)


def _kernel_names(p: Program, pre: str = "") -> dict[str, str]:
    """Kernel (``fn``) and shape function (``fn_shape``) name -> the name of the emitted function: that
    of the first one with the same parameters and C, so identical nodes (the layers of a transformer,
    repeated blocks of a CNN) share one function that the C compiler compiles once. Node names reach
    the C through ``who_`` only, never the body. ``pre`` is put before every name."""
    first: dict[tuple, str] = {}
    names: dict[str, str] = {}
    for st in p.steps:
        if st.shape_body is not None:
            params = [d for d, _ in st.in_params]
            key = ("shape", tuple(_signature(params, st.shape_body)), st.shape_body)
            names[st.fn + "_shape"] = first.setdefault(key, pre + st.fn + "_shape")
        if st.body is not None:
            key = ("kernel", tuple(_signature(st.params, st.body)), st.body)
            names[st.fn] = first.setdefault(key, pre + st.fn)
    return names


def _unique_kernels(p: Program, names: dict[str, str], linkage: str, pre: str) -> list[dict]:
    """What model.c.j2 renders per step: each distinct kernel and shape function once (bodies of
    the others None). ``pre``: the prefix _kernel_names put before the names."""
    steps = []
    for st in p.steps:
        shape = st.shape_body is not None and names[st.fn + "_shape"] == pre + st.fn + "_shape"
        kern = st.body is not None and names[st.fn] == pre + st.fn
        steps.append({"name": names.get(st.fn, st.fn), "shape_name": names.get(st.fn + "_shape", ""),
                      "linkage": linkage, "params": _signature(st.params, st.body),
                      "body": _indent(st.body) if kern else None,
                      "shape_params": _signature([d for d, _ in st.in_params], st.shape_body),
                      "shape_body": _indent(st.shape_body) if shape else None,
                      "comment": _comment(st.node)})
    return steps


def _static_size(b: Buffer) -> int:
    n = b.dtype.itemsize
    for d in b.shape:
        n *= d if isinstance(d, int) else 1
    return n


def _ptr(p: Program, b: Buffer, is_out: bool) -> str:
    c = b.ctype
    if b.kind == "input":
        return f"(const {c} *)in[{b.index}].data"
    if b.kind == "weight" and b.symbol:  # a static C array (string constants)
        return f"(const {c} *){b.symbol}"
    if b.kind == "weight":
        return f"(const {c} *)(W + {b.index})"
    if b.kind == "output":
        return f"({c} *)out[{b.index}].data"
    if b.kind == "slice":  # a Concat input written in place into the Concat's buffer
        return f"({_ptr(p, p.buffers[b.parent], is_out)} + ({b.offset}))"
    return f"b{b.id}"


def _indent(body: str) -> str:
    return "\n".join(("    " + ln) if ln.strip() else "" for ln in body.strip("\n").split("\n"))


def _comment(text: str) -> str:
    """Node descriptions come from the model: keep them printable and unable to close the comment."""
    safe = "".join(ch if (ch.isascii() and ch.isprintable()) else "?" for ch in text)
    return safe.replace("*/", "* /").replace("/*", "/ *")[:200]
