"""If, Loop and Scan: call the bodies' compiled run functions and assemble the results.

Every body is compiled into the same translation unit as a static run function with the model ABI
(``ctx.subprogram``), taking ``onnxc_tensor`` descriptors: the ONNX formals first, then the node's
captured values (passes/lift_captures.py). These kernels allocate their outputs: the body's
outputs become the node's (ownership passes through), Loop/Scan stack per-iteration outputs into
buffers they grow or size on the first iteration, and every shape the spec requires to agree across
iterations is checked. On any failure everything the kernel owns is released.
"""

from __future__ import annotations

from onnxc.passes.lift_captures import captures, onnx_inputs
from onnxc.passes.shapes.control_flow import scan_layout

from .base import KernelCtx, Operand, kernel
from .typesets import STORABLE

HEADER = '#include "onnxc_value.h"'
# what body outputs may hold (the outputs' element types): values copied as bytes; strings do not
# leave bodies yet (lower.py)
BODY_TYPES = STORABLE


def describe(op: Operand, var: str) -> list[str]:
    """C statements making descriptor ``var`` point at operand ``op`` (borrowed, not owned)."""
    if op.dtype is None:
        return [f"{var} = onnxc_value_desc({op.ptr});"]
    lines = [f"{var}.data = (void *){op.ptr};", f"{var}.rank = {op.rank};", f"{var}.dtype = {int(op.dtype)};"]
    lines += [f"{var}.dims[{k}] = {d};" for k, d in enumerate(op.dims)]
    return lines


def capture_lines(ctx: KernelCtx, var: str, first: int) -> list[str]:
    """Fill ``var[first...]`` with the node's captured values."""
    n = len(onnx_inputs(ctx.node))
    lines = []
    for j, _ in enumerate(captures(ctx.node)):
        lines += describe(ctx.ins[n + j], f"{var}[{first + j}]")
    return lines


def call(fn: str, off: int, ins: str, outs: str) -> str:
    """A call of a body's run function: it shares the run's threads and cancel counter."""
    return f"{fn}(rt->W + {off}, {ins}, {outs}, rt->err, rt->errlen, rt->threads, rt->cancel, rt->cancel0)"


def _cancelled(ctx: KernelCtx, it: str) -> str:
    return (f"st_ = onnxc_fail(rt, ONNXC_ERR_CANCELLED, \"run cancelled in %s at iteration %lld\", {ctx.who}, "
            f"(long long)({it}));")


def poll(ctx: KernelCtx, it: str, indent: str) -> str:
    """C stopping the kernel (``goto fail_``) when the run was cancelled (runtime_c/onnxc_process.h): each
    iteration of Loop, Scan and SequenceMap, whose bodies may be empty, polls once (``it``: the iteration)."""
    return f"{indent}if (onnxc_cancelled(rt)) {{ {_cancelled(ctx, it)} goto fail_; }}"


def body_call(ctx: KernelCtx, fn: str, off: int, it: str, indent: str) -> list[str]:
    """C running the body for iteration ``it`` into ``st_``; on failure ``goto fail_``. A cancelled body
    (it polls between its steps) says which node and iteration of the enclosing kernel it was in."""
    return [f"{indent}st_ = {call(fn, off, 'sin_', 'so_')};",
            f"{indent}if (st_) {{ if (st_ == ONNXC_ERR_CANCELLED) {_cancelled(ctx, it)} goto fail_; }}"]


def empty_dims(ctx: KernelCtx, k: int) -> list[str]:
    """Dims of output ``k`` when no iteration produced it: its inferred dims, 0 where only a run
    would have told."""
    out = ctx.outs[k]
    return ["0" if ctx.lvalue(d) is not None else ctx.dim(d) for d in out.shape]


