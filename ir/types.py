"""Element types and value types of the IR.

`DType` numbers equal ONNX ``TensorProto.DataType`` so the frontend maps them one to one. Types that
numpy lacks (bfloat16, float8, float4, int4, int2) are stored as raw unsigned integer bit patterns
of the same width, one element per byte or more; packing happens only at the file boundary.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .dims import Dim, as_dim, free_symbols


class DType(enum.IntEnum):
    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26

    @property
    def np(self) -> np.dtype:
        """numpy dtype used to hold values of this type in memory."""
        return np.dtype(_NP[self])

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def c(self) -> str:
        """C type of one stored element."""
        return _C[self]

    @property
    def is_float(self) -> bool:
        return self in FLOAT_TYPES

    @property
    def is_int(self) -> bool:
        return self in INT_TYPES

    @property
    def is_signed(self) -> bool:
        return self in (DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.INT4, DType.INT2)

    @property
    def short(self) -> str:
        return self.name.lower()


_NP = {
    DType.FLOAT: "float32", DType.UINT8: "uint8", DType.INT8: "int8", DType.UINT16: "uint16",
    DType.INT16: "int16", DType.INT32: "int32", DType.INT64: "int64", DType.STRING: "object",
    DType.BOOL: "bool", DType.FLOAT16: "float16", DType.DOUBLE: "float64", DType.UINT32: "uint32",
    DType.UINT64: "uint64", DType.COMPLEX64: "complex64", DType.COMPLEX128: "complex128",
    DType.BFLOAT16: "uint16", DType.FLOAT8E4M3FN: "uint8", DType.FLOAT8E4M3FNUZ: "uint8",
    DType.FLOAT8E5M2: "uint8", DType.FLOAT8E5M2FNUZ: "uint8", DType.UINT4: "uint8", DType.INT4: "int8",
    DType.FLOAT4E2M1: "uint8", DType.FLOAT8E8M0: "uint8", DType.UINT2: "uint8", DType.INT2: "int8",
}

_C = {
    DType.FLOAT: "float", DType.UINT8: "uint8_t", DType.INT8: "int8_t", DType.UINT16: "uint16_t",
    DType.INT16: "int16_t", DType.INT32: "int32_t", DType.INT64: "int64_t", DType.STRING: "onnxc_str",
    DType.BOOL: "bool", DType.FLOAT16: "uint16_t", DType.DOUBLE: "double", DType.UINT32: "uint32_t",
    DType.UINT64: "uint64_t", DType.COMPLEX64: "float _Complex", DType.COMPLEX128: "double _Complex",
    DType.BFLOAT16: "uint16_t", DType.FLOAT8E4M3FN: "uint8_t", DType.FLOAT8E4M3FNUZ: "uint8_t",
    DType.FLOAT8E5M2: "uint8_t", DType.FLOAT8E5M2FNUZ: "uint8_t", DType.UINT4: "uint8_t", DType.INT4: "int8_t",
    DType.FLOAT4E2M1: "uint8_t", DType.FLOAT8E8M0: "uint8_t", DType.UINT2: "uint8_t", DType.INT2: "int8_t",
}

FLOAT_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT8E4M3FN,
                         DType.FLOAT8E4M3FNUZ, DType.FLOAT8E5M2, DType.FLOAT8E5M2FNUZ, DType.FLOAT4E2M1,
                         DType.FLOAT8E8M0})
INT_TYPES = frozenset({DType.UINT8, DType.INT8, DType.UINT16, DType.INT16, DType.INT32, DType.INT64,
                       DType.UINT32, DType.UINT64, DType.UINT4, DType.INT4, DType.UINT2, DType.INT2})
# Element types that are computed through float32 and stored as bit patterns.
EMULATED_FLOATS = frozenset({DType.FLOAT16, DType.BFLOAT16, DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ,
                             DType.FLOAT8E5M2, DType.FLOAT8E5M2FNUZ, DType.FLOAT4E2M1, DType.FLOAT8E8M0})


def dtype_from_numpy(dt: np.dtype) -> DType:
    dt = np.dtype(dt)
    if dt.kind in ("U", "S", "O"):
        return DType.STRING
    for k, v in _NP.items():
        if np.dtype(v) == dt and k not in EMULATED_FLOATS | {DType.INT4, DType.UINT4, DType.INT2, DType.UINT2}:
            return k
    if dt == np.float16:
        return DType.FLOAT16
    raise TypeError(f"no ONNX element type for numpy dtype {dt}")


Shape = tuple  # tuple[Dim, ...]


@dataclass(frozen=True)
class TensorType:
    """A tensor: element type and shape (None when even the rank is unknown)."""

    dtype: DType
    shape: tuple | None = None

    def __post_init__(self) -> None:
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def numel(self) -> Dim:
        n: Dim = 1
        for d in self.shape or ():
            n = n * d if isinstance(n, int) and isinstance(d, int) else as_dim(d) * n
        return n

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for d in self.shape or ():
            out |= free_symbols(d)
        return out

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype.short}[?]"
        return f"{self.dtype.short}[{', '.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class SequenceType:
    elem: object  # TensorType | SequenceType | ...

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    elem: object

    def __str__(self) -> str:
        return f"optional({self.elem})"


@dataclass(frozen=True)
class MapType:
    key: DType
    value: object

    def __str__(self) -> str:
        return f"map({self.key.short}, {self.value})"


ValueType = TensorType | SequenceType | OptionalType | MapType

CONTAINER_TYPES = (SequenceType, OptionalType, MapType)  # values that cross the ABI as an onnxc_value


def innermost(t: object) -> object:
    """The type inside any nesting of sequences, optionals and maps (a map's value type)."""
    while isinstance(t, CONTAINER_TYPES):
        t = t.value if isinstance(t, MapType) else t.elem
    return t
