"""Load a compiled model library through cffi's ABI mode and call it with numpy arrays."""

from __future__ import annotations

import contextlib
import math
import mmap
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import cffi
import numpy as np

from onnxc.codegen import sigint
from onnxc.ir import (
    CONTAINER_TYPES,
    DType,
    InputError,
    MapType,
    OptionalType,
    RuntimeFailure,
    SequenceType,
    TensorType,
    UnsupportedOpError,
)
from onnxc.ir.limits import MAX_TENSOR_BYTES, element_count

CDEF = """
typedef struct onnxc_tensor { void *data; int64_t dims[16]; int32_t rank; int32_t dtype; } onnxc_tensor;
typedef struct onnxc_value { int32_t kind; int32_t elem_dtype; onnxc_tensor t; int64_t n, cap;
                             struct onnxc_value **items; } onnxc_value;
int onnxc_model_run(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                    size_t errlen, int threads);
int onnxc_model_run_into(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                         size_t errlen, int threads);
int onnxc_model_run_cancellable(const unsigned char *W, const onnxc_tensor *in, onnxc_tensor *out, char *err,
                                size_t errlen, int threads, const unsigned int *cancel);
int onnxc_model_watch_sigint(unsigned int *counter);
void onnxc_model_free(void *p);
void onnxc_model_value_free(void *p);
int onnxc_model_maps_dense(void *seq, void *out, int64_t *c, int32_t *dtype);
int onnxc_model_maps_keyed(void *seq, const void *keys, int64_t c, int32_t kdtype, int32_t vdtype, void *out);
const unsigned char *onnxc_model_weights(size_t *size);  /* AOT artifacts with embedded weights only */
"""

Buffer = bytes | bytearray | memoryview | np.ndarray  # a weights blob: anything numpy can view as bytes

_ffi = cffi.FFI()
_ffi.cdef(CDEF)
_ffis: dict[str, cffi.FFI] = {"onnxc_model": _ffi}
_libs: dict[tuple[str, str], object] = {}
_lock = threading.Lock()


def ffi_for(prefix: str) -> cffi.FFI:
    """The cffi declarations of a library whose run function is ``<prefix>_run`` (JIT libraries use
    ``onnxc_model``; AOT artifacts ``<name>_model``, so several can live in one program)."""
    with _lock:
        f = _ffis.get(prefix)
        if f is None:
            f = cffi.FFI()
            f.cdef(CDEF.replace("onnxc_model_", prefix + "_"))
            _ffis[prefix] = f
        return f

ERRLEN = 1024
# the element type of a numpy array, for inputs whose declared type the caller did not give
_NP_DTYPES = {d.np: d for d in (DType.BOOL, DType.FLOAT16, DType.DOUBLE, DType.UINT64, DType.UINT32, DType.UINT16,
                                DType.UINT8, DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.FLOAT)}
VALUE_DTYPE = 1000  # onnxc_tensor.dtype of a descriptor pointing at an onnxc_value (runtime_c/onnxc_value.h)


def open_library(path: Path, ffi: cffi.FFI = _ffi):
    """dlopen a model library once per process. RTLD_NODELETE keeps it mapped until exit, so
    its pool's worker threads never run unmapped code during interpreter shutdown."""
    key = (str(path), str(id(ffi)))
    with _lock:
        lib = _libs.get(key)
        if lib is None:
            lib = ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_LOCAL | getattr(ffi, "RTLD_NODELETE", 0x1000))
            _libs[key] = lib
        return lib