@kernel("If", allocates=True, types=BODY_TYPES, typed="out0")
def if_kernel(ctx: KernelCtx) -> str:
    ctx.helper("onnxc_value", HEADER)
    node = ctx.node
    then_fn, then_off = ctx.subprogram(node.attr("then_branch"))
    else_fn, else_off = ctx.subprogram(node.attr("else_branch"))
    nc, no = len(captures(node)), len(node.outputs)
    lines = [f"onnxc_tensor sin_[{max(1, nc)}], so_[{no}];", "memset(sin_, 0, sizeof sin_);",
             "memset(so_, 0, sizeof so_);"]
    lines += capture_lines(ctx, "sin_", 0)
    lines.append(f"int st_ = in0[0] ? {call(then_fn, then_off, 'sin_', 'so_')} : "
                 f"{call(else_fn, else_off, 'sin_', 'so_')};")
    lines.append("if (st_) return st_;")
    lines += [f"*out{k} = so_[{k}];" for k in range(no)]
    lines.append("return 0;")
    return "\n".join(lines)


def _scalar(var: str, ptr: str, dtype: int) -> str:
    return f"memset(&{var}, 0, sizeof {var}); {var}.data = (void *){ptr}; {var}.dtype = {dtype};"


@kernel("Loop", allocates=True, types=BODY_TYPES, typed="out0")
def loop_kernel(ctx: KernelCtx) -> str:
    ctx.helper("onnxc_value", HEADER)
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    ins = onnx_inputs(node)
    nv, nc = len(ins) - 2, len(captures(node))
    nk = len(node.outputs) - nv
    nin, nout = 2 + nv + nc, 1 + nv + nk
    trip = "in0[0]" if ins[0] is not None else "INT64_MAX"
    cond = "in1[0]" if len(ins) > 1 and ins[1] is not None else "1"
    L = [f"int64_t M_ = {trip}, it_ = 0, itv_ = 0;", f"bool cond_ = {cond}, cv_ = 0;",
         f"onnxc_tensor cur_[{max(1, nv)}], sin_[{nin}], so_[{nout}];", f"int own_[{max(1, nv)}] = {{0}};",
         f"onnxc_tensor acc_[{max(1, nk)}];", f"size_t cap_[{max(1, nk)}] = {{0}};", "int st_ = 0;",
         "memset(cur_, 0, sizeof cur_); memset(sin_, 0, sizeof sin_); memset(so_, 0, sizeof so_);",
         "memset(acc_, 0, sizeof acc_);"]
    for j in range(nv):
        L += describe(ctx.ins[2 + j], f"cur_[{j}]")
    L += capture_lines(ctx, "sin_", 2 + nv)
    L += [
        "for (; it_ < M_ && cond_; it_++) {",
        poll(ctx, "it_", "    "),
        "    itv_ = it_; cv_ = cond_;",
        f"    {_scalar('sin_[0]', '&itv_', 7)}",
        f"    {_scalar('sin_[1]', '&cv_', 9)}",
        f"    for (int j = 0; j < {nv}; j++) sin_[2 + j] = cur_[j];",
        "    memset(so_, 0, sizeof so_);",
        *body_call(ctx, body_fn, off, "it_", "    "),
        "    if (so_[0].dtype != 9 || onnxc_tensor_numel(&so_[0]) < 1) {",
        "        st_ = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"Loop: the body's condition output is not a bool "
        "scalar\"); goto fail_; }",
        "    cond_ = *(const bool *)so_[0].data;",
        "    onnxc_desc_release(&so_[0]);",
        f"    for (int j = 0; j < {nv}; j++) {{",
        "        if (own_[j]) onnxc_desc_release(&cur_[j]);",
        "        cur_[j] = so_[1 + j]; so_[1 + j].data = NULL; own_[j] = 1;",
        "    }",
        f"    for (int k = 0; k < {nk}; k++) {{",
        f"        onnxc_tensor *e = &so_[1 + {nv} + k];",
        "        if (e->dtype == ONNXC_VALUE_DTYPE) { st_ = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"Loop: scan "
        "output %d is not a tensor\", k); goto fail_; }",
        "        size_t nb = onnxc_tensor_nbytes(e);",
        "        if (it_ == 0) { acc_[k] = *e; acc_[k].rank = e->rank + 1; acc_[k].data = NULL;",
        "            for (int a = 0; a < e->rank; a++) acc_[k].dims[a + 1] = e->dims[a];",
        "            acc_[k].dims[0] = 0; }",
        "        else {",
        "            int same = acc_[k].rank == e->rank + 1;",
        "            for (int a = 0; same && a < e->rank; a++) same = acc_[k].dims[a + 1] == e->dims[a];",
        "            if (!same) { st_ = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"Loop: scan output %d changes shape "
        "at iteration %lld\", k, (long long)it_); goto fail_; }",
        "        }",
        # acc_ holds dims[0] * nb <= ONNXC_MAX_BYTES bytes and nb <= ONNXC_MAX_BYTES: need and 2 * cap_
        # stay below SIZE_MAX, and a need past the limit is refused before anything is allocated
        "        size_t need_ = (size_t)(acc_[k].dims[0] + 1) * nb;",
        "        if (need_ > ONNXC_MAX_BYTES) { st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Loop: scan output %d "
        "would need %zu bytes after %lld iterations, more than onnxc's limit\", k, need_, (long long)it_ + 1); "
        "goto fail_; }",
        "        if (need_ > cap_[k]) {",
        "            size_t cap = 2 * cap_[k] > need_ && 2 * cap_[k] <= ONNXC_MAX_BYTES ? 2 * cap_[k] : need_;",
        "            void *p = realloc(acc_[k].data, cap ? cap : 1);",
        "            if (!p) { st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Loop: out of memory for scan output %d\", "
        "k); goto fail_; }",
        "            acc_[k].data = p; cap_[k] = cap;",
        "        }",
        "        if (nb) memcpy((char *)acc_[k].data + (size_t)acc_[k].dims[0] * nb, e->data, nb);",
        "        acc_[k].dims[0]++;",
        "        onnxc_desc_release(e);",
        "    }",
        "}",
        f"for (int j = 0; j < {nv}; j++) {{",
        "    if (!own_[j]) {",
        "        onnxc_tensor c; if (onnxc_desc_copy(&cur_[j], &c)) { st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, "
        "\"Loop: out of memory\"); goto fail_; }",
        "        cur_[j] = c; own_[j] = 1;",
        "    }",
        "}",
    ]
    for k in range(nk):
        out = ctx.outs[nv + k]
        dims = empty_dims(ctx, nv + k)
        L += [f"if (M_ <= 0 || acc_[{k}].rank == 0) {{  /* no iteration ran */",
              f"    acc_[{k}].rank = {out.rank}; acc_[{k}].dtype = {int(out.dtype)};"]
        L += [f"    acc_[{k}].dims[{a}] = {d};" for a, d in enumerate(dims)]
        L += [f"    acc_[{k}].dims[0] = 0;", "}",
              f"if (!acc_[{k}].data) {{ acc_[{k}].data = onnxc_alloc(onnxc_tensor_nbytes(&acc_[{k}]));",
              f"    if (!acc_[{k}].data) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Loop: out of memory\"); "
              "goto fail_; } }"]
    L += [f"*out{j} = cur_[{j}];" for j in range(nv)]
    L += [f"*out{nv + k} = acc_[{k}];" for k in range(nk)]
    L += ["return 0;",
          "fail_:",
          f"for (int j = 0; j < {nout}; j++) if (so_[j].data) onnxc_desc_release(&so_[j]);",
          f"for (int j = 0; j < {nv}; j++) if (own_[j]) onnxc_desc_release(&cur_[j]);",
          f"for (int k = 0; k < {nk}; k++) free(acc_[k].data);",
          "(void)cv_; return st_;"]
    return "\n".join(L)


