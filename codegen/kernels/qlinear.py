"""Integer matrix products and convolutions: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

Products are exact: operands minus their zero points are int16 (both are 8-bit), accumulated in
32 bits with wrap-around (the spec allows overflow only in the accumulation). The quantized ops then
requantize each accumulator like the ONNX reference: ``multiplier = a_scale * b_scale / y_scale`` in
the scales' type (float16/bfloat16 emulated, see runtime_c/onnxc_quant.h), then
``saturate(rint(acc * multiplier + y_zero_point))`` in double. The double product is exact while
|acc| < 2^29, so a fused multiply-add the C compiler may form gives the same result.
onnxc::ConvIntegerToFloat (passes/fuse_integer_dequant.py) is ConvInteger whose output loops write
``act(float(acc) * scale + bias)`` instead of int32, on the integer GEMM or the depthwise kernel.

Templates: templates/qmatmul.c.j2 (numpy-broadcast batches; per-row A and per-column B parameters)
and templates/qconv.c.j2 (im2col over chunks of output rows, the Conv geometry of spatial.py).
"""

from __future__ import annotations

import math

from onnxc.codegen.templating import render
from onnxc.ir import DType, Node, ShapeError
from onnxc.passes.shapes.dynamic_quant import CONV_TO_FLOAT
from onnxc.passes.shapes.quant import qconv_geometry
from onnxc.passes.shapes.quant_layout import BYTE_TYPES, INT_RANGES, matmul_param

from ..cexpr import c_literal, c_product
from .base import KernelCtx, Operand, kernel
from .epilogue import activation, use_act
from .nncommon import unsupported
from .parcall import par_call
from .qconv_fast import fast_qconv, fast_qdwconv, fast_qmatmul
from .quant import load, use

COL_BUDGET = 1 << 21  # elements of the im2col buffer (and of the accumulators) per chunk
DOT_MIN_K = 16  # convolutions with at least this many products per output use onnxc_qgemm_s16

_ROUND = {DType.FLOAT16: "onnxc_round_h", DType.BFLOAT16: "onnxc_round_bf"}


def _byte_operands(*idx: int):
    """``accepts=``: the operands at ``idx`` must be int8/uint8 (not float8, which QLinearMatMul-21
    also allows); ``types=`` declares input 0's."""

    def accepts(node: Node) -> str | None:
        for i in idx:
            v = node.input(i)
            dt = getattr(getattr(v, "type", None), "dtype", None)
            if dt is not None and dt not in BYTE_TYPES:
                return f"{node.op_type} on {dt.short} tensors is not supported (int8/uint8 only)"
        return None

    return accepts


def _param(op: Operand | None, index: str, cast: str = "(int32_t)") -> str:
    """C expression of a zero point element (0 when the input is absent)."""
    if op is None:
        return "0"
    return f"{cast}{op.ptr}[{index}]"


def _rounded(dt: DType, expr: str) -> str:
    return f"{_ROUND[dt]}({expr})" if dt in _ROUND else expr


def _check(cond: str, msg: str, name: str) -> str:
    return f"if ({cond}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {msg}\", {name});"


def _differ(a: str, b: str) -> bool:
    return a != b and not (a.isdigit() and b.isdigit())


# -- MatMulInteger / QLinearMatMul ----------------------------------------------------------------------

class _Batch:
    """Offsets of each tensor's current matrix (or parameter vector) over the output's batch axes."""

    def __init__(self, ctx: KernelCtx, odims: list[str], name: str):
        self.ctx, self.odims, self.name = ctx, odims, name
        self.strides: dict[str, list[str]] = {}
        self.checks: list[str] = []

    def add(self, key: str, dims: list[str], block: str) -> None:
        nb = len(self.odims)
        dims = list(dims)
        while len(dims) > nb and dims[0] == "1":
            dims.pop(0)
        if len(dims) > nb:
            raise unsupported(self.ctx, f"parameter batch dims {dims} exceed the output's {self.odims}")
        off, acc, strides = nb - len(dims), block, ["0"] * nb
        for ax in range(len(dims) - 1, -1, -1):
            d, o = dims[ax], self.odims[ax + off]
            strides[ax + off] = "0" if d == "1" else (acc if d == o else f"(({d}) == 1 ? 0 : {acc})")
            if _differ(d, o) and d != "1":
                self.checks.append(_check(f"({d}) != 1 && ({d}) != ({o})",
                                          f"batch dim {d} does not broadcast to {o}", self.name))
            acc = d if acc == "1" else f"({acc}) * ({d})"
        self.strides[key] = strides

    def lines(self) -> list[str]:
        out = []
        for ax in range(len(self.odims) - 1, -1, -1):
            d = self.odims[ax]
            adds = " ".join(f"o_{k} += i * {s[ax]};" for k, s in self.strides.items() if s[ax] != "0")
            out.append(f"i = r % ({d}); r /= ({d}); {adds}")
        return out


@kernel("MatMulInteger", types=BYTE_TYPES, accepts=_byte_operands(1))
def matmul_integer(ctx: KernelCtx) -> str:
    return _qmatmul(ctx, a=0, b=1, za=2, zb=3, quantized=False)


