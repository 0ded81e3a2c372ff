"""onnxruntime's normalization ops, as the standard LayerNormalization / RMSNormalization and adds.

- SkipLayerNormalization (com.microsoft): ``s = input + bias + skip``, ``output = LayerNorm(s)`` over
  the last axis with gamma (and beta); ``mean`` / ``inv_std_var`` are the float32 statistics of shape
  ``input.shape[:-1] + (1,)``; ``input_skip_bias_sum`` is ``s``.
- SkipSimplifiedLayerNormalization (com.microsoft): the same with RMS normalization,
  ``s / sqrt(mean(s^2) + epsilon) * gamma``; its ``mean`` output is zeros, as onnxruntime writes.
- SimplifiedLayerNormalization (onnxruntime registers it in the default domain at version 1; no
  standard op has that name): RMS normalization over the axes from ``axis`` on; ``inv_std_var`` has
  the input's shape with those axes set to 1 (float32; double for stash_type 11 on double inputs).
- LayerNormalization (com.microsoft): the standard LayerNormalization-17. onnxruntime 1.32 registers
  no such op; it writes its pre-17 LayerNormalization in the default domain, read as the standard op.
- EmbedLayerNormalization (com.microsoft): ``word_embedding[input_ids] + position_embedding[p] +
  segment_embedding[segment_ids]``, then LayerNorm; ``p`` is the position in the sequence, or
  ``position_ids`` (shape (batch, seq) or (1, seq)); ``mask_index`` (int32, (batch,)) counts the
  entries of ``mask`` equal to 1 per row (zeros without a mask); ``embedding_sum`` is the sum.
  float32 tables only, like onnxruntime's CPU kernel.

As in onnxruntime's CPU kernels, float16/bfloat16 inputs are added and normalized in float32 and
rounded once to the input type at the end. The bias is added to the input before the skip so that,
after a MatMul, both fold into its epilogue (passes/fuse_epilogues.py). Ids outside their table
(negative ones too) fail at run time, as in onnxruntime, rather than wrap around like Gather's.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Value

from .builder import ALL_FLOATS, Builder
from .registry import expansion

MS = "com.microsoft"
HALVES = (DType.FLOAT16, DType.BFLOAT16)
INT32_MIN = -(2**31)


# -- helpers ----------------------------------------------------------------------------------------
def _same_type(b: Builder, inputs: list[int], allowed=ALL_FLOATS, mixed_ok: bool = False) -> DType:
    """The element type of input ``inputs[0]``, which every present input of ``inputs`` must share
    (an invalid model, or an unsupported combination when the op allows ``mixed_ok`` types)."""
    b.require_types(inputs, allowed)
    dt = b.dtype(inputs[0])
    for i in inputs[1:]:
        if b.input(i) is not None and b.dtype(i) != dt:
            msg = f"input {i} has element type {b.dtype(i).short}, but input {inputs[0]} has {dt.short}"
            raise b.unsupported(msg + " (mixed types are not supported yet)") if mixed_ok else b.fail(msg)
    return dt


def _vector(b: Builder, i: int, name: str, size) -> None:
    """Input ``i``, when present, must be 1-D of ``size`` elements."""
    if b.input(i) is None:
        return
    s = b.shape(i)
    if len(s) != 1 or (isinstance(s[0], int) and isinstance(size, int) and s[0] != size):
        raise b.fail(f"{name} must be 1-D of size {size} (the hidden size), got shape {list(s)}")


def _work(b: Builder, v: Value | None) -> Value | None:
    """Node input ``v`` in the precision sums and statistics run in: float32 for the half types."""
    if v is None or v.type.dtype not in HALVES:
        return v
    return b.cast(v, DType.FLOAT)


def _into(b: Builder, i: int, have: DType, want: DType) -> Value | None:
    """Where to compute output ``i`` in element type ``have``: the output itself when it needs no
    cast to ``want`` (a graph output then needs no copy), else a fresh value (None)."""
    return b.output(i) if have == want else None


def _emit(b: Builder, v: Value, i: int, want: DType) -> None:
    """Write ``v`` to output ``i`` as ``want`` when it is read and ``v`` is not already that output."""
    if b.used(i) and v is not b.output(i):
        b.cast(v, want, out=b.output(i))


def _target(b: Builder, i: int | None) -> Value:
    """Output ``i`` of the node when it has one, else a fresh value nothing reads."""
    v = None if i is None else b.output(i)
    return v if v is not None else Value(b.graph.fresh_name(f"{b.base}_unused"))


def _used(b: Builder, i: int | None) -> bool:
    return i is not None and b.used(i)


def _layer_norm(b: Builder, x: Value, scale: Value, bias: Value | None, eps: float, y: Value | None,
                stats: tuple[int | None, int | None] = (None, None)) -> Value:
    """Standard LayerNormalization of ``x`` over the last axis into ``y`` (None: a fresh value); writes
    the outputs ``stats`` (mean, inv_std_var; float32) when read. Returns the normalized value."""
    mean_i, inv_i = stats
    n = 3 if _used(b, inv_i) else 2 if _used(b, mean_i) else 1
    y = y if y is not None else Value(b.graph.fresh_name(f"{b.base}_y"))
    outs = [y] + [_target(b, i) for i in stats][:n - 1]
    b.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps, version=17, out=outs)
    return y


def _rms(b: Builder, x: Value, scale: Value, axis: int, rank: int, eps: float, work: DType, y: Value | None,
         inv_i: int | None, inv_type: DType = DType.FLOAT) -> Value:
    """``x / sqrt(mean(x^2 over axis..) + eps) * scale`` in ``work`` precision into ``y`` (None: fresh):
    the standard RMSNormalization, or spelled out when the inverse deviation (keepdims) is read as
    output ``inv_i``."""
    if not _used(b, inv_i):
        return b.op("RMSNormalization", x, scale, axis=axis, epsilon=eps, version=23, out=y)
    mean_sq = b.reduce("ReduceMean", b.op("Mul", x, x), list(range(axis, rank)), keepdims=1)
    root = b.op("Sqrt", b.op("Add", mean_sq, b.scalar(eps, work)))
    inv = b.op("Reciprocal", root, out=_into(b, inv_i, work, inv_type))
    _emit(b, inv, inv_i, inv_type)
    return b.op("Mul", b.op("Mul", x, inv), scale, out=y)


# -- SkipLayerNormalization, SkipSimplifiedLayerNormalization ---------------------------------------
def _check_skip(b: Builder) -> None:
    """onnxruntime's shape rules: input (B, S, H) or (T, H); skip of the input's shape, (1, S, H) or
    (S, H); gamma, beta, bias (H)."""
    xs, ss = b.shape(0), b.shape(1)
    if len(xs) not in (2, 3):
        raise b.fail(f"input must be 3-D (batch, sequence, hidden) or 2-D (tokens, hidden), got shape {list(xs)}")
    ok = len(ss) in (2, 3) and len(ss) <= len(xs)
    ok = ok and all(not (isinstance(p, int) and isinstance(q, int) and p != q) for p, q in zip(ss[-2:], xs[-2:]))
    if ok and len(ss) == 3 and isinstance(ss[0], int) and ss[0] != 1 and isinstance(xs[0], int):
        ok = ss[0] == xs[0]
    if not ok:
        raise b.fail(f"skip must have the input's shape {list(xs)}, or (1, S, H) or (S, H) for a 3-D input; "
                     f"got {list(ss)}")


@expansion("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", domain=MS)
def skip_layer_normalization(b: Builder) -> None:
    simplified = b.node.op_type == "SkipSimplifiedLayerNormalization"
    vectors = {2: "gamma", 3: "bias"} if simplified else {2: "gamma", 3: "beta", 4: "bias"}
    dt = _same_type(b, [0, 1, *vectors], (DType.FLOAT, *HALVES))
    _check_skip(b)
    for i, name in vectors.items():
        _vector(b, i, name, b.shape(0)[-1])
    bias = b.input(3 if simplified else 4)
    eps = float(b.attr("epsilon", 1e-12))
    s = _work(b, b.input(0))
    if bias is not None:
        s = b.op("Add", s, _work(b, bias))
    s = b.op("Add", s, _work(b, b.input(1)), out=_into(b, 3, DType.FLOAT, dt))
    _emit(b, s, 3, dt)
    gamma, y = _work(b, b.input(2)), _into(b, 0, DType.FLOAT, dt)
    if simplified:
        y = _rms(b, s, gamma, b.rank(0) - 1, b.rank(0), eps, DType.FLOAT, y, 2)
        if b.used(1):  # onnxruntime's "mean" of an RMS norm: zeros
            shape = b.op("Concat", b.op("Shape", b.input(0), end=-1), b.ints([1]), axis=0)
            b.op("ConstantOfShape", shape, value=np.zeros(1, np.float32), out=b.output(1))
    else:
        y = _layer_norm(b, s, gamma, _work(b, b.input(3)), eps, y, (1, 2))
    _emit(b, y, 0, dt)


# -- SimplifiedLayerNormalization (default domain), LayerNormalization (com.microsoft) --------------
@expansion("SimplifiedLayerNormalization")
def simplified_layer_normalization(b: Builder) -> None:
    dt = _same_type(b, [0, 1], mixed_ok=True)
    r = b.rank(0)
    axis = int(b.attr("axis", -1))
    if not -r <= axis < r:
        raise b.fail(f"axis {axis} is out of range for rank {r}")
    axis %= r
    stash = int(b.attr("stash_type", 1))
    if stash != int(DType.FLOAT) and not (stash == int(DType.DOUBLE) and dt == DType.DOUBLE):
        raise b.unsupported(f"stash_type {stash} is not supported (1: float; 11: double, for double inputs)")
    xs, ss = b.shape(0), b.shape(1)
    if len(ss) > r - axis or any(isinstance(p, int) and isinstance(q, int) and p not in (1, q)
                                 for p, q in zip(reversed(ss), reversed(xs))):
        raise b.fail(f"scale of shape {list(ss)} does not broadcast to the normalized shape {list(xs[axis:])}")
    work = DType.DOUBLE if dt == DType.DOUBLE else DType.FLOAT
    x, scale = _work(b, b.input(0)), _work(b, b.input(1))
    y = _rms(b, x, scale, axis, r, float(b.attr("epsilon", 1e-5)), work, _into(b, 0, work, dt), 1, DType(stash))
    _emit(b, y, 0, dt)


@expansion("LayerNormalization", domain=MS)
def ms_layer_normalization(b: Builder) -> None:
    n = max(i + 1 for i in range(len(b.node.outputs)) if i == 0 or b.used(i))
    b.op("LayerNormalization", b.input(0), b.input(1), b.input(2), out=[_target(b, i) for i in range(n)],
         axis=b.attr("axis", -1), epsilon=b.attr("epsilon", 1e-5), stash_type=b.attr("stash_type", 1),
         version=17)


# -- EmbedLayerNormalization ------------------------------------------------------------------------
EMBED_INPUTS = ("input_ids", "segment_ids", "word_embedding", "position_embedding", "segment_embedding",
                "gamma", "beta", "mask", "position_ids")


def _check_embed(b: Builder) -> None:
    """onnxruntime's rules: int32 ids (B, S); 2-D tables of one hidden size; gamma, beta (H);
    segment_ids and mask of the ids' shape, position_ids (B, S) or (1, S)."""
    for i in (0, 2, 3, 5, 6):
        if b.input(i) is None:
            raise b.fail(f"input {i} ({EMBED_INPUTS[i]}) is required")
    for i in (0, 1, 7, 8):
        if b.input(i) is not None and b.dtype(i) != DType.INT32:
            raise b.fail(f"{EMBED_INPUTS[i]} must be int32, got {b.dtype(i).short}")
    if (b.input(1) is None) != (b.input(4) is None):
        raise b.fail("segment_ids and segment_embedding must be given together")
    ids = b.shape(0)
    if len(ids) != 2:
        raise b.fail(f"input_ids must be 2-D (batch, sequence), got shape {list(ids)}")
    hidden = b.shape(2)[-1]
    for i in (2, 3, 4):
        s = b.shape(i) if b.input(i) is not None else (0, hidden)
        if len(s) != 2 or (isinstance(s[1], int) and isinstance(hidden, int) and s[1] != hidden):
            raise b.fail(f"{EMBED_INPUTS[i]} must be 2-D (rows, {hidden}), got shape {list(s)}")
    _vector(b, 5, "gamma", hidden)
    _vector(b, 6, "beta", hidden)
    for i in (1, 7, 8):
        s = b.shape(i) if b.input(i) is not None else ids
        lead = (1, ids[0]) if i == 8 else (ids[0],)
        if len(s) != 2 or any(isinstance(p, int) and isinstance(q, int) and p != q for p, q in ((s[1], ids[1]),)) \
                or (isinstance(s[0], int) and all(isinstance(d, int) and d != s[0] for d in lead)):
            raise b.fail(f"{EMBED_INPUTS[i]} must have the shape of input_ids {list(ids)}"
                         f"{' (or batch 1)' if i == 8 else ''}, got {list(s)}")