class NativeModel:
    """A loaded model library plus its weights blob; ``run`` takes and returns numpy arrays."""

    def __init__(self, lib_path: Path, weights: Buffer | None, out_dtypes: list, threads: int = 1,
                 in_types: list | None = None, prefix: str = "onnxc_model"):
        """``out_dtypes``: per output its DType, or its IR type when it is a sequence/optional;
        ``in_types``: per input its DType for tensors (the descriptor's dtype, which the library checks;
        None: taken from the array), the IR type for sequence/optional/map inputs;
        ``weights``: the blob (any bytes-like object; used in place when 64-byte aligned, e.g. the
        Program's blob or ``read_weights``, else copied), or None when the library embeds it (AOT
        artifacts: ``<prefix>_weights()``);
        the run function is ``<prefix>_run``."""
        self.ffi = ffi = ffi_for(prefix)
        self.lib = open_library(lib_path, ffi)
        self.path = lib_path
        self.prefix = prefix
        self._run = getattr(self.lib, f"{prefix}_run")
        try:  # (libraries from before cancelling have neither: their runs ignore Ctrl-C)
            self._run_cancellable = getattr(self.lib, f"{prefix}_run_cancellable")
        except AttributeError:
            self._run_cancellable = None
        sigint.watch(self.lib, prefix)
        self._run_into = getattr(self.lib, f"{prefix}_run_into")
        self._free = getattr(self.lib, f"{prefix}_free")
        self._value_free = getattr(self.lib, f"{prefix}_value_free")
        try:  # (libraries from before it read sequences of maps one map at a time)
            self._maps_dense = getattr(self.lib, f"{prefix}_maps_dense")
        except AttributeError:
            self._maps_dense = None
        try:  # (libraries from before it rebuilt every call's keys)
            maps_keyed = getattr(self.lib, f"{prefix}_maps_keyed")
        except AttributeError:
            maps_keyed = None
        self._readers = [MapsReader(ffi, maps_keyed) if maps_keyed is not None and isinstance(d, CONTAINER_TYPES)
                         else None for d in out_dtypes]
        if weights is None:
            self._wptr = getattr(self.lib, f"{prefix}_weights")(ffi.new("size_t *"))
        else:
            self._weights = as_aligned(weights)
            self._wptr = ffi.from_buffer("unsigned char[]", self._weights)
        self.out_dtypes = [d if isinstance(d, CONTAINER_TYPES) else DType(d) for d in out_dtypes]
        self.in_types = in_types or []
        self.threads = threads
        self.library_bytes: bytes | None = None  # set when the library file is gone (an unpickled model)

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        ffi = self.ffi
        n_in, n_out = len(arrays), len(self.out_dtypes)
        ins = ffi.new("onnxc_tensor[]", max(1, n_in))
        outs = ffi.new("onnxc_tensor[]", max(1, n_out))
        keep = []
        for i, a in enumerate(arrays):
            t = ins[i]
            vt = self.in_types[i] if i < len(self.in_types) else None
            if vt is not None and not isinstance(vt, DType):
                t.data = build_value(a, vt, keep, f"input {i}", ffi)
                t.dtype = VALUE_DTYPE
                continue
            if a.ndim > 16:
                raise InputError(f"input {i} has rank {a.ndim}; at most 16 is supported")
            t.dtype = int(vt if vt is not None else _NP_DTYPES.get(a.dtype, DType.UNDEFINED))
            if a.dtype.kind in "OUS":
                t.dtype = int(DType.STRING)
                a = string_pointers(a, keep, f"input {i}", ffi)
            buf = ffi.from_buffer(a) if a.nbytes else ffi.NULL
            keep.append(buf)
            t.data = buf
            t.rank = a.ndim
            for k, d in enumerate(a.shape):
                t.dims[k] = d
        err = ffi.new("char[]", ERRLEN)
        if self._run_cancellable is not None:
            st = self._run_cancellable(self._wptr, ins, outs, err, ERRLEN, self.threads, sigint.cancel_ptr())
        else:
            st = self._run(self._wptr, ins, outs, err, ERRLEN, self.threads)
        if st != 0:
            raise status_error(st, ffi.string(err).decode("utf-8", "replace"))
        return [self.take_output(outs[i], dt, i) for i, dt in enumerate(self.out_dtypes)]

    def run_into(self, ins, outs, err) -> int:
        """Call ``<prefix>_run_into`` with descriptors prepared by the caller (onnxc/fastpath.py)."""
        return self._run_into(self._wptr, ins, outs, err, ERRLEN, self.threads)

    def take_output(self, t, dt, j: int | None = None):
        """The Python value of output ``j``'s descriptor, which the library filled (it owns the memory)."""
        ffi = self.ffi
        if not isinstance(dt, DType):
            p = _cast(ffi, "onnxc_value *", t.data)
            try:
                reader = self._readers[j] if j is not None else None
                rows = reader.read(p) if reader is not None else None
                if rows is None:
                    rows = read_value(p, ffi, maps_dense=self._maps_dense)
                    if reader is not None:
                        reader.learn(p)
                return rows
            finally:
                self._value_free(p)
        shape = tuple(t.dims[k] for k in range(t.rank))
        if dt == DType.STRING:
            try:
                return read_strings(t.data, shape, ffi)
            finally:
                self._free(t.data)
        npdt = dt.np
        nbytes = math.prod(shape) * npdt.itemsize
        owner = ffi.gc(t.data, self._free)
        return np.frombuffer(ffi.buffer(owner, nbytes), dtype=npdt).reshape(shape)