@kernel("Scan", allocates=True, types=BODY_TYPES, typed="out0")
def scan_kernel(ctx: KernelCtx) -> str:
    ctx.helper("onnxc_value", HEADER)
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    first, ns, nx, in_axes, out_axes = scan_layout(node)
    batched = node.version < 9
    nc = len(captures(node))
    ny = len(node.outputs) - ns
    in_dirs = list(node.attr("directions" if batched else "scan_input_directions", [0] * nx))
    out_dirs = [0] * ny if batched else list(node.attr("scan_output_directions", [0] * ny))
    xs = [ctx.ins[first + ns + j] for j in range(nx)]
    states = [ctx.ins[first + j] for j in range(ns)]
    B = xs[0].dims[0] if batched else "1"
    L = ["int st_ = 0;", f"const int64_t B_ = {B};",
         f"onnxc_tensor cur_[{max(1, ns)}], sin_[{ns + nx + nc}], so_[{ns + ny}];",
         f"int own_[{max(1, ns)}] = {{0}};", f"onnxc_tensor ys_[{max(1, ny)}];",
         f"void *slice_[{max(1, nx)}] = {{0}};",
         "memset(cur_, 0, sizeof cur_); memset(sin_, 0, sizeof sin_); memset(so_, 0, sizeof so_);",
         "memset(ys_, 0, sizeof ys_);"]
    # scan inputs: length T along their axis, copied slice by slice (outer x inner blocks)
    geo = []
    for j, x in enumerate(xs):
        ax = in_axes[j] % x.rank if not batched else 1
        outer = " * ".join(["1"] + [f"({d})" for d in x.dims[1 if batched else 0:ax]])
        inner = " * ".join(["1"] + [f"({d})" for d in x.dims[ax + 1:]])
        geo.append((ax, outer, inner))
        L.append(f"const int64_t T{j}_ = {x.dims[ax]};")
        if j:
            L.append(f"if (T{j}_ != T0_) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"Scan: scan input {j} has "
                     f"length %lld, scan input 0 has %lld\", (long long)T{j}_, (long long)T0_);")
    L.append("const int64_t T_ = T0_;")
    for j, x in enumerate(xs):
        ax, outer, inner = geo[j]
        es = f"sizeof({x.ctype})"
        L.append(f"slice_[{j}] = onnxc_alloc((size_t)({outer}) * ({inner}) * {es});")
        L.append(f"if (!slice_[{j}]) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Scan: out of memory\"); "
                 "goto fail_; }")
        sdims = [d for a, d in enumerate(x.dims) if a != ax][1 if batched else 0:]
        L += [f"sin_[{ns + j}].data = slice_[{j}]; sin_[{ns + j}].rank = {len(sdims)}; "
              f"sin_[{ns + j}].dtype = {int(x.dtype)};"]
        L += [f"sin_[{ns + j}].dims[{a}] = {d};" for a, d in enumerate(sdims)]
    L += capture_lines(ctx, "sin_", ns + nx)
    L.append("for (int64_t b_ = 0; b_ < B_; b_++) {")
    # states of this batch entry (borrowed views of the inputs)
    for j, s in enumerate(states):
        if s.dtype is None:
            L.append(f"    cur_[{j}] = onnxc_value_desc(in{first + j}); own_[{j}] = 0;")
            continue
        sd = s.dims[1:] if batched else s.dims
        per = " * ".join(["1"] + [f"({d})" for d in sd])
        L.append(f"    cur_[{j}].data = (void *)(in{first + j} + b_ * ({per})); cur_[{j}].rank = {len(sd)}; "
                 f"cur_[{j}].dtype = {int(s.dtype)}; own_[{j}] = 0;")
        L += [f"    cur_[{j}].dims[{a}] = {d};" for a, d in enumerate(sd)]
    L.append("    for (int64_t t_ = 0; t_ < T_; t_++) {")
    L.append(poll(ctx, "b_ * T_ + t_", "        "))
    for j, x in enumerate(xs):
        ax, outer, inner = geo[j]
        es = f"sizeof({x.ctype})"
        tt = "(T_ - 1 - t_)" if in_dirs[j] else "t_"
        base = f"(const char *)in{first + ns + j} + (size_t)b_ * (size_t)(T_ * ({outer}) * ({inner})) * {es}"
        L += [f"        for (int64_t o = 0; o < ({outer}); o++)",
              f"            memcpy((char *)slice_[{j}] + (size_t)(o * ({inner})) * {es}, {base} + "
              f"(size_t)((o * T_ + {tt}) * ({inner})) * {es}, (size_t)({inner}) * {es});"]
    L += [f"        for (int j = 0; j < {ns}; j++) sin_[j] = cur_[j];",
          "        memset(so_, 0, sizeof so_);",
          *body_call(ctx, body_fn, off, "b_ * T_ + t_", "        "),
          f"        for (int j = 0; j < {ns}; j++) {{",
          "            if (own_[j]) onnxc_desc_release(&cur_[j]);",
          "            cur_[j] = so_[j]; so_[j].data = NULL; own_[j] = 1;",
          "        }"]
    for k in range(ny):
        y = ctx.outs[ns + k]
        r = y.rank - (1 if batched else 0)
        oax = out_axes[k] % r if not batched else 0
        tt = "(T_ - 1 - t_)" if out_dirs[k] else "t_"
        e = f"so_[{ns + k}]"
        L += [f"        if ({e}.dtype == ONNXC_VALUE_DTYPE || {e}.rank != {r - 1}) {{ st_ = onnxc_fail(rt, "
              f"ONNXC_ERR_RUNTIME, \"Scan: scan output {k} has rank %d, expected {r - 1}\", (int){e}.rank); "
              "goto fail_; }",
              f"        if (!ys_[{k}].data) {{",
              f"            ys_[{k}].rank = {y.rank}; ys_[{k}].dtype = {int(y.dtype)};"]
        lead = ["B_"] if batched else []
        full = lead + [f"{e}.dims[{a}]" for a in range(oax)] + ["T_"] + \
            [f"{e}.dims[{a}]" for a in range(oax, r - 1)]
        L += [f"            ys_[{k}].dims[{a}] = {d};" for a, d in enumerate(full)]
        L += [f"            ys_[{k}].data = onnxc_alloc(onnxc_tensor_nbytes(&ys_[{k}]));",
              f"            if (!ys_[{k}].data) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Scan: out of memory\"); "
              "goto fail_; }",
              f"            memset(ys_[{k}].data, 0, onnxc_tensor_nbytes(&ys_[{k}]));",
              "        } else {",
              "            int same = 1;",
              f"            for (int a = 0; a < {oax}; a++) same &= ys_[{k}].dims[{len(lead)} + a] == {e}.dims[a];",
              f"            for (int a = {oax}; a < {r - 1}; a++) same &= ys_[{k}].dims[{len(lead)} + a + 1] == "
              f"{e}.dims[a];",
              f"            if (!same) {{ st_ = onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"Scan: scan output {k} changes "
              "shape across iterations\"); goto fail_; }",
              "        }",
              "        {",
              f"            int64_t outer = 1, inner = 1; size_t es = onnxc_dtype_size({e}.dtype);",
              f"            for (int a = 0; a < {oax}; a++) outer *= {e}.dims[a];",
              f"            for (int a = {oax}; a < {r - 1}; a++) inner *= {e}.dims[a];",
              f"            char *dst = (char *)ys_[{k}].data + (size_t)b_ * (size_t)(outer * T_ * inner) * es;",
              "            for (int64_t o = 0; o < outer; o++)",
              f"                memcpy(dst + (size_t)((o * T_ + {tt}) * inner) * es, (const char *){e}.data + "
              "(size_t)(o * inner) * es, (size_t)inner * es);",
              "        }",
              f"        onnxc_desc_release(&{e});"]
    L.append("    }")
    # final states: owned results, or copies of the inputs when no step ran; batched: one per entry
    if batched:
        for j in range(len(states)):
            out = ctx.outs[j]
            L += [f"    if (b_ == 0) {{ out{j}->rank = cur_[{j}].rank + 1; out{j}->dtype = {int(out.dtype)};",
                  f"        out{j}->dims[0] = B_;",
                  f"        for (int a = 0; a < cur_[{j}].rank; a++) out{j}->dims[a + 1] = cur_[{j}].dims[a];",
                  f"        out{j}->data = onnxc_alloc(onnxc_tensor_nbytes(out{j}));",
                  f"        if (!out{j}->data) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Scan: out of memory\"); "
                  "goto fail_; } }",
                  f"    {{ size_t nb = onnxc_tensor_nbytes(&cur_[{j}]);",
                  f"      memcpy((char *)out{j}->data + (size_t)b_ * nb, cur_[{j}].data, nb);",
                  f"      if (own_[{j}]) onnxc_desc_release(&cur_[{j}]); own_[{j}] = 0; }}"]
    L.append("}")
    if not batched:
        L += [f"for (int j = 0; j < {ns}; j++) {{",
              "    if (!own_[j]) {",
              "        onnxc_tensor c; if (onnxc_desc_copy(&cur_[j], &c)) { st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, "
              "\"Scan: out of memory\"); goto fail_; }",
              "        cur_[j] = c; own_[j] = 1;",
              "    }",
              "}"]
        L += [f"*out{j} = cur_[{j}];" for j in range(ns)]
    for k in range(ny):
        y = ctx.outs[ns + k]
        dims = empty_dims(ctx, ns + k)
        L += [f"if (!ys_[{k}].data) {{  /* zero iterations */",
              f"    ys_[{k}].rank = {y.rank}; ys_[{k}].dtype = {int(y.dtype)};"]
        L += [f"    ys_[{k}].dims[{a}] = {d};" for a, d in enumerate(dims)]
        L += [f"    ys_[{k}].data = onnxc_alloc(onnxc_tensor_nbytes(&ys_[{k}]));",
              f"    if (!ys_[{k}].data) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"Scan: out of memory\"); "
              "goto fail_; }",
              "}"]
        L.append(f"*out{ns + k} = ys_[{k}];")
    L += [f"for (int j = 0; j < {nx}; j++) free(slice_[j]);",
          "return 0;",
          "fail_:",
          f"for (int j = 0; j < {ns + ny}; j++) if (so_[j].data) onnxc_desc_release(&so_[j]);",
          f"for (int j = 0; j < {ns}; j++) if (own_[j]) onnxc_desc_release(&cur_[j]);",
          f"for (int k = 0; k < {ny}; k++) free(ys_[k].data);",
          f"for (int j = 0; j < {nx}; j++) free(slice_[j]);"]
    if batched:
        L += [f"free(out{j}->data); out{j}->data = NULL;" for j in range(ns)]
    L.append("return st_;")
    return "\n".join(L)


