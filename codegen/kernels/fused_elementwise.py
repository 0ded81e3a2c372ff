"""The kernel of onnxc::ElementwiseChain: one broadcasting loop evaluating an expression tree per element.

The tree (passes/shapes/fused.py) renders through the C expression table of the elementwise kernels
(codegen/kernels/elementwise.py), so each op computes exactly what its own kernel computes, minus the
store and reload of the intermediate tensor. Each op's result becomes a ``const`` local of a GNU C
statement expression, in evaluation order, and equal subtrees (a value the chain reads several times,
GELU's x) are computed once, so the text stays linear in the number of distinct ops. The loop itself is
``broadcast_loop`` (codegen/kernels/loops.py): contiguous, vectorized, broadcast leaves hoisted; its
inner-loop pragma becomes ``ONNXC_VM_SIMD`` (runtime_c/onnxc_vmath.h: 16 lanes on AVX-512).
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.fused import BOOL_OPS, DOMAIN, OP, In, Lit, Op

from ..cexpr import c_literal
from . import elementwise as ew
from .base import KernelCtx, kernel

# row keys of ops whose attribute selects another formula
_VARIANTS = {"Gelu": lambda e: "Gelu:tanh" if e.attr("approximate", "none") == "tanh" else "Gelu",
             "Mod": lambda e: "Mod:fmod" if e.attr("fmod", 0) else "Mod"}


def _accepts(node: Node) -> str | None:
    dt = node.attr("dtype")
    if dt is None or DType(int(dt)) not in (DType.FLOAT, DType.DOUBLE):
        return f"fused elementwise chains compute in float or double, not {dt!r}"
    return None


class _Renderer:
    """Emits one ``const`` local per op; leaves are ``{k}`` placeholders (broadcast_loop fills them)."""

    def __init__(self, dt: DType):
        self.dt = dt
        self.names = {"T": dt.c, "t": dt.short, "f": "f" if dt == DType.FLOAT else ""}
        self.lines: list[str] = []
        self.done: dict[Op, str] = {}  # equal subtrees (values read several times) are computed once

    def value(self, e) -> str:
        if isinstance(e, In):
            return f"{{{e.k}}}"
        if isinstance(e, Lit):
            return c_literal(e.value, ew.attr_type(self.dt, isinstance(e.value, int)))
        if e in self.done:
            return self.done[e]
        args = [self.value(a) for a in e.args]
        code = self.op(e, args)
        name = f"t{len(self.lines)}"
        ctype = "int" if e.op in BOOL_OPS else self.dt.c
        self.lines.append(f"const {ctype} {name} = {code};")
        self.done[e] = name
        return name

    def op(self, e: Op, args: list[str]) -> str:
        dt = self.dt
        if e.op == "Clip":
            x = args[0]
            for bound, cmp in (("min", "<"), ("max", ">")):
                v = e.attr(bound)
                if v is not None:
                    lit = c_literal(v, dt)
                    x = f"({x} {cmp} {lit} ? {lit} : {x})"
            return x
        if e.op == "Pow":
            y = e.args[1]
            if isinstance(y, Lit) and y.value in (1.0, 2.0, 3.0) and not y.shape:
                return {1.0: args[0], 2.0: f"({args[0]} * {args[0]})",
                        3.0: f"({args[0]} * {args[0]} * {args[0]})"}[y.value]
            return ew.pow_expr(dt, dt).format(*args)
        key = _VARIANTS.get(e.op, lambda _: e.op)(e)
        row = ew.UNARY.get(key) or ew.BINARY.get(key) or ew.VARIADIC.get(key)
        if row is None or "f" not in row.exprs:
            raise NotImplementedError(f"{key} has no float formula to fuse")
        vals = {k: c_literal(e.attr(k, d), ew.attr_type(dt, isinstance(d, int))) for k, d in row.attrs.items()}
        tmpl = row.exprs["f"]
        if e.op in ew.VARIADIC:
            acc = args[0]
            for a in args[1:]:
                acc = tmpl.format(acc, a, **vals, **self.names)
            return f"({acc} / ({dt.c}){len(args)})" if e.op == "Mean" else acc
        return tmpl.format(*args, **vals, **self.names)


def render(expr, dt: DType) -> str:
    """The C expression of ``expr`` over the leaves ``{0}``, ``{1}``... (the statement expression's own
    braces doubled: broadcast_loop fills the leaves in with ``str.format``)."""
    r = _Renderer(dt)
    root = r.value(expr)
    if not r.lines:
        return root
    return f"({{{{ {' '.join(r.lines)} {root}; }}}})"


# the output's type: the chain's compute type (attribute dtype, checked by _accepts), or bool after a comparison
@kernel(OP, domain=DOMAIN, types={DType.FLOAT, DType.DOUBLE, DType.BOOL}, typed="out0", accepts=_accepts)
def elementwise_chain(ctx: KernelCtx) -> str:
    dt = DType(int(ctx.attr("dtype")))
    return ew.loop(ctx, list(ctx.ins), render(ctx.attr("expr"), dt), simd="ONNXC_VM_SIMD")  # 512-bit vectors where available
