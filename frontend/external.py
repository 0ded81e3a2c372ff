"""Reading tensor bytes stored outside the model file (``data_location == EXTERNAL``).

The ONNX spec makes ``location`` a path relative to the directory of the model file. A model is
untrusted input, so the path must stay inside that directory: absolute paths, ``..`` components and
symlinks that resolve elsewhere are rejected rather than followed.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from onnxc.ir import ModelError


def external_info(t: Any) -> dict[str, str]:
    """The ``external_data`` key/value pairs of a TensorProto."""
    return {e.key: e.value for e in t.external_data}


def read_external(t: Any, base_dir: str | None, what: str) -> bytes:
    """The bytes of tensor ``t`` from its external file; ``what`` names the tensor in errors."""
    info = external_info(t)
    location = info.get("location", "")
    if not location:
        raise ModelError(f"{what} has external data but no 'location' entry")
    if base_dir is None:
        raise ModelError(f"{what} stores its data in the external file {location!r}, but the model was not "
                         "loaded from a file; pass base_dir= (the directory holding the data files)")
    path = safe_path(base_dir, location, what)
    offset = _int_entry(info, "offset", what)
    length = _int_entry(info, "length", what) if "length" in info else None
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset > size:
                raise ModelError(f"{what}: offset {offset} is past the end of {location!r} ({size} bytes)")
            f.seek(offset)
            data = f.read() if length is None else f.read(length)
    except OSError as e:
        raise ModelError(f"{what}: cannot read external data file {location!r}: {e.strerror or e}") from None
    if length is not None and len(data) != length:
        raise ModelError(f"{what}: external file {location!r} holds {len(data)} bytes at offset {offset}, "
                         f"expected {length}")
    return data


def safe_path(base_dir: str, location: str, what: str) -> str:
    """Absolute path of ``location`` inside ``base_dir``; ModelError if it would leave that directory."""
    if (os.path.isabs(location) or PurePosixPath(location).is_absolute()
            or PureWindowsPath(location).is_absolute() or PureWindowsPath(location).drive
            or location.startswith(("/", "\\"))):
        raise ModelError(f"{what}: external data location {location!r} is an absolute path; "
                         "it must be relative to the model's directory")
    parts = PurePosixPath(location.replace("\\", "/")).parts
    if ".." in parts:
        raise ModelError(f"{what}: external data location {location!r} escapes the model's directory")
    base = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(base, *parts))
    if os.path.commonpath([base, path]) != base:
        raise ModelError(f"{what}: external data location {location!r} resolves to {path!r}, "
                         f"outside the model's directory {base!r}")
    if not os.path.isfile(path):
        raise ModelError(f"{what}: external data file {location!r} not found in {base!r}")
    return path


def _int_entry(info: dict[str, str], key: str, what: str) -> int:
    try:
        n = int(info.get(key, "0"))
    except ValueError:
        raise ModelError(f"{what}: external data {key} {info[key]!r} is not an integer") from None
    if n < 0:
        raise ModelError(f"{what}: external data {key} {n} is negative")
    return n
