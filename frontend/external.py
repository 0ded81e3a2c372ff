"""Reading tensor bytes stored outside the model file (``data_location == EXTERNAL``).

The ONNX spec makes ``location`` a path relative to the directory of the model file. A model is
untrusted input, so every external reference goes through the one resolver here (``DataDir``), whatever
holds it: graph and sparse initializers, node attributes, If/Loop/Scan bodies at any depth, model-local
functions and their attribute defaults, and ``training_info`` (whose graphs onnxc never decodes: their
references are checked, not read). The model cache lists the files a ``DataDir`` read, so it never sees
a path the resolver refused. Refused, with a ModelError naming the tensor:

- a location that is absolute, has a ``..`` component, contains NUL, or resolves (through symlinks)
  outside the folder;
- anything but a regular file (a FIFO would block the open; a device would read forever). The file is
  opened without following a final symlink and without blocking, then checked with ``fstat``; on Linux
  the opened file's own path is checked against the folder again, so a directory swapped for a symlink
  between the check and the open is caught too;
- ``offset``/``length`` entries that are not integers, negative, or past the end of the file, and a
  byte count other than the tensor's (checked from the file's size, before anything is read: a
  two-element tensor cannot make onnxc read a terabyte file).

Tensors of MAP_MIN_BYTES or more are not read but mapped: the bytes are a read-only view of the file
mapped once per file, so a model with gigabytes of weights is not held in memory twice while it is
compiled (the lowering copies each weight once into the weights blob, then lets go of its pages:
ir/mapped.py). Smaller tensors are read, so the common model holds no mapping of its files.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from onnxc.ir import ModelError

EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
MAP_MIN_BYTES = 1 << 20  # external tensors from this size are mapped, not read (see the top)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def external_info(t: Any) -> dict[str, str]:
    """The ``external_data`` key/value pairs of a TensorProto."""
    return {e.key: e.value for e in t.external_data}


class DataDir:
    """The folder a model's external data is read from (None: the model did not come from a file), and
    the files read from it so far (``files``: real paths, for the model cache)."""

    def __init__(self, base_dir: str | os.PathLike[str] | None):
        self.dir = None if base_dir is None else os.fspath(base_dir)
        self.files: set[str] = set()
        self.maps: dict[str, mmap.mmap] = {}  # real path -> its read-only mapping (large tensors)

    @staticmethod
    def of(base_dir: DataDir | str | os.PathLike[str] | None) -> DataDir:
        return base_dir if isinstance(base_dir, DataDir) else DataDir(base_dir)

    def resolve(self, location: str, what: str, *, must_exist: bool = True) -> str | None:
        """Real path of ``location`` inside the folder; ModelError if it would leave the folder or is not
        a regular file. ``must_exist=False`` (references that are checked, not read): a missing file, or
        no folder at all, is accepted, and None is returned for it."""
        if "\0" in location:
            raise ModelError(f"{what}: external data location {location!r} contains a NUL character")
        if (os.path.isabs(location) or PurePosixPath(location).is_absolute()
                or PureWindowsPath(location).is_absolute() or PureWindowsPath(location).drive
                or location.startswith(("/", "\\"))):
            raise ModelError(f"{what}: external data location {location!r} is an absolute path; "
                             "it must be relative to the model's directory")
        parts = PurePosixPath(location.replace("\\", "/")).parts
        if ".." in parts:
            raise ModelError(f"{what}: external data location {location!r} escapes the model's directory")
        if self.dir is None:
            if must_exist:
                raise ModelError(f"{what} stores its data in the external file {location!r}, but the model was "
                                 "not loaded from a file; pass base_dir= (the directory holding the data files)")
            return None
        base = os.path.realpath(self.dir)
        path = os.path.realpath(os.path.join(base, *parts))
        self._inside(base, path, location, what)
        try:
            st = os.stat(path)
        except OSError:
            if must_exist:
                raise ModelError(f"{what}: external data file {location!r} not found in {base!r}") from None
            return None
        if not stat.S_ISREG(st.st_mode):
            raise ModelError(f"{what}: external data location {location!r} is not a regular file")
        return path

    @staticmethod
    def _inside(base: str, path: str, location: str, what: str) -> None:
        if os.path.commonpath([base, path]) != base:
            raise ModelError(f"{what}: external data location {location!r} resolves to {path!r}, "
                             f"outside the model's directory {base!r}")

    def read(self, t: Any, what: str, need: int | None = None) -> bytes | memoryview:
        """The bytes of TensorProto ``t`` from its external file; ``need``: the byte count its dims and
        type take (None: unknown), checked before reading. From MAP_MIN_BYTES on, a read-only view of the
        file's mapping (see the top)."""
        info = external_info(t)
        location = info.get("location", "")
        if not location:
            raise ModelError(f"{what} has external data but no 'location' entry")
        path = self.resolve(location, what)
        offset = _int_entry(info, "offset", what)
        length = _int_entry(info, "length", what) if "length" in info else None
        n = 0
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as e:
            raise ModelError(f"{what}: cannot read external data file {location!r}: {e.strerror or e}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ModelError(f"{what}: external data location {location!r} is not a regular file")
            self._check_opened(fd, path, location, what)
            size = st.st_size
            n = _span(what, location, size, offset, length, need)
            if n >= MAP_MIN_BYTES:
                data = self._mapped(fd, path)[offset:offset + n]
                self.files.add(path)
                return data
            with os.fdopen(fd, "rb") as f:
                fd = -1
                f.seek(offset)
                data = f.read(n)
        except OSError as e:
            raise ModelError(f"{what}: cannot read external data file {location!r}: {e.strerror or e}") from None
        except MemoryError:
            raise ModelError(f"{what}: not enough memory to read {n} bytes of external data from {location!r}") \
                from None
        finally:
            if fd >= 0:
                os.close(fd)
        if len(data) != n:
            raise ModelError(f"{what}: external file {location!r} holds {len(data)} bytes at offset {offset}, "
                             f"expected {n}")
        self.files.add(path)
        return data

    def _mapped(self, fd: int, path: str) -> memoryview:
        m = self.maps.get(path)
        if m is None:
            m = self.maps[path] = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return memoryview(m)

    def _check_opened(self, fd: int, path: str, location: str, what: str) -> None:
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return  # (no /proc: the checks before the open stand)
        if opened != path:
            self._inside(os.path.realpath(self.dir), opened, location, what)


def _span(what: str, location: str, size: int, offset: int, length: int | None, need: int | None) -> int:
    """Bytes to read at ``offset`` of a file of ``size`` bytes; ModelError when the entries do not fit."""
    if offset > size:
        raise ModelError(f"{what}: external data offset {offset} is past the end of {location!r} ({size} bytes)")
    if length is not None and length > size - offset:
        raise ModelError(f"{what}: external data length {length} at offset {offset} runs past the end of "
                         f"{location!r} ({size} bytes)")
    n = size - offset if length is None else length
    if need is not None and n != need:
        held = (f"the external data length is {length}" if length is not None
                else f"{location!r} holds {n} bytes from offset {offset}")
        raise ModelError(f"{what}: the tensor needs {need} bytes, but {held}")
    return n


def read_external(t: Any, base_dir: DataDir | str | None, what: str, need: int | None = None) -> bytes:
    """The bytes of tensor ``t`` from its external file; ``what`` names the tensor in errors."""
    return DataDir.of(base_dir).read(t, what, need)


def check_unread(msg: Any, data: DataDir, where: str) -> None:
    """Check every external reference held anywhere inside protobuf ``msg`` (parts of a model onnxc does
    not decode, e.g. a TrainingInfoProto) with the resolver, without reading any file."""
    stack = [msg]
    while stack:
        m = stack.pop()
        if m.DESCRIPTOR.name == "TensorProto":  # (its fields hold no tensors; raw_data is not copied out)
            if m.data_location == EXTERNAL:
                location = external_info(m).get("location", "")
                data.resolve(location, f"{where}: tensor {m.name!r}", must_exist=False)
            continue
        for fd, v in m.ListFields():
            if fd.message_type is not None:
                stack.extend([v] if hasattr(v, "DESCRIPTOR") else v)  # (a message, or a repeated field of them)


def _int_entry(info: dict[str, str], key: str, what: str) -> int:
    try:
        n = int(info.get(key, "0"))
    except ValueError:
        raise ModelError(f"{what}: external data {key} {info[key]!r} is not an integer") from None
    if n < 0:
        raise ModelError(f"{what}: external data {key} {n} is negative")
    return n