def _lookup(b: Builder, table: Value, ids: Value) -> Value:
    """``table[ids]`` along axis 0; a negative id becomes one Gather refuses (onnxruntime fails too)."""
    safe = b.op("Where", b.op("Less", ids, b.scalar(0, DType.INT32)), b.scalar(INT32_MIN, DType.INT32), ids)
    return b.op("Gather", table, safe, axis=0)


@expansion("EmbedLayerNormalization", domain=MS)
def embed_layer_normalization(b: Builder) -> None:
    _check_embed(b)
    _same_type(b, [2, 3, 4, 5, 6], (DType.FLOAT,))
    ids = b.input(0)
    s = _lookup(b, b.input(2), ids)
    if b.input(8) is not None:
        pos = _lookup(b, b.input(3), b.input(8))
    else:
        seq = b.op("Range", b.scalar(0, DType.INT64), b.dim(ids, 1), b.scalar(1, DType.INT64))
        pos = b.op("Gather", b.input(3), seq, axis=0)
    segment = b.input(1)
    s = b.op("Add", s, pos, out=None if segment is not None else b.output(2))  # embedding_sum
    if segment is not None:
        s = b.op("Add", s, _lookup(b, b.input(4), segment), out=b.output(2))
    _layer_norm(b, s, b.input(5), b.input(6), float(b.attr("epsilon", 1e-12)), b.output(0))
    if b.used(1):
        _mask_index(b)


def _mask_index(b: Builder) -> None:
    """Per batch row, the count of mask entries equal to 1 (int32); zeros without a mask."""
    mask = b.input(7)
    if mask is None:
        rows = b.op("Shape", b.input(0), end=1)
        b.op("ConstantOfShape", rows, value=np.zeros(1, np.int32), out=b.output(1))
        return
    ones = b.cast(b.op("Equal", mask, b.scalar(1, DType.INT32)), DType.INT32)
    b.reduce("ReduceSum", ones, [1], keepdims=0, out=b.output(1))