@kernel("QLinearMatMul", types=BYTE_TYPES, accepts=_byte_operands(3, 7))
def qlinear_matmul(ctx: KernelCtx) -> str:
    return _qmatmul(ctx, a=0, b=3, za=2, zb=5, quantized=True)


def _qmatmul(ctx: KernelCtx, a: int, b: int, za: int, zb: int, quantized: bool) -> str:
    node, name = ctx.node, ctx.who
    A, B, Y = ctx.ins[a], ctx.ins[b], ctx.outs[0]
    use(ctx, [])
    fast = fast_qmatmul(ctx, a, b, za, zb, quantized)
    if fast is not None:
        return fast

    def op(i: int) -> Operand | None:
        return ctx.ins[i] if i < len(ctx.ins) else None

    ad = ["1", A.dims[0]] if A.rank == 1 else list(A.dims)
    bd = [B.dims[0], "1"] if B.rank == 1 else list(B.dims)
    nb = max(len(ad), len(bd)) - 2
    odims = list(Y.dims[:nb])
    batch = _Batch(ctx, odims, name)
    batch.add("a", ad[:-2], "M * K")
    batch.add("b", bd[:-2], "K * N")
    checks: list[str] = []
    exprs: dict[int, str] = {}
    sides = {za: ("a", A), zb: ("b", B)}
    if quantized:
        sides |= {1: ("a", A), 4: ("b", B), 6: ("y", None), 7: ("y", None)}
    for i, (side, operand) in sides.items():
        p = op(i)
        if p is None:
            continue
        kind = matmul_param(node, i, side, operand.shape if operand is not None else ())
        key, var = f"p{i}", ("m" if side == "a" else "n")
        if kind == "tensor":
            exprs[i] = "0"
            continue
        want = "M" if side == "a" else "N"
        vec = p.dims[-2] if (p.rank >= 2 and side == "a") else p.dims[-1]
        if _differ(vec, ad[-2] if side == "a" else bd[-1]):
            checks.append(_check(f"({vec}) != {want}", f"parameter {p.value.name} does not match {want}", name))
        if p.rank >= 2:
            batch.add(key, p.dims[:-2], want)
            exprs[i] = f"o_{key} + {var}"
        else:
            exprs[i] = var
    vals = dict(M=ad[-2], N=bd[-1], K=ad[-1], NB=c_product(odims) if odims else "1", checks=checks + batch.checks,
                name=name, quantized=quantized, Ta=A.dtype.c, Tb=B.dtype.c, Ty=Y.dtype.c, b_ptr=B.ptr,
                offsets=[f"o_{k}" for k in batch.strides], batch_lines=batch.lines(),
                za=_param(op(za), exprs.get(za, "0")), zb=_param(op(zb), exprs.get(zb, "0")),
                b_keys=["o_b"] + [f"o_p{zb}"] * (f"p{zb}" in batch.strides),
                offset_caps=[("int64_t", f"o_{k}") for k in batch.strides], par=par_call(ctx),
                setup=[], row_setup=[], mult="", lo="0", hi="0")
    if quantized:
        vals.update(_requant_values(ctx, exprs))
    return render("qmatmul.c.j2", **vals)


def _requant_values(ctx: KernelCtx, exprs: dict[int, str]) -> dict:
    """Template values computing the multiplier a_scale * b_scale / y_scale and y's zero point."""
    sa, sb, sy, zy, y = ctx.ins[1], ctx.ins[4], ctx.ins[6], ctx.ins[7] if len(ctx.ins) > 7 else None, ctx.outs[0]
    ts = sa.dtype
    use(ctx, [ts])
    lo, hi = INT_RANGES[y.dtype]
    setup = [f"const float sy = {load(ts, f'{sy.ptr}[0]')};",
             f"const double zy = {_param(zy, '0', '(double)') if zy is not None else '0.0'};"]
    a_row, b_col = exprs[1] != "0", exprs[4] != "0"
    sav, sbv = load(ts, f"{sa.ptr}[{exprs[1]}]"), load(ts, f"{sb.ptr}[{exprs[4]}]")
    row_setup = []
    if not a_row and not b_col:
        setup.append(f"const float mult0 = {_rounded(ts, _rounded(ts, f'{sav} * {sbv}') + ' / sy')};")
        mult = "mult0"
    else:
        row_setup.append(f"const float sa_m = {sav};")
        mult = _rounded(ts, _rounded(ts, f"sa_m * {sbv}") + " / sy")
    return dict(setup=setup, row_setup=row_setup, mult=mult, lo=f"{lo}.0", hi=f"{hi}.0")


# -- ConvInteger / QLinearConv ----------------------------------------------------------------------------

def _as3(vals: list[str], fill: str) -> list[str]:
    return [fill] * (3 - len(vals)) + list(vals)


@kernel("ConvInteger", types=BYTE_TYPES, accepts=_byte_operands(1))
def conv_integer(ctx: KernelCtx) -> str:
    return _qconv(ctx, w=1, zx=2, zw=3, quantized=False)


