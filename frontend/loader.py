"""``load_model``: an ONNX model (file, bytes or protobuf message) -> ir.Model.

The bytes are parsed with onnxc's own schema (frontend/schema.py); a message from another protobuf
library (e.g. ``onnx.ModelProto``) is serialized and re-parsed, so nothing here imports ``onnx``.
Every failure is a ModelError naming what was wrong; protobuf and OS exceptions do not leak.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from onnxc.ir import Model, ModelError

from . import large_attrs, schema
from .external import DataDir, check_unread
from .functions import convert_function, opset_dict
from .graphs import BuildContext, all_names, build_graph, normalize_domain
from .validate import check_text

Source = str | os.PathLike | bytes | bytearray | memoryview | Message


_MAP_BYTES = 1 << 24  # files from this size are mapped, not read: no copy, no fresh memory to zero


def _read(path: str) -> bytes | mmap.mmap:
    """The bytes of the file ``path``; a large file (on POSIX) as a read-only map, which slices to bytes."""
    with open(path, "rb") as f:
        if os.name == "posix" and os.fstat(f.fileno()).st_size >= _MAP_BYTES:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return f.read()


def read_source(source: Any, message: type[Message], kind: str,
                prepare: Callable[[bytes], bytes] | None = None) -> tuple[Message, str | None, str]:
    """Parse ``source`` (path, bytes or protobuf message) as ``message``.

    Returns the message, the file path (None unless read from a file) and a description for errors.
    ``prepare`` rewrites the bytes before they are parsed (not a message of the schema's own type).
    """
    path = None
    if isinstance(source, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(source))
        what = repr(os.fspath(source))
        try:
            data = _read(path)
        except FileNotFoundError:
            raise ModelError(f"file {what} does not exist") from None
        except OSError as e:
            raise ModelError(f"cannot read file {what}: {e.strerror or e}") from None
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        what = f"{len(data)} bytes"
    elif isinstance(source, Message):
        if isinstance(source, message):
            check_text(source, f"the {kind} message")
            return source, None, f"the {kind} message"
        data, what = source.SerializeToString(), f"the {type(source).__name__} message"
    else:
        raise TypeError(f"cannot load an ONNX {kind} from {type(source).__name__}; "
                        "pass a path, bytes or a protobuf message")
    if prepare is not None:
        data = prepare(data)
    msg = message()
    try:
        msg.ParseFromString(memoryview(data) if isinstance(data, mmap.mmap) else data)
    except Exception as e:  # protobuf raises DecodeError, and RuntimeError/ValueError in some backends
        raise ModelError(f"could not parse {what} as an ONNX {kind}: {e}") from None
    check_text(msg, what)
    return msg, path, what


def load_model(source: Source, *, base_dir: str | os.PathLike[str] | None = None) -> Model:
    """Load an ONNX model into the IR, validated (SSA, definedness, cycles, domains) and sorted.

    ``source`` is a path, the serialized bytes, or any protobuf ModelProto (``onnx.ModelProto``
    included). External tensor data is read relative to ``base_dir``, which defaults to the model
    file's directory; models given as bytes or messages need ``base_dir`` if they use external data.
    Every external reference is confined to that folder (frontend/external.py); ``Model.data_files``
    lists the files read.
    """
    cut = large_attrs.Cut()

    def prepare(data: bytes) -> bytes:
        nonlocal cut
        data, cut = large_attrs.cut(data)
        return data

    mp, path, what = read_source(source, schema.ModelProto, "ModelProto", prepare)
    with large_attrs.active(cut):
        return _model(mp, path, what, base_dir)


def _model(mp: Any, path: str | None, what: str, base_dir: str | os.PathLike[str] | None) -> Model:
    if not mp.HasField("graph"):
        raise ModelError(f"could not parse {what} as an ONNX ModelProto: it has no graph")
    if base_dir is None and path is not None:
        base_dir = os.path.dirname(path)
    data_dir = DataDir(base_dir)
    for i, ti in enumerate(mp.training_info):  # not compiled: its references are checked, never read
        for part in ("initialization", "algorithm"):
            if ti.HasField(part):
                check_unread(getattr(ti, part), data_dir, f"training_info[{i}] {part}")

    opsets = opset_dict(mp.opset_import)
    if not mp.opset_import and mp.ir_version < 3:
        opsets[""] = 1  # IR versions 1 and 2 predate opset_import: the default opset is version 1
    function_domains = {normalize_domain(f.domain) for f in mp.functions}
    local_ops = {(normalize_domain(f.domain), f.name) for f in mp.functions}
    functions = {}
    for fp in mp.functions:
        f = convert_function(fp, opsets, function_domains, data_dir, local_ops)
        key = (f.domain, f.name, f.overload)
        if key in functions:
            raise ModelError(f"model-local function {key} is defined twice")
        functions[key] = f

    ctx = BuildContext(opsets, set(opsets) | function_domains, data_dir, taken=all_names(mp.graph),
                       local_ops=local_ops)
    graph = build_graph(mp.graph, ctx)
    return Model(
        graph=graph, opset_imports=opsets, functions=functions, ir_version=mp.ir_version,
        producer_name=mp.producer_name, producer_version=mp.producer_version,
        model_version=mp.model_version, doc=mp.doc_string,
        metadata={e.key: e.value for e in mp.metadata_props}, path=path, data_files=sorted(data_dir.files),
    )
