"""Window functions (HannWindow, HammingWindow, BlackmanWindow, 17), CenterCropPad (18) and
AffineGrid (20): ops whose output shape comes from an input tensor of sizes.

The expansions build the output from Range/Shape arithmetic, so a constant size folds to constant
shapes (and a constant window or base grid), a symbolic one stays static-in-symbols, and a size known
only at run time gives run-time dims. Window values are computed in double and cast to
``output_datatype``.
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Value

from .builder import FLOATS, Builder
from .registry import expansion

# cosine-sum windows: w[n] = sum_k a_k * cos(2 pi k n / N)
COSINE_TERMS = {
    "HannWindow": (0.5, -0.5),
    "HammingWindow": (25.0 / 46.0, -(1 - 25.0 / 46.0)),
    "BlackmanWindow": (0.42, -0.5, 0.08),
}


@expansion("HannWindow", "HammingWindow", "BlackmanWindow", versions=(17, 10**9))
def window(b: Builder) -> None:
    b.require_types([0], (DType.INT32, DType.INT64))
    if b.rank(0) not in (0, 1):
        raise b.fail(f"size must be a scalar, got shape {list(b.shape(0))}")
    out_type = DType(b.attr("output_datatype", int(DType.FLOAT)))
    if out_type in (DType.FLOAT16, DType.BFLOAT16) or not (out_type.is_float or out_type.is_int):
        raise b.unsupported(f"output_datatype {out_type.short} is not supported yet")
    size, it = b.input(0), b.dtype(0)
    if b.rank(0):
        size = b.squeeze(size, [0])
    n = b.cast(b.op("Range", b.scalar(0, it), size, b.scalar(1, it), tag="n"), DType.DOUBLE)
    period = b.cast(size, DType.DOUBLE)
    if not b.attr("periodic", 1):
        period = b.op("Sub", period, b.scalar(1.0, DType.DOUBLE))
    phase = b.op("Div", b.op("Mul", n, b.scalar(2 * math.pi, DType.DOUBLE)), period)  # 2 pi n / N
    terms = COSINE_TERMS[b.node.op_type]
    w = b.scalar(terms[0], DType.DOUBLE)
    for k, a in enumerate(terms[1:], start=1):
        angle = phase if k == 1 else b.op("Mul", phase, b.scalar(float(k), DType.DOUBLE))
        w = b.op("Add", w, b.op("Mul", b.op("Cos", angle), b.scalar(a, DType.DOUBLE)))
    b.cast(w, out_type, out=b.output(0))


@expansion("CenterCropPad", versions=(18, 10**9))
def center_crop_pad(b: Builder) -> None:
    """One Pad whose negative pads crop: per axis, diff = target - dim splits into
    trunc(diff / 2) before and the rest after (the odd element goes on the end side)."""
    b.require_types([1], (DType.INT32, DType.INT64))
    r = b.rank(0)
    n = b.shape(1)
    if len(n) != 1 or not isinstance(n[0], int):
        raise b.fail(f"shape must be a 1-D tensor of static length, got shape {list(n)}")
    axes = b.attr("axes")
    axes = list(range(r)) if axes is None else axes
    if len(axes) != n[0]:
        raise b.fail(f"shape has {n[0]} values for {len(axes)} axes")
    for a in axes:
        if not -r <= a < r:
            raise b.fail(f"axis {a} is out of range for rank {r}")
    axes = [a % r for a in axes]
    if len(set(axes)) != len(axes):
        raise b.fail(f"axes {axes} repeat an axis")
    i64 = DType.INT64
    target = b.input(1) if b.dtype(1) == i64 else b.cast(b.input(1), i64)
    dims = b.op("Gather", b.op("Shape", b.input(0)), b.ints(axes), axis=0, tag="dims")
    diff = b.op("Sub", target, dims, tag="diff")
    before = b.op("Mul", b.op("Sign", diff), b.op("Div", b.op("Abs", diff), b.scalar(2, i64)), tag="before")
    pads = b.op("Concat", before, b.op("Sub", diff, before), axis=0, tag="pads")
    b.op("Pad", b.input(0), pads, b.scalar(0, b.dtype(0)), b.ints(axes), mode="constant", out=b.output(0))


def _coords(b: Builder, n: Value, dt: DType, align_corners: bool) -> Value:
    """The n normalized pixel coordinates in [-1, 1] along one axis (1-D, type ``dt``)."""
    i64 = DType.INT64
    i = b.cast(b.op("Range", b.scalar(0, i64), n, b.scalar(1, i64), tag="pixels"), dt)
    nf = b.cast(n, dt)
    one = b.scalar(1.0, dt)
    if align_corners:  # corner pixel centers at -1 and 1 (a single pixel sits at -1)
        step = b.op("Div", b.scalar(2.0, dt), b.op("Max", b.op("Sub", nf, one), one))
        return b.op("Sub", b.op("Mul", i, step), one)
    two = b.scalar(2.0, dt)  # pixel centers: (2i + 1) / n - 1
    return b.op("Sub", b.op("Div", b.op("Add", b.op("Mul", i, two), one), nf), one)


@expansion("AffineGrid", versions=(20, 10**9))
def affine_grid(b: Builder) -> None:
    """Homogeneous base grid (x, y[, z], 1) over the output size, times theta transposed."""
    b.require_types([0], FLOATS)
    b.require_types([1], (DType.INT64,))
    dt, theta = b.dtype(0), b.shape(0)
    ls = b.shape(1)
    if len(ls) != 1 or ls[0] not in (4, 5):
        raise b.fail(f"size must be (N, C, H, W) or (N, C, D, H, W), got shape {list(ls)}")
    nd = ls[0] - 2
    if len(theta) != 3 or theta[1:] != (nd, nd + 1):
        raise b.fail(f"theta must have shape (N, {nd}, {nd + 1}) for a {nd}-D size, got {list(theta)}")
    size = b.input(1)
    spatial = b.slice(size, [2], [ls[0]], [0])  # (D,) H, W
    plane = b.op("Concat", spatial, b.ints([1]), axis=0)  # expand target (D,) H, W, 1
    align = bool(b.attr("align_corners", 0))
    cols = []
    for k in range(nd):
        n = b.squeeze(b.slice(size, [2 + k], [3 + k], [0]), [0])
        shape = [1] * (nd + 1)
        shape[k] = -1
        cols.append(b.op("Expand", b.reshape(_coords(b, n, dt, align), shape), plane))
    ones = b.op("Expand", b.const(np.ones([1] * (nd + 1), dtype=dt.np)), plane)
    base = b.op("Concat", *reversed(cols), ones, axis=nd)  # x (last axis) first
    base = b.reshape(base, [-1, nd + 1])
    grid = b.op("MatMul", base, b.transpose(b.input(0), [0, 2, 1]))  # (N, prod(spatial), nd)
    out_shape = b.op("Concat", b.op("Shape", b.input(0), start=0, end=1), spatial, b.ints([nd]), axis=0)
    b.reshape(grid, out_shape, out=b.output(0))