@kernel("SequenceMap", allocates=True, types=BODY_TYPES, typed="out0")
def sequence_map_kernel(ctx: KernelCtx) -> str:
    ctx.helper("onnxc_value", HEADER)
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    ins = onnx_inputs(node)
    ni, nc, no = len(ins), len(captures(node)), len(node.outputs)
    L = ["int st_ = 0;", f"onnxc_tensor sin_[{ni + nc}], so_[{no}];", f"onnxc_value *res_[{no}] = {{0}};",
         "memset(sin_, 0, sizeof sin_); memset(so_, 0, sizeof so_);", "const int64_t n_ = in0->n;"]
    for j in range(ni):
        op = ctx.ins[j]
        if op.dtype is None:
            L.append(f"if (in{j}->kind != ONNXC_SEQUENCE || in{j}->n != n_) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                     f"\"SequenceMap: input {j} is not a sequence of the length of input 0\");")
        else:
            L += describe(op, f"sin_[{j}]")
    L += capture_lines(ctx, "sin_", ni)
    for k in range(no):
        dt = ctx.outs[k].value.type.elem.dtype
        L += [f"res_[{k}] = onnxc_value_new(ONNXC_SEQUENCE, {int(dt)});",
              f"if (!res_[{k}]) {{ st_ = onnxc_fail(rt, ONNXC_ERR_MEMORY, \"SequenceMap: out of memory\"); "
              "goto fail_; }"]
    L.append("for (int64_t i = 0; i < n_; i++) {")
    L.append(poll(ctx, "i", "    "))
    for j in range(ni):
        if ctx.ins[j].dtype is None:
            L.append(f"    sin_[{j}] = in{j}->items[i]->t;")
    L += ["    memset(so_, 0, sizeof so_);",
          *body_call(ctx, body_fn, off, "i", "    "),
          f"    for (int k = 0; k < {no}; k++) {{",
          "        onnxc_value *it = so_[k].dtype == ONNXC_VALUE_DTYPE ? (onnxc_value *)so_[k].data : "
          "onnxc_value_adopt(&so_[k]);",
          "        if (!it || onnxc_seq_insert(res_[k], res_[k]->n, it)) { onnxc_value_free(it); st_ = onnxc_fail(rt, "
          "ONNXC_ERR_MEMORY, \"SequenceMap: out of memory\"); goto fail_; }",
          "        so_[k].data = NULL;",
          "    }",
          "}"]
    L += [f"*out{k} = onnxc_value_desc(res_[{k}]);" for k in range(no)]
    L += ["return 0;", "fail_:",
          f"for (int k = 0; k < {no}; k++) {{ if (so_[k].data) onnxc_desc_release(&so_[k]); "
          "onnxc_value_free(res_[k]); }",
          "return st_;"]
    return "\n".join(L)
