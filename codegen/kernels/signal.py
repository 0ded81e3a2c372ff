"""Kernels of the signal ops DFT (17, 20), STFT (17) and MelWeightMatrix (17); shapes in
passes/shapes/signal.py.

DFT and STFT gather each signal line into a complex buffer, transform it with the mixed-radix FFT of
runtime_c/onnxc_signal.h (Bluestein's algorithm for lengths with a large prime factor) and scatter
the result; lines run on the runtime's pool (codegen/kernels/parcall.py). The C is in
templates/signal_*.c.j2. The transform runs in the precision the reference (numpy) uses:
double for double signals and for real signals of any type (numpy promotes those), float for complex
float and half signals (numpy's single-precision complex transform) — so results agree with the
reference to rounding, even where an exact zero comes out as a float rounding residue. An IRFFT
(inverse and onesided) completes the one-sided spectrum by conjugate symmetry before the inverse
transform and keeps the real part, which ignores the imaginary parts of the DC and Nyquist bins as
numpy does. Scalar inputs known only at run time (dft_length, DFT-20's axis, frame_step,
frame_length) are read and validated by the same C in the shape function and the kernel, which also
checks the output dims it writes.

MelWeightMatrix folds when its inputs are constant (passes/shapes/signal.py, the same arithmetic);
the kernel serves run-time inputs, rounding the edge frequencies' mel conversion to their own
float type as the reference does.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.signal import MEL_TYPES, dft_axis

from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .parcall import par_call
from .typesets import ALL_FLOATS


def _fail(ctx: KernelCtx, msg: str, *args: str) -> str:
    """``return onnxc_fail(...)`` with a message naming the node; ``args`` are C int64 expressions."""
    extra = "".join(f", (long long)({a})" for a in args)
    return f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: {msg}\", {ds.who(ctx)}{extra});"


def _scalar(ctx: KernelCtx, i: int) -> str:
    """C expression of scalar input ``i``: a literal when constant."""
    c = ctx.const_input(i)
    return str(int(c.reshape(-1)[0])) if c is not None else f"(int64_t)in{i}[0]"


def _check_out(ctx: KernelCtx, values: list[str]) -> list[str]:
    """Fail unless output 0's dims equal ``values`` (the kernel then never writes past its buffer)."""
    y = ctx.outs[0]
    return [f"if (({v}) != ({d})) {_fail(ctx, f'output axis {a} has %lld elements, expected %lld', d, v)}"
            for a, (v, d) in enumerate(zip(values, y.dims)) if v != d]


def _ct(dt: DType, cin: str) -> tuple[str, str]:
    """(C compute type, FFT suffix) for signals of element type ``dt`` with ``cin`` (C literal) values
    per element: 1 real, 2 complex."""
    return ("double", "d") if dt == DType.DOUBLE or cin == "1" else ("float", "s")


# -- DFT ------------------------------------------------------------------------------------------

def _dft_setup(ctx: KernelCtx) -> list[str]:
    """C declaring xd[] (input dims), ax, n (transform length) and lout (output length), validated."""
    x = ctx.ins[0]
    r = x.rank
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    lines = [ds.c_array("xd", list(x.dims))]
    axis = dft_axis(ctx.node, r)
    if axis is not None:
        lines.append(f"const int64_t ax = {axis};")
    else:
        lines += [f"int64_t ax = {_scalar(ctx, 2)};",
                  f"if (ax < -{r} || ax > {r - 2} || (ax > -2 && ax < 0)) "
                  + _fail(ctx, f"axis %lld is out of range [-{r}, -2] or [0, {r - 2}]", "ax"),
                  f"if (ax < 0) ax += {r};"]
    if ctx.node.input(1) is not None:
        lines.append(f"const int64_t n = {_scalar(ctx, 1)};")
    else:
        lines.append(f"const int64_t n = {'2 * (xd[ax] - 1)' if inverse and onesided else 'xd[ax]'};")
    lines += [f"if (n < 1) {_fail(ctx, 'the DFT length %lld must be >= 1', 'n')}",
              f"const int64_t lout = {'n / 2 + 1' if onesided and not inverse else 'n'};"]
    return lines


