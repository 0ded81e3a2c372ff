"""Load a compiled model library through cffi's ABI mode and call it with numpy arrays."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cffi
import numpy as np

from onnxc.ir import DType, InputError, RuntimeFailure

CDEF = """
typedef struct onnxc_tensor { void *data; int64_t dims[16]; int32_t rank; int32_t dtype; } onnxc_tensor;
int onnxc_model_run(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                    size_t errlen, int threads);
void onnxc_model_free(void *p);
"""

_ffi = cffi.FFI()
_ffi.cdef(CDEF)
_libs: dict[str, object] = {}
_lock = threading.Lock()

ERRLEN = 1024


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

    def __init__(self, lib_path: Path, weights: bytes, out_dtypes: list[DType], threads: int = 1):
        self.lib = open_library(lib_path)
        self.path = lib_path
        self._weights = np.frombuffer(weights, dtype=np.uint8) if weights else np.zeros(64, np.uint8)
        self._wptr = _ffi.from_buffer("unsigned char[]", self._weights)
        self.out_dtypes = [DType(d) for d in out_dtypes]
        self.threads = threads

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        n_in, n_out = len(arrays), len(self.out_dtypes)
        ins = _ffi.new("onnxc_tensor[]", max(1, n_in))
        outs = _ffi.new("onnxc_tensor[]", max(1, n_out))
        keep = []
        for i, a in enumerate(arrays):
            t = ins[i]
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
            shape = tuple(t.dims[k] for k in range(t.rank))
            npdt = dt.np
            nbytes = int(np.prod(shape, dtype=np.int64)) * npdt.itemsize
            owner = _ffi.gc(t.data, self.lib.onnxc_model_free)
            arr = np.frombuffer(_ffi.buffer(owner, nbytes), dtype=npdt).reshape(shape)
            results.append(arr)
        return results
