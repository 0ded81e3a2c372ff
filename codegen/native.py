"""Load a compiled model library through cffi's ABI mode and call it with numpy arrays."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cffi
import numpy as np

from onnxc.ir import DType, InputError, OptionalType, RuntimeFailure, SequenceType, TensorType

CDEF = """
typedef struct onnxc_tensor { void *data; int64_t dims[16]; int32_t rank; int32_t dtype; } onnxc_tensor;
typedef struct onnxc_value { int32_t kind; int32_t elem_dtype; onnxc_tensor t; int64_t n, cap;
                             struct onnxc_value **items; } onnxc_value;
int onnxc_model_run(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                    size_t errlen, int threads);
void onnxc_model_free(void *p);
void onnxc_model_value_free(void *p);
"""

_ffi = cffi.FFI()
_ffi.cdef(CDEF)
_libs: dict[str, object] = {}
_lock = threading.Lock()

ERRLEN = 1024
VALUE_DTYPE = 1000  # onnxc_tensor.dtype of a descriptor pointing at an onnxc_value (runtime_c/onnxc_value.h)


# OpenMP workers must sleep between calls, not spin: a spinning pool steals the core the next call
# (or another process) needs. libgomp reads this when it loads, i.e. with the first model library.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def open_library(path: Path):
    """dlopen a model library once per process. RTLD_NODELETE keeps it (and libgomp) mapped until
    exit, so OpenMP threads never run unmapped code during interpreter shutdown."""
    key = str(path)
    with _lock:
        lib = _libs.get(key)
        if lib is None:
            lib = _ffi.dlopen(key, _ffi.RTLD_NOW | _ffi.RTLD_LOCAL | getattr(_ffi, "RTLD_NODELETE", 0x1000))
            _libs[key] = lib
        return lib


class NativeModel:
    """A loaded model library plus its weights blob; ``run`` takes and returns numpy arrays."""

    def __init__(self, lib_path: Path, weights: bytes, out_dtypes: list, threads: int = 1,
                 in_types: list | None = None):
        """``out_dtypes``: per output its DType, or its IR type when it is a sequence/optional;
        ``in_types``: per input None for tensors, the IR type for sequence/optional inputs."""
        self.lib = open_library(lib_path)
        self.path = lib_path
        self._weights = np.frombuffer(weights, dtype=np.uint8) if weights else np.zeros(64, np.uint8)
        self._wptr = _ffi.from_buffer("unsigned char[]", self._weights)
        self.out_dtypes = [d if isinstance(d, (SequenceType, OptionalType)) else DType(d) for d in out_dtypes]
        self.in_types = in_types or []
        self.threads = threads

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        n_in, n_out = len(arrays), len(self.out_dtypes)
        ins = _ffi.new("onnxc_tensor[]", max(1, n_in))
        outs = _ffi.new("onnxc_tensor[]", max(1, n_out))
        keep = []
        for i, a in enumerate(arrays):
            t = ins[i]
            vt = self.in_types[i] if i < len(self.in_types) else None
            if vt is not None:
                t.data = build_value(a, vt, keep, f"input {i}")
                t.dtype = VALUE_DTYPE
                continue
            if a.ndim > 16:
                raise InputError(f"input {i} has rank {a.ndim}; at most 16 is supported")
            buf = _ffi.from_buffer(a) if a.nbytes else _ffi.NULL
            keep.append(buf)
            t.data = buf
            t.rank = a.ndim
            for k, d in enumerate(a.shape):
                t.dims[k] = d
        err = _ffi.new("char[]", ERRLEN)
        st = self.lib.onnxc_model_run(self._wptr, ins, outs, err, ERRLEN, self.threads)
        if st != 0:
            msg = _ffi.string(err).decode("utf-8", "replace")
            raise (InputError if st == 1 else RuntimeFailure)(msg)
        results = []
        for i, dt in enumerate(self.out_dtypes):
            t = outs[i]
            if not isinstance(dt, DType):
                p = _ffi.cast("onnxc_value *", t.data)
                try:
                    results.append(read_value(p))
                finally:
                    self.lib.onnxc_model_value_free(p)
                continue
            shape = tuple(t.dims[k] for k in range(t.rank))
            npdt = dt.np
            nbytes = int(np.prod(shape, dtype=np.int64)) * npdt.itemsize
            owner = _ffi.gc(t.data, self.lib.onnxc_model_free)
            arr = np.frombuffer(_ffi.buffer(owner, nbytes), dtype=npdt).reshape(shape)
            results.append(arr)
        return results


def build_value(obj, t, keep: list, what: str):
    """An ``onnxc_value *`` for a Python sequence (list), optional (None or the element) or tensor.
    The C side only reads it; ``keep`` holds the cdata and arrays alive until the call returns."""
    v = _ffi.new("onnxc_value *")
    keep.append(v)
    if isinstance(t, OptionalType):
        if obj is None:
            return v  # kind 0: empty
        t = t.elem
    if isinstance(t, SequenceType):
        if not isinstance(obj, (list, tuple)):
            raise InputError(f"{what}: expected a sequence (list of arrays), got {type(obj).__name__}")
        v.kind = 2
        v.elem_dtype = int(getattr(t.elem, "dtype", 0) or 0)
        items = _ffi.new("onnxc_value *[]", max(1, len(obj)))
        keep.append(items)
        for i, x in enumerate(obj):
            items[i] = build_value(x, t.elem, keep, f"{what}[{i}]")
        v.n = v.cap = len(obj)
        v.items = items
        return v
    if not isinstance(t, TensorType):
        raise InputError(f"{what}: values of type {t} are not supported")
    a = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
    if a.dtype != t.dtype.np:
        raise InputError(f"{what}: expected element type {t.dtype.short}, got {a.dtype}")
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    if a.ndim > 16:
        raise InputError(f"{what}: rank {a.ndim}; at most 16 is supported")
    keep.append(a)
    buf = _ffi.from_buffer(a) if a.nbytes else _ffi.NULL
    keep.append(buf)
    v.kind = 1
    v.elem_dtype = int(t.dtype)
    v.t.data = buf
    v.t.rank = a.ndim
    v.t.dtype = int(t.dtype)
    for k, d in enumerate(a.shape):
        v.t.dims[k] = d
    return v


def read_value(p):
    """The Python form of an ``onnxc_value *`` the library returned (copied out)."""
    if p.kind == 0:
        return None
    if p.kind == 2:
        return [read_value(p.items[i]) for i in range(p.n)]
    t = p.t
    shape = tuple(t.dims[k] for k in range(t.rank))
    dt = DType(t.dtype).np
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if n == 0:
        return np.zeros(shape, dt)
    return np.frombuffer(_ffi.buffer(t.data, n), dtype=dt).reshape(shape).copy()