def _dft_out_dims(ctx: KernelCtx) -> list[str]:
    r = ctx.ins[0].rank
    irfft = bool(ctx.attr("inverse", 0)) and bool(ctx.attr("onesided", 0))
    return [f"(ax == {a} ? lout : xd[{a}])" for a in range(r - 1)] + ["1" if irfft else "2"]


def _dft_shape(ctx: KernelCtx) -> str:
    return "\n".join([*_dft_setup(ctx), ds.bind(ctx, 0, _dft_out_dims(ctx)), "return 0;"])


@kernel("DFT", types=ALL_FLOATS, shape_fn=_dft_shape)
def dft(ctx: KernelCtx) -> str:
    x, y = ctx.ins[0], ctx.outs[0]
    dt = x.dtype
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    irfft = inverse and onesided
    cin, cout = x.dims[-1], y.dims[-1]
    ct, sfx = _ct(dt, cin)
    ctx.include("onnxc_signal.h")
    if dt in half.HALF:
        half.use(ctx)
    setup = "\n".join([*_dft_setup(ctx), *_check_out(ctx, _dft_out_dims(ctx))])
    caps = [("int64_t", v) for v in ("inner", "lin", "lout", "use", "n")] + [(ct, "scale")]
    return render("signal_dft.c.j2", setup=setup, r=x.rank, nuse="n / 2 + 1" if irfft else "n", ct=ct, sfx=sfx,
                  who=ds.who(ctx), scale="1.0 / (double)n" if inverse else "1.0", T=dt.c, cin=cin, cout=cout,
                  load_re=half.load(dt, f"src[k * inner * {cin}]"),
                  load_im=half.load(dt, f"src[k * inner * {cin} + 1]") if cin == "2" else "0",
                  irfft=irfft, inverse=int(inverse), store_re=half.store(dt, "z[2 * k] * scale"),
                  store_im=half.store(dt, "z[2 * k + 1] * scale") if cout == "2" else "",
                  caps=caps, par=par_call(ctx))


# -- STFT -----------------------------------------------------------------------------------------

def _stft_setup(ctx: KernelCtx) -> list[str]:
    """C declaring B, L, step, fl (frame length), frames and bins, validated."""
    x = ctx.ins[0]
    win = ctx.ins[2] if len(ctx.ins) > 2 else None
    lines = [f"const int64_t B = {x.dims[0]}, L = {x.dims[1]}, step = {_scalar(ctx, 1)};",
             f"if (step < 1) {_fail(ctx, 'frame_step %lld must be >= 1', 'step')}"]
    if len(ctx.ins) > 3 and ctx.ins[3] is not None:
        lines.append(f"const int64_t fl = {_scalar(ctx, 3)};")
        if win is not None:
            lines.append(f"if (fl != {win.dims[0]}) "
                         + _fail(ctx, "frame_length %lld differs from the window length %lld", "fl", win.dims[0]))
    else:
        lines.append(f"const int64_t fl = {win.dims[0] if win is not None else 'L'};")
    lines += [f"if (fl < 1 || fl > L) {_fail(ctx, 'frame_length %lld must be in [1, %lld] (the signal length)', 'fl', 'L')}",
              "const int64_t frames = (L - fl) / step + 1;",
              f"const int64_t bins = {'fl / 2 + 1' if ctx.attr('onesided', 1) else 'fl'};",
              "(void)B;"]
    return lines


def _stft_shape(ctx: KernelCtx) -> str:
    return "\n".join([*_stft_setup(ctx), ds.bind(ctx, 0, ["B", "frames", "bins", "2"]), "return 0;"])


