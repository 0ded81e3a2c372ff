"""TensorProto / SparseTensorProto -> numpy arrays in the IR's storage layout.

The storage dtype of each element type is ``DType.np`` (ir/types.py): numpy types where numpy has
them, float16 as ``np.float16``, bfloat16 as its uint16 bit pattern, the 8- and 4-bit floats as
uint8 bit patterns, int4/int2 (uint4/uint2) unpacked to one element per int8 (uint8), strings as
object arrays of ``str`` (``bytes`` when not valid UTF-8). Element counts are exact (Python ints) and
checked against the limits of ir/limits.py first, then against the stored data, so dims whose product
wraps in 64 bits, a truncated or an inconsistent tensor is a ModelError naming it, not a reshape crash.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxc.ir import DType, ModelError
from onnxc.ir.limits import element_count, too_big

from .external import EXTERNAL, DataDir, read_external
from .types import convert_dtype

# Little-endian wire dtype of raw_data for the element types numpy can read directly.
_RAW = {
    DType.FLOAT: "<f4", DType.UINT8: "u1", DType.INT8: "i1", DType.UINT16: "<u2", DType.INT16: "<i2",
    DType.INT32: "<i4", DType.INT64: "<i8", DType.BOOL: "u1", DType.FLOAT16: "<f2", DType.DOUBLE: "<f8",
    DType.UINT32: "<u4", DType.UINT64: "<u8", DType.COMPLEX64: "<c8", DType.COMPLEX128: "<c16",
    DType.BFLOAT16: "<u2", DType.FLOAT8E4M3FN: "u1", DType.FLOAT8E4M3FNUZ: "u1", DType.FLOAT8E5M2: "u1",
    DType.FLOAT8E5M2FNUZ: "u1", DType.FLOAT8E8M0: "u1",
}
# Sub-byte types: elements per byte (low bits first).
_PACKED = {DType.INT4: 2, DType.UINT4: 2, DType.FLOAT4E2M1: 2, DType.INT2: 4, DType.UINT2: 4}
# Types whose typed-field storage is int32_data, one element per entry.
_INT32_FIELD = {DType.INT32, DType.INT16, DType.INT8, DType.UINT16, DType.UINT8, DType.BOOL, DType.FLOAT16,
                DType.BFLOAT16, DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ, DType.FLOAT8E5M2,
                DType.FLOAT8E5M2FNUZ, DType.FLOAT8E8M0}


def tensor_name(t: Any, fallback: str = "") -> str:
    return f"tensor {t.name or fallback!r}"


def tensor_to_array(t: Any, base_dir: DataDir | str | None = None, what: str | None = None) -> np.ndarray:
    """Decode TensorProto ``t``; ``base_dir`` (a folder or the loader's DataDir) resolves external data,
    ``what`` names it in errors."""
    what = what or tensor_name(t)
    if t.HasField("segment"):
        raise ModelError(f"{what} is a segment of a larger tensor; segmented tensors are not supported")
    if t.data_type == 0:
        raise ModelError(f"{what} has no data_type")
    dtype = convert_dtype(t.data_type, what)
    dims = _dims(t.dims, dtype, what)
    n = element_count(dims)
    if t.data_location == EXTERNAL:
        if dtype == DType.STRING:
            raise ModelError(f"{what}: string tensors cannot use external data")
        raw = read_external(t, base_dir, what, raw_bytes(dtype, dims))
        flat = _from_raw(raw, dtype, n, what, copy=not isinstance(raw, memoryview))
    elif t.HasField("raw_data"):
        if dtype == DType.STRING:
            raise ModelError(f"{what}: string tensors cannot use raw_data")
        flat = _from_raw(t.raw_data, dtype, n, what)
    else:
        flat = _from_fields(t, dtype, n, what)
    return flat.reshape(dims)


def raw_bytes(dtype: DType, dims: tuple[int, ...]) -> int:
    """Bytes the raw data of a tensor of ``dtype`` and ``dims`` takes (exact: no int64 wraparound)."""
    n = math.prod(dims)
    if dtype in _PACKED:
        return -(-n // _PACKED[dtype])
    return n * np.dtype(_RAW[dtype]).itemsize


def _dims(dims: Any, dtype: DType, what: str) -> tuple[int, ...]:
    """The dims of a stored tensor, ModelError when negative or beyond the size limits."""
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{what} has negative dims {list(dims)}")
    why = too_big(dtype, dims)
    if why is not None:
        raise ModelError(f"{what}: {why}")
    return dims


def _from_raw(raw: bytes | memoryview, dtype: DType, n: int, what: str, copy: bool = True) -> np.ndarray:
    """The elements of ``raw``; ``copy=False``: a read-only view when the stored type is the in-memory one
    (mapped external data, frontend/external.py)."""
    if dtype in _PACKED:
        per = _PACKED[dtype]
        need = -(-n // per)
        _check(what, dtype, n, "raw_data bytes", len(raw), need)
        return unpack_bits(np.frombuffer(raw, np.uint8), dtype, n)
    wire = np.dtype(_RAW[dtype])
    _check(what, dtype, n, "raw_data bytes", len(raw), n * wire.itemsize)
    arr = np.frombuffer(raw, wire)
    if dtype == DType.BOOL:
        return arr != 0
    return arr.astype(dtype.np, copy=copy)


def _from_fields(t: Any, dtype: DType, n: int, what: str) -> np.ndarray:
    if dtype == DType.STRING:
        data = list(t.string_data)
        _check(what, dtype, n, "entries in string_data", len(data), n)
        out = np.empty(len(data), dtype=object)
        out[:] = [decode_str(s) for s in data]
        return out
    if dtype in _PACKED:
        need = -(-n // _PACKED[dtype])
        _check(what, dtype, n, "entries in int32_data", len(t.int32_data), need)
        packed = np.asarray(t.int32_data, dtype=np.int32).astype(np.uint8)
        return unpack_bits(packed, dtype, n)
    if dtype in _INT32_FIELD:
        _check(what, dtype, n, "entries in int32_data", len(t.int32_data), n)
        ints = np.asarray(t.int32_data, dtype=np.int32)
        if dtype == DType.BOOL:
            return ints != 0
        if dtype == DType.FLOAT16:
            return ints.astype(np.uint16).view(np.float16)
        return ints.astype(dtype.np)
    field, scalar, per = {
        DType.FLOAT: ("float_data", np.float32, 1), DType.COMPLEX64: ("float_data", np.float32, 2),
        DType.DOUBLE: ("double_data", np.float64, 1), DType.COMPLEX128: ("double_data", np.float64, 2),
        DType.INT64: ("int64_data", np.int64, 1), DType.UINT32: ("uint64_data", np.uint64, 1),
        DType.UINT64: ("uint64_data", np.uint64, 1),
    }[dtype]
    values = getattr(t, field)
    _check(what, dtype, n, f"entries in {field}", len(values), n * per)
    arr = np.asarray(values, dtype=scalar)
    return arr.view(dtype.np) if per == 2 else arr.astype(dtype.np)


def _check(what: str, dtype: DType, n: int, unit: str, got: int, need: int) -> None:
    """ModelError unless the stored count ``got`` is the ``need`` that ``n`` elements take."""
    if got != need:
        raise ModelError(f"{what}: {n} elements of type {dtype.name} need {need} {unit}, found {got}")


def unpack_bits(packed: np.ndarray, dtype: DType, n: int) -> np.ndarray:
    """Unpack 4-bit (two a byte) or 2-bit (four a byte) elements, low bits first, to one a byte."""
    per = _PACKED[dtype]
    bits = 8 // per
    mask = (1 << bits) - 1
    parts = [(packed >> (bits * k)) & mask for k in range(per)]
    flat = np.stack(parts, axis=-1).reshape(-1)[:n].astype(np.uint8)
    if dtype in (DType.INT4, DType.INT2):
        sign = 1 << (bits - 1)
        return ((flat.astype(np.int16) ^ sign) - sign).astype(np.int8)
    return flat


def decode_str(s: bytes) -> str | bytes:
    """UTF-8 text of ``s``, or ``s`` itself when it is not valid UTF-8."""
    try:
        return s.decode("utf-8")
    except UnicodeDecodeError:
        return s


def sparse_to_array(sp: Any, base_dir: DataDir | str | None = None, what: str | None = None) -> np.ndarray:
    """Densify a SparseTensorProto: zeros (empty strings) everywhere but at ``indices``."""
    what = what or f"sparse {tensor_name(sp.values)}"
    values = tensor_to_array(sp.values, base_dir, f"{what} values").reshape(-1)
    dims = _dims(sp.dims, convert_dtype(sp.values.data_type, what), what)
    n = element_count(dims)
    try:
        dense = np.full(n, "", dtype=object) if values.dtype == object else np.zeros(n, dtype=values.dtype)
    except MemoryError:
        raise ModelError(f"{what}: densifying dims {list(dims)} ({n * values.dtype.itemsize} bytes) ran out of "
                         "memory") from None
    nnz = values.shape[0]
    if nnz == 0:
        return dense.reshape(dims)
    idx = tensor_to_array(sp.indices, base_dir, f"{what} indices").astype(np.int64)
    if idx.ndim == 1 and idx.shape[0] == nnz:
        flat = idx
    elif idx.ndim == 2 and idx.shape == (nnz, len(dims)):
        if np.any(idx < 0) or np.any(idx >= np.asarray(dims, dtype=np.int64)):
            raise ModelError(f"{what}: an index is out of range for dims {list(dims)}")
        flat = np.ravel_multi_index(tuple(idx.T), dims) if dims else np.zeros(nnz, np.int64)
    else:
        raise ModelError(f"{what}: indices of shape {list(idx.shape)} do not fit {nnz} values "
                         f"in {len(dims)} dimensions")
    if np.any(flat < 0) or np.any(flat >= n):
        raise ModelError(f"{what}: an index is out of range for dims {list(dims)}")
    dense[flat] = values
    return dense.reshape(dims)