@kernel("QLinearConv", types=BYTE_TYPES, accepts=_byte_operands(3, 7))
def qlinear_conv(ctx: KernelCtx) -> str:
    return _qconv(ctx, w=3, zx=2, zw=5, quantized=True)


@kernel(CONV_TO_FLOAT[1], domain=CONV_TO_FLOAT[0], types=BYTE_TYPES, accepts=_byte_operands(1))
def conv_integer_to_float(ctx: KernelCtx) -> str:
    """ConvInteger with a float epilogue ``act(float(acc) * scale[m] + bias[m])`` in the integer kernels'
    output loops (passes/fuse_integer_dequant.py makes it, for the layouts those kernels run)."""
    code, a, b = activation(ctx)
    use_act(ctx)
    s = ctx.ins[4]
    per = not all(d == "1" for d in s.dims)
    dq = dict(scale_m=f"{s.ptr}[{'m' if per else '0'}]", scale_c=f"{s.ptr}[{'c' if per else '0'}]",
              bias=ctx.ins[5].ptr, act=code, a=c_literal(a, DType.FLOAT), b=c_literal(b, DType.FLOAT))
    return _qconv(ctx, w=1, zx=2, zw=3, quantized=False, dq=dq)


def _qconv(ctx: KernelCtx, w: int, zx: int, zw: int, quantized: bool, dq: dict | None = None) -> str:
    node, name = ctx.node, ctx.who
    X, W, Y = ctx.ins[0], ctx.ins[w], ctx.outs[0]
    use(ctx, [])

    def op(i: int) -> Operand | None:
        return ctx.ins[i] if i < len(ctx.ins) else None

    try:
        _, wshape, group, win = qconv_geometry(node, 0, w)
    except ShapeError as e:  # checked by the shape rule already; keep the message
        raise unsupported(ctx, str(e)) from e
    if win.rank > 3:
        raise unsupported(ctx, f"{win.rank}-D convolution is not supported (1-D to 3-D)")
    m, cg = W.dims[0], W.dims[1]
    if not (m.isdigit() and cg.isdigit()):
        raise unsupported(ctx, f"weight channel dims {list(wshape[:2])} must be static")
    # long dot products (KG = Cg * kernel taps) go through the blocked GEMM; short ones sweep per tap
    dot = int(cg) * math.prod(win.kernel) >= DOT_MIN_K
    per_channel = {i: op(i) is not None and not all(d == "1" for d in op(i).dims) for i in (zw, 4)}
    checks = []
    for i in (zw, 4) if quantized else (zw,):
        p = op(i)
        if per_channel[i] and _differ(p.dims[0], m):
            checks.append(_check(f"({p.dims[0]}) != {m}", f"{p.value.name} needs one value per output channel",
                                 name))
    vals = dict(
        N=X.dims[0], C=X.dims[1], M=m, G=str(group), Cg=cg, Mg=str(int(m) // group),
        I=_as3(X.dims[2:], "1"), O=_as3(Y.dims[2:], "1"), K=_as3([str(k) for k in win.kernel], "1"),
        S=_as3([str(s) for s in win.strides], "1"), Dl=_as3([str(d) for d in win.dilations], "1"),
        P=_as3([ctx.dim(p) for p in win.pads_begin], "0"), checks=checks, col_budget=COL_BUDGET, name=name,
        quantized=quantized, Tx=X.dtype.c, Ty=Y.dtype.c, w=W.ptr,
        zw=_param(op(zw), "m" if per_channel[zw] else "0"), zx=_param(op(zx), "0"),
        par=par_call(ctx),
        setup=[], channel_setup=[], lo="0", hi="0", dot=dot, cstride="KG" if dot else "1", dq=dq,
    )
    fast = fast_qconv(ctx, vals, w, zx, zw, quantized, list(win.kernel)) or fast_qdwconv(ctx, vals, w, zx, zw,
                                                                                      quantized)
    if fast is not None:
        return fast
    if dq is not None:
        raise unsupported(ctx, "a float epilogue needs the integer GEMM (constant weight, >= 4 output channels "
                               "per group) or the depthwise kernel")
    if quantized:
        xs, ws, ys, zy, bias = ctx.ins[1], ctx.ins[4], ctx.ins[6], op(7), op(8)
        use(ctx, [xs.dtype])
        lo, hi = INT_RANGES[Y.dtype]
        wsv = load(ws.dtype, f"{ws.ptr}[{'m' if per_channel[4] else '0'}]")
        vals.update(
            setup=[f"const float xs = {load(xs.dtype, f'{xs.ptr}[0]')}, ys = {load(ys.dtype, f'{ys.ptr}[0]')};",
                   f"const double zy = {_param(zy, '0', '(double)') if zy is not None else '0.0'};"],
            channel_setup=[f"const float mult = {_rounded(xs.dtype, _rounded(xs.dtype, f'xs * {wsv}') + ' / ys')};",
                           f"const uint32_t bias = {_param(bias, 'm', '(uint32_t)') if bias is not None else '0'};"],
            lo=f"{lo}.0", hi=f"{hi}.0")
    return render("qconv.c.j2", **vals)
