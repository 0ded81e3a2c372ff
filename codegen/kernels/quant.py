"""QuantizeLinear and DequantizeLinear kernels (every opset, per-tensor / per-axis / blocked).

x is viewed as [O, A, I] around the quantization axis: per-tensor nodes run one flat loop with the
scale and zero point hoisted, per-axis nodes hoist them per row of A, blocked nodes read them per
element from the row of the scale tensor for block ``a / block_size``. The arithmetic (precision,
rounding half to even, saturation, NaN) is the numpy twin's in passes/shapes/quant_np.py; the
scalar helpers are in runtime_c/onnxc_quant.h. float8 / float4 elements convert with
runtime_c/onnxc_lowp.h; nodes that need them are unsupported while that header is absent.
"""

from __future__ import annotations

from onnxc.codegen.compiler import runtime_dir
from onnxc.ir import DType, Node
from onnxc.passes.shapes.quant_layout import (
    DEQUANT_INPUTS,
    INT_RANGES,
    QUANT_TYPES,
    QLayout,
    dequantize_output_type,
    division_type,
    quant_layout,
    quantize_output_type,
)

from ..cexpr import c_product
from .base import KernelCtx, Operand, kernel
from .parfor import par_for

LOWP = {DType.FLOAT8E4M3FN: "f8e4m3fn", DType.FLOAT8E4M3FNUZ: "f8e4m3fnuz", DType.FLOAT8E5M2: "f8e5m2",
        DType.FLOAT8E5M2FNUZ: "f8e5m2fnuz", DType.FLOAT4E2M1: "f4e2m1", DType.FLOAT8E8M0: "f8e8m0"}


def lowp_available() -> bool:
    """Whether the float8/float4 conversion header ships with this build."""
    return (runtime_dir() / "onnxc_lowp.h").exists()


def use(ctx: KernelCtx, types: list[DType | None]) -> None:
    """Include the quantization helpers (and the float8/float4 conversions when ``types`` need them)."""
    ctx.include("onnxc_quant.h")
    if any(t in LOWP for t in types):
        ctx.include("onnxc_lowp.h")


def load(dt: DType, expr: str, ct: str = "float") -> str:
    """C expression: the value of stored element ``expr`` of type ``dt`` as C type ``ct``."""
    if dt == DType.FLOAT16:
        v = f"onnxc_h2f({expr})"
    elif dt == DType.BFLOAT16:
        v = f"onnxc_bf2f({expr})"
    elif dt in LOWP:
        v = f"onnxc_{LOWP[dt]}_to_float({expr})"
    else:
        return f"({ct})({expr})"
    return v if ct == "float" else f"({ct}){v}"


def lowp_reason(node: Node, types: list[DType | None]) -> str | None:
    bad = sorted({t.short for t in types if t in LOWP})
    if bad and not lowp_available():
        return f"{', '.join(bad)} elements need runtime_c/onnxc_lowp.h, which is not available yet"
    return None


def _types(node: Node) -> list[DType | None]:
    return [None if v is None else getattr(v.type, "dtype", None) for v in list(node.inputs) + node.outputs]


def _accepts(node: Node) -> str | None:
    return lowp_reason(node, _types(node))


_BLOCK = 1 << 14  # elements of one block of the flat (per-tensor) loop on the pool
# QuantizeLinear's element in par_for work units (an elementwise add's element is 1): a division, a rounding and a
# clamp, about 0.26 ns per element on one core (with 1, BERT's 128 x 1024 activations ran on one thread at 2: 34 us)
_QUANT_WORK = 8


# -- the loop nest ----------------------------------------------------------------------------------

