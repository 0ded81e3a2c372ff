"""Parallel loops of generated kernels on the runtime's own thread pool (runtime_c/onnxc_pool.h).

    lines += par_for(ctx, "o", "O", body, work="O * L", head=head)

gives the kernel the loop ``for (int64_t o = 0; o < O; o++) { body }``, split into chunks of
consecutive ``o`` that the calling thread and the pool's workers take as they come: a worker whose core
another process holds takes fewer chunks, and nobody waits for it at a barrier (an OpenMP region ends
when its slowest thread does: a scheduler time slice on a busy machine).

C has no closures, so the loop becomes a file-scope function (a helper of the translation unit, named
after a hash of its C, so identical kernels share it) that reads what the loop uses from a struct:

- the kernel's parameters: ``rt``, ``D``, ``who_`` and every operand pointer (``in<k>``, ``out<k>``);
- ``head``: C declarations the kernel made before the loop that the loop reads. They are repeated at the
  top of the function, so they must be cheap and pure (``const int64_t O = D[0] * 4;``: dims, strides,
  pointers into operands), never allocations or writes;
- ``captures``: other locals, as (C type, name) pairs, copied by value into the struct (a scratch
  pointer the kernel allocated, a flag it computed).

The body may ``continue`` and may ``return onnxc_fail(...)`` (the kernel returns that status once every
chunk is done); ``break`` would end one chunk only, so a body must not use it. ``slot_`` (0 ..
threads - 1; 0 in a one-thread build) names the thread running the chunk, for per-thread scratch.
A body's ``return onnxc_fail(...)`` may run on several threads at once, each writing the run's error
message: bodies that can fail often should set a flag instead and fail once after the loop. Chunks are consecutive ranges
of the index, computed the same way whichever thread runs them, so results do not depend on the thread
count when each iteration writes its own outputs.

Work below two grains (``work``, in elements or multiply-adds: PAR_WORK_MIN / 2 by default) runs on the
calling thread without touching the pool; a model compiled for one thread gets the plain loop.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from .base import WHO, KernelCtx

# Work (elements, or multiply-adds: a few nanoseconds each on one core) below which a loop runs on one thread:
# about 0.1-1 ms of work. A pool job costs a few microseconds while the workers spin, tens when they sleep;
# below this the second thread saves less than that and the cache lines it pulls over.
PAR_WORK_MIN = 1 << 18
PAR_GRAIN = PAR_WORK_MIN // 2  # the least work of a chunk: loops of PAR_WORK_MIN and more are split


def _operands(ctx: KernelCtx) -> list[tuple[str, str]]:
    """(C type, name) of the kernel's operand parameters, as lower.py declares them."""
    out = [(f"const {op.ctype} *", op.ptr) for op in ctx.ins if op is not None]
    return out + [(f"{op.ctype} *", op.ptr) for op in ctx.outs]


def _lines(code: str | Sequence[str]) -> list[str]:
    return code.split("\n") if isinstance(code, str) else list(code)


def par_for(ctx: KernelCtx, var: str, extent: str, body: str | Sequence[str], *, work: str | None = None,
            head: str | Sequence[str] = (), captures: Sequence[tuple[str, str]] = (),
            grain: int = PAR_GRAIN) -> list[str]:
    """C lines running ``for (int64_t var = 0; var < extent; var++) { body }`` on the pool (see module doc).
    ``work`` (default: ``extent``) is the loop's total work in elements or multiply-adds."""
    body, head = _lines(body), _lines(head)
    if ctx.threads <= 1:
        loop = [f"for (int64_t {var} = 0; {var} < ({extent}); {var}++) {{", *body, "}"]
        return ["{", "const int slot_ = 0;", *loop, "}"] if re.search(r"\bslot_\b", "\n".join(body)) else loop
    text = "\n".join(head + body)
    fields = [("onnxc_rt *", "rt"), ("const int64_t *", "D")]
    if re.search(rf"\b{WHO}\b", text):
        fields.append(("const char *", WHO))
    fields += [(t, n) for t, n in _operands(ctx) if re.search(rf"\b{n}\b", text)]
    fields += list(captures)
    operands = {n for _, n in _operands(ctx)}
    decl = [(t.strip(), n) for t, n in fields]
    members = "".join(f"    {t}{'' if t.endswith('*') else ' '}{n};\n" for t, n in decl)
    loads = "".join(f"    {t}{'restrict ' if n in operands else ('' if t.endswith('*') else ' ')}{n} = a_->{n}; (void){n};\n"
                    for t, n in decl)
    inner = "\n".join("        " + ln for ln in head + [f"for (int64_t {var} = lo_; {var} < hi_; {var}++) {{"]
                      + ["    " + b for b in body] + ["}"])
    proto = ("typedef struct {\n" + members + "    int64_t n_, chunks_;\n    int rc_;\n} @_args;\n"
             "static int @_range(const @_args *a_, int64_t lo_, int64_t hi_, int slot_) {\n"
             + loads + "    (void)slot_;\n" + inner + "\n    return 0;\n}\n"
             "static void @(void *p_, int64_t c_, int slot_) {\n"
             "    @_args *a_ = (@_args *)p_;\n"
             "    const int r_ = @_range(a_, a_->n_ * c_ / a_->chunks_, a_->n_ * (c_ + 1) / a_->chunks_, slot_);\n"
             "    if (r_) __atomic_store_n(&a_->rc_, r_, __ATOMIC_RELAXED);\n}\n")
    name = "onnxc_pf_" + hashlib.sha1(proto.encode()).hexdigest()[:12]
    ctx.helper(name, proto.replace("@", name))
    init = ", ".join(n for _, n in fields)
    return [
        "{",
        f"    {name}_args a_ = {{{init}, ({extent}), 1, 0}};",
        f"    const int64_t k_ = onnxc_chunks(rt->threads, (double)({work or extent}), {grain});",
        "    a_.chunks_ = k_ < a_.n_ ? k_ : (a_.n_ > 1 ? a_.n_ : 1);",
        f"    if (a_.chunks_ <= 1) a_.rc_ = {name}_range(&a_, 0, a_.n_, 0);",
        f"    else onnxc_parallel(rt->threads, a_.chunks_, {name}, &a_);",
        "    if (a_.rc_) return a_.rc_;",
        "}",
    ]
