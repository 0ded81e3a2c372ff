"""Shape rules of the signal ops DFT (17, 20), STFT (17) and MelWeightMatrix (17), and the fold rule of
MelWeightMatrix.

Scalar inputs (dft_length, DFT-20's axis, frame_step, frame_length, MelWeightMatrix's sizes) are
used as Dims when they are constants or symbolic; otherwise the output dims they decide are run-time
dims (``runtime_dim``) that the kernel's shape function computes (codegen/kernels/signal.py). A DFT
whose axis is known only at run time gets run-time dims on every signal axis when the transform
changes the axis length (onesided, dft_length).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType
from onnxc.ir.dims import dmax, floordiv, is_static

from .cast import cast_array, float_to_bfloat16, half_to_float
from .common import fail, norm_axis, runtime_dim, shape_of, sym_ints, tensor_type
from .registry import fold_rule, shape_rule

FLOAT_TYPES = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16)
MEL_TYPES = frozenset({DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64, DType.INT8, DType.INT16,
                       DType.INT32, DType.INT64, *FLOAT_TYPES})
RUNTIME = None  # a scalar input whose value only the data gives


def scalar(node: Node, i: int, what: str) -> Dim | None:
    """Input ``i`` as one Dim (a constant or symbolic value), or RUNTIME; ShapeError when it has
    several elements or is not an integer tensor."""
    t = tensor_type(node, i)
    if t.dtype not in (DType.INT32, DType.INT64):
        raise fail(node, f"{what} (input {i}) must be int32 or int64, got {t.dtype.short}")
    if t.shape is not None and (len(t.shape) > 1 or any(is_static(d) and d != 1 for d in t.shape)):
        raise fail(node, f"{what} (input {i}) must be a scalar, got shape {list(t.shape)}")
    vals = sym_ints(node.input(i))
    return vals[0] if vals else RUNTIME


def _positive(node: Node, d: Dim | None, what: str) -> None:
    if d is not None and is_static(d) and d < 1:
        raise fail(node, f"{what} must be >= 1, got {d}")


def _float_input(node: Node, i: int, what: str) -> TensorType:
    t = tensor_type(node, i)
    if t.dtype not in FLOAT_TYPES:
        raise fail(node, f"{what} must be a float tensor, got {t.dtype.short}")
    return t


# -- DFT ------------------------------------------------------------------------------------------

def dft_axis(node: Node, rank: int) -> int | None:
    """The normalized transform axis, or None when DFT-20's axis input is known only at run time."""
    if node.version < 20:
        axis = int(node.attr("axis", 1))
    elif node.input(2) is None:
        axis = -2
    else:
        a = scalar(node, 2, "axis")
        if a is RUNTIME or not is_static(a):
            return None
        axis = int(a)
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise fail(node, f"axis {axis} is out of range [-{rank}, -2] or [0, {rank - 2}] for rank {rank}")
    return norm_axis(node, axis, rank)


def dft_length(node: Node, d_axis: Dim) -> Dim | None:
    """The transform length: dft_length, else the axis length (2 * (length - 1) for IRFFT)."""
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if node.input(1) is not None:
        n = scalar(node, 1, "dft_length")
        _positive(node, n, "dft_length")
        return n
    return 2 * (d_axis - 1) if inverse and onesided else d_axis


def dft_out_length(node: Node, n: Dim) -> Dim:
    """Output length along the axis for transform length ``n``."""
    onesided, inverse = bool(node.attr("onesided", 0)), bool(node.attr("inverse", 0))
    return floordiv(n, 2) + 1 if onesided and not inverse else n


@shape_rule("DFT", versions=(17, 10**9))
def _dft(node: Node) -> list:
    t = _float_input(node, 0, "input")
    shape = shape_of(node, 0)
    r = len(shape)
    if r < 2 or shape[-1] not in (1, 2):
        raise fail(node, f"input must have rank >= 2 and a last dim of 1 (real) or 2 (complex), got "
                         f"shape {list(shape)}")
    irfft = bool(node.attr("inverse", 0)) and bool(node.attr("onesided", 0))
    out = list(shape[:-1]) + [1 if irfft else 2]
    axis = dft_axis(node, r)
    if axis is None:  # every signal axis might be the one
        if node.input(1) is not None or node.attr("onesided", 0):
            out[:-1] = [runtime_dim(node, 0, a) for a in range(r - 1)]
        return [TensorType(t.dtype, tuple(out))]
    n = dft_length(node, shape[axis])
    if n is RUNTIME:
        out[axis] = runtime_dim(node, 0, axis)
    else:
        _positive(node, n, "the DFT length")
        out[axis] = dft_out_length(node, n)
    return [TensorType(t.dtype, tuple(out))]


# -- STFT -----------------------------------------------------------------------------------------

def stft_frame_length(node: Node) -> Dim | None:
    """frame_length, else the window's length, else the signal length (RUNTIME: from the data)."""
    win = shape_of(node, 2) if node.input(2) is not None else None
    if win is not None and len(win) != 1:
        raise fail(node, f"window must be 1-D, got shape {list(win)}")
    if node.input(3) is not None:
        fl = scalar(node, 3, "frame_length")
        _positive(node, fl, "frame_length")
        if fl is not RUNTIME and win is not None and is_static(fl) and is_static(win[0]) and fl != win[0]:
            raise fail(node, f"frame_length {fl} differs from the window length {win[0]}")
        return fl
    return win[0] if win is not None else shape_of(node, 0)[1]


