"""Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops.

One function turns a node's window attributes (kernel_shape, strides, dilations, pads, auto_pad,
ceil_mode) and the input's spatial dims into a :class:`Window`: per-axis kernel, stride, dilation,
begin/end padding and output size, all as Dims so symbolic input sizes (N, H, W) stay symbolic.
Shape rules use ``Window.out``; kernels render the same fields as C, so both agree by construction.
Every window attribute and extent is at most MAX_WINDOW, so the C arithmetic on them (extent times
stride, pads plus input size) stays far from 64-bit overflow and no kernel loops 2^62 taps.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import Dim, Node, ShapeError, UnsupportedOpError
from onnxc.ir.dims import ceildiv, dmax, dmin, floordiv, is_static

from .common import fail

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
MAX_WINDOW = 2**31 - 1  # largest kernel size, stride, dilation, pad or dilated kernel extent


@dataclass(frozen=True)
class Window:
    """Geometry of a sliding window over ``len(kernel)`` spatial axes."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[Dim, ...]
    pads_end: tuple[Dim, ...]
    inp: tuple[Dim, ...]
    out: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.kernel)

    @property
    def extent(self) -> tuple[int, ...]:
        """Span of the dilated kernel on each axis."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def auto_pad_of(node: Node) -> str:
    ap = node.attr("auto_pad", "NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else str(ap)
    if ap == "":
        ap = "NOTSET"
    if ap not in AUTO_PADS:
        raise fail(node, f"auto_pad must be one of {list(AUTO_PADS)}, got {ap!r}")
    return ap


def ints_attr(node: Node, name: str, n: int, default: int) -> tuple[int, ...]:
    """An INTS attribute of length ``n`` (or its default repeated), validated."""
    v = node.attr(name)
    if v is None:
        return (default,) * n
    v = tuple(int(x) for x in v)
    if len(v) != n:
        raise fail(node, f"attribute {name} has {len(v)} values, expected {n} (one per spatial axis)")
    return bounded(node, name, v)


def bounded(node: Node, name: str, values: tuple[int, ...]) -> tuple[int, ...]:
    """``values`` of window attribute ``name``, ShapeError when one is beyond +-MAX_WINDOW."""
    if any(abs(x) > MAX_WINDOW for x in values):
        raise fail(node, f"attribute {name} {list(values)} has a value beyond the limit of {MAX_WINDOW}")
    return values


def window(node: Node, inp: tuple, kernel: tuple[int, ...], ceil_mode: bool = False) -> Window:
    """The window geometry of ``node`` over spatial input dims ``inp`` with kernel size ``kernel``."""
    n = len(kernel)
    if len(inp) != n:
        raise fail(node, f"kernel has {n} spatial axes but the input has {len(inp)}")
    if any(k <= 0 for k in kernel):
        raise fail(node, f"kernel_shape {list(kernel)} must be positive")
    bounded(node, "kernel_shape", kernel)
    strides = ints_attr(node, "strides", n, 1)
    dil = ints_attr(node, "dilations", n, 1)
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise fail(node, f"strides {list(strides)} and dilations {list(dil)} must be positive")
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    if any(e > MAX_WINDOW for e in ext):
        raise fail(node, f"the dilated kernel spans {ext}, beyond the limit of {MAX_WINDOW}")
    ap = auto_pad_of(node)
    pb: list[Dim] = []
    pe: list[Dim] = []
    out: list[Dim] = []
    if ap == "NOTSET":
        pads = node.attr("pads")
        pads = [0] * (2 * n) if pads is None else list(bounded(node, "pads", tuple(int(p) for p in pads)))
        if len(pads) != 2 * n:
            raise fail(node, f"pads has {len(pads)} values, expected {2 * n}")
        if any(p < 0 for p in pads):
            raise UnsupportedOpError(f"{node.describe()}: negative pads {pads} are not supported",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
        pb, pe = pads[:n], pads[n:]
        for i in range(n):
            span = inp[i] + pb[i] + pe[i] - ext[i]
            if not ceil_mode:
                out.append(floordiv(span, strides[i]) + 1)
                continue
            o = ceildiv(span, strides[i]) + 1
            # the last window must start inside the input or the begin padding
            lim = floordiv(inp[i] + pb[i] - 1, strides[i]) + 1
            if is_static(o) and is_static(lim):
                o = o - 1 if (o - 1) * strides[i] >= inp[i] + pb[i] else o
            else:
                o = dmin(o, lim)
            out.append(o)
    elif ap == "VALID":
        pb, pe = [0] * n, [0] * n
        out = [floordiv(inp[i] - ext[i], strides[i]) + 1 for i in range(n)]
    else:
        for i in range(n):
            o = ceildiv(inp[i], strides[i])
            total = dmax(0, (o - 1) * strides[i] + ext[i] - inp[i])
            half = floordiv(total, 2)
            if ap == "SAME_UPPER":
                pb.append(half)
                pe.append(total - half)
            else:
                pb.append(total - half)
                pe.append(half)
            out.append(o)
    for o in out:
        if is_static(o) and o <= 0:
            raise ShapeError(f"{node.describe()}: input spatial size {list(inp)} is too small for kernel "
                             f"{list(kernel)} (dilations {list(dil)}, pads {list(pb) + list(pe)}): output {out}")
    return Window(tuple(kernel), strides, dil, tuple(pb), tuple(pe), tuple(inp), tuple(out))


def transpose_window(node: Node, inp: tuple, kernel: tuple[int, ...]) -> Window:
    """Geometry of ConvTranspose: ``out`` is the output size, ``inp`` the input size."""
    n = len(kernel)
    strides = ints_attr(node, "strides", n, 1)
    dil = ints_attr(node, "dilations", n, 1)
    opad = ints_attr(node, "output_padding", n, 0)
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise fail(node, f"strides {list(strides)} and dilations {list(dil)} must be positive")
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    full = [strides[i] * (inp[i] - 1) + opad[i] + ext[i] for i in range(n)]
    ap = auto_pad_of(node)
    oshape = node.attr("output_shape")
    pads = node.attr("pads")
    if oshape is not None:
        oshape = [int(x) for x in oshape]
        if len(oshape) == n + 2:  # some exporters include N and C
            oshape = oshape[2:]
        if len(oshape) != n:
            raise fail(node, f"output_shape {oshape} must have one value per spatial axis ({n})")
        out: list[Dim] = list(oshape)
        pb, pe = _split_total([full[i] - out[i] for i in range(n)], ap == "SAME_UPPER")
    elif ap in ("SAME_UPPER", "SAME_LOWER"):
        out = [inp[i] * strides[i] for i in range(n)]
        pb, pe = _split_total([full[i] - out[i] for i in range(n)], ap == "SAME_UPPER")
    else:
        p = [0] * (2 * n) if pads is None or ap == "VALID" else [int(x) for x in pads]
        if len(p) != 2 * n:
            raise fail(node, f"pads has {len(p)} values, expected {2 * n}")
        pb, pe = p[:n], p[n:]
        out = [full[i] - pb[i] - pe[i] for i in range(n)]
    for i in range(n):  # negative pads (an output_shape past the full size) just extend the output
        if is_static(out[i]) and out[i] <= 0:
            raise fail(node, f"output size {out[i]} on spatial axis {i} is not positive")
    return Window(tuple(kernel), strides, dil, tuple(pb), tuple(pe), tuple(inp), tuple(out))


def _split_total(total: list, upper: bool) -> tuple[list, list]:
    pb, pe = [], []
    for t in total:
        half = floordiv(t, 2)
        if upper:
            pb.append(half)
            pe.append(t - half)
        else:
            pb.append(t - half)
            pe.append(half)
    return pb, pe
