"""onnxruntime's block-quantized weight ops (domain ``com.microsoft``, opset 1): MatMulNBits (what
onnxruntime's int4 / GPTQ / HQQ weight quantizers and model builders write) and GatherBlockQuantized
(quantized embedding tables), as an unpacked constant + blocked DequantizeLinear (opset 21) + MatMul /
Gather.

MatMulNBits (A, B, scales, zero_points?, g_idx?, bias?; K, N, bits (2, 4, 8), block_size (a power of two
>= 16), accuracy_level): ``Y = A @ W + bias`` with ``W[k, n] = (q[n, k] - zp[n, k // block_size]) *
scales[n, k // block_size]``. B (uint8 [N, k_blocks, blob_size], blob_size = block_size * bits / 8) holds
q packed along K, low-order bits first; K is padded to k_blocks * block_size. scales are [N, k_blocks]
(or flat), of A's type (float32 or float16). zero_points are uint8 packed the same way ([N,
ceil(k_blocks * bits / 8)]) or of the scales' type ([N, k_blocks], not rounded), default 2^(bits - 1).
accuracy_level only lets onnxruntime quantize A internally; it is ignored here (A is not quantized).
B (and packed zero points) must be initializers: they are unpacked here, at compile time, into a uint4 /
uint2 / uint8 initializer [K, N] in the standard layout. With 4 bits, float32 A and constant scales
(and zero points), the node becomes onnxc::MatMulNBits (passes/shapes/contrib.py), whose kernel keeps
the weights 4-bit (codegen/kernels/matmul_nbits.py): scales and zero points transposed to [k_blocks,
N], packed zero points unpacked to uint4, the bias taken as it is. Otherwise the unpacked weights are
read by ``DequantizeLinear(axis=0, block_size)`` -> MatMul (-> Add of the bias); float zero points
give DequantizeLinear on [k_blocks, block_size, N] -> Sub(zp * scale) -> Reshape instead. g_idx
(deprecated) is accepted when it is the identity grouping ``k // block_size``.

GatherBlockQuantized (data, indices, scales, zero_points?; bits, block_size, quantize_axis,
gather_axis): ``Gather(dequantized data, indices, gather_axis)``, data quantized in blocks along
quantize_axis. int4 / uint4 data (zero point default 0); uint8 data with bits 2 / 4 / 8, packed along
its last axis like MatMulNBits' B (default zero point 2^(bits - 1); gather_axis 0 and quantize_axis
last, as onnxruntime requires); float8 / float4 data (no zero point; block_size 0 is the whole axis;
scale dims of 1 broadcast). Out-of-range indices give zeros, as in onnxruntime. When the two axes
differ, data, scales and zero points are gathered first and only the gathered rows dequantized.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType, Value
from onnxc.passes.shapes.contrib import NBITS_DOMAIN
from onnxc.passes.shapes.quant_layout import FLOAT8

from .builder import Builder, make_attr
from .ms_quant import dequantize
from .registry import expansion

MS = "com.microsoft"
UNPACKED = {2: DType.UINT2, 4: DType.UINT4, 8: DType.UINT8}  # bits -> the standard type of the values
FP_DATA = FLOAT8 | {DType.FLOAT4E2M1}


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 [..., m] holding 8 / bits values per byte (low-order bits first) -> uint8 [..., m * 8 / bits]."""
    per = 8 // bits
    if per == 1:
        return np.asarray(packed, np.uint8)
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    vals = (np.asarray(packed, np.uint8)[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(*packed.shape[:-1], packed.shape[-1] * per)


def typed_const(b: Builder, array: np.ndarray, dt: DType, tag: str = "q") -> Value:
    """An initializer of element type ``dt`` (sub-byte types: one value per byte) holding ``array``."""
    arr = np.ascontiguousarray(array, dtype=dt.np)
    name = b.graph.fresh_name(f"{b.base}_{tag}")
    return b.graph.add_initializer(Value(name, TensorType(dt, arr.shape), const=arr))


def _const(b: Builder, i: int, what: str) -> np.ndarray:
    v = b.input(i)
    if v.const is None:
        raise b.unsupported(f"{what} (input {i}, {v.name!r}) must be a constant (an initializer): its packed "
                            "values are unpacked at compile time")
    return np.asarray(v.const)


def _block_size(b: Builder, allow_zero: bool = False) -> int:
    bs = int(b.attr("block_size", 128))
    if (bs == 0 and allow_zero) or (bs >= 16 and bs & (bs - 1) == 0):
        return bs
    raise b.fail(f"block_size must be a power of 2 and >= 16{' (or 0)' if allow_zero else ''}, got {bs}")


# -- MatMulNBits ------------------------------------------------------------------------------------
def _nbits_attrs(b: Builder) -> tuple[int, int, int, int]:
    k, n, bits = int(b.attr("K", 0)), int(b.attr("N", 0)), int(b.attr("bits", 4))
    if bits not in UNPACKED:
        raise b.fail(f"bits must be 2, 4 or 8, got {bits}")
    if k <= 0 or n <= 0:
        raise b.fail(f"K and N must be positive, got K={k}, N={n}")
    if b.attr("weight_prepacked", 0):
        raise b.unsupported(f"weight_prepacked={b.attr('weight_prepacked')} (an execution provider's own "
                            "layout) is not supported")
    return k, n, bits, _block_size(b)


def _check_nbits_inputs(b: Builder, k: int, n: int, nb: int, blob: int) -> DType:
    dt = b.dtype(0)
    if dt not in (DType.FLOAT, DType.FLOAT16):
        raise b.unsupported(f"A: {dt.short} is not supported (supported: float, f16)")
    for i in (2, 5):
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, but A has {dt.short}")
    ka = b.shape(0)[-1] if b.rank(0) else None
    if ka is None or (isinstance(ka, int) and ka != k):
        raise b.fail(f"A must have K={k} elements in its last dim, got shape {list(b.shape(0))}")
    bshape = tuple(b.shape(1))
    if b.dtype(1) != DType.UINT8:
        raise b.fail(f"B must be uint8, got {b.dtype(1).short}")
    if 0 in bshape:
        raise b.unsupported(f"an empty B {list(bshape)} (an omitted projection) is not supported")
    if bshape != (n, nb, blob):
        raise b.fail(f"B must have shape {[n, nb, blob]} (N, k_blocks, blob_size), got {list(bshape)}")
    if tuple(b.shape(2)) not in ((n * nb,), (n, nb)):
        raise b.fail(f"scales must have shape {[n, nb]} (or {[n * nb]}), got {list(b.shape(2))}")
    if b.input(5) is not None and tuple(b.shape(5)) != (n,):
        raise b.fail(f"bias must have shape [{n}], got {list(b.shape(5))}")
    return dt


def _check_g_idx(b: Builder, k: int, bs: int, nb: int) -> None:
    if b.input(4) is None:
        return
    g = _const(b, 4, "g_idx").reshape(-1)
    if g.size not in (k, nb * bs):
        raise b.fail(f"g_idx must have K={k} or {nb * bs} elements, got {g.size}")
    if not np.array_equal(g, np.arange(g.size) // bs):
        raise b.unsupported("a g_idx other than k // block_size (reordered groups) is not supported")


def _packed_zero_points(b: Builder, n: int, nb: int, bits: int) -> np.ndarray:
    """uint8 zero points [N, ceil(nb * bits / 8)] (or flat) unpacked to [nb, N]."""
    zb = -(-nb * bits // 8)
    if tuple(b.shape(3)) not in ((n * zb,), (n, zb)):
        raise b.fail(f"uint8 zero_points must have shape {[n, zb]} (or {[n * zb]}), got {list(b.shape(3))}")
    z = unpack_bits(_const(b, 3, "zero_points").reshape(n, zb), bits)[:, :nb]
    return np.ascontiguousarray(z.T)


def _float_zp_shape(b: Builder, n: int, nb: int) -> None:
    zs = b.shape(3)
    if tuple(zs) not in ((n * nb,), (n, nb)):
        raise b.fail(f"zero_points must have shape {[n, nb]} (or {[n * nb]}), got {list(zs)}")


def _float_zp_weights(b: Builder, q: np.ndarray, s: Value, dims: tuple[int, int, int, int], qt: DType) -> Value:
    """W [K, N] for zero points of the scales' type: ``q * s - zp * s`` per block, on [nb, bs, N]."""
    k, n, nb, bs = dims
    _float_zp_shape(b, n, nb)
    s3 = b.reshape(s, [nb, 1, n])
    zp = b.reshape(b.transpose(b.reshape(b.input(3), [n, nb]), [1, 0]), [nb, 1, n])
    q3 = typed_const(b, q.reshape(n, nb, bs).transpose(1, 2, 0), qt)
    w = b.op("Sub", dequantize(b, q3, s3, None, axis=1, block=bs), b.op("Mul", zp, s3))
    w = b.reshape(w, [nb * bs, n])
    return w if nb * bs == k else b.slice(w, [0], [k], [0])


def _kernel_case(b: Builder, bits: int, dt: DType) -> bool:
    """Whether the 4-bit kernel takes the node: 4 bits, float32 A, constant scales and zero points."""
    consts = all(b.input(i) is None or b.input(i).const is not None for i in (2, 3))
    return bits == 4 and dt == DType.FLOAT and consts


def _as_kernel(b: Builder, q: np.ndarray, dims: tuple[int, int, int, int]) -> None:
    """The node as onnxc::MatMulNBits(A, Q [K, N], S [nb, N], Z?, bias?)."""
    k, n, nb, bs = dims
    s = _const(b, 2, "scales").reshape(n, nb).T
    ins = [b.input(0), typed_const(b, q[:, :k].T, DType.UINT4), typed_const(b, s, DType.FLOAT, tag="s")]
    if b.input(3) is None:
        ins.append(None)
    elif b.dtype(3) == DType.UINT8:
        ins.append(typed_const(b, _packed_zero_points(b, n, nb, 4), DType.UINT4, tag="zp"))
    else:
        _float_zp_shape(b, n, nb)
        ins.append(typed_const(b, _const(b, 3, "zero_points").reshape(n, nb).T, DType.FLOAT, tag="zp"))
    ins.append(b.input(5))
    while ins[-1] is None:
        ins.pop()
    node = Node("MatMulNBits", ins, [b.output(0)], {"block_size": make_attr("block_size", bs)},
                domain=NBITS_DOMAIN, name=b.node.name or f"{b.base}/MatMulNBits", version=1)
    b.graph.insert_before(b.node, node)
    b.nodes.append(node)


@expansion("MatMulNBits", domain=MS)
def matmul_nbits(b: Builder) -> None:
    k, n, bits, bs = _nbits_attrs(b)
    nb, blob = -(-k // bs), bs * bits // 8
    dt = _check_nbits_inputs(b, k, n, nb, blob)
    _check_g_idx(b, k, bs, nb)
    qt = UNPACKED[bits]
    q = unpack_bits(_const(b, 1, "B").reshape(n, nb * blob), bits)  # [N, nb * bs]
    zp = b.input(3)
    if zp is not None and b.dtype(3) not in (DType.UINT8, dt):
        raise b.fail(f"zero_points must be uint8 or of the scales' type {dt.short}, got {b.dtype(3).short}")
    if _kernel_case(b, bits, dt):
        _as_kernel(b, q, (k, n, nb, bs))
        return
    s = b.transpose(b.reshape(b.input(2), [n, nb]), [1, 0])  # [nb, N]
    if zp is not None and b.dtype(3) != DType.UINT8:
        w = _float_zp_weights(b, q, s, (k, n, nb, bs), qt)
    else:
        z = _packed_zero_points(b, n, nb, bits) if zp is not None else np.full((nb, n), 1 << (bits - 1))
        w = dequantize(b, typed_const(b, q[:, :k].T, qt), s, typed_const(b, z, qt, tag="zp"), axis=0, block=bs)
    bias = b.input(5)
    y = b.op("MatMul", b.input(0), w, out=b.output(0) if bias is None else None)
    if bias is not None:
        b.op("Add", y, bias, out=b.output(0))


# -- GatherBlockQuantized ---------------------------------------------------------------------------
def _axis(b: Builder, name: str, default: int, r: int) -> int:
    a = int(b.attr(name, default))
    if not -r <= a < r:
        raise b.fail(f"{name} {a} is out of range for data of rank {r}")
    return a % r


def _uint8_data(b: Builder, bits: int, q: int, g: int, r: int) -> tuple[Value, Value | None, DType]:
    """uint8 data (and zero points) unpacked to the standard type of ``bits``-wide values."""
    if bits not in UNPACKED:
        raise b.fail(f"bits must be 2, 4 or 8 for uint8 data, got {bits}")
    if g != 0 or q != r - 1 or r < 2:
        raise b.fail(f"uint8 data needs gather_axis 0 and quantize_axis the last of rank >= 2, got "
                     f"gather_axis {g}, quantize_axis {q}, rank {r}")
    qt = UNPACKED[bits]
    data = b.input(0) if bits == 8 else typed_const(b, unpack_bits(_const(b, 0, "data"), bits), qt)
    sshape = b.shape(2)
    if b.input(3) is not None:
        if b.dtype(3) != DType.UINT8:
            raise b.fail(f"zero_points must have data's type uint8, got {b.dtype(3).short}")
        if bits == 8:
            return data, b.input(3), qt
        nb = sshape[-1]
        if not isinstance(nb, int):
            raise b.unsupported("packed zero points need scales of a static shape")
        z = unpack_bits(_const(b, 3, "zero_points"), bits)
        if z.shape[:-1] != tuple(sshape[:-1]) or z.shape[-1] < nb or z.shape[-1] - nb >= 8 // bits:
            raise b.fail(f"packed zero_points of shape {list(b.shape(3))} do not match scales {list(sshape)}")
        return data, typed_const(b, z[..., :nb], qt, tag="zp"), qt
    zp = typed_const(b, np.array(1 << (bits - 1)), qt, tag="zp")
    return data, b.op("Expand", zp, b.op("Shape", b.input(2))), qt


def _check_scales(b: Builder, data: Value, q: int, block: int, broadcast: bool) -> Value:
    """Scales of ``data`` blocked along ``q``; with ``broadcast`` (float8 / float4 data) dims of 1
    elsewhere are expanded to data's."""
    ds, ss = data.type.shape, b.shape(2)
    if len(ss) != len(ds):
        raise b.fail(f"scales must have data's rank {len(ds)}, got shape {list(ss)}")
    want = [-(-d // block) if i == q and isinstance(d, int) else d for i, d in enumerate(ds)]
    expand = False
    for i, (w, s) in enumerate(zip(want, ss)):
        if broadcast and i != q and s == 1 and w != 1:
            expand = True
        elif isinstance(w, int) and isinstance(s, int) and w != s:
            raise b.fail(f"scales shape {list(ss)} does not match data {list(ds)} blocked by {block} on axis {q}")
    if not expand:
        return b.input(2)
    if not all(isinstance(d, int) for d in want):
        raise b.unsupported(f"broadcast scales need data of a static shape, got {list(ds)}")
    return b.op("Expand", b.input(2), b.ints(want))


def _gather_valid(b: Builder, data: Value, g: int) -> tuple[Value, Value]:
    """(indices with out-of-range ones replaced by 0, their validity mask)."""
    idx, it = b.input(1), b.dtype(1)
    d = data.type.shape[g]
    size = b.scalar(d, it) if isinstance(d, int) else b.cast(b.dim(data, g), it)
    valid = b.op("And", b.op("GreaterOrEqual", idx, b.op("Neg", size)), b.op("Less", idx, size))
    return b.op("Where", valid, idx, b.scalar(0, it)), valid


@expansion("GatherBlockQuantized", domain=MS)
def gather_block_quantized(b: Builder) -> None:
    dt, r = b.dtype(0), b.rank(0)
    if b.dtype(2) not in (DType.FLOAT, DType.FLOAT16):
        raise b.unsupported(f"scales: {b.dtype(2).short} is not supported (supported: float, f16)")
    if b.dtype(1) not in (DType.INT32, DType.INT64):
        raise b.fail(f"indices must be int32 or int64, got {b.dtype(1).short}")
    if r == 0:
        raise b.fail("data must have rank >= 1")
    g, q = _axis(b, "gather_axis", 0, r), _axis(b, "quantize_axis", 1, r)
    bits, fp = int(b.attr("bits", 4)), dt in FP_DATA
    block = _block_size(b, allow_zero=fp)
    if dt == DType.UINT8:
        data, zp, dt = _uint8_data(b, bits, q, g, r)
    elif dt in (DType.INT4, DType.UINT4) or fp:
        if dt in (DType.INT4, DType.UINT4) and bits != 4:
            raise b.fail(f"bits must be 4 for {dt.short} data, got {bits}")
        if fp and b.input(3) is not None:
            raise b.fail(f"zero_points must not be given for {dt.short} data")
        if b.input(3) is not None and b.dtype(3) != dt:
            raise b.fail(f"zero_points must have data's type {dt.short}, got {b.dtype(3).short}")
        data, zp = b.input(0), b.input(3)
    else:
        raise b.unsupported(f"data: {dt.short} is not supported")
    if block == 0:
        block = data.type.shape[q]
        if not isinstance(block, int):
            raise b.unsupported("block_size 0 needs a static quantize_axis dim")
    scales = _check_scales(b, data, q, block, fp)
    safe, valid = _gather_valid(b, data, g)
    if g == q:
        y = b.op("Gather", dequantize(b, data, scales, zp, axis=q, block=block), safe, axis=g)
    else:
        parts = [b.op("Gather", v, safe, axis=g) for v in (data, scales, zp) if v is not None]
        qa = q if q < g else q + b.rank(1) - 1
        y = dequantize(b, parts[0], parts[1], parts[2] if zp is not None else None, axis=qa, block=block)
    trailing = r - g - 1
    if trailing:
        valid = b.unsqueeze(valid, list(range(b.rank(1), b.rank(1) + trailing)))
    b.op("Where", valid, y, b.scalar(0.0, b.dtype(2)), out=b.output(0))
