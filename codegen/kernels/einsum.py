"""Einsum: a loop nest over the equation's labels, or packed GEMMs when it is a (batched) matrix product.

The equation is parsed once (passes/shapes/einsum.py) into one label per operand axis. Each operand
then has one stride per label: the sum of the strides of its axes with that label (a diagonal when a
label repeats inside a term), 0 where the operand broadcasts (size-1 axes, missing ellipsis axes).

* Loop nest (any number of operands, any type): the output labels in output order (the output is
  written contiguously), then the summed labels innermost; each level keeps running offsets.
  Floats accumulate in float32 (also float16/bfloat16, rounded once), doubles in double, integers in
  the unsigned type of their width or 32 bits, wrapping like numpy.
* GEMM (two float/double/half operands whose labels are each batch (A, B, output), M (A, output),
  N (B, output) or K (A, B), with at least one K and one M or N label, no diagonals): operands are
  gathered into [batch, M, K] / [batch, K, N] buffers unless their layout is already that (or its
  transpose), the blocked GEMM runs per batch, and the result is scattered to the output order.
  Half operands are gathered into float32 buffers and the result rounded once.
"""

from __future__ import annotations

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.einsum import EINSUM_TYPES, EinsumSpec, einsum_spec

from ..cexpr import c_literal, c_product
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .nncommon import gemm_expr
from .parfor import par_for

GEMM_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16})


def _accepts(node: Node) -> str | None:
    """Every operand has input 0's element type (whose supported values ``types=`` declares)."""
    t0 = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
    for k, v in enumerate(node.inputs[1:], 1):
        t = None if v is None else v.type
        if isinstance(t0, TensorType) and isinstance(t, TensorType) and t.dtype != t0.dtype:
            return f"input {k} of type {t.dtype.short} with input 0 of type {t0.dtype.short} is not supported"
    return None


def _acc_type(dt: DType) -> str:
    """C type the products are summed in."""
    if dt == DType.DOUBLE:
        return "double"
    if dt.is_float:
        return "float"
    return "uint64_t" if dt.itemsize == 8 else "uint32_t"


class _Strides:
    """Per-operand label strides (C expressions), plus the run-time checks broadcasting needs."""

    def __init__(self, ctx: KernelCtx, spec: EinsumSpec, size: dict[str, str]):
        self.checks: list[str] = []
        self.of: list[dict[str, str]] = []
        for k, (op, term) in enumerate(zip(ctx.ins, spec.terms)):
            acc: dict[str, list[str]] = {}
            for d, s, lab in zip(op.dims, op.strides(), term):
                acc.setdefault(lab, [])
                if d == "1" or s == "0":
                    continue
                if d == size[lab]:
                    acc[lab].append(s)
                    continue
                self.checks.append(
                    f"if (!(({d}) == ({size[lab]}) || ({d}) == 1)) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                    f"\"%s: input {k} axis labelled '{lab}' has size %lld, expected %lld or 1\", {ds.who(ctx)}, "
                    f"(long long)({d}), (long long)({size[lab]}));")
                acc[lab].append(f"(({d}) == 1 ? 0 : ({s}))")
            self.of.append({lab: " + ".join(ss) if ss else "0" for lab, ss in acc.items()})

    def get(self, k: int, lab: str) -> str:
        return self.of[k].get(lab, "0")


def _contiguous(labels: list[str], size: dict[str, str]) -> dict[str, str]:
    """Row-major strides of a dense tensor whose axes are ``labels``."""
    out: dict[str, str] = {}
    acc = "1"
    for lab in reversed(labels):
        out[lab] = acc
        acc = size[lab] if acc == "1" else f"({acc}) * ({size[lab]})"
    return out


def _nest(labels: list[str], size: dict[str, str], ptrs: list[tuple[str, dict[str, str]]], body: list[str],
          depth: int = 0) -> list[str]:
    """Nested loops over ``labels``, starting at nesting level ``depth``. ``ptrs`` are (offset name,
    label -> stride) pairs: level d defines ``<name>_<d + 1>`` from ``<name>_<d>`` (``<name>_<depth>``
    must exist), and the body reads ``<name>_<depth + len(labels)>``."""
    lines = []
    for lvl, lab in enumerate(labels, start=depth):
        pad = "    " * lvl
        lines.append(f"{pad}for (int64_t i{lvl} = 0; i{lvl} < {size[lab]}; i{lvl}++) {{")
        for name, strides in ptrs:
            s = strides.get(lab, "0")
            step = f" + i{lvl} * ({s})" if s != "0" else ""
            lines.append(f"{pad}    const int64_t {name}_{lvl + 1} = {name}_{lvl}{step};")
    lines += ["    " * (depth + len(labels)) + ln for ln in body]
    for lvl in range(depth + len(labels) - 1, depth - 1, -1):
        lines.append("    " * lvl + "}")
    return lines


