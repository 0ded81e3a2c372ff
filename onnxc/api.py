"""The public face: compile a model and call it with numpy arrays."""

from __future__ import annotations

import gc
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from onnxc.codegen import cache as c_cache
from onnxc.codegen import model_cache
from onnxc.codegen.cache import build_cached
from onnxc.codegen.compiler import CompilerConfig, compiler_version, thread_flags
from onnxc.codegen.kernels.bf16 import check_precision, warn_if_slow
from onnxc.codegen.lower import Program
from onnxc.codegen.native import NativeModel, contiguous
from onnxc.codegen.templating import use_cache as use_template_cache
from onnxc.ir import CacheWarning, CompileError, DType, InputError, Model, ModelError, TensorType, innermost

from . import progress
from .fastpath import FastPath, run_out
from .pipeline import Compilation, Options, compile_pipeline, resolve_threads, resume


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: name, numpy dtype, ONNX element type and shape (ints or dim names)."""

    name: str
    dtype: np.dtype
    elem_type: DType
    shape: tuple
    type: object = None  # the IR type; a SequenceType/OptionalType/MapType for non-tensor values

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.type, TensorType) or self.type is None

    def __repr__(self) -> str:
        if not self.is_tensor:
            return f"TensorInfo({self.name!r}, {self.type})"
        return f"TensorInfo({self.name!r}, {self.elem_type.name.lower()}, {list(self.shape)})"


_ML_NAMES = {DType.BFLOAT16: "bfloat16", DType.FLOAT8E4M3FN: "float8_e4m3fn", DType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
             DType.FLOAT8E5M2: "float8_e5m2", DType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
             DType.FLOAT8E8M0: "float8_e8m0fnu", DType.FLOAT4E2M1: "float4_e2m1fn", DType.INT4: "int4",
             DType.UINT4: "uint4", DType.INT2: "int2", DType.UINT2: "uint2"}
_SUBBYTE_INTS = (DType.INT4, DType.UINT4, DType.INT2, DType.UINT2)


def _ml_dtype(dt: DType) -> np.dtype | None:
    """The ml_dtypes numpy dtype of a type numpy lacks (bfloat16, float8, float4, int4, int2), when
    ml_dtypes is installed and has it."""
    if dt not in _ML_NAMES:
        return None
    try:
        import ml_dtypes
    except ImportError:
        return None
    t = getattr(ml_dtypes, _ML_NAMES[dt], None)
    return None if t is None else np.dtype(t)


def _from_ml(a: np.ndarray, dt: DType, storage: np.dtype) -> np.ndarray:
    """IR storage of an ml_dtypes array: float bit patterns (float4 in the low nibble), int4/int2
    values one a byte (sign-extended)."""
    if dt in _SUBBYTE_INTS:
        return a.astype(storage)
    if dt == DType.FLOAT4E2M1:
        return a.view(np.uint8) & np.uint8(0x0F)
    return a.view(storage)


def _to_ml(a: np.ndarray, dt: DType, ml: np.dtype) -> np.ndarray:
    """An output in IR storage as its ml_dtypes array (values for int4/int2, else the same bits)."""
    return a.astype(ml) if dt in _SUBBYTE_INTS else a.view(ml)


def _info(name: str, t) -> TensorInfo:
    if not isinstance(t, TensorType):  # sequence / optional / map: its innermost element type
        e = innermost(t)
        dt = e.dtype if isinstance(e, TensorType) else DType.UNDEFINED
        return TensorInfo(name, np.dtype(object), dt, (), t)
    shape = tuple(d if isinstance(d, int) else str(d) for d in t.shape or ())
    return TensorInfo(name, t.dtype.np, t.dtype, shape, t)


class CompiledModel:
    """A model compiled to native code. ``run(dict) -> dict``; ``model(*arrays)`` positional.

    ``ir``, ``program`` and ``c_source`` (the optimized IR, the lowered Program, the C source) are kept
    only when given; a model from ``onnxc.compile`` recomputes them on first use (``recompute``), so a
    compiled model does not hold its weights a second and third time in the IR and the Program."""

    def __init__(self, native: NativeModel, inputs: list[TensorInfo], outputs: list[TensorInfo],
                 ir: Model | None = None, program: Program | None = None, source: str | Path | None = None,
                 timings: dict | None = None, early: list[bool] | None = None,
                 recompute: Callable[[], tuple[Model, Program, str]] | None = None, about: dict | None = None):
        """``source``: the C source, or the file holding it (read on first use); ``recompute``: gives
        (IR, Program, C source) again when ``ir``/``program`` are asked for and were not given; ``about``:
        what the model file says of itself (``model_about``)."""
        self._native = native
        self._about = about
        self._early = early
        self.inputs = inputs
        self.outputs = outputs
        self._ir = ir
        self._program = program
        self._source = source
        self._recompute = recompute
        self.timings = timings or {}
        self._in_names = [i.name for i in inputs]
        self._out_names = [o.name for o in outputs]
        try:  # the per-call fast path (onnxc/fastpath.py) for numeric tensor models
            if early is None and program is not None:
                early = output_plan(program)
            self._fast = FastPath(native, [i.type for i in inputs], [o.type for o in outputs], early or [],
                                  (self._in_names, self._out_names))
        except ValueError:
            self._fast = None
        self._views = {i: v for i, o in enumerate(outputs)
                       if o.is_tensor and (v := _ml_dtype(o.elem_type)) is not None}

    def _prepare(self, feeds: dict) -> list[np.ndarray]:
        arrays = []
        for info in self.inputs:
            if info.name not in feeds:
                raise InputError(f"missing input {info.name!r}; the model's inputs are {self._in_names}")
            a = feeds[info.name]
            if not info.is_tensor:  # a list (sequence) or None/element (optional): converted natively
                arrays.append(a)
                continue
            if not isinstance(a, np.ndarray):
                a = _from_python(a, info)
            if info.elem_type == DType.STRING:  # str, bytes or object arrays; encoded natively
                if a.dtype.kind not in "OUS":
                    raise InputError(f"input {info.name!r}: expected strings, got {a.dtype}")
                arrays.append(a)
                continue
            if a.dtype != info.dtype:
                ml = _ml_dtype(info.elem_type)
                if ml is not None and a.dtype == ml:  # (a dtype compares equal to None: float64)
                    a = _from_ml(a, info.elem_type, info.dtype)  # ml_dtypes bfloat16/float8/int4... arrays
                elif a.dtype.kind == info.dtype.kind == "f" and a.dtype == np.float64 and a.ndim == 0:
                    a = a.astype(info.dtype)
                else:
                    raise InputError(f"input {info.name!r}: expected element type "
                                     f"{info.elem_type.name.lower()} ({info.dtype}), got {a.dtype}")
            if not a.flags.c_contiguous:
                a = contiguous(a, f"input {info.name!r}")
            arrays.append(a)
        extra = set(feeds) - set(self._in_names)
        if extra:
            raise InputError(f"unknown input(s) {sorted(extra)}; the model's inputs are {self._in_names}")
        return arrays

    def _finish(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs of types numpy lacks (bfloat16, float8, float4, int4, int2) come back as ml_dtypes
        arrays when installed, else as their raw storage (uint16/uint8 bit patterns, int8/uint8 values)."""
        if self._views:
            outs = [_to_ml(a, self.outputs[i].elem_type, self._views[i]) if i in self._views else a
                    for i, a in enumerate(outs)]
        return outs

    def run(self, feeds: dict, output_names: list[str] | None = None, *,
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The outputs (all, or ``output_names``) for the inputs ``feeds``, by name.

        ``out``: output name -> a numpy array of the output's dtype and of the shape this call produces
        (C-contiguous, writable) that receives it, as onnxruntime's IO binding; the returned dict holds
        these arrays. Outputs sized from the input shapes are written in place, no copy; outputs whose
        shape is known only after the run are copied into it (onnxc/fastpath.py run_out)."""
        outs = None
        fast = self._fast
        if out is not None:
            outs = run_out(self, feeds, out)
        elif fast is not None and output_names is None and not self._views:  # dict in, dict out, all generated
            res = fast.call_dict(feeds)
            if res is not None:
                return res
        if outs is None and fast is not None and len(feeds) == fast.n_in:
            try:
                arrays = [feeds[n] for n in self._in_names]
            except KeyError:
                arrays = None
            if arrays is not None:
                outs = fast.call(arrays)
                if outs is not None and self._views:
                    outs = self._finish(outs)
        if outs is None:
            outs = self._finish(self._native.run(self._prepare(feeds)))
        res = dict(zip(self._out_names, outs))
        if output_names is not None:
            unknown = [n for n in output_names if n not in res]
            if unknown:
                raise InputError(f"unknown output(s) {unknown}; the model's outputs are {self._out_names}")
            return {n: res[n] for n in output_names}
        return res

    def __call__(self, *arrays: np.ndarray):
        fast = self._fast
        outs = fast.call(arrays) if fast is not None and len(arrays) == fast.n_in else None
        if outs is None:
            if len(arrays) != len(self.inputs):
                raise InputError(f"expected {len(self.inputs)} positional input(s) {self._in_names}, got "
                                 f"{len(arrays)}")
            outs = self._native.run(self._prepare(dict(zip(self._in_names, arrays))))
        if self._views:
            outs = self._finish(outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"<onnxc.CompiledModel inputs={self.inputs} outputs={self.outputs}>"

    @property
    def threads(self) -> int:
        """Threads a run may use, the calling thread included (``compile(threads=...)``, ``load(threads=...)``).
        Settable at any time, without a recompile: kernels laid out at compile time for another count give
        the same results and share out their work over the new count (pool limit: 64)."""
        return self._native.threads

    @threads.setter
    def threads(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"threads: expected an integer >= 1, got {n!r}")
        self._native.threads = int(n)
        if self._fast is not None:
            self._fast.set_threads(int(n))

    def __reduce__(self):
        """Pickling (multiprocessing with spawn or forkserver, joblib, Dask workers) and deep copies carry
        the compiled library's and the weights' bytes with an artifact manifest; unpickling opens them as
        ``onnxc.load`` opens an artifact, without a C compiler (onnxc/pickling.py)."""
        from .pickling import portable_state, unpickle

        return (unpickle, (portable_state(self),))

    @property
    def about(self) -> dict:
        """What the model file says of itself: ``metadata`` (its metadata_props: class names, labels...),
        ``producer``, ``model_version``, ``doc_string``, ``graph_name`` (model_about)."""
        if self._about is None:
            self._about = model_about(self.ir) if self.ir is not None else model_about(None)
        return self._about

    @property
    def metadata(self) -> dict[str, str]:
        """The model's metadata_props as a dict (a detector's class names, a classifier's labels...)."""
        return dict(self.about.get("metadata", {}))

    @property
    def ir(self) -> Model | None:
        """The IR after the passes (None for a loaded AOT artifact)."""
        if self._ir is None:
            self._materialize()
        return self._ir

    @property
    def program(self) -> Program | None:
        """The lowered Program (None for a loaded AOT artifact)."""
        if self._program is None:
            self._materialize()
        return self._program

    @property
    def c_source(self) -> str | None:
        """The C source of the library (None for a loaded AOT artifact)."""
        if isinstance(self._source, Path):
            try:
                self._source = self._source.read_text()
            except OSError:  # the cache entry went away: compute it again
                self._source = None
        if self._source is None:
            self._materialize()
        return self._source

    def _materialize(self) -> None:
        if self._recompute is not None:
            ir, program, source = self._recompute()
            self._ir, self._program, self._recompute = ir, program, None
            if self._source is None:
                self._source = source


def model_about(m: Model | None) -> dict:
    """What a model file says of itself, as stored in manifests (JSON): metadata_props, producer, model
    version, doc string, graph name."""
    if m is None:
        return {"metadata": {}, "producer": "", "model_version": 0, "doc_string": "", "graph_name": ""}
    return {"metadata": dict(m.metadata), "producer": f"{m.producer_name} {m.producer_version}".strip(),
            "model_version": int(m.model_version), "doc_string": m.doc, "graph_name": m.graph.name}


def _from_python(a, info: TensorInfo) -> np.ndarray:
    """A feed given as a Python list, tuple or scalar, as an array of the input's element type: numbers
    convert (to an integer or bool input only when it holds them exactly); anything else is left to the
    type check, which names what it got."""
    raw = np.asarray(a)
    want = info.dtype
    if raw.dtype.kind in "USO" and want is not None and want.kind in "biuf":
        shown = repr(a) if len(repr(a)) <= 60 else repr(a)[:57] + "..."
        raise InputError(f"input {info.name!r}: expected {info.elem_type.name.lower()} numbers, got a Python "
                         f"{type(a).__name__} that holds none: {shown}")
    if raw.dtype.kind not in "biuf" or want is None or want.kind not in "biuf" or raw.dtype == want:
        return raw
    with np.errstate(invalid="ignore", over="ignore"):
        conv = raw.astype(want)
    if want.kind in "iub" and not np.array_equal(conv, raw):
        shown = f" {a!r}" if raw.size <= 8 else ""
        raise InputError(f"input {info.name!r}: expected {info.elem_type.name.lower()} values, got numbers it "
                         f"cannot hold exactly{shown}")
    return conv


def output_plan(program: Program) -> list[bool]:
    """Per output: True when the run function sizes it from the input shapes alone (caller-allocatable)."""
    return [b.kind == "output" and not program.is_dynamic(b) for _, b, _ in program.outputs]


def lower_model(model, threads: int | None = None, check_ir: bool | None = None,
                dump_ir: str | set[str] | None = None, constants: Mapping[str, object] | None = None,
                precision: str = "fp32") -> tuple[Model, Program, int, dict]:
    """The steps load .. lower of the compile pipeline (onnxc/pipeline.py): (IR, Program, threads,
    timings). ``constants``: inputs bound to values (passes/bind_constants.py); ``precision`` as compile()."""
    c = compile_pipeline(model, Options(threads, check_ir, dump_ir, constants=constants,
                                        precision=check_precision(precision)), until="lower")
    return c.model, c.program, c.threads, {"load": c.seconds("load"), "passes": c.seconds("support_check", "optimize"),
                                           "lower": c.seconds("lower")}


GC_WEIGHT_BYTES = 16 << 20  # from this size of weights, a compile collects the IR at once (a full GC: ~50 ms)
MAX_UNITS = 4  # translation units a large model's C is spread over, compiled in parallel (codegen/emit.py)


def compiler_config(cc: str | None = None, flags: tuple[str, ...] | None = None) -> CompilerConfig:
    cfg = CompilerConfig()
    if cc is not None:
        cfg = CompilerConfig(cc=cc, flags=cfg.flags)
    if flags is not None:
        cfg = CompilerConfig(cc=cfg.cc, flags=tuple(flags))
    return cfg


def io_infos(m: Model, program: Program) -> tuple[list[TensorInfo], list[TensorInfo]]:
    outs = [_info(n, TensorType(b.dtype, shape) if not b.is_value else v.type)
            for (n, b, shape), v in zip(program.outputs, m.graph.outputs)]
    ins = [_info(v.name, v.type) for v in m.graph.inputs]
    return ins, outs


def native_types(ins: list[TensorInfo], outs: list[TensorInfo]) -> tuple[list, list]:
    """What NativeModel needs: per output and input its DType, or its IR type for values."""
    return ([o.elem_type if o.is_tensor else o.type for o in outs],
            [i.elem_type if i.is_tensor else i.type for i in ins])


def compile(model, *, threads: int | None = None, cache_dir: str | os.PathLike | None = None,
            cc: str | None = None, flags: tuple[str, ...] | None = None, check_ir: bool | None = None,
            dump_ir: str | set[str] | None = None, profile: bool = False,
            constants: Mapping[str, object] | None = None, quiet: bool = False,
            precision: str = "fp32") -> CompiledModel:
    """Compile an ONNX model (path, bytes or protobuf ModelProto) to native code.

    ``threads``: threads the kernels may use (default: all cores). ``cache_dir``: compile cache
    (default ``$ONNXC_CACHE_DIR`` or ``~/.cache/onnxc``). ``cc``/``flags``: C compiler and its
    optimization flags (default ``-O3 -march=native``). ``check_ir``: run the IR checker after every
    pass (default from ``$ONNXC_CHECK_IR``). ``dump_ir``: print the IR after the named passes or "all".
    ``profile``: time each kernel step; read the sums with ``onnxc.profile.read_profile(model)``.
    ``constants``: graph inputs bound to fixed values (``{"sr": 16000}``), folded into the model, which no
    longer takes them: branches and shapes they decide are settled at compile time.
    ``quiet``: no status line on stderr (drawn when stderr is a terminal and the compile runs over a
    second); the logger "onnxc" gets one INFO record per finished phase either way (onnxc/progress.py).
    ``precision``: "fp32" (default) or "bf16": float32 Conv/MatMul/Gemm weights rounded to bfloat16, their
    products accumulated in float32 (AVX512_BF16 where the CPU has it; codegen/kernels/bf16.py).

    A model compiled before with the same options (the same file bytes, threads, compiler, flags and
    onnxc version) comes from the model cache (codegen/model_cache.py) without being parsed; its
    ``ir``/``program``/``c_source`` are computed again from ``model`` when first asked for.
    """
    with progress.session(quiet) as rep:
        rep.phase("load")
        if check_precision(precision) == "bf16":
            warn_if_slow()
        return _compile(model, threads, cache_dir, cc, flags, check_ir, dump_ir, profile, constants, precision)


def _compile(model, threads: int | None, cache_dir: str | os.PathLike | None, cc: str | None,
             flags: tuple[str, ...] | None, check_ir: bool | None, dump_ir: str | set[str] | None, profile: bool,
             constants: Mapping[str, object] | None, precision: str = "fp32") -> CompiledModel:
    """compile() within its progress session (phases: load, passes, codegen, cc): the model cache, else
    the compile pipeline (onnxc/pipeline.py) with the JIT build step."""
    t0 = time.perf_counter()
    nthreads = resolve_threads(threads)
    cfg = compiler_config(cc, flags)
    root = c_cache.cache_dir(cache_dir)
    use_template_cache(root)
    data = model
    key = None
    if dump_ir is None and not isinstance(model, Model):  # (dumping the IR means running the passes)
        data, key = _model_key(model, root, nthreads, cfg, profile, constants, precision)

    def recompute() -> tuple[Model, Program, str]:
        c = compile_pipeline(model, Options(nthreads, check_ir, constants=constants, profile=profile, units=MAX_UNITS,
                                            precision=precision), until="emit")
        return c.model, c.program, c.source

    base_dir = os.path.dirname(os.path.abspath(model)) if isinstance(model, (str, os.PathLike)) else None
    if key is not None:
        cm = _from_model_cache(root, key, nthreads, recompute, base_dir)
        if cm is not None:
            t = time.perf_counter() - t0
            cm.timings = {"load": t, "passes": 0.0, "codegen": 0.0, "build": 0.0, "total": t, "model_cache_hit": 1.0}
            return cm
    t1 = time.perf_counter()
    jit = _JitBuild(root, key, cfg, cache_dir, base_dir)
    c = compile_pipeline(data, Options(nthreads, check_ir, dump_ir, constants=constants, base_dir=base_dir,
                                       profile=profile, units=MAX_UNITS, build=jit, precision=precision), until="load")
    del data  # the protobuf (or its bytes) is let go here
    resume(c)
    t4 = time.perf_counter()
    out_types, in_types = native_types(jit.ins, jit.outs)
    native = NativeModel(Path(jit.so), jit.weights, out_types, nthreads, in_types)
    load_s, passes_s = c.seconds("load"), c.seconds("support_check", "optimize")
    timings = {"load": load_s, "passes": passes_s, "codegen": jit.cc_start - t1 - load_s - passes_s,
               "build": t4 - jit.cc_start, "total": time.perf_counter() - t0}
    return CompiledModel(native, jit.ins, jit.outs, c.model, c.program, c.source, timings, jit.early,
                         recompute if key is not None else None, jit.about)


@dataclass
class _JitBuild:
    """compile()'s build step: the model-cache entry (written while the C compiler runs), then the
    library from the compile cache; what the CompiledModel needs is kept here."""

    root: Path
    key: str | None
    cfg: CompilerConfig
    cache_dir: str | os.PathLike | None
    base_dir: str | None
    so: Path | None = None
    ins: list = field(default_factory=list)
    outs: list = field(default_factory=list)
    early: list = field(default_factory=list)
    weights: object = None
    about: dict = field(default_factory=dict)
    cc_start: float = 0.0

    def __call__(self, c: Compilation) -> None:
        self.ins, self.outs = io_infos(c.model, c.program)
        self.early = output_plan(c.program)
        self.weights = c.program.weights
        self.about = model_about(c.model)
        pending = self._pending(c)
        self.cc_start = time.perf_counter()
        try:
            self.so = build_cached(c.source, self.cfg, self.cache_dir)
        except BaseException:
            if pending is not None:
                pending.abandon()
            raise
        if pending is not None:
            pending.commit(self.so)

    def _pending(self, c: Compilation) -> model_cache.PendingEntry | None:
        """The model-cache entry to commit once the library is built; with a key, the IR and Program are
        let go (recomputed when asked for: the weights stay in the native model only)."""
        if self.key is None:
            return None
        manifest = model_cache.manifest([(i.name, i.type) for i in self.ins],
                                        [(o.name, o.type, e) for o, e in zip(self.outs, self.early)], self.weights,
                                        c.threads, self.about)
        pending = None
        if manifest is not None:
            pending = model_cache.PendingEntry(self.root, self.key, manifest, c.source, self.weights, c.externals,
                                               self.base_dir)
        c.model, c.program = None, None
        if len(self.weights) >= GC_WEIGHT_BYTES:
            gc.collect()  # the IR's producer/use links are cycles: free its constants now, not at some later GC
        return pending


def _model_key(model, root: Path, threads: int, cfg: CompilerConfig, profile: bool,
               constants: Mapping[str, object] | None = None, precision: str = "fp32") -> tuple[object, str | None]:
    """(What to load on a miss, the model-cache key), the key None when the model cannot be keyed (an
    unreadable file: the frontend reports it; no C compiler: the compile reports it). A protobuf
    message is serialized once, for the key and the frontend."""
    data = model
    try:
        if isinstance(model, (str, os.PathLike)):
            digest = model_cache.file_digest(model, root)
        elif isinstance(model, (bytes, bytearray, memoryview)):
            digest = model_cache.bytes_digest(model)
        elif hasattr(model, "SerializeToString"):
            data = model.SerializeToString(deterministic=True)
            digest = model_cache.bytes_digest(data)
        else:
            return model, None
        options = {"threads": threads, "cc": cfg.cc, "cc_version": compiler_version(cfg.cc),
                   "flags": list(cfg.flags), "sanitize": list(cfg.sanitize), "thread_flags": list(thread_flags(cfg.cc)), "profile": bool(profile)}
        if constants:
            options["constants"] = {k: np.asarray(v).tolist() for k, v in sorted(constants.items())}
        if precision != "fp32":  # (absent for fp32: the keys of earlier entries stay valid)
            options["precision"] = precision
    except (OSError, CompileError):
        return data, None
    return data, model_cache.model_key(digest, options)


def _from_model_cache(root: Path, key: str, threads: int, recompute: Callable[[], tuple[Model, Program, str]],
                      base_dir: str | None) -> CompiledModel | None:
    """The model of cache entry ``key``, or None (counted as a model-cache miss) when there is none or
    it fails a check; a bad entry is discarded with a CacheWarning naming what failed, to be rebuilt by
    this compile. ``base_dir``: the folder of the model file (its external data files are there, found
    by the frontend's confined resolver, as when the model was loaded)."""
    from .aot import open_artifact

    resolve = None
    if base_dir is not None:
        from onnxc.frontend.external import DataDir

        resolve = partial(DataDir(base_dir).resolve, what="a file recorded in the model cache", must_exist=False)
    try:
        entry = model_cache.lookup(root, key, resolve)
        cm = None if entry is None else open_artifact(entry.dir, entry.manifest, threads)
    except model_cache.StaleEntry:
        model_cache.discard(root, key)
        entry = cm = None
    except (model_cache.EntryError, ModelError, OSError) as e:
        warnings.warn(f"onnxc cache: a model cache entry failed its check ({e}); discarding it and compiling "
                      "the model again", CacheWarning, stacklevel=4)  # (the caller of compile())
        model_cache.discard(root, key)
        entry = cm = None
    if cm is None:
        c_cache.stats["model_misses"] += 1
        return None
    c_cache.stats["hits"] += 1
    c_cache.stats["model_hits"] += 1
    cm._source, cm._recompute = entry.source_path, recompute
    return cm
