"""Building blocks of shape functions: C that reads shape-like inputs and binds run-time dims.

A shape function (see base.py) computes the output dims a node's input *data* determines. These
helpers write its common parts: reading an int tensor into a local array, and assigning computed
dims to the output — ``D[k] = v`` for each run-time dimension variable the node defines, and a
run-time equality check for a dim the shape rule could still decide at compile time (so a wrong
assumption becomes an error naming the node, never a buffer overrun).
"""

from __future__ import annotations

from .base import KernelCtx


def include(ctx: KernelCtx) -> None:
    """The shape helpers (runtime_c/onnxc_shape.h)."""
    ctx.include("onnxc_shape.h")


def who(ctx: KernelCtx) -> str:
    """C string literal naming the node, for error messages."""
    return ctx.who


def check(call: str) -> str:
    """Run a C helper returning an onnxc status; return it from the shape function when it fails."""
    return f"{{ const int s_ = {call}; if (s_) return s_; }}"


def read_ints(ctx: KernelCtx, i: int, n: int, var: str) -> str:
    """Declare ``int64_t var[n]`` holding the first ``n`` elements of input ``i`` (any numeric type)."""
    return (f"int64_t {var}[{max(n, 1)}] = {{0}};\n"
            f"for (int j_ = 0; j_ < {n}; j_++) {var}[j_] = (int64_t)in{i}[j_];")


def c_array(var: str, items: list[str]) -> str:
    """Declare ``const int64_t var[]`` = items (at least one element, for rank 0)."""
    return f"const int64_t {var}[{max(len(items), 1)}] = {{{', '.join(items) or '0'}}};"


def bind(ctx: KernelCtx, out: int, values: list[str]) -> str:
    """Assign output ``out``'s dims from C expressions ``values`` (one per axis)."""
    y = ctx.outs[out]
    lines = []
    for a, (d, v) in enumerate(zip(y.shape, values)):
        lv = ctx.lvalue(d)
        if lv is not None:
            lines.append(f"{lv} = {v};")
        elif v != y.dims[a]:
            lines.append(f"if (({v}) != ({y.dims[a]})) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: output "
                         f"{out} axis {a} has %lld elements at run time, expected %lld\", {who(ctx)}, "
                         f"(long long)({v}), (long long)({y.dims[a]}));")
    return "\n".join(lines)


def bind_array(ctx: KernelCtx, out: int, var: str) -> str:
    """Assign output ``out``'s dims from the C array ``var``."""
    return bind(ctx, out, [f"{var}[{a}]" for a in range(ctx.outs[out].rank)])


def assign(ctx: KernelCtx, d, value: str) -> str:
    """``D[k] = value;`` for a run-time variable (an output dim or an auxiliary one) of this node."""
    lv = ctx.lvalue(d)
    if lv is None:
        raise ValueError(f"{d} is not a run-time variable of this node")
    return f"{lv} = {value};"


def in_dims(ctx: KernelCtx, i: int, var: str) -> str:
    """Declare ``const int64_t var[]`` holding input ``i``'s dims."""
    return c_array(var, list(ctx.ins[i].dims))
