"""Elementwise ops: one table row per op, a C expression over the input elements per type class.

A row gives an expression for floats (``f``: float, double), signed (``s``) and unsigned (``u``)
integers and bool (``b``); ``i`` sets both integer classes, ``all`` every class. A dtype whose class
has no expression is rejected. Placeholders: ``{0}``, ``{1}``... input elements; ``{T}`` the C type
and ``{t}`` the short type name of the typed input (helpers are named ``onnxc_div_int32``...);
``{f}`` the libm suffix (``sqrtf`` for float, ``sqrt`` for double); attribute names render the
attribute as a C literal (float attributes in the float type, or double for integer inputs).
exp, log, tanh, sigmoid and erf go through ``onnxc_vm_<fn>_<type>`` (runtime_c/onnxc_vmath.h), softplus,
expm1, floor and ceil through ``onnxc_<fn>_<type>`` helpers; their float versions are branch-free, so
the loops vectorize.

float16 and bfloat16 use the float expressions in float32: inputs are loaded and the result stored
through codegen/kernels/half.py (``half.wrap``).

Integer semantics that C leaves undefined are defined by the helpers of runtime_c/onnxc_elementwise.h
(wrapping arithmetic, x / 0 -> 0, saturating float -> int); the fold rules' numpy twins in
passes/shapes/elementwise_np.py compute the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.cast import half_to_float
from onnxc.passes.shapes.elementwise import check_enum_attr, legacy_b_shape, prelu_slope_shape
from onnxc.passes.shapes.elementwise_np import SELU, SELU_V1

from ..cexpr import c_literal
from . import half
from .base import KernelCtx, Operand, kernel
from .loops import broadcast_loop


@dataclass(frozen=True)
class Ew:
    """One op: an expression per type class and the defaults of the attributes it uses."""

    exprs: dict[str, str]
    attrs: dict = field(default_factory=dict)
    typed_input: int = 0  # the input whose dtype picks the expression (Where: X)


def ew(f: str | None = None, i: str | None = None, s: str | None = None, u: str | None = None,
       b: str | None = None, all: str | None = None, typed_input: int = 0, **attrs) -> Ew:
    """A table row; the output type comes from the shape rule (bool for comparisons)."""
    exprs = {"f": f or all, "s": s or i or all, "u": u or i or all, "b": b or all}
    return Ew({k: v for k, v in exprs.items() if v}, attrs, typed_input)


UNARY: dict[str, Ew] = {
    "Abs": ew(f="fabs{f}({0})", i="onnxc_abs_{t}({0})"),
    "Neg": ew(f="(-{0})", s="onnxc_neg_{t}({0})"),
    "Exp": ew(f="onnxc_vm_exp_{t}({0})"),
    "Log": ew(f="onnxc_vm_log_{t}({0})"),
    "Sqrt": ew(f="sqrt{f}({0})"),
    "Reciprocal": ew(f="(1 / {0})"),
    "Floor": ew(f="onnxc_floor_{t}({0})"),
    "Ceil": ew(f="onnxc_ceil_{t}({0})"),
    "Round": ew(f="nearbyint{f}({0})"),  # half to even under the default rounding mode
    "Sign": ew(f="({0} > 0 ? 1 : {0} < 0 ? -1 : {0})", s="({T})(({0} > 0) - ({0} < 0))", u="({T})({0} > 0)"),
    "Sigmoid": ew(f="onnxc_vm_sigmoid_{t}({0})"),
    "HardSigmoid": ew(f="ONNXC_CLAMP01({alpha} * {0} + {beta})", alpha=0.2, beta=0.5),
    "Tanh": ew(f="onnxc_vm_tanh_{t}({0})"),
    "Relu": ew(f="({0} < 0 ? 0 : {0})", s="({0} < 0 ? 0 : {0})"),
    "LeakyRelu": ew(f="({0} > 0 ? {0} : {0} * {alpha})", alpha=0.01),
    "Elu": ew(f="({0} < 0 ? {alpha} * onnxc_expm1_{t}({0}) : {0})", alpha=1.0),
    "Selu": ew(f="({0} > 0 ? {gamma} * {0} : {gamma} * {alpha} * onnxc_expm1_{t}({0}))", **SELU),
    "Celu": ew(f="({0} > 0 ? {0} : {alpha} * onnxc_expm1_{t}({0} / {alpha}))", alpha=1.0),
    "ThresholdedRelu": ew(f="({0} > {alpha} ? {0} : 0)", alpha=1.0),
    "Softplus": ew(f="onnxc_softplus_{t}({0})"),
    "Softsign": ew(f="({0} / (1 + fabs{f}({0})))"),
    "HardSwish": ew(f="({0} * ONNXC_CLAMP01({0} * ({T})(1.0 / 6) + ({T})0.5))"),
    "Mish": ew(f="({0} * onnxc_vm_tanh_{t}(onnxc_softplus_{t}({0})))"),
    "Swish": ew(f="({0} * onnxc_vm_sigmoid_{t}({alpha} * {0}))", alpha=1.0),
    "Gelu": ew(f="(({T})0.5 * {0} * (1 + onnxc_vm_erf_{t}({0} * ({T})0.70710678118654752440)))"),
    "Gelu:tanh": ew(f="(({T})0.5 * {0} * (1 + onnxc_vm_tanh_{t}(({T})0.79788456080286535588 * "
                      "({0} + ({T})0.044715 * {0} * {0} * {0}))))"),
    "Erf": ew(f="onnxc_vm_erf_{t}({0})"),
    "Sin": ew(f="sin{f}({0})"), "Cos": ew(f="cos{f}({0})"), "Tan": ew(f="tan{f}({0})"),
    "Asin": ew(f="asin{f}({0})"), "Acos": ew(f="acos{f}({0})"), "Atan": ew(f="atan{f}({0})"),
    "Sinh": ew(f="sinh{f}({0})"), "Cosh": ew(f="cosh{f}({0})"), "Asinh": ew(f="asinh{f}({0})"),
    "Acosh": ew(f="acosh{f}({0})"), "Atanh": ew(f="atanh{f}({0})"),
    "IsNaN": ew(f="isnan({0})"),
    "IsInf": ew(f="(({0} == INFINITY && {detect_positive}) || ({0} == -INFINITY && {detect_negative}))",
                detect_positive=1, detect_negative=1),
    "Not": ew(b="(!{0})"),
    "BitwiseNot": ew(i="({T})~{0}"),
    "Shrink": ew(f="({0} < -{lambd} ? {0} + {bias} : {0} > {lambd} ? {0} - {bias} : 0)",
                 i="onnxc_from_double_{t}({0} < -{lambd} ? {0} + {bias} : {0} > {lambd} ? {0} - {bias} : 0)",
                 lambd=0.5, bias=0.0),
}

BINARY: dict[str, Ew] = {
    "Add": ew(f="({0} + {1})", i="onnxc_add_{t}({0}, {1})"),
    "Sub": ew(f="({0} - {1})", i="onnxc_sub_{t}({0}, {1})"),
    "Mul": ew(f="({0} * {1})", i="onnxc_mul_{t}({0}, {1})"),
    "Div": ew(f="({0} / {1})", i="onnxc_div_{t}({0}, {1})"),
    "Mod": ew(f="onnxc_mod_{t}({0}, {1})", i="onnxc_mod_{t}({0}, {1})"),
    "Mod:fmod": ew(f="fmod{f}({0}, {1})", i="onnxc_fmod_{t}({0}, {1})"),
    "BitShift:LEFT": ew(i="onnxc_shl_{t}({0}, {1})"),
    "BitShift:RIGHT": ew(i="onnxc_shr_{t}({0}, {1})"),
    "BitwiseAnd": ew(i="({T})({0} & {1})"),
    "BitwiseOr": ew(i="({T})({0} | {1})"),
    "BitwiseXor": ew(i="({T})({0} ^ {1})"),
    "And": ew(b="({0} && {1})"),
    "Or": ew(b="({0} || {1})"),
    "Xor": ew(b="({0} != {1})"),
    "Equal": ew(all="({0} == {1})"),
    "Less": ew(f="({0} < {1})", i="({0} < {1})"),
    "Greater": ew(f="({0} > {1})", i="({0} > {1})"),
    "LessOrEqual": ew(f="({0} <= {1})", i="({0} <= {1})"),
    "GreaterOrEqual": ew(f="({0} >= {1})", i="({0} >= {1})"),
    "PRelu": ew(f="({0} > 0 ? {0} : {0} * {1})", s="({0} > 0 ? {0} : onnxc_mul_{t}({0}, {1}))", u="{0}"),
    "Where": ew(all="({0} ? {1} : {2})", typed_input=1),
}

# variadic ops: how two partial results combine, and the final step (Mean divides)
VARIADIC: dict[str, Ew] = {
    "Max": ew(f="onnxc_max_{t}({0}, {1})", i="onnxc_max_{t}({0}, {1})"),
    "Min": ew(f="onnxc_min_{t}({0}, {1})", i="onnxc_min_{t}({0}, {1})"),
    "Sum": ew(f="({0} + {1})", i="onnxc_add_{t}({0}, {1})"),
    "Mean": ew(f="({0} + {1})"),
}

TYPE_CLASS = {DType.FLOAT: "f", DType.DOUBLE: "f", DType.BOOL: "b", DType.INT8: "s", DType.INT16: "s",
              DType.INT32: "s", DType.INT64: "s", DType.UINT8: "u", DType.UINT16: "u", DType.UINT32: "u",
              DType.UINT64: "u", DType.FLOAT16: "f", DType.BFLOAT16: "f"}


def row_key(node: Node) -> str:
    """The table row of ``node``: the op type, or op:variant when an attribute picks the semantics."""
    op = node.op_type
    if op == "Gelu" and node.attr("approximate", "none") == "tanh":
        return "Gelu:tanh"
    if op == "Mod" and node.attr("fmod", 0):
        return "Mod:fmod"
    if op == "BitShift":
        return f"BitShift:{node.attr('direction')}"
    return op


def attr_type(dt: DType, is_int: bool) -> DType:
    """The type a scalar of a formula is written in: int64 for integers, else ``dt`` when it is float or
    double, double otherwise."""
    if is_int:
        return DType.INT64
    return dt if dt in (DType.FLOAT, DType.DOUBLE) else DType.DOUBLE


def _row(node: Node) -> Ew | None:
    key = row_key(node)
    return UNARY.get(key) or BINARY.get(key) or VARIADIC.get(key)


def _typed(node: Node, row: Ew) -> DType | None:
    v = node.input(row.typed_input)
    return None if v is None else v.dtype


def unsupported(node: Node) -> str | None:
    """Why the elementwise kernel cannot lower ``node`` beyond its element type (types= checks that):
    an invalid enum attribute, a variant without a table row, or a variant without an expression for
    the type's class (None when it can, or types are not known yet)."""
    try:
        check_enum_attr(node)
    except ShapeError as e:
        return str(e)
    row = _row(node)
    if row is None:
        return f"{node.op_type} variant {row_key(node)!r} is not supported"
    dt = _typed(node, row)
    cls = TYPE_CLASS.get(dt) if dt is not None else None
    if cls is not None and cls not in row.exprs:
        return f"{row_key(node)} on {dt.short} tensors is not supported"
    return None