@shape_rule("STFT", versions=(17, 10**9))
def _stft(node: Node) -> list:
    t = _float_input(node, 0, "signal")
    shape = shape_of(node, 0)
    if len(shape) != 3 or shape[2] not in (1, 2):
        raise fail(node, f"signal must have shape [batch, length, 1 or 2], got {list(shape)}")
    if node.input(2) is not None and _float_input(node, 2, "window").dtype != t.dtype:
        raise fail(node, "window must have the signal's element type")
    step = scalar(node, 1, "frame_step")
    _positive(node, step, "frame_step")
    fl = stft_frame_length(node)
    length = shape[1]
    if step is RUNTIME or fl is RUNTIME or not (is_static(step) or is_static(fl)):
        frames = runtime_dim(node, 0, 1)
    elif is_static(length) and is_static(fl) and is_static(step):
        if fl > length:
            raise fail(node, f"frame_length {fl} exceeds the signal length {length}")
        frames = (length - fl) // step + 1
    else:  # static-in-symbols; a signal shorter than a frame is a run-time error of the kernel
        frames = dmax(floordiv(length - fl, step) + 1, 0)
    if fl is RUNTIME:
        bins = runtime_dim(node, 0, 2)
    else:
        bins = floordiv(fl, 2) + 1 if node.attr("onesided", 1) else fl
    return [TensorType(t.dtype, (shape[0], frames, bins, 2))]


# -- MelWeightMatrix ------------------------------------------------------------------------------

@shape_rule("MelWeightMatrix", versions=(17, 10**9))
def _mel(node: Node) -> list:
    dims = []
    for i, what in ((1, "dft_length"), (0, "num_mel_bins")):
        v = scalar(node, i, what)
        if v is not RUNTIME and is_static(v) and v < 0:
            raise fail(node, f"{what} must be >= 0, got {v}")
        dims.append(runtime_dim(node, 0, len(dims)) if v is RUNTIME else
                    floordiv(v, 2) + 1 if i == 1 else v)
    scalar(node, 2, "sample_rate")
    for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")):
        _float_input(node, i, what)
    out = DType(int(node.attr("output_datatype", int(DType.FLOAT))))
    if out not in MEL_TYPES:
        raise fail(node, f"output_datatype {out.short} is not allowed (allowed: "
                         f"{', '.join(sorted(t.short for t in MEL_TYPES))})")
    return [TensorType(out, tuple(dims))]


def round_to(x, dt: DType) -> np.float64:
    """float64 ``x`` rounded to element type ``dt`` (the precision numpy computes ``dt`` values in)."""
    if dt == DType.DOUBLE:
        return np.float64(x)
    if dt == DType.BFLOAT16:
        return np.float64(half_to_float(float_to_bfloat16(np.float32(x)), dt))
    return np.float64(np.asarray(x, dt.np))


def mel_points(num_mel_bins: int, dft_length: int, sample_rate: int, lower: float, upper: float,
               edge: DType) -> np.ndarray:
    """The num_mel_bins + 2 triangle corners as spectrogram bin indices, with the reference's precision:
    the edges' mel conversion ``2595 * log1p(hz / 700)`` in their own float type (each step rounded
    to it), the rest in float64, the bin index a float floor division."""
    def mel(hz: float) -> np.float64:
        ratio = round_to(np.float64(hz) / round_to(700.0, edge), edge)
        return round_to(round_to(2595.0, edge) * round_to(np.log1p(ratio), edge), edge) / np.log(10)

    lo_mel, hi_mel = mel(lower), mel(upper)
    step = (hi_mel - lo_mel) / (num_mel_bins + 2)
    hz = 700 * np.expm1((np.arange(num_mel_bins + 2) * step + lo_mel) / 2595 * np.log(10))
    return (((dft_length + 1) * hz) // sample_rate).astype(np.int64)


def mel_weights(node: Node, num_mel_bins: int, dft_length: int, sample_rate: int, lower: float, upper: float,
                edge: DType) -> np.ndarray:
    """The matrix in float64: triangles rising from corner i to i + 1 and falling to i + 2."""
    if sample_rate <= 0:
        raise fail(node, f"sample_rate must be > 0, got {sample_rate}")
    bins = dft_length // 2 + 1
    pts = mel_points(num_mel_bins, dft_length, sample_rate, lower, upper, edge)
    if num_mel_bins and (pts.min() < 0 or pts[:-1].max() >= bins or pts[-1] > bins):
        raise fail(node, f"the mel bands fall outside the {bins} spectrogram bins (check the edges and "
                         "sample_rate)")
    out = np.zeros((bins, num_mel_bins))
    for i in range(num_mel_bins):
        lo, mid, hi = pts[i], pts[i + 1], pts[i + 2]
        if mid == lo:
            out[mid, i] = 1
        else:
            out[lo:mid + 1, i] = (np.arange(lo, mid + 1) - lo) / (mid - lo)
        if hi > mid:
            out[mid:hi, i] = (hi - np.arange(mid, hi)) / (hi - mid)
    return out


@fold_rule("MelWeightMatrix")
def _fold_mel(node: Node, xs: list) -> list:
    n, dft, rate = (int(np.asarray(x).reshape(-1)[0]) for x in xs[:3])
    edge = tensor_type(node, 3).dtype
    lower, upper = (float(half_to_float(np.asarray(x), edge).reshape(-1)[0]) for x in xs[3:5])
    w = mel_weights(node, n, dft, rate, lower, upper, edge)
    return [cast_array(w, DType(int(node.attr("output_datatype", int(DType.FLOAT)))))]
