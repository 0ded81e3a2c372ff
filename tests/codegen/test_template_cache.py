"""The compiled-template cache of codegen/templating.py (``use_cache``): a new environment (as in a new
process) loads compiled templates instead of compiling them, a changed template is compiled again, and a
damaged file or a cache folder that cannot be written only costs the compile."""

from __future__ import annotations

import jinja2
import pytest

from onnxc.codegen import templating


@pytest.fixture
def fresh(monkeypatch):
    """A function giving a new environment (what a new process has), cleaned up after the test."""
    def make(root, loader=None):
        templating.env.cache_clear()
        e = templating.env()
        if loader is not None:
            e.loader = loader
        templating.use_cache(root)
        return e

    yield make
    templating.env.cache_clear()


def _no_compile(e, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the template was compiled, not loaded from the cache")
    monkeypatch.setattr(e, "compile", refuse)


def test_second_environment_loads_compiled_templates(fresh, tmp_path, monkeypatch):
    name = "trees_walk.c.j2"
    first = fresh(tmp_path).get_template(name)
    files = list((tmp_path / "jinja").iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 100
    e = fresh(tmp_path)
    _no_compile(e, monkeypatch)
    assert e.get_template(name).render is not None
    assert e.get_template(name) is not first


def test_changed_template_is_compiled_again(fresh, tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "t.c.j2").write_text("int a = {{ v }};\n")
    assert fresh(tmp_path, jinja2.FileSystemLoader(src)).get_template("t.c.j2").render(v=1) == "int a = 1;\n"
    (src / "t.c.j2").write_text("long a = {{ v }} + 1;\n")
    assert fresh(tmp_path, jinja2.FileSystemLoader(src)).get_template("t.c.j2").render(v=2) == "long a = 2 + 1;\n"
    e = fresh(tmp_path, jinja2.FileSystemLoader(src))  # the new version is the one kept
    _no_compile(e, monkeypatch)
    assert e.get_template("t.c.j2").render(v=3) == "long a = 3 + 1;\n"


@pytest.mark.parametrize("damage", [b"", b"garbage", b"j2\x80\x02Kz."])
def test_damaged_file_is_compiled_again(fresh, tmp_path, damage):
    src = tmp_path / "src"
    src.mkdir()
    (src / "t.c.j2").write_text("x{{ v }}\n")
    fresh(tmp_path, jinja2.FileSystemLoader(src)).get_template("t.c.j2")
    (kept,) = (tmp_path / "jinja").iterdir()
    kept.write_bytes(damage)
    assert fresh(tmp_path, jinja2.FileSystemLoader(src)).get_template("t.c.j2").render(v=5) == "x5\n"


def test_unwritable_cache_folder_only_costs_the_compile(fresh, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "t.c.j2").write_text("y{{ v }}\n")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    e = fresh(blocker, jinja2.FileSystemLoader(src))  # its jinja/ folder cannot be created
    assert e.get_template("t.c.j2").render(v=7) == "y7\n"
    assert blocker.read_text() == "not a folder"