def row_types(*rows: Ew) -> frozenset:
    """The element types for which one of ``rows`` has an expression (its ``types=``)."""
    return frozenset(t for t, cls in TYPE_CLASS.items() if any(cls in r.exprs for r in rows))


def expression(ctx: KernelCtx, row: Ew, dt: DType) -> str:
    """The row's C expression for dtype ``dt`` with attributes and type names filled in."""
    reason = unsupported(ctx.node)
    if reason:
        raise NotImplementedError(reason)
    defaults = row.attrs
    if ctx.node.op_type == "Selu" and ctx.node.version < 6:
        defaults = SELU_V1
    cls = TYPE_CLASS[dt]
    dt = half.compute_type(dt)
    vals = {k: c_literal(ctx.attr(k, v), attr_type(dt, isinstance(v, int))) for k, v in defaults.items()}
    names = {"T": dt.c, "t": dt.short, "f": "f" if dt == DType.FLOAT else ""}
    n = max(len(ctx.ins), 3)
    return row.exprs[cls].format(*[f"{{{i}}}" for i in range(n)], **vals, **names)


def node_name(ctx: KernelCtx) -> str:
    """The node's description as a C string literal, for run-time error messages."""
    return ctx.who


def reshaped(op: Operand, shape: tuple, dim_c) -> Operand:
    """A view of ``op`` with another shape of the same size (legacy broadcast, scalars)."""
    return replace(op, shape=tuple(shape), dims=[dim_c(d) for d in shape])


