"""Shape rules of assorted single ops: Col2Im (18), DeformConv (19, 22), MaxUnpool (9, 11, 22),
Det (11, 22), ReverseSequence (10, 28) and TensorScatter (24).

Their kernels are in codegen/kernels/col2im.py, deform_conv.py, linalg.py and placement.py, which
read the geometry through the helpers here so both sides agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onnxc.ir import Dim, DType, Node, TensorType, UnsupportedOpError
from onnxc.ir.dims import floordiv, is_static

from .common import fail, norm_axis, require_equal, runtime_dim, shape_of, tensor_type
from .registry import shape_rule
from .shape_ops import RUNTIME, runtime_shape, shape_input, static_length
from .spatial import Window, ints_attr, window

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16})
# Element types pure data movement handles (fixed-size storage; strings excluded).
MOVABLE = frozenset(d for d in DType if d not in (DType.UNDEFINED, DType.STRING))


def _unsupported(node: Node, why: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{node.describe()}: {why}", [(node.domain or "ai.onnx", node.op_type, node.version)])


def _float_input(node: Node, i: int, what: str) -> TensorType:
    t = tensor_type(node, i)
    if t.dtype not in FLOATS:
        raise fail(node, f"{what} must be a float tensor, got {t.dtype.short}")
    return t


# -- Col2Im ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Col2ImGeometry:
    block: tuple | None          # the block (kernel) shape when known at compile time (Dims)
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.strides)


def col2im_geometry(node: Node) -> Col2ImGeometry:
    """A Col2Im node's block geometry; the spatial rank is the length of block_shape."""
    v = node.input(2)
    if v is None or node.input(1) is None:
        raise fail(node, "inputs 1 (image_shape) and 2 (block_shape) are required")
    block = shape_input(node, 2, "block_shape", dynamic=True)
    n = static_length(node, 2, "block_shape") if block is RUNTIME else len(block)
    if block is not RUNTIME and any(is_static(b) and b <= 0 for b in block):
        raise fail(node, f"block_shape {list(block)} must be positive")
    strides = ints_attr(node, "strides", n, 1)
    dil = ints_attr(node, "dilations", n, 1)
    pads = node.attr("pads")
    pads = [0] * (2 * n) if pads is None else [int(p) for p in pads]
    if len(pads) != 2 * n:
        raise fail(node, f"pads has {len(pads)} values, expected {2 * n}")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise fail(node, f"strides {list(strides)} and dilations {list(dil)} must be positive")
    return Col2ImGeometry(None if block is RUNTIME else tuple(block), strides, dil, tuple(pads[:n]), tuple(pads[n:]))


