"""The per-call fast path: the common call (C-contiguous numpy arrays of the declared dtypes) in a
few hundred nanoseconds of Python per tensor.

What it avoids compared with the general path: per-call cffi allocations (the descriptor arrays
are made once per thread, with static ranks and dims filled in), dtype conversions, and the
wrapping of library-allocated outputs: outputs whose shape follows from the input shapes are
allocated here with ``np.empty`` and written in place by ``<prefix>_run_into``, which checks
every shape it is handed. Anything unusual (another dtype, a non-contiguous or empty array, a
wrong shape, a sequence) returns None and the caller takes the general path, which converts or
raises the precise error.

Measured cost of one call of a one-Add model (1-element float32 tensors, 2.6 GHz Xeon, loaded):
the C run itself is tens of ns; cffi's ABI-mode call costs ~240 ns with one argument and ~520 ns
with six, hence ``<prefix>_run_args`` taking one pointer to a per-thread struct filled once;
``from_buffer`` plus the descriptor store ~300 ns per tensor (cheaper than ``arr.ctypes.data``,
~1.1 us, or ``__array_interface__``, ~0.9 us); ``np.empty`` ~220 ns per output; the checks of
an input (type, dtype, contiguity, shape) ~200 ns.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping

import cffi
import numpy as np

from onnxc.codegen import sigint
from onnxc.codegen.native import ERRLEN, NativeModel, open_library, status_error
from onnxc.ir import DType, InputError, RuntimeFailure, TensorType
from onnxc.ir.dims import as_symbol, evaluate, free_symbols
from onnxc.ir.limits import element_count

ShapeFn = Callable[[list], tuple]

_ARGS_CDEF = """
typedef struct onnxc_tensor { void *data; int64_t dims[16]; int32_t rank; int32_t dtype; } onnxc_tensor;
typedef struct PREFIX_args { const unsigned char *W; const onnxc_tensor *in; onnxc_tensor *out; char *err;
                             size_t errlen; int threads; const unsigned int *cancel; } PREFIX_args;
