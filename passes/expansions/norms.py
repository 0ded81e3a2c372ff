"""Normalizations defined as functions: RMSNormalization (23) and GroupNormalization (18, 21).

Statistics are computed in the input's precision, or in double when ``stash_type`` asks for it
(float16/bfloat16 stash types are not supported yet). The reference implementation computes double
inputs in double too; the spec's default ``stash_type=1`` would round them through float32.
"""

from __future__ import annotations

from onnxc.ir import DType, Value

from .builder import FLOATS, Builder
from .registry import expansion


def _stash(b: Builder, x: Value) -> tuple[Value, DType]:
    """``x`` in the precision of stage one (input type, or double when stash_type is DOUBLE)."""
    stash = b.attr("stash_type", 1)
    if stash not in (int(DType.FLOAT), int(DType.DOUBLE)):
        raise b.unsupported(f"stash_type {stash} is not supported yet (1: float, 11: double)")
    dt = x.type.dtype
    if stash == int(DType.DOUBLE) and dt != DType.DOUBLE:
        return b.cast(x, DType.DOUBLE), DType.DOUBLE
    return x, dt


def _restore(b: Builder, v: Value, work: DType, want: DType) -> Value:
    return v if work == want else b.cast(v, want)


@expansion("RMSNormalization", versions=(23, 10**9))
def rms_normalization(b: Builder) -> None:
    b.require_types([0, 1], FLOATS)
    r = b.rank(0)
    axis = b.attr("axis", -1)
    if not -r <= axis < r:
        raise b.fail(f"axis {axis} is out of range for rank {r}")
    axis %= r
    eps = b.attr("epsilon", 1e-5)
    x, work = _stash(b, b.input(0))
    mean_sq = b.reduce("ReduceMean", b.op("Mul", x, x), list(range(axis, r)), keepdims=1)
    rms = b.op("Sqrt", b.op("Add", mean_sq, b.scalar(eps, work)))
    normalized = b.op("Div", x, rms)
    scale = b.input(1)
    normalized = _restore(b, normalized, work, scale.type.dtype)
    b.op("Mul", normalized, scale, out=b.output(0))


@expansion("GroupNormalization", versions=(18, 10**9))
def group_normalization(b: Builder) -> None:
    b.require_types([0, 1, 2], FLOATS)
    shape = b.shape(0)
    r = len(shape)
    if r < 2:
        raise b.fail(f"X must have shape (N, C, ...), got rank {r}")
    groups = b.attr("num_groups")
    if groups is None or groups <= 0:
        raise b.fail("attribute num_groups (> 0) is required")
    c = shape[1]
    if isinstance(c, int) and c % groups:
        raise b.fail(f"the channel count {c} is not divisible by num_groups {groups}")
    per_channel = b.node.version >= 21
    want = c if per_channel else groups
    for i, name in ((1, "scale"), (2, "bias")):
        s = b.shape(i)
        if len(s) != 1 or (isinstance(s[0], int) and isinstance(want, int) and s[0] != want):
            raise b.fail(f"{name} must have shape ({'C' if per_channel else 'num_groups'}) = ({want}), "
                         f"got {list(s)}")
    eps = b.attr("epsilon", 1e-5)
    x, work = _stash(b, b.input(0))
    grouped = b.reshape(x, [0, groups, -1])  # (N, G, C/G * spatial)
    mean = b.reduce("ReduceMean", grouped, [2], keepdims=1)
    centered = b.op("Sub", grouped, mean)
    var = b.reduce("ReduceMean", b.op("Mul", centered, centered), [2], keepdims=1)
    normalized = b.op("Div", centered, b.op("Sqrt", b.op("Add", var, b.scalar(eps, work))))
    normalized = _restore(b, normalized, work, b.dtype(0))
    scale, bias = b.input(1), b.input(2)
    if per_channel:
        normalized = b.reshape(normalized, b.op("Shape", b.input(0)))
        trailing = [-1] + [1] * (r - 2)  # (C, 1, ..., 1) broadcasts over (N, C, spatial...)
        scale, bias = b.reshape(scale, trailing), b.reshape(bias, trailing)
        b.op("Add", b.op("Mul", normalized, scale), bias, out=b.output(0))
    else:
        scale, bias = b.reshape(scale, [-1, 1]), b.reshape(bias, [-1, 1])
        y = b.op("Add", b.op("Mul", normalized, scale), bias)
        b.reshape(y, b.op("Shape", b.input(0)), out=b.output(0))