def contiguous(a: np.ndarray, what: str) -> np.ndarray:
    """A C-contiguous copy of the view ``a``. InputError naming ``what`` and the size when the copy is
    beyond MAX_TENSOR_BYTES or does not fit in memory (a broadcast view of a scalar to 2^40 elements
    takes no memory itself; its copy takes 4 TiB)."""
    nbytes = element_count(a.shape) * a.dtype.itemsize
    why = f"{what}: a non-contiguous array of shape {list(a.shape)} needs a contiguous copy of {nbytes} bytes"
    if nbytes > MAX_TENSOR_BYTES:
        raise InputError(f"{why}, more than the limit of {MAX_TENSOR_BYTES} bytes per tensor")
    try:
        return a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    except MemoryError:
        raise InputError(f"{why}: out of memory") from None


def status_error(st: int, msg: str) -> BaseException:
    """The exception for a non-zero status of a run function (codes: runtime_c/onnxc.h). A cancelled
    run (Ctrl-C, codegen/sigint.py) gives KeyboardInterrupt, not an OnnxcError: it must not be caught
    as an error (``except Exception``, ``except OnnxcError``) and the program goes on."""
    if st == 1:
        return InputError(msg)
    if st == 5:  # valid data using a feature onnxc does not implement
        return UnsupportedOpError(f"unsupported at run time: {msg}")
    if st == 6:
        return KeyboardInterrupt(msg)
    return RuntimeFailure(msg)


_HUGE = 4 << 20  # blobs from this size get their own mapping, backed by transparent huge pages


def aligned_empty(n: int, zero: bool = False) -> np.ndarray:
    """``n`` bytes of 64-byte aligned memory (a uint8 array), zeroed when ``zero`` (pages are only
    touched when written). Large buffers (weights) are an anonymous mapping advised to use huge pages:
    filling a fresh 550 MB blob then costs a few hundred 2 MB page faults instead of 140000 4 kB ones
    (measured: 0.3 s instead of 2.4 s to read the VGG-19 weights into it)."""
    if n >= _HUGE:
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # page-aligned, zeroed
        with contextlib.suppress(AttributeError, OSError):  # (no THP: plain pages)
            m.madvise(mmap.MADV_HUGEPAGE)
        return np.frombuffer(m, np.uint8)
    buf = (np.zeros if zero else np.empty)(n + 64, np.uint8)
    off = -buf.ctypes.data % 64
    return buf[off:off + n]


def aligned_copy(data: Buffer) -> np.ndarray:
    """``data`` in 64-byte aligned memory. Weight offsets in the blob are 64-byte aligned, but the
    buffer of a bytes object is not (16 mod 64): unaligned, every vector load of a weight row would
    straddle two cache lines (measured: a 1.6x slower recurrent step)."""
    src = np.frombuffer(data, np.uint8)
    out = aligned_empty(src.size)
    out[:] = src
    return out