def loop(ctx: KernelCtx, ins: list[Operand], expr: str, simd: str = "#pragma omp simd") -> str:
    """The broadcasting loop of the node's output over ``ins``, with the helper header included (``simd``:
    the line before the inner loop)."""
    ctx.include("onnxc_elementwise.h")
    ctx.include("onnxc_vmath.h")
    if any(op.dtype in half.HALF for op in ins + ctx.outs):
        half.use(ctx)
    return broadcast_loop(ctx.outs[0], ins, expr, name=node_name(ctx), ctx=ctx, simd=simd)


def elementwise(ctx: KernelCtx) -> str:
    node = ctx.node
    row = _row(node)
    dt = _typed(node, row)
    expr = expression(ctx, row, dt)
    ins = list(ctx.ins)
    if len(ins) == 2 and node.version < 7:
        ins[1] = reshaped(ins[1], legacy_b_shape(node, ins[0].shape, ins[1].shape), ctx.dim)
    if node.op_type == "PRelu":
        ins[1] = reshaped(ins[1], prelu_slope_shape(node, ins[0].shape, ins[1].shape), ctx.dim)
    if node.op_type in VARIADIC:
        acc = "{0}"
        for k in range(1, len(ins)):
            acc = expr.replace("{1}", f"{{{k}}}").replace("{0}", acc, 1)
        if node.op_type == "Mean":
            acc = f"({acc} / ({half.compute_type(dt).c}){len(ins)})"
        expr = acc
    return loop(ctx, ins, half.wrap(expr, [op.dtype for op in ins], ctx.outs[0].dtype))