int PREFIX_run_args(const PREFIX_args *a);
"""
_ffis: dict[str, cffi.FFI] = {}
_lock = threading.Lock()


def _args_entry(native: NativeModel):
    """(ffi, ``<prefix>_run_args``) of the model library, or None when the library predates that entry
    (an older AOT artifact): then the six-argument ``run_into`` serves."""
    prefix = getattr(native, "prefix", "onnxc_model")
    with _lock:
        ffi = _ffis.get(prefix)
        if ffi is None:
            ffi = _ffis[prefix] = cffi.FFI()
            ffi.cdef(_ARGS_CDEF.replace("PREFIX", prefix))
    try:
        return ffi, getattr(open_library(native.path, ffi), f"{prefix}_run_args")
    except (AttributeError, OSError):
        return None


def _numeric(t) -> bool:
    return isinstance(t, TensorType) and t.dtype not in (DType.STRING, DType.UNDEFINED) and \
        t.dtype.np.kind in "biuf" and t.dtype.np.itemsize in (1, 2, 4, 8) and t.shape is not None


def shape_fn(dims: tuple, where: dict[str, tuple[int, int]]) -> ShapeFn | None:
    """A function of the input shapes giving an output's shape, or None when it needs more than the
    input shapes (a run-time dim defined by a node)."""
    items = []
    for d in dims:
        if isinstance(d, int):
            items.append(repr(d))
            continue
        if not free_symbols(d) <= set(where):
            return None
        name = as_symbol(d)
        if name is not None:
            i, k = where[name]
            items.append(f"s[{i}][{k}]")
        else:
            items.append(None)
    if all(x is not None for x in items):
        return eval(f"lambda s: ({', '.join(items)}{',' if len(items) == 1 else ''})")  # ints/indexes only

    def general(s: list) -> tuple:
        env = {name: s[i][k] for name, (i, k) in where.items()}
        return tuple(evaluate(d, env) for d in dims)

    return general


class FastPath:
    def __init__(self, native: NativeModel, in_types: list, out_types: list, early: list[bool],
                 names: tuple[list[str], list[str]] | None = None):
        """``in_types``/``out_types``: the IR types of the graph inputs/outputs; ``early``: per output,
        whether the run function sizes it from the input shapes alone (then ``run_into`` expects the
        caller's buffer; else the library allocates it); ``names``: the input and output names, for
        ``call_dict``. Raises ValueError when the model does not qualify (non-numeric or non-tensor
        inputs, an early output whose shape cannot be computed)."""
        if not all(_numeric(t) for t in in_types):
            raise ValueError("only numeric tensor inputs take the fast path")
        if len(early) != len(out_types):
            raise ValueError("no output allocation plan")
        self.native = native
        entry = _args_entry(native)
        self.ffi, self._run_args = entry if entry is not None else (native.ffi, None)
        self.n_in, self.n_out = len(in_types), len(out_types)
        self.in_dt = [t.dtype.np for t in in_types]
        self.in_static = [t.shape if all(isinstance(d, int) and d > 0 for d in t.shape) else None for t in in_types]
        self.in_rank = [len(t.shape) for t in in_types]
        self.in_code = [int(t.dtype) for t in in_types]  # the descriptors' dtype, checked by the library
        where: dict[str, tuple[int, int]] = {}
        for i, t in enumerate(in_types):
            for k, d in enumerate(t.shape):
                name = as_symbol(d)
                if name is not None:
                    where.setdefault(name, (i, k))
        self.out_fn: list[ShapeFn | None] = []
        self.out_dt: list = []
        self.out_static: list[tuple | None] = []
        for t, pre in zip(out_types, early):
            fn = shape_fn(t.shape, where) if pre and _numeric(t) else None
            if pre and fn is None:
                raise ValueError("an output the run function sizes early has no shape function here")
            self.out_fn.append(fn)
            self.out_dt.append(t.dtype.np if fn is not None else (t.dtype if isinstance(t, TensorType) else t))
            static = fn is not None and all(isinstance(d, int) and d > 0 for d in t.shape)
            self.out_static.append(tuple(t.shape) if static else None)
        self.out_code = [int(t.dtype) if fn is not None else 0 for t, fn in zip(out_types, self.out_fn)]
        self._tls = threading.local()
        self._args_made: weakref.WeakSet = weakref.WeakSet()  # every thread's argument struct (set_threads)
        self._in_names = names[0] if names is not None else None
        self._out_names = names[1] if names is not None else None
        # call(arrays) -> the outputs, or None when the call needs the general path
        self.call = self._generate()
        # call_dict(feeds) -> {output name: array}, or None (also for missing or unknown names)
        self.call_dict = self._generate(names) if names is not None else None

    def _buffers(self):
        ffi = self.ffi
        ins = ffi.new("onnxc_tensor[]", max(1, self.n_in))
        outs = ffi.new("onnxc_tensor[]", max(1, self.n_out))
        for i, shp in enumerate(self.in_static):
            ins[i].rank = self.in_rank[i]
            ins[i].dtype = self.in_code[i]
            for k, d in enumerate(shp or ()):
                ins[i].dims[k] = d
        for j, shp in enumerate(self.out_static):
            outs[j].dtype = self.out_code[j]  # caller-allocated outputs: their type, checked by run_into
            if shp is not None:
                outs[j].rank = len(shp)
                for k, d in enumerate(shp):
                    outs[j].dims[k] = d
        err = ffi.new("char[]", ERRLEN)
        args = ffi.NULL
        if self._run_args is not None:  # the arguments of run_into, once per thread (the main thread's
            prefix = getattr(self.native, "prefix", "onnxc_model")  # runs stop on Ctrl-C: codegen/sigint.py)
            with _lock:  # (set_threads sees every struct, made before or after it)
                args = ffi.new(f"{prefix}_args *", {"W": self.native._wptr, "in": ins, "out": outs, "err": err,
                                                      "errlen": ERRLEN, "threads": self.native.threads,
                                                      "cancel": sigint.cancel_ptr()})
                self._args_made.add(args)
        # the argument struct, the descriptor arrays, the error buffer, then each descriptor (indexing
        # makes a new proxy, so they are made once here)
        b = (args, ins, outs, err, *[ins[i] for i in range(self.n_in)], *[outs[j] for j in range(self.n_out)])
        self._tls.b = b
        return b

    def _generate(self, names: tuple[list[str], list[str]] | None = None) -> Callable:
        """A call function specialized for this model: unrolled per tensor, constants bound. With
        ``names`` it takes a dict of inputs by name and returns a dict of outputs by name."""
        ns: dict = {"np_ndarray": np.ndarray, "np_empty": np.empty, "tls": self._tls, "make": self._buffers,
                    "fb": self.ffi._backend.from_buffer, "CA": self.ffi.typeof("char[]"), "NULL": self.ffi.NULL,
                    "run": self.native._run_into, "run_args": self._run_args, "W": self.native._wptr,
                    "threads": self.native.threads, "ERRLEN": ERRLEN, "fail": self._fail,
                    "take": self.native.take_output, "oom": self._out_of_memory}
        arr = [f"a{i}" for i in range(self.n_in)]
        if names is None:
            L = ["def call(arrays):"]
            if arr:  # (the callers pass exactly n_in arrays)
                L.append(f"    {', '.join(arr)}{',' if len(arr) == 1 else ''} = arrays")
        else:  # the names are bound as constants, never pasted into the code
            L = ["def call(feeds):", f"    if len(feeds) != {self.n_in}: return None", "    try:"]
            for i, n in enumerate(names[0]):
                ns[f"name{i}"] = n
                L.append(f"        a{i} = feeds[name{i}]")
            L += ["        pass", "    except KeyError:", "        return None"]
            for j, n in enumerate(names[1]):
                ns[f"oname{j}"] = n
        L += ["    try:", "        b = tls.b", "    except AttributeError:", "        b = make()"]
        refs = [f"i{i}" for i in range(self.n_in)] + [f"u{j}" for j in range(self.n_out)]
        L.append(f"    args, ins, outs, err, {', '.join(refs)}{',' if len(refs) == 1 else ''} = b")
        for i, a in enumerate(arr):
            ns[f"dt{i}"] = self.in_dt[i]
            cond = f"type({a}) is not np_ndarray or {a}.dtype is not dt{i} or not {a}.flags.c_contiguous"
            if self.in_static[i] is not None:
                ns[f"s{i}"] = self.in_static[i]
                L.append(f"    if {cond} or {a}.shape != s{i}: return None")
            else:
                L.append(f"    if {cond} or {a}.ndim != {self.in_rank[i]} or not {a}.size: return None")
                L.append(f"    t = i{i}.dims")
                L += [f"    t[{k}] = {a}.shape[{k}]" for k in range(self.in_rank[i])]
            L.append(f"    i{i}.data = fb(CA, {a}, False)")
        if any(fn is not None and st is None for fn, st in zip(self.out_fn, self.out_static)):
            L.append(f"    s = [{', '.join(f'{a}.shape' for a in arr)}]")
        outs = []
        for j, fn in enumerate(self.out_fn):
            if fn is None:
                L.append(f"    u{j}.data = NULL")
                outs.append(f"take(u{j}, odt{j}, {j})")
                ns[f"odt{j}"] = self.out_dt[j]
                continue
            ns[f"odt{j}"] = self.out_dt[j]
            if self.out_static[j] is not None:
                ns[f"os{j}"] = self.out_static[j]
                L += ["    try:", f"        o{j} = np_empty(os{j}, odt{j})", "    except MemoryError:",
                      f"        oom({j}, os{j}, odt{j})"]
            else:
                ns[f"ofn{j}"] = fn
                L.append(f"    sh = ofn{j}(s)")
                # a negative dim (an input too small for a kernel window): the general path names it
                L += ["    try:", f"        o{j} = np_empty(sh, odt{j})", "    except MemoryError:",
                      f"        oom({j}, sh, odt{j})", "    except ValueError:", "        return None"]
                L.append(f"    if not o{j}.size: return None")
                L.append(f"    t = u{j}")
                L.append("    t.rank = len(sh)")
                L.append("    for k, d in enumerate(sh): t.dims[k] = d")
            L.append(f"    u{j}.data = fb(CA, o{j}, False)")
            outs.append(f"o{j}")
        if self._run_args is not None:
            L.append("    st = run_args(args)")
        else:
            L.append("    st = run(W, ins, outs, err, ERRLEN, threads)")
        L.append("    if st: fail(st, err)")
        if names is None:
            L.append(f"    return [{', '.join(outs)}]")
        else:
            L.append(f"    return {{{', '.join(f'oname{j}: {o}' for j, o in enumerate(outs))}}}")
        exec("\n".join(L), ns)  # generated from the model's types only: no model text in it
        return ns["call"]

    def set_threads(self, n: int) -> None:
        """Runs from now on use ``n`` threads (``native.threads``, already set by the caller): every
        thread's argument struct is updated in place, the call functions (which bind the count when the
        library has no ``run_args``) are made again."""
        with _lock:
            for args in list(self._args_made):
                args.threads = n
        self.call = self._generate()
        if self.call_dict is not None:
            self.call_dict = self._generate((self._in_names, self._out_names))

    def call_into(self, arrays: list, given: Mapping[int, np.ndarray], check: Callable) -> list | None:
        """The outputs of one run in which output ``j`` of ``given`` is written straight into
        ``given[j]`` (caller-allocated: ``out_fn[j]`` is not None) after ``check(j, array, shape)`` has
        compared it with the shape this call produces; the other outputs as ``call`` gives them. None when
        the inputs need the general path (as ``call``) or an early output is empty. Runs on the thread's
        descriptors and argument struct, as ``call`` does (made once per thread: building them per call cost
        8x the run of a small model)."""
        for i, a in enumerate(arrays):
            if type(a) is not np.ndarray or a.dtype != self.in_dt[i] or not a.flags.c_contiguous \
                    or a.ndim != self.in_rank[i] or not a.size:
                return None
            if self.in_static[i] is not None and a.shape != self.in_static[i]:
                return None  # (the general path names the mismatch; the thread's descriptor keeps its dims)
        shapes = [a.shape for a in arrays]
        early = {j: fn(shapes) for j, fn in enumerate(self.out_fn) if fn is not None}
        if any(element_count(sh) == 0 or min(sh, default=0) < 0 for sh in early.values()):
            return None
        try:
            b = self._tls.b
        except AttributeError:
            b = self._buffers()
        args, ins, outs, err = b[:4]
        dins, douts = b[4:4 + self.n_in], b[4 + self.n_in:]
        keep: list = []
        for i, a in enumerate(arrays):
            _bind(dins[i], a, keep, self.ffi)
        res: list = [None] * self.n_out
        for j in range(self.n_out):
            sh = early.get(j)
            if sh is None:
                douts[j].data = self.ffi.NULL  # the library allocates it
                continue
            if j in given:
                check(j, given[j], sh)
                res[j] = given[j]
            else:
                res[j] = np.empty(sh, self.out_dt[j])
            _bind(douts[j], res[j], keep, self.ffi)
        st = self._run_args(args) if self._run_args is not None else self.native.run_into(ins, outs, err)
        if st:
            self._fail(st, err)
        return [self.native.take_output(douts[j], self.out_dt[j], j) if o is None else o for j, o in enumerate(res)]

    def _fail(self, st: int, err) -> None:
        raise status_error(st, self.ffi.string(err).decode("utf-8", "replace"))

    def _out_of_memory(self, j: int, shape: tuple, dt) -> None:
        """The error of an output numpy cannot allocate (the library's own allocations report
        ONNXC_ERR_MEMORY, a RuntimeFailure too)."""
        name = repr(self._out_names[j]) if self._out_names is not None else str(j)
        n = element_count(shape) * np.dtype(dt).itemsize
        raise RuntimeFailure(f"output {name}: out of memory for shape {list(shape)} ({n} bytes)")


def _bind(t, a: np.ndarray, keep: list, ffi: cffi.FFI) -> None:
    """Point the descriptor ``t`` (its element type already set) at the C-contiguous array ``a``; ``keep``
    holds the buffer reference until the call returns."""
    t.rank = a.ndim
    dims = t.dims
    for k, d in enumerate(a.shape):
        dims[k] = d
    buf = ffi.from_buffer(a, require_writable=False)
    keep.append(buf)
    t.data = buf


def run_out(model, feeds: dict, out: Mapping[str, np.ndarray]) -> list:
    """The outputs of ``model.run(feeds, out=out)`` (a CompiledModel), in output order, ``out[name]`` in
    the place of output ``name``. Outputs the library writes into a caller's buffer (their shape follows
    from the input shapes) are written straight into ``out[name]``; the others (shapes known only after
    the run, ml_dtypes views, an ``out`` array that overlaps an input) are copied into it after the run."""
    given = _out_arrays(model, out)
    arrays = model._prepare(feeds)
    fast, views = model._fast, model._views
    direct = {j: a for j, a in given.items() if fast is not None and fast.out_fn[j] is not None and j not in views
              and not any(isinstance(x, np.ndarray) and np.may_share_memory(a, x) for x in arrays)}
    outs = None
    if direct:
        outs = fast.call_into(arrays, direct, _shape_check(model))
    if outs is None:
        direct = {}
        outs = model._native.run(arrays)
    if views:
        outs = model._finish(outs)
    check = _shape_check(model)
    for j, a in given.items():
        if j not in direct:
            check(j, a, outs[j].shape)
            np.copyto(a, outs[j], casting="no")
            outs[j] = a
    return outs


def _shape_check(model) -> Callable:
    """``check(j, array, shape)``: InputError unless the caller's array for output ``j`` has ``shape``."""

    def check(j: int, a: np.ndarray, shape: tuple) -> None:
        if a.shape != tuple(shape):
            raise InputError(f"out[{model._out_names[j]!r}]: expected shape {list(shape)} (the shape this call "
                             f"produces), got {list(a.shape)}")

    return check