def _loop_nest(ctx: KernelCtx, spec: EinsumSpec, size: dict[str, str], st: _Strides) -> list[str]:
    dt = ctx.outs[0].dtype
    acc_t = _acc_type(dt)
    out, summed = list(spec.output), list(spec.summed)
    nin = len(ctx.ins)
    xs = [f"in{k}[a{k}_{len(out) + len(summed)}]" for k in range(nin)]
    product = " * ".join(half.load(dt, x) if dt.is_float else f"({acc_t}){x}" for x in xs)
    if summed:
        inner = _nest(summed, size, [(f"a{k}", {lab: st.get(k, lab) for lab in summed}) for k in range(nin)],
                      [f"s += {product};"], depth=len(out))
        body = [f"{acc_t} s = 0;", *[ln[4 * len(out):] for ln in inner]]
    else:
        body = [f"const {acc_t} s = {product};"]
    yv = "s" if dt.is_float else f"({dt.c})s"
    body.append(f"out0[y_{len(out)}] = {half.store(dt, yv)};")
    work = c_product([size[lab] for lab in out + summed])
    ptrs = [(f"a{k}", {lab: st.get(k, lab) for lab in out}) for k in range(nin)] + [("y", _contiguous(out, size))]
    head = [f"const int64_t {p}_0 = 0;" for p in [f"a{k}" for k in range(nin)] + ["y"]]
    nest = _nest(out, size, ptrs, body)
    if not out:
        return head + nest
    # the outermost output label on the pool: each iteration writes its own outputs
    return head + par_for(ctx, "i0", size[out[0]], nest[1:-1], work=work, head=head)


# -- the GEMM form --------------------------------------------------------------------------------

def _gemm_plan(ctx: KernelCtx, spec: EinsumSpec) -> dict | None:
    """Label groups of a two-operand matrix product, or None when the equation is not one."""
    if len(ctx.ins) != 2 or ctx.outs[0].dtype not in GEMM_TYPES:
        return None
    ta_, tb_ = spec.terms
    if len(set(ta_)) != len(ta_) or len(set(tb_)) != len(tb_):
        return None
    out = spec.output
    batch = [lab for lab in out if lab in ta_ and lab in tb_]
    m = [lab for lab in out if lab in ta_ and lab not in tb_]
    n = [lab for lab in out if lab in tb_ and lab not in ta_]
    k = [lab for lab in ta_ if lab in tb_ and lab not in out]
    if len(batch) + len(m) + len(k) != len(ta_) or len(batch) + len(n) + len(k) != len(tb_):
        return None  # a label only one operand has and the output lacks: summed on its own
    if not k or not (m or n):
        return None
    return {"batch": batch, "m": m, "n": n, "k": k}


def _gather(dst: str, src: str, labels: list[str], size: dict[str, str], strides: dict[str, str],
            load: str) -> list[str]:
    """Copy the strided ``src`` into contiguous ``dst`` in ``labels`` order (``load`` formats ``{}``)."""
    body = [f"{dst}[g_{len(labels)}] = {load.format(f'{src}[o_{len(labels)}]')};"]
    return ["{", "const int64_t o_0 = 0, g_0 = 0;",
            *_nest(labels, size, [("o", strides), ("g", _contiguous(labels, size))], body), "}"]