def _register_table() -> None:
    """One kernel per op of the tables, typed by the classes its rows (all variants) have expressions for."""
    rows: dict[str, list[Ew]] = {}
    for key, row in [*UNARY.items(), *BINARY.items(), *VARIADIC.items()]:
        rows.setdefault(key.split(":")[0], []).append(row)
    for op, rs in rows.items():
        kernel(op, accepts=unsupported, types=row_types(*rs), typed=f"in{rs[0].typed_input}")(elementwise)


_register_table()


def pow_expr(base: DType, exp: DType) -> str:
    """C expression of Pow for a base and exponent of any numeric types (numpy.power, cast to base)."""
    if base.is_float:
        if exp == base:
            return f"pow{'f' if base == DType.FLOAT else ''}({{0}}, {{1}})"
        return f"({base.c})pow((double){{0}}, (double){{1}})"
    if exp.is_float:
        return f"onnxc_from_double_{base.short}(pow((double){{0}}, (double){{1}}))"
    e = "onnxc_pow_exp_u64({1})" if exp == DType.UINT64 else "(int64_t){1}"
    return f"({base.c})onnxc_ipow((int64_t){{0}}, {e})"


def _pow_unsupported(node: Node) -> str | None:
    """The exponent's type (the base's is declared with types=)."""
    v = node.input(1)
    if v is not None and v.dtype is not None and v.dtype not in row_types(BINARY["Add"]):
        return f"Pow with a {v.dtype.short} exponent is not supported" + ("" if v.dtype == DType.BOOL else " yet")
    return None


@kernel("Pow", accepts=_pow_unsupported, types=row_types(BINARY["Add"]))
def power(ctx: KernelCtx) -> str:
    x, y = ctx.ins
    if ctx.node.version < 7:
        y = reshaped(y, legacy_b_shape(ctx.node, x.shape, y.shape), ctx.dim)
    e = float(half_to_float(y.const, y.dtype).reshape(-1)[0]) if y.const is not None and y.const.size == 1 else None
    if e in (1.0, 2.0, 3.0) and y.rank <= x.rank and all(d == 1 for d in y.shape):
        mul = "({0} * {1})" if x.dtype.is_float else f"onnxc_mul_{x.dtype.short}({{0}}, {{1}})"
        expr = {1.0: "{0}", 2.0: mul.format("{0}", "{0}")}.get(e) or mul.format(mul.format("{0}", "{0}"), "{0}")
        return loop(ctx, [x], half.wrap(expr, [x.dtype], x.dtype))  # exact: x * x is what pow(x, 2) rounds to
    expr = pow_expr(half.compute_type(x.dtype), half.compute_type(y.dtype))
    return loop(ctx, [x, y], half.wrap(expr, [x.dtype, y.dtype], x.dtype))


@kernel("Clip", types=row_types(BINARY["Add"]))
def clip(ctx: KernelCtx) -> str:
    """Clip to [min, max]; an absent bound does not clip. min > max gives max (numpy.clip)."""
    x = ctx.ins[0]
    dt = half.compute_type(x.dtype)
    ins, bounds = [x], []
    for i, name in ((1, "min"), (2, "max")):
        if ctx.node.version < 11:
            v = ctx.attr(name)
            bounds.append(None if v is None else c_literal(v, attr_type(dt, False)))
            continue
        op = ctx.ins[i] if i < len(ctx.ins) else None
        if op is None:
            bounds.append(None)
        elif op.const is not None:
            v = half_to_float(op.const, op.dtype).reshape(-1)[0]
            bounds.append(c_literal(v.item(), dt))
        else:
            bounds.append(f"{{{len(ins)}}}")
            ins.append(reshaped(op, (), ctx.dim))
    expr = "{0}"
    if bounds[0] is not None:
        expr = f"({expr} < {bounds[0]} ? {bounds[0]} : {expr})"
    if bounds[1] is not None:
        expr = f"({expr} > {bounds[1]} ? {bounds[1]} : {expr})"
    return loop(ctx, ins, half.wrap(expr, [op.dtype for op in ins], x.dtype))