@kernel("STFT", types=ALL_FLOATS, shape_fn=_stft_shape)
def stft(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    dt = x.dtype
    cin = x.dims[2]
    window = len(ctx.ins) > 2 and ctx.ins[2] is not None
    ct, sfx = _ct(dt, cin)
    ctx.include("onnxc_signal.h")
    if dt in half.HALF:
        half.use(ctx)

    def weighted(e: str) -> str:
        """Signal element ``e`` times the window, rounded to the signal's type as in the reference."""
        if not window:
            return half.load(dt, e)
        v = f"{half.load(dt, e)} * {half.load(dt, 'in2[k]')}"
        return half.load(dt, half.store(dt, v)) if dt in half.HALF else v

    setup = "\n".join([*_stft_setup(ctx), *_check_out(ctx, ["B", "frames", "bins", "2"])])
    caps = [("int64_t", v) for v in ("L", "step", "fl", "frames", "bins")]
    return render("signal_stft.c.j2", setup=setup, ct=ct, sfx=sfx, who=ds.who(ctx), T=dt.c, cin=cin,
                  load_re=weighted(f"src[k * {cin}]"), load_im=weighted(f"src[k * {cin} + 1]") if cin == "2" else "0",
                  store_re=half.store(dt, "z[2 * k]"), store_im=half.store(dt, "z[2 * k + 1]"), caps=caps,
                  par=par_call(ctx))


# -- MelWeightMatrix ------------------------------------------------------------------------------

def _mel_setup(ctx: KernelCtx) -> list[str]:
    """C declaring nmel, dft, rate and bins, validated."""
    return [f"const int64_t nmel = {_scalar(ctx, 0)}, dft = {_scalar(ctx, 1)}, rate = {_scalar(ctx, 2)};",
            f"if (nmel < 0 || dft < 0) {_fail(ctx, 'num_mel_bins (%lld) and dft_length (%lld) must be >= 0', 'nmel', 'dft')}",
            f"if (rate <= 0) {_fail(ctx, 'sample_rate %lld must be > 0', 'rate')}",
            "const int64_t bins = dft / 2 + 1;"]


def _mel_shape(ctx: KernelCtx) -> str:
    return "\n".join([*_mel_setup(ctx), ds.bind(ctx, 0, ["bins", "nmel"]), "return 0;"])


def _round_to(dt: DType, e: str) -> str:
    """C double ``e`` rounded to element type ``dt`` (the precision numpy computes ``dt`` values in)."""
    if dt == DType.DOUBLE:
        return f"({e})"
    if dt in half.HALF:
        return f"(double){half.load(dt, half.store(dt, f'(float)({e})'))}"
    return f"(double)(float)({e})"


@kernel("MelWeightMatrix", types=MEL_TYPES, typed="out0", shape_fn=_mel_shape)
def mel_weight_matrix(ctx: KernelCtx) -> str:
    y = ctx.outs[0]
    et = ctx.ins[3].dtype  # the edges' type: their mel conversion runs in it
    ctx.include("onnxc_signal.h")
    if et in half.HALF or y.dtype in half.HALF:
        half.use(ctx)
    if y.dtype in half.HALF:
        put = lambda e: half.store(y.dtype, f"(float)({e})")  # noqa: E731
    else:
        put = lambda e: f"({y.dtype.c})({e})"  # noqa: E731

    def mel(edge: str) -> str:
        """2595 * log1p(edge / 700) with each step (and constant) rounded to the edge's type, then
        / log(10) in double: passes/shapes/signal.py ``mel_points``."""
        ratio = _round_to(et, f"(double){half.load(et, edge)} / {_round_to(et, '700.0')}")
        return _round_to(et, f"{_round_to(et, '2595.0')} * " + _round_to(et, f"log1p({ratio})")) + " / log(10.0)"

    return render("signal_mel.c.j2", setup="\n".join([*_mel_setup(ctx), *_check_out(ctx, ["bins", "nmel"])]),
                  mel_lo=mel("in3[0]"), mel_hi=mel("in4[0]"), who=ds.who(ctx),
                  fail_bins=_fail(ctx, "the mel bands fall outside the %lld spectrogram bins", "bins"),
                  zero=put("0.0"), one=put("1.0"), rise=put("(double)(j - a) / (double)(c - a)"),
                  fall=put("(double)(e - j) / (double)(e - c)"))
