"""The public face: compile a model and call it with numpy arrays."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnxc.codegen.cache import build_cached
from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.emit import emit_c
from onnxc.codegen.lower import Program, lower
from onnxc.codegen.native import NativeModel
from onnxc.ir import DType, InputError, Model, TensorType
from onnxc.passes.pipeline import optimize

from .support import check_supported


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: name, numpy dtype, ONNX element type and shape (ints or dim names)."""

    name: str
    dtype: np.dtype
    elem_type: DType
    shape: tuple
    type: object = None  # the IR type; a SequenceType/OptionalType for non-tensor values

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.type, TensorType) or self.type is None

    def __repr__(self) -> str:
        if not self.is_tensor:
            return f"TensorInfo({self.name!r}, {self.type})"
        return f"TensorInfo({self.name!r}, {self.elem_type.name.lower()}, {list(self.shape)})"


def _ml_dtype(dt: DType) -> np.dtype | None:
    """The ml_dtypes numpy dtype of an emulated float type, when ml_dtypes is installed."""
    if dt not in (DType.BFLOAT16, DType.FLOAT8E4M3FN, DType.FLOAT8E4M3FNUZ, DType.FLOAT8E5M2,
                  DType.FLOAT8E5M2FNUZ):
        return None
    try:
        import ml_dtypes
    except ImportError:
        return None
    names = {DType.BFLOAT16: "bfloat16", DType.FLOAT8E4M3FN: "float8_e4m3fn", DType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
             DType.FLOAT8E5M2: "float8_e5m2", DType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz"}
    return np.dtype(getattr(ml_dtypes, names[dt]))


def _info(name: str, t) -> TensorInfo:
    if not isinstance(t, TensorType):  # sequence / optional: its innermost element type
        e = t
        while not isinstance(e, TensorType) and hasattr(e, "elem"):
            e = e.elem
        dt = e.dtype if isinstance(e, TensorType) else DType.UNDEFINED
        return TensorInfo(name, np.dtype(object), dt, (), t)
    shape = tuple(d if isinstance(d, int) else str(d) for d in t.shape or ())
    return TensorInfo(name, t.dtype.np, t.dtype, shape, t)


class CompiledModel:
    """A model compiled to native code. ``run(dict) -> dict``; ``model(*arrays)`` positional."""

    def __init__(self, native: NativeModel, inputs: list[TensorInfo], outputs: list[TensorInfo],
                 ir: Model | None = None, program: Program | None = None, source: str | None = None,
                 timings: dict | None = None):
        self._native = native
        self.inputs = inputs
        self.outputs = outputs
        self.ir = ir
        self.program = program
        self.c_source = source
        self.timings = timings or {}
        self._in_names = [i.name for i in inputs]
        self._views = {i: v for i, o in enumerate(outputs) if (v := _ml_dtype(o.elem_type)) is not None}

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
                a = np.asarray(a)
            if a.dtype != info.dtype:
                if a.dtype.name == info.elem_type.name.lower() and a.dtype.itemsize == info.dtype.itemsize:
                    a = a.view(info.dtype)  # ml_dtypes bfloat16/float8 arrays: same bits, numpy-native view
                elif a.dtype.kind == info.dtype.kind == "f" and a.dtype == np.float64 and a.ndim == 0:
                    a = a.astype(info.dtype)
                else:
                    raise InputError(f"input {info.name!r}: expected element type "
                                     f"{info.elem_type.name.lower()} ({info.dtype}), got {a.dtype}")
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            arrays.append(a)
        extra = set(feeds) - set(self._in_names)
        if extra:
            raise InputError(f"unknown input(s) {sorted(extra)}; the model's inputs are {self._in_names}")
        return arrays

    def _finish(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs of types numpy lacks (bfloat16, float8) come back as ml_dtypes views when installed,
        else as their raw bit patterns (uint8/uint16)."""
        if self._views:
            outs = [a.view(self._views[i]) if i in self._views else a for i, a in enumerate(outs)]
        return outs

    def run(self, feeds: dict, output_names: list[str] | None = None) -> dict[str, np.ndarray]:
        outs = self._finish(self._native.run(self._prepare(feeds)))
        res = {o.name: a for o, a in zip(self.outputs, outs)}
        if output_names is not None:
            return {n: res[n] for n in output_names}
        return res

    def __call__(self, *arrays: np.ndarray):
        if len(arrays) != len(self.inputs):
            raise InputError(f"expected {len(self.inputs)} positional input(s) {self._in_names}, got {len(arrays)}")
        outs = self._finish(self._native.run(self._prepare(dict(zip(self._in_names, arrays)))))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"<onnxc.CompiledModel inputs={self.inputs} outputs={self.outputs}>"


def compile(model, *, threads: int | None = None, cache_dir: str | os.PathLike | None = None,
            cc: str | None = None, flags: tuple[str, ...] | None = None, check_ir: bool | None = None,
            dump_ir: str | set[str] | None = None) -> CompiledModel:
    """Compile an ONNX model (path, bytes or protobuf ModelProto) to native code.

    ``threads``: threads the kernels may use (default: all cores). ``cache_dir``: compile cache
    (default ``$ONNXC_CACHE_DIR`` or ``~/.cache/onnxc``). ``cc``/``flags``: C compiler and its
    optimization flags (default ``-O3 -march=native``). ``check_ir``: run the IR checker after every
    pass (default from ``$ONNXC_CHECK_IR``). ``dump_ir``: print the IR after the named passes or "all".
    """
    t0 = time.perf_counter()
    if isinstance(model, Model):
        m = model
    else:
        from onnxc.frontend import load_model

        m = load_model(model)
    t1 = time.perf_counter()
    check_supported(m)
    if check_ir is None:
        check_ir = os.environ.get("ONNXC_CHECK_IR", "") not in ("", "0")
    m = optimize(m, check=check_ir, dump_after=dump_ir)
    t2 = time.perf_counter()
    nthreads = threads or os.cpu_count() or 1
    program = lower(m, nthreads)
    source = emit_c(program)
    t3 = time.perf_counter()
    cfg = CompilerConfig()
    if cc is not None:
        cfg = CompilerConfig(cc=cc, flags=cfg.flags)
    if flags is not None:
        cfg = CompilerConfig(cc=cfg.cc, flags=tuple(flags))
    so = build_cached(source, cfg, cache_dir)
    t4 = time.perf_counter()
    outs = [_info(n, TensorType(b.dtype, shape) if not b.is_value else v.type)
            for (n, b, shape), v in zip(program.outputs, m.graph.outputs)]
    ins = [_info(v.name, v.type) for v in m.graph.inputs]
    native = NativeModel(Path(so), program.weights, [o.type if not o.is_tensor else b.dtype
                                                    for o, (_, b, _) in zip(outs, program.outputs)], nthreads,
                         [None if i.is_tensor else i.type for i in ins])
    timings = {"load": t1 - t0, "passes": t2 - t1, "codegen": t3 - t2, "build": t4 - t3,
               "total": time.perf_counter() - t0}
    return CompiledModel(native, ins, outs, m, program, source, timings)
