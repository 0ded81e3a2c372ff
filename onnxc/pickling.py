"""Pickling of compiled models (multiprocessing with spawn or forkserver, joblib, Dask workers, deep copies):
the state carries the compiled library's and the weights' bytes with an artifact manifest, and unpickling
opens them as ``onnxc.load`` opens an artifact, without a C compiler."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from onnxc.ir import CompileError, ModelError

if TYPE_CHECKING:
    from .api import CompiledModel


def portable_state(cm: CompiledModel) -> dict:
    """The picklable state of ``cm``: manifest, library bytes, weights bytes (None when embedded)."""
    from onnxc.codegen.artifact import FORMAT, checksum, type_json


    nat = cm._native
    weights = getattr(nat, "_weights", None)
    w = None if weights is None else bytes(memoryview(weights).cast("B"))
    early = cm._early if cm._early is not None else [None] * len(cm.outputs)
    try:
        manifest = {
            "format": FORMAT, "name": "model", "prefix": nat.prefix, "library": "model.so", "threads": nat.threads,
            "weights": {"mode": "embedded"} if w is None else
            {"mode": "file", "file": "model.weights", "size": len(w), "checksum": checksum(w)},
            "inputs": [{"name": i.name, "type": type_json(i.type)} for i in cm.inputs],
            "outputs": [{"name": o.name, "type": type_json(o.type), "early": e} for o, e in zip(cm.outputs, early)],
            "model": cm.about}
    except (CompileError, ModelError, KeyError, TypeError, ValueError) as e:
        raise TypeError(f"this compiled model cannot be pickled: an input or output type has no portable form ({e})") \
            from None
    lib = getattr(nat, "library_bytes", None) or Path(nat.path).read_bytes()  # (an unpickled model's file is gone)
    return {"manifest": manifest, "library": lib, "weights": w}


_UNPICKLED_LIBS: dict[str, Path] = {}  # sha256 of a library -> this process's copy of it (see library_copy)


def library_copy(lib: bytes) -> Path:
    """This process's file of the library ``lib``: written once per distinct library and kept until exit, so
    unpickling the same model again (a Dask task argument, a joblib batch) opens the library already
    loaded instead of mapping one more copy (libraries are never unloaded: RTLD_NODELETE)."""
    import atexit
    import hashlib
    import shutil
    import tempfile

    key = hashlib.sha256(lib).hexdigest()
    path = _UNPICKLED_LIBS.get(key)
    if path is None or not path.exists():
        d = Path(tempfile.mkdtemp(prefix="onnxc-unpickled-lib-"))
        path = d / "model.so"
        path.write_bytes(lib)
        atexit.register(shutil.rmtree, d, True)
        _UNPICKLED_LIBS[key] = path
    return path


def unpickle(state: dict) -> CompiledModel:
    """A CompiledModel from ``portable_state``: the library goes to this process's copy of it
    (library_copy), the weights to a private temporary folder, opened like an artifact (onnxc/aot.py
    open_artifact; the weights are read into memory) and the folder is removed."""
    import shutil
    import tempfile

    from .aot import open_artifact

    d = Path(tempfile.mkdtemp(prefix="onnxc-unpickled-"))
    try:
        manifest = dict(state["manifest"], library=str(library_copy(state["library"])))
        if state["weights"] is not None:
            (d / "model.weights").write_bytes(state["weights"])
        cm = open_artifact(d, manifest)
        cm._native.library_bytes = state["library"]  # pickled again (Dask moves data between workers)
        return cm
    finally:
        shutil.rmtree(d, ignore_errors=True)