def _out_arrays(model, out: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    """``out`` by output index, after the checks that need no run: known tensor outputs, numpy arrays of
    the output's dtype, C-contiguous, writable, no two sharing memory."""
    if not isinstance(out, Mapping):
        raise InputError(f"out: expected a dict of output name -> numpy array, got {type(out).__name__}")
    names = model._out_names
    unknown = [n for n in out if n not in names]
    if unknown:
        raise InputError(f"out: unknown output(s) {unknown}; the model's outputs are {names}")
    given: dict[int, np.ndarray] = {}
    for name, a in out.items():
        j = names.index(name)
        info = model.outputs[j]
        what = f"out[{name!r}]"
        if not info.is_tensor:
            raise InputError(f"{what}: the output is a {info.type}, not a tensor; out= takes tensor outputs only")
        if not isinstance(a, np.ndarray):
            raise InputError(f"{what}: expected a numpy array, got {type(a).__name__}")
        want = model._views.get(j, info.dtype)
        if a.dtype != want:
            raise InputError(f"{what}: expected dtype {want} (the output's element type "
                             f"{info.elem_type.name.lower()}), got {a.dtype}")
        if not a.flags.c_contiguous:
            raise InputError(f"{what}: expected a C-contiguous array, got one with strides {a.strides}")
        if not a.flags.writeable:
            raise InputError(f"{what}: the array is read-only")
        for k, b in given.items():
            if np.may_share_memory(a, b):
                raise InputError(f"{what} and out[{names[k]!r}] share memory")
        given[j] = a
    return given
