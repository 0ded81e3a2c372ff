"""Named sets of element types for kernels' ``types=`` declarations, and their compact names.

A kernel declares the element types it computes correctly for its op's main type parameter
(``@kernel(..., types=FLOATS | HALF)``, see base.py); ``onnxc ops`` prints them with the short
names of ``type_name`` (float, double, f16, bf16, i8..i64, u8..u64, bool, string, f8e4m3fn, i4...).
"""

from __future__ import annotations

from collections.abc import Iterable

from onnxc.ir import DType

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})
HALF = frozenset({DType.FLOAT16, DType.BFLOAT16})
SIGNED = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.INT64})
UNSIGNED = frozenset({DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
INTS = SIGNED | UNSIGNED
BOOL = frozenset({DType.BOOL})
STRING = frozenset({DType.STRING})
NUMERIC = FLOATS | INTS                      # computed natively in C
ALL_FLOATS = FLOATS | HALF                   # half types computed in float32
ARITH = NUMERIC | HALF                       # every type with arithmetic onnxc computes
MOVABLE = ARITH | BOOL                       # what element-copying kernels move bit-exactly
LOWP = frozenset({DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ, DType.FLOAT8E5M2, DType.FLOAT8E5M2FNUZ,
                  DType.FLOAT8E8M0, DType.FLOAT4E2M1})
SUBBYTE = frozenset({DType.INT4, DType.UINT4, DType.INT2, DType.UINT2})
COMPLEX = frozenset({DType.COMPLEX64, DType.COMPLEX128})
# every type stored as whole bytes per element: kernels that copy values as bytes (sequences) carry them
STORABLE = MOVABLE | LOWP | SUBBYTE
# every element type a tensor can have in the IR (views and value-passing kernels carry any of them)
ANY = frozenset(t for t in DType if t != DType.UNDEFINED)

_NAMES = {DType.FLOAT: "float", DType.DOUBLE: "double", DType.FLOAT16: "f16", DType.BFLOAT16: "bf16",
          DType.BOOL: "bool", DType.STRING: "string", DType.COMPLEX64: "c64", DType.COMPLEX128: "c128",
          DType.FLOAT4E2M1: "f4e2m1"}
for _t in SIGNED | UNSIGNED | SUBBYTE:
    _NAMES[_t] = ("i" if _t.is_signed else "u") + str(_t.np.itemsize * 8 if _t not in SUBBYTE else
                                                        int(_t.name[-1]))
for _t in LOWP - {DType.FLOAT4E2M1}:
    _NAMES[_t] = "f8" + _t.name[len("FLOAT8"):].lower()

# display order: floats, halves, low-precision floats, signed, unsigned, sub-byte, bool, string, complex
_ORDER = [DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ,
          DType.FLOAT8E5M2, DType.FLOAT8E5M2FNUZ, DType.FLOAT8E8M0, DType.FLOAT4E2M1,
          DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16, DType.UINT32,
          DType.UINT64, DType.INT4, DType.UINT4, DType.INT2, DType.UINT2, DType.BOOL, DType.STRING,
          DType.COMPLEX64, DType.COMPLEX128]


def type_name(dt: DType) -> str:
    """Compact name of an element type: float, double, f16, bf16, i8, u64, bool, string, f8e4m3fn, i4..."""
    return _NAMES.get(dt, dt.name.lower())


def type_names(types: Iterable[DType]) -> list[str]:
    """Compact names of ``types`` in a fixed order (floats first, then integers, bool, string)."""
    ts = set(types)
    return [type_name(t) for t in _ORDER if t in ts] + sorted(type_name(t) for t in ts - set(_ORDER))


def describe_types(types: Iterable[DType]) -> str:
    """One short line for a set of types: "any", "any except string", or names with runs folded
    ("i8..i64" for every signed width, "u8..u64", "f8*" for every float8)."""
    ts = set(types)
    missing = ANY - ts
    if not missing:
        return "any"
    if len(missing) <= 3 and len(ts) > len(ANY) // 2:
        return "any except " + ", ".join(type_names(missing))
    names = type_names(ts)
    for group, label in ((SIGNED, "i8..i64"), (UNSIGNED, "u8..u64"), (LOWP - {DType.FLOAT4E2M1}, "f8*")):
        if group <= ts:
            members = set(type_names(group))
            at = next(i for i, n in enumerate(names) if n in members)
            names = [n for n in names if n not in members]
            names.insert(at, label)
    return ", ".join(names)


__all__ = ["FLOATS", "HALF", "SIGNED", "UNSIGNED", "INTS", "BOOL", "STRING", "NUMERIC", "ALL_FLOATS", "ARITH",
           "MOVABLE", "LOWP", "SUBBYTE", "STORABLE", "COMPLEX", "ANY", "type_name", "type_names", "describe_types"]