def _checks(ctx: KernelCtx, lay: QLayout) -> list[str]:
    """Run-time checks that symbolic scale / zero-point dims fit x (static ones were checked already)."""
    x, s, z = ctx.ins[0], ctx.ins[1], ctx.ins[2] if len(ctx.ins) > 2 else None
    pairs: list[tuple[str, str]] = []
    if lay.kind == "axis":
        pairs.append((s.dims[0], x.dims[lay.axis]))
    elif lay.kind == "block":
        for k, (xd, sd) in enumerate(zip(x.dims, s.dims)):
            if k == lay.axis:
                xd = str(-(-int(xd) // lay.block)) if xd.isdigit() else f"(({xd}) + {lay.block - 1}) / {lay.block}"
            pairs.append((sd, xd))
    if z is not None:
        pairs += list(zip(z.dims, s.dims))
    conds = [f"({a}) != ({b})" for a, b in pairs if a != b and not (a.isdigit() and b.isdigit())]
    if not conds:
        return []
    name = ctx.who
    return [f"if ({' || '.join(conds)})",
            f"    return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: scale/zero point shape does not match x "
            f"(quantization axis {lay.axis})\", {name});"]


def _nest(ctx: KernelCtx, lay: QLayout, params: list[str], elem: str, cost: int = 1) -> str:
    """The loops writing ``out0[...] = elem`` where ``elem`` reads ``xv`` (x element) and the names
    declared by ``params`` (C declarations reading ``S(idx)`` / ``Z(idx)`` placeholders); ``cost``: an
    element's work for par_for."""
    x = ctx.ins[0]
    has_z = len(ctx.ins) > 2 and ctx.ins[2] is not None

    def decl(idx: str) -> str:
        out = []
        for p in params:
            if "Z(" in p and not has_z:
                continue
            out.append(p.replace("S(idx)", f"in1[{idx}]").replace("Z(idx)", f"in2[{idx}]"))
        return " ".join(out)

    body = f"out0[e] = {elem.replace('xv', 'in0[e]')};"
    lines = _checks(ctx, lay)
    # on the runtime's pool: blocks of the flat loop, or rows along the quantization axis
    if lay.kind == "tensor":
        head = [f"const int64_t n = {x.numel()};", decl("0")]
        loop = [f"const int64_t el = b_ * {_BLOCK}, eh = el + {_BLOCK} < n ? el + {_BLOCK} : n;",
                "for (int64_t e = el; e < eh; e++) " + body]
        lines += head + par_for(ctx, "b_", f"(n + {_BLOCK - 1}) / {_BLOCK}", loop, work=f"n * {cost}", head=head)
        return "\n".join(lines + ["return 0;"])
    dims = x.dims
    outer, mid, inner = c_product(dims[:lay.axis]), dims[lay.axis], c_product(dims[lay.axis + 1:])
    head = [f"const int64_t O = {outer}, A = {mid}, I = {inner};", "(void)O;"]
    loop = ["    const int64_t a = oa % A, base = oa * I;"]
    if lay.kind == "axis":
        loop += ["    " + decl("a"), "    for (int64_t i = 0, e = base; i < I; i++, e++) " + body]
    else:
        s = ctx.ins[1]
        loop += [f"    const int64_t srow = ((oa / A) * ({s.dims[lay.axis]}) + a / {lay.block}) * I;",
                 "    for (int64_t i = 0, e = base; i < I; i++, e++) {",
                 "        " + decl("srow + i"), "        " + body, "    }"]
    lines += head + par_for(ctx, "oa", "O * A", loop, work=f"O * A * I * {cost}", head=head)
    return "\n".join(lines + ["return 0;"])


# -- QuantizeLinear -----------------------------------------------------------------------------------

@kernel("QuantizeLinear", types=QUANT_TYPES, typed="out0", accepts=_accepts)  # the quantized type
def quantize_linear(ctx: KernelCtx) -> str:
    node = ctx.node
    x, s = ctx.ins[0], ctx.ins[1]
    z: Operand | None = ctx.ins[2] if len(ctx.ins) > 2 else None
    out, prec, lay = quantize_output_type(node), division_type(node), quant_layout(node)
    use(ctx, [x.dtype, s.dtype, out])
    ct = "double" if prec == DType.DOUBLE else "float"
    rnd = {DType.FLOAT16: "onnxc_round_h", DType.BFLOAT16: "onnxc_round_bf"}.get(prec)
    sv = load(s.dtype, "S(idx)", ct)
    xv = load(x.dtype, "xv", ct)
    if rnd and s.dtype != prec:
        sv = f"{rnd}({sv})"
    if rnd and x.dtype != prec:
        xv = f"{rnd}({xv})"
    q = f"{rnd}({xv} / s_)" if rnd else f"({xv} / s_)"
    params = [f"const {ct} s_ = {sv};"]
    if out in INT_RANGES and not rnd:
        # |x| < s / 2 rounds to 0: divide 0 instead, or a quotient below the normal range (an activation whose
        # range reaches -FLT_MAX, as masked attention scores do, has a scale near 1e36) takes the divider's slow
        # subnormal path, 5x the loop's time
        params.append(f"const {ct} h_ = s_ * 0.5{'f' if ct == 'float' else ''};")
        q = f"((fabs{'f' if ct == 'float' else ''}({xv}) < h_ ? 0 : {xv}) / s_)"
    if out in INT_RANGES:
        lo, hi = INT_RANGES[out]
        f = "f" if ct == "float" else ""
        if z is not None:
            params.append(f"const {ct} z_ = ({ct})Z(idx);")
        r = f"rint{f}({q})" + (" + z_" if z is not None else "")
        elem = f"({out.c})onnxc_qclamp{f}({r}, {lo}.0{f}, {hi}.0{f})"
    else:
        sat = int(bool(node.attr("saturate", 1))) if out != DType.FLOAT4E2M1 else 1
        v = q
        if z is not None:
            params.append(f"const {ct} z_ = {load(out, 'Z(idx)', ct)};")
            # float4 always adds the zero point (-0 + 0 = +0) like the reference; float8 only a nonzero one
            v = f"({q} + z_)" if out == DType.FLOAT4E2M1 else f"(z_ != 0 ? {q} + z_ : {q})"
        elem = f"onnxc_{ct}_to_{LOWP[out]}({v}, {sat})"
    return _nest(ctx, lay, params, elem, _QUANT_WORK)


# -- DequantizeLinear ---------------------------------------------------------------------------------

@kernel("DequantizeLinear", types=DEQUANT_INPUTS, accepts=_accepts)
def dequantize_linear(ctx: KernelCtx) -> str:
    node = ctx.node
    x, s = ctx.ins[0], ctx.ins[1]
    z: Operand | None = ctx.ins[2] if len(ctx.ins) > 2 else None
    out, lay = dequantize_output_type(node), quant_layout(node)
    use(ctx, [x.dtype, s.dtype, out])
    # int32 minus an int32 zero point is computed in double, like the reference's numpy promotion
    ct = "double" if x.dtype == DType.INT32 and z is not None else "float"
    dx = f"({ct}){load(x.dtype, 'xv')}"
    params = [f"const {ct} s_ = {load(s.dtype, 'S(idx)', ct)};"]
    if z is not None:
        params.append(f"const {ct} z_ = {load(x.dtype, 'Z(idx)', ct)};")
        dx = f"({dx} - z_)"
    y = f"{dx} * s_"
    if out == DType.FLOAT16:
        elem = f"onnxc_{'d2h' if ct == 'double' else 'f2h'}({y})"
    elif out == DType.BFLOAT16:
        elem = f"onnxc_f2bf((float)({y}))"
    else:
        elem = f"(float)({y})"
    return _nest(ctx, lay, params, elem)