@shape_rule("Col2Im", versions=(18, 10**9))
def _col2im(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in MOVABLE or t.dtype.is_float and t.dtype not in FLOATS:
        raise _unsupported(node, f"{t.dtype.short} tensors are not supported")
    x = shape_of(node, 0)
    if len(x) != 3:
        raise fail(node, f"input must be [N, C * prod(block_shape), L], got shape {list(x)}")
    geo = col2im_geometry(node)
    image = shape_input(node, 1, "image_shape", dynamic=True)
    if image is RUNTIME:
        if static_length(node, 1, "image_shape") != geo.rank:
            raise fail(node, f"image_shape and block_shape differ in length ({geo.rank} block dims)")
        image = tuple(runtime_dim(node, 0, 2 + a) for a in range(geo.rank))
    if len(image) != geo.rank:
        raise fail(node, f"image_shape has {len(image)} values, block_shape {geo.rank}")
    if geo.block is None or not all(is_static(b) for b in geo.block):
        return [TensorType(t.dtype, (x[0], runtime_dim(node, 0, 1), *image))]
    k = math.prod(geo.block)
    if is_static(x[1]) and x[1] % k:
        raise fail(node, f"input dim 1 ({x[1]}) is not a multiple of prod(block_shape) = {k}")
    return [TensorType(t.dtype, (x[0], floordiv(x[1], k), *image))]


# -- DeformConv -----------------------------------------------------------------------------------

def deform_window(node: Node) -> Window:
    """Geometry of a DeformConv node; validates the shapes of W, offset, B and mask."""
    x, w = shape_of(node, 0), shape_of(node, 1)
    if len(x) < 3 or len(w) != len(x):
        raise fail(node, f"X must be [N, C, spatial...] and W [oC, C / group, kernel...] of the same rank, got "
                         f"{list(x)} and {list(w)}")
    ks = node.attr("kernel_shape")
    ks = tuple(w[2:]) if ks is None else tuple(int(k) for k in ks)
    if not all(isinstance(k, int) for k in ks):
        raise _unsupported(node, f"kernel shape {list(ks)} must be static")
    if len(ks) != len(x) - 2:
        raise fail(node, f"kernel_shape {list(ks)} does not match input rank {len(x)}")
    win = window(node, tuple(x[2:]), ks)
    group, og = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    if group <= 0 or og <= 0:
        raise fail(node, f"group {group} and offset_group {og} must be positive")
    _static_check(node, x[1], w[1] * group, "input channels", "W dim 1 * group")
    if is_static(w[0]) and w[0] % group:
        raise fail(node, f"output channels {w[0]} are not a multiple of group {group}")
    if is_static(x[1]) and x[1] % og:
        raise fail(node, f"input channels {x[1]} are not a multiple of offset_group {og}")
    k, nd = math.prod(ks), len(ks)
    off = shape_of(node, 2)
    if len(off) != len(x):
        raise fail(node, f"offset must be [N, offset_group * prod(kernel) * {nd}, output spatial...], got {list(off)}")
    _static_check(node, off[1], og * k * nd, "offset channels", "offset_group * prod(kernel) * spatial rank")
    _static_check(node, off[0], x[0], "offset batch", "X batch")
    for a, (o, want) in enumerate(zip(off[2:], win.out)):
        _static_check(node, o, want, f"offset spatial dim {a}", "the output size")
    b = node.input(3)
    if b is not None:
        bs = shape_of(node, 3)
        if len(bs) != 1:
            raise fail(node, f"B must be 1-D [oC], got {list(bs)}")
        _static_check(node, bs[0], w[0], "B length", "output channels")
    if node.input(4) is not None:
        m = shape_of(node, 4)
        if len(m) != len(x):
            raise fail(node, f"mask must be [N, offset_group * prod(kernel), output spatial...], got {list(m)}")
        _static_check(node, m[1], og * k, "mask channels", "offset_group * prod(kernel)")
        for a, (o, want) in enumerate(zip(m[2:], win.out)):
            _static_check(node, o, want, f"mask spatial dim {a}", "the output size")
    return win


def _static_check(node: Node, got: Dim, want: Dim, what: str, against: str) -> None:
    if is_static(got) and is_static(want) and got != want:
        raise fail(node, f"{what} is {got}, expected {want} ({against})")
    require_equal(node, [(got, what), (want, against)])


@shape_rule("DeformConv", versions=(19, 10**9))
def _deform_conv(node: Node) -> list:
    t = _float_input(node, 0, "X")
    for i in (1, 2, 3, 4):
        if node.input(i) is not None and tensor_type(node, i).dtype != t.dtype:
            raise fail(node, f"input {i} is {tensor_type(node, i).dtype.short}, X is {t.dtype.short}")
    x, w = shape_of(node, 0), shape_of(node, 1)
    win = deform_window(node)
    return [TensorType(t.dtype, (x[0], w[0], *win.out))]


# -- MaxUnpool ------------------------------------------------------------------------------------

def unpool_inferred(node: Node) -> tuple:
    """The spatial output size MaxUnpool infers from its attributes: (in - 1) * stride - pads + kernel."""
    x = shape_of(node, 0)
    ks = node.attr("kernel_shape")
    if ks is None:
        raise fail(node, "attribute kernel_shape is required")
    ks = tuple(int(k) for k in ks)
    n = len(x) - 2
    if len(ks) != n:
        raise fail(node, f"kernel_shape {list(ks)} does not match input rank {len(x)}")
    strides = ints_attr(node, "strides", n, 1)
    pads = node.attr("pads")
    pads = [0] * (2 * n) if pads is None else [int(p) for p in pads]
    if len(pads) != 2 * n:
        raise fail(node, f"pads has {len(pads)} values, expected {2 * n}")
    return tuple((x[2 + a] - 1) * strides[a] - pads[a] - pads[n + a] + ks[a] for a in range(n))


@shape_rule("MaxUnpool", versions=(9, 10**9))
def _maxunpool(node: Node) -> list:
    t = _float_input(node, 0, "X")
    x = shape_of(node, 0)
    if len(x) < 3:
        raise fail(node, f"X must be [N, C, spatial...], got shape {list(x)}")
    if tensor_type(node, 1).dtype != DType.INT64:
        raise fail(node, f"I must be int64, got {tensor_type(node, 1).dtype.short}")
    if len(shape_of(node, 1)) != len(x):
        raise fail(node, f"I must have X's shape {list(x)}, got {list(shape_of(node, 1))}")
    inferred = unpool_inferred(node)
    out = shape_input(node, 2, "output_shape", dynamic=True)
    if out is None:
        return [TensorType(t.dtype, (x[0], x[1], *inferred))]
    if out is RUNTIME:
        out = runtime_shape(node, 0, static_length(node, 2, "output_shape"))
    if len(out) != len(x):
        raise fail(node, f"output_shape {list(out)} must have {len(x)} values (the rank of X)")
    for a, (o, i) in enumerate(zip(out, (x[0], x[1], *inferred))):
        if is_static(o) and is_static(i) and (o < i if a >= 2 else o != i):
            raise fail(node, f"output_shape {list(out)} cannot hold the unpooled tensor {[x[0], x[1], *inferred]}")
    return [TensorType(t.dtype, tuple(out))]


# -- Det ------------------------------------------------------------------------------------------

@shape_rule("Det", versions=(11, 10**9))
def _det(node: Node) -> list:
    t = _float_input(node, 0, "X")
    x = shape_of(node, 0)
    if len(x) < 2:
        raise fail(node, f"X must be [..., M, M], got shape {list(x)}")
    _static_check(node, x[-1], x[-2], "the last dim", "the second-to-last dim (square matrices)")
    return [TensorType(t.dtype, tuple(x[:-2]))]


# -- ReverseSequence ------------------------------------------------------------------------------

def reverse_axes(node: Node) -> tuple[int, int]:
    """(batch_axis, time_axis): 0 and 1 in some order."""
    b, t = int(node.attr("batch_axis", 1)), int(node.attr("time_axis", 0))
    if {b, t} != {0, 1}:
        raise fail(node, f"batch_axis {b} and time_axis {t} must be 0 and 1")
    return b, t


@shape_rule("ReverseSequence", versions=(10, 10**9))
def _reverse_sequence(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in MOVABLE:
        raise _unsupported(node, f"{t.dtype.short} tensors are not supported")
    x = shape_of(node, 0)
    if len(x) < 2:
        raise fail(node, f"input must have rank >= 2, got shape {list(x)}")
    b, _ = reverse_axes(node)
    lens = shape_of(node, 1)
    if tensor_type(node, 1).dtype != DType.INT64 or len(lens) != 1:
        raise fail(node, f"sequence_lens must be a 1-D int64 tensor, got {tensor_type(node, 1)}")
    _static_check(node, lens[0], x[b], "sequence_lens length", "the batch size")
    return [TensorType(t.dtype, x)]


# -- TensorScatter --------------------------------------------------------------------------------

def scatter_axis(node: Node) -> int:
    """TensorScatter's sequence axis, normalized; never the batch axis 0."""
    r = len(shape_of(node, 0))
    a = norm_axis(node, int(node.attr("axis", -2)), r)
    if a == 0:
        raise fail(node, "axis must not be 0 (the batch axis)")
    return a


def scatter_mode(node: Node) -> str:
    m = node.attr("mode", "linear")
    m = m.decode() if isinstance(m, bytes) else str(m)
    if m not in ("linear", "circular"):
        raise fail(node, f"mode must be 'linear' or 'circular', got {m!r}")
    return m


@shape_rule("TensorScatter", versions=(24, 10**9))
def _tensor_scatter(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in MOVABLE:
        raise _unsupported(node, f"{t.dtype.short} tensors are not supported")
    past, upd = shape_of(node, 0), shape_of(node, 1)
    if tensor_type(node, 1).dtype != t.dtype:
        raise fail(node, f"update is {tensor_type(node, 1).dtype.short}, past_cache {t.dtype.short}")
    if len(upd) != len(past):
        raise fail(node, f"update rank {len(upd)} differs from past_cache rank {len(past)}")
    axis = scatter_axis(node)
    scatter_mode(node)
    for a, (p, u) in enumerate(zip(past, upd)):
        if a != axis:
            _static_check(node, u, p, f"update dim {a}", "past_cache")
        elif is_static(u) and is_static(p) and u > p:
            raise fail(node, f"update has {u} positions on axis {a}, past_cache only {p}")
    if node.input(2) is not None:
        wi = shape_of(node, 2)
        if tensor_type(node, 2).dtype != DType.INT64 or len(wi) != 1:
            raise fail(node, f"write_indices must be a 1-D int64 tensor, got {tensor_type(node, 2)}")
        _static_check(node, wi[0], past[0], "write_indices length", "the batch size")
    return [TensorType(t.dtype, past)]