def as_aligned(data: Buffer) -> np.ndarray:
    """``data`` as a 64-byte aligned uint8 array: the same memory when it is aligned already (no
    second copy of the weights), else an aligned copy; never empty (a valid pointer for the C side)."""
    a = np.frombuffer(data, np.uint8)
    if not a.size:
        return np.zeros(64, np.uint8)
    return a if a.ctypes.data % 64 == 0 else aligned_copy(a)


def string_pointers(a: np.ndarray, keep: list, what: str, ffi: cffi.FFI = _ffi) -> np.ndarray:
    """The pointer array (``onnxc_str[]``) of a str/bytes/object array: its strings are encoded as
    UTF-8 into one NUL-separated buffer that ``keep`` holds until the call returns."""
    enc = []
    for s in a.reshape(-1).tolist():
        if isinstance(s, str):
            b = s.encode("utf-8", "surrogateescape")
        elif isinstance(s, bytes):
            b = s
        else:
            raise InputError(f"{what}: expected strings, got an element of type {type(s).__name__}")
        if b"\0" in b:
            raise InputError(f"{what}: strings must not contain NUL characters")
        enc.append(b)
    chars = ffi.new("char[]", b"\0".join(enc) + b"\0")
    keep.append(chars)
    lens = np.fromiter((len(b) + 1 for b in enc), dtype=np.uint64, count=len(enc))
    starts = np.concatenate([np.zeros(1, np.uint64), np.cumsum(lens, dtype=np.uint64)[:-1]]) if len(enc) else lens
    ptrs = (starts + np.uint64(int(ffi.cast("uintptr_t", chars)))).reshape(a.shape)
    keep.append(ptrs)
    return ptrs


def _dense_maps(p, ffi: cffi.FFI, maps_dense) -> list | None:
    """ZipMap's sequence of maps as dicts, through one copy of every value into one array, or None when
    the maps do not share one key table (the library checks, ``<prefix>_maps_dense``)."""
    m0 = p.items[0] if p.n > 0 else None
    if m0 is None or m0.kind != 3 or m0.n != 2 or m0.items[1].kind != 1:
        return None
    if p.n == 1:
        k, v = m0.items[0], m0.items[1]
        if k.kind == 1 and k.t.rank == 1 and v.t.rank == 1:
            # one row (batch 1): its two lists straight from the library, no array in between
            return [dict(zip(_table_keys(k.t, ffi), _scalars(v.t, ffi), strict=True))]
    vt = m0.items[1].t
    npdt = _NP_OF.get(vt.dtype)
    if npdt is None or vt.rank != 1:
        return None
    values = np.empty((p.n, vt.dims[0]), npdt)
    if not maps_dense(p, ffi.from_buffer(values), ffi.NULL, ffi.NULL):
        return None
    keys = _scalars(m0.items[0].t, ffi)
    if not 0 < len(keys) <= _DICT_LITERAL_MAX:
        return [dict(zip(keys, row)) for row in values.tolist()]
    return _dict_rows(len(keys))(*keys, values.tolist())