def _gemm(ctx: KernelCtx, spec: EinsumSpec, size: dict[str, str], st: _Strides, plan: dict) -> list[str]:
    dt = ctx.outs[0].dtype
    cdt = half.compute_type(dt)
    ct = cdt.c
    batch, m, n, k = plan["batch"], plan["m"], plan["n"], plan["k"]
    terms = spec.terms
    lines = [f"const int64_t Bt = {c_product([size[x] for x in batch])}, Mt = {c_product([size[x] for x in m])}, "
             f"Nt = {c_product([size[x] for x in n])}, Kt = {c_product([size[x] for x in k])};"]
    direct = dt not in half.HALF and not st.checks
    # A as [batch, M, K] (ta = 0) or [batch, K, M] (ta = 1); B as [batch, K, N] or [batch, N, K]
    layouts = {}
    for idx, (first, second) in ((0, (m, k)), (1, (k, n))):
        term = list(terms[idx])
        plain = direct and all(st.get(idx, lab) != "0" for lab in term)
        if plain and term == batch + first + second:
            layouts[idx] = ("0", f"in{idx}", None)
        elif plain and term == batch + second + first:
            layouts[idx] = ("1", f"in{idx}", None)
        else:
            layouts[idx] = ("0", f"p{idx}", batch + first + second)
    out_direct = direct and list(spec.output) == batch + m + n
    bufs = [(f"p{i}", f"(size_t)Bt * {'Mt * Kt' if i == 0 else 'Kt * Nt'}") for i in (0, 1)
            if layouts[i][2] is not None]
    if not out_direct:
        bufs.append(("pc", "(size_t)Bt * Mt * Nt"))
    for name, count in bufs:
        lines.append(f"{ct} *{name} = ({ct} *)onnxc_alloc({count} * sizeof({ct}));")
    if bufs:
        lines.append("if (" + " || ".join(f"!{b}" for b, _ in bufs) + ") {")
        lines += [f"    free({b});" for b, _ in bufs]
        lines += ["    return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in Einsum\");", "}"]
    for i in (0, 1):
        labels = layouts[i][2]
        if labels is not None:
            lines += _gather(f"p{i}", f"in{i}", labels, size, {lab: st.get(i, lab) for lab in terms[i]},
                             half.load(dt, "{}"))
    (ta, a, _), (tb, b, _) = layouts[0], layouts[1]
    lda = "Mt" if ta == "1" else "Kt"
    ldb = "Kt" if tb == "1" else "Nt"
    c = "out0" if out_direct else "pc"
    call = gemm_expr(ctx, cdt, ta, tb, "Mt", "Nt", "Kt", c_literal(1.0, cdt), f"{a} + bi * Mt * Kt", lda,
                     f"{b} + bi * Kt * Nt", ldb, c_literal(0.0, cdt), f"{c} + bi * Mt * Nt", "Nt",
                     threads="inner ? rt->threads : 1")
    # small products run on the pool across the batch (whenever there are two), large ones use the
    # GEMM's own threads
    head = [lines[0], "const int inner = Mt * Nt * Kt >= 65536 || Bt == 1;", "(void)inner;"]
    lines += [*head[1:], "int bad_ = 0, *bad = &bad_;", "(void)bad;"]
    lines += par_for(ctx, "bi", "Bt", [f"    if ({call}) __atomic_store_n(bad, 1, __ATOMIC_RELAXED);"],
                     work="inner ? 1 : Bt", grain=1, head=head,
                     captures=[(f"{ct} *", b) for b, _ in bufs] + [("int *", "bad")])
    if not out_direct:  # scatter [batch, M, N] to the output's label order
        labels = batch + m + n
        body = [f"out0[o_{len(labels)}] = {half.store(dt, f'pc[g_{len(labels)}]')};"]
        ptrs = [("o", _contiguous(list(spec.output), size)), ("g", _contiguous(labels, size))]
        lines += ["{", "const int64_t o_0 = 0, g_0 = 0;", *_nest(labels, size, ptrs, body), "}"]
    lines += [f"free({b});" for b, _ in bufs]
    lines.append("if (bad_) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory in Einsum\");")
    return lines


@kernel("Einsum", types=EINSUM_TYPES, accepts=_accepts)
def einsum(ctx: KernelCtx) -> str:
    spec = einsum_spec(ctx.node)
    half.use(ctx)
    labels = list(dict.fromkeys([lab for t in spec.terms for lab in t] + list(spec.output)))
    size = {lab: ctx.dim(spec.dims[lab]) for lab in labels}
    st = _Strides(ctx, spec, size)
    lines = list(st.checks)
    plan = _gemm_plan(ctx, spec)
    lines += _gemm(ctx, spec, size, st, plan) if plan else _loop_nest(ctx, spec, size, st)
    lines.append("return 0;")
    return "\n".join(lines)

