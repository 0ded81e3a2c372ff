"""The Jinja environment for C templates: StrictUndefined, no autoescape, templates from package data.

Compiling a template to Python takes Jinja milliseconds, and a fresh process compiles every template it
renders (a few tenths of a second of a small model's compile); ``use_cache`` keeps the compiled templates
in the onnxc cache folder (``jinja/``), one file per template and environment, written atomically. Jinja
checks a file's source checksum and its bytecode and Python versions before using it (a changed template
is compiled again); a file that cannot be read, written or decoded only costs the compile.
"""

from __future__ import annotations

import hashlib
import io
from functools import lru_cache
from pathlib import Path

import jinja2

from . import cache_integrity as integrity

_OPTIONS = {"undefined": jinja2.StrictUndefined, "autoescape": False, "keep_trailing_newline": True,
            "trim_blocks": True, "lstrip_blocks": True}
# what else shapes a compiled template: Jinja's version and the environment's options
_TAG = hashlib.sha256(f"{jinja2.__version__}{sorted((k, repr(v)) for k, v in _OPTIONS.items())}".encode()).hexdigest()


@lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("onnxc.codegen", "templates"), **_OPTIONS)


class _Bytecode(jinja2.BytecodeCache):
    """Compiled templates in ``folder``, keyed by template name and _TAG."""

    def __init__(self, folder: Path):
        self.folder = folder

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return hashlib.sha256(f"{_TAG}\0{name}".encode()).hexdigest()[:40]

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self.folder / bucket.key, "rb") as f:
                bucket.load_bytecode(f)
        except Exception:  # missing, unreadable or damaged (pickle/marshal errors): compile the template
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = io.BytesIO()
        bucket.write_bytecode(data)
        try:
            integrity.private_dir(self.folder)
        except OSError:  # a read-only cache folder: nothing kept
            return
        integrity.write_atomic(self.folder / bucket.key, data.getvalue())  # (OSError ignored)


def use_cache(root: Path | None) -> None:
    """Keep compiled templates under the cache folder ``root`` from now on (None: not at all)."""
    env().bytecode_cache = None if root is None else _Bytecode(Path(root) / "jinja")


def render(template: str, /, **values) -> str:
    """Render ``templates/<name>`` with precomputed ``values``."""
    return env().get_template(template).render(**values)


def c_string(s: str) -> str:
    """A C string literal holding ``s`` exactly; every byte outside safe printable ASCII is escaped.

    Model text (names, doc strings) reaches C only through this function.
    """
    out = ['"']
    for byte in s.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        if byte < 0x80 and (ch.isalnum() or ch in " _-.:/,;()[]{}<>=+*!#&|^~@$'"):
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)