class MapsReader:
    """An output that is a sequence of maps with the same keys on every row and every call (ZipMap's): the keys
    are read once, on a call that takes the general path (``learn``), and kept as Python scalars and in their C
    form; later calls (``read``) have the library check each row's keys against the kept ones and copy the
    values into one array (``<prefix>_maps_keyed``), whose rows become the dicts. At batch 1 this takes about
    a third of the general path's time (a classifier's probabilities). The kept state is one tuple, replaced
    whole, so threads calling the model at once never pair one call's keys with another's table."""

    def __init__(self, ffi: cffi.FFI, keyed) -> None:
        self.ffi, self.keyed = ffi, keyed
        self.state: tuple | None = None  # (keys, C table, key dtype, value dtype, numpy dtype, row builder, refs)

    def learn(self, p) -> None:
        """Keep the keys of sequence ``p``'s first map when it maps 1-D numeric or string keys to 1-D numeric
        values; else keep nothing."""
        self.state = None
        ffi = self.ffi
        if p.kind != 2 or p.n < 1:
            return
        m = p.items[0]
        if m.kind != 3 or m.n != 2 or m.items[0].kind != 1 or m.items[1].kind != 1:
            return
        k, v = m.items[0].t, m.items[1].t
        npdt = _NP_OF.get(v.dtype)
        if k.rank != 1 or v.rank != 1 or npdt is None or (k.dtype != int(DType.STRING) and k.dtype not in _NP_OF):
            return
        keys = _scalars(k, ffi)
        if k.dtype == int(DType.STRING):
            refs = [ffi.new("char[]", s.encode("utf-8", "surrogateescape")) for s in keys]
            table = ffi.new("char *[]", refs)
        else:
            refs = []
            table = ffi.new("char[]", ffi.buffer(k.data, len(keys) * _ITEMSIZE[k.dtype])[:])
        rows = _dict_rows(len(keys)) if 0 < len(keys) <= _DICT_LITERAL_MAX else None
        self.state = (keys, table, int(k.dtype), int(v.dtype), npdt, rows, refs)

    def read(self, p) -> list | None:
        """The dicts of sequence ``p``, or None when no keys are kept or ``p``'s are not the kept ones."""
        st = self.state
        if st is None:
            return None
        keys, table, kdtype, vdtype, npdt, rows, _ = st
        values = np.empty((max(p.n, 0), len(keys)), npdt)
        if not self.keyed(p, table, len(keys), kdtype, vdtype, self.ffi.from_buffer(values)):
            return None
        if rows is not None:
            return rows(*keys, values.tolist())
        return [dict(zip(keys, row)) for row in values.tolist()]


_KEY_TABLES: dict[tuple[int, bytes], list] = {}  # numeric key tables seen (dtype, bytes) -> their scalars
_KEY_TABLES_MAX = 64


def _table_keys(t, ffi: cffi.FFI) -> list:
    """``_scalars`` of a map's numeric key table, remembered by its bytes: ZipMap writes the same label table
    on every call, and its bytes compare faster than they convert (a classifier's output at batch 1)."""
    n, dt = t.dims[0], t.dtype
    size = _ITEMSIZE.get(dt)
    if not n or dt not in _UNPACK or size is None:
        return _scalars(t, ffi)
    ident = (dt, ffi.buffer(t.data, n * size)[:])
    keys = _KEY_TABLES.get(ident)
    if keys is None:
        if len(_KEY_TABLES) >= _KEY_TABLES_MAX:
            _KEY_TABLES.clear()
        keys = _KEY_TABLES[ident] = _scalars(t, ffi)
    return keys


_DICT_LITERAL_MAX = 256  # keys per row up to which rows are built by a dict display


@lru_cache(maxsize=64)
def _dict_rows(n: int) -> Callable:
    """``f(k0, ..., k{n-1}, rows)``: one dict ``{k0: r[0], ...}`` per row ``r`` of ``rows``. A dict display
    in a comprehension builds each row about 4x faster than ``dict(zip(keys, row))`` (ZipMap outputs of
    thousands of rows). The source holds generated identifiers only; keys arrive as arguments."""
    ks = ", ".join(f"k{i}" for i in range(n))
    vs = "".join(f"v{i}, " for i in range(n))
    items = ", ".join(f"k{i}: v{i}" for i in range(n))
    ns: dict = {}
    exec(f"def rows_({ks}, rows):\n    return [{{{items}}} for {vs}in rows]\n", ns)  # noqa: S102
    return ns["rows_"]


def _scalars(t, ffi: cffi.FFI) -> list:
    """The elements of a 1-D ``onnxc_tensor`` as a list of Python scalars."""
    n = t.dims[0]
    if n == 0:
        return []
    ctype = _UNPACK.get(t.dtype)
    if ctype is not None:
        return ffi.unpack(_cast(ffi, ctype, t.data), n)
    if t.dtype == int(DType.STRING):
        s = ffi.cast("char **", t.data)
        return [ffi.string(s[i]).decode("utf-8", "surrogateescape") for i in range(n)]
    return np.frombuffer(ffi.buffer(t.data, n * _ITEMSIZE[t.dtype]), DType(t.dtype).np).tolist()


