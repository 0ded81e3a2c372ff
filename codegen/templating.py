"""The Jinja environment for C templates: StrictUndefined, no autoescape, templates from package data."""

from __future__ import annotations

from functools import lru_cache

import jinja2


@lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("onnxc.codegen", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


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