def read_strings(data, shape: tuple, ffi: cffi.FFI = _ffi) -> np.ndarray:
    """An object array of str copied out of a packed string tensor (pointer array + characters)."""
    n = math.prod(shape)
    p = ffi.cast("char **", data)
    out = np.empty(n, dtype=object)
    out[:] = [ffi.string(p[i]).decode("utf-8", "surrogateescape") for i in range(n)]
    return out.reshape(shape)


def build_value(obj, t, keep: list, what: str, ffi: cffi.FFI = _ffi):
    """An ``onnxc_value *`` for a Python sequence (list), optional (None or the element) or tensor.
    The C side only reads it; ``keep`` holds the cdata and arrays alive until the call returns."""
    v = ffi.new("onnxc_value *")
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
        items = ffi.new("onnxc_value *[]", max(1, len(obj)))
        keep.append(items)
        for i, x in enumerate(obj):
            items[i] = build_value(x, t.elem, keep, f"{what}[{i}]", ffi)
        v.n = v.cap = len(obj)
        v.items = items
        return v
    if isinstance(t, MapType):
        return _build_map(obj, t, keep, what, ffi, v)
    if not isinstance(t, TensorType):
        raise InputError(f"{what}: values of type {t} are not supported")
    a = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
    if a.dtype != t.dtype.np:
        raise InputError(f"{what}: expected element type {t.dtype.short}, got {a.dtype}")
    if not a.flags.c_contiguous:
        a = contiguous(a, what)
    if a.ndim > 16:
        raise InputError(f"{what}: rank {a.ndim}; at most 16 is supported")
    if t.dtype == DType.STRING:
        a = string_pointers(a, keep, what, ffi)
    keep.append(a)
    buf = ffi.from_buffer(a) if a.nbytes else ffi.NULL
    keep.append(buf)
    v.kind = 1
    v.elem_dtype = int(t.dtype)
    v.t.data = buf
    v.t.rank = a.ndim
    v.t.dtype = int(t.dtype)
    for k, d in enumerate(a.shape):
        v.t.dims[k] = d
    return v


def _build_map(obj, t: MapType, keep: list, what: str, ffi: cffi.FFI, v):
    """Fill ``v`` as a map (kind 3) from a dict: items[0] its keys, items[1] its values (1-D tensors)."""
    if not isinstance(obj, dict):
        raise InputError(f"{what}: expected a map (dict), got {type(obj).__name__}")
    kind = {DType.STRING: "str", DType.INT64: "int"}.get(t.key)
    if kind is None:
        raise InputError(f"{what}: maps with {t.key.short} keys are not supported")
    for k in obj:
        ok = isinstance(k, str) if kind == "str" else isinstance(k, (int, np.integer)) and not isinstance(k, bool)
        if not ok:
            raise InputError(f"{what}: expected {t.key.short} keys, got the key {k!r}")
    vt = t.value
    if not isinstance(vt, TensorType):
        raise InputError(f"{what}: maps of {vt} values are not supported")
    keys = np.empty(len(obj), dtype=object) if kind == "str" else np.fromiter(obj, np.int64, len(obj))
    if kind == "str":
        keys[:] = list(obj)
    vals = list(obj.values())
    try:
        values = np.array(vals, dtype=vt.dtype.np) if vt.dtype != DType.STRING else np.array(vals, dtype=object)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what}: map values must be {vt.dtype.short} scalars ({e})") from None
    if values.ndim != 1:
        raise InputError(f"{what}: map values must be scalars")
    items = ffi.new("onnxc_value *[]", 2)
    keep.append(items)
    items[0] = build_value(keys, TensorType(t.key, (len(obj),)), keep, f"{what} keys", ffi)
    items[1] = build_value(values, TensorType(vt.dtype, (len(obj),)), keep, f"{what} values", ffi)
    v.kind = 3
    v.elem_dtype = int(vt.dtype)
    v.n = v.cap = 2
    v.items = items
    return v


# pointer types whose elements ffi.unpack turns into a list of Python scalars in one call
_UNPACK = {int(DType.FLOAT): "float *", int(DType.DOUBLE): "double *", int(DType.INT64): "int64_t *",
           int(DType.INT32): "int32_t *", int(DType.INT16): "int16_t *", int(DType.INT8): "int8_t *",
           int(DType.UINT64): "uint64_t *", int(DType.UINT32): "uint32_t *", int(DType.UINT16): "uint16_t *",
           int(DType.UINT8): "uint8_t *"}
# numpy element types of numeric tensor data (dtype code -> numpy dtype)
_NP_OF = {int(d): d.np for d in DType if d not in (DType.UNDEFINED, DType.STRING) and d.np is not None}
# bytes of one element in a tensor's data (strings: a pointer)
_ITEMSIZE = {int(d): (_ffi.sizeof("void *") if d == DType.STRING else d.np.itemsize)
             for d in DType if d != DType.UNDEFINED}


_CTYPES: dict[tuple[int, str], object] = {}  # (id of an FFI, C type) -> its resolved type


def _cast(ffi: cffi.FFI, ctype: str, ptr):
    """``ffi.cast(ctype, ptr)`` with the type resolved once per FFI (cffi's cast parses the string and goes
    through two Python layers per call: a ZipMap output at batch 1 made three of them)."""
    t = _CTYPES.get((id(ffi), ctype))
    if t is None:
        t = _CTYPES[(id(ffi), ctype)] = ffi.typeof(ctype)
    return ffi._backend.cast(t, ptr)


def read_value(p, ffi: cffi.FFI = _ffi, _keys: dict | None = None, maps_dense=None):
    """The Python form of an ``onnxc_value *`` the library returned (copied out): None, a list, a
    dict of Python scalars (a map) or an array.

    Maps are read as lists of scalars without numpy, and key tensors shared by several maps (ZipMap
    gives every row's map the same label table) are decoded once per call (``_keys``), so a
    sequence of n maps costs about one dict construction per map; with ``maps_dense`` (the library's
    ``<prefix>_maps_dense``), a sequence of maps sharing one key table (ZipMap's) is copied out as one
    array first, and its n dicts are built from its rows."""
    if p.kind == 0:
        return None
    if p.kind == 2:
        if maps_dense is not None and p.n > 0:
            rows = _dense_maps(p, ffi, maps_dense)
            if rows is not None:
                return rows
        keys = {} if _keys is None else _keys
        return [read_value(p.items[i], ffi, keys) for i in range(p.n)]
    if p.kind == 3:
        k, v = p.items[0], p.items[1]
        kt, vt = k.t, v.t
        if k.kind == 1 and v.kind == 1 and kt.rank == 1 and vt.rank == 1:
            # a key tensor is known by its bytes (for strings: the pointers, which stay valid until the
            # whole tree is freed after reading): every ZipMap row has its own copy of one label table
            n, dt = kt.dims[0], kt.dtype
            ident = (dt, ffi.buffer(kt.data, n * _ITEMSIZE[dt])[:] if n else b"")
            keys = None if _keys is None else _keys.get(ident)
            if keys is None:
                keys = _scalars(kt, ffi)
                if _keys is not None:
                    _keys[ident] = keys
            return dict(zip(keys, _scalars(vt, ffi), strict=True))
        keys, values = read_value(k, ffi), read_value(v, ffi)
        return dict(zip(keys.tolist(), values.tolist(), strict=True))
    t = p.t
    shape = tuple(t.dims[k] for k in range(t.rank))
    if t.dtype == int(DType.STRING):
        return read_strings(t.data, shape, ffi)
    dt = DType(t.dtype).np
    n = math.prod(shape) * dt.itemsize
    if n == 0:
        return np.zeros(shape, dt)
    return np.frombuffer(ffi.buffer(t.data, n), dtype=dt).reshape(shape).copy()

