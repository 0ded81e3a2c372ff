"""Integrity of cached files (codegen/cache_integrity.py): a truncated, garbage or swapped library, weights
file, runtime object or precompiled header in a cache is caught before it is linked or loaded, reported
with a CacheWarning naming the file, discarded and rebuilt, and the compile returns correct results;
an unchanged file costs one stat (no hash); cache folders are private and files not world-writable.

The damaged caches are made by a child process, so the libraries the test loads were never mapped in
this process before (a library mapped once stays in use under its path)."""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import api
from onnxc.api import lower_model
from onnxc.codegen import cache as c_cache
from onnxc.codegen import cache_integrity, model_cache
from onnxc.codegen.compiler import CompilerConfig
from onnxc.codegen.emit import emit_c
from onnxc.codegen.runtime_lib import PCH, runtime_objects, sources_for
from onnxc.frontend import load_model

N = 64
X = np.random.default_rng(1).standard_normal((3, N)).astype(np.float32)


def model(act: str, scale: float) -> onnx.ModelProto:
    """y = act(x @ W + b): models of two activations have other libraries and same-sized weights."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((N, N)) * scale).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
             helper.make_node(act, ["u"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", N])],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference(path: Path) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(onnx.load(path)).run(None, {"x": X})[0]


@pytest.fixture(scope="module")
def runtime_seed() -> Path:
    """The runtime folder (objects, precompiled header) the tests' models link, from the session's cache
    (built there once): copied into each test's cache, so the tests do not build it again."""
    srcs = set()
    for act in ("Relu", "Sigmoid"):
        srcs.update(sources_for(emit_c(lower_model(model(act, 1.0), 1)[1])))
    return runtime_objects(CompilerConfig(), sorted(srcs))[0].parent


@pytest.fixture
def cache(tmp_path, runtime_seed) -> Path:
    c = tmp_path / "cache"
    shutil.copytree(runtime_seed, c / "runtime" / runtime_seed.name, ignore=shutil.ignore_patterns(".*", "*.lock"))
    return c


@pytest.fixture
def two(tmp_path) -> tuple[Path, Path]:
    """Two saved models with the same inputs and outputs, other code and other weights of one size."""
    paths = (tmp_path / "a.onnx", tmp_path / "b.onnx")
    onnx.save(model("Relu", 2.0), paths[0])
    onnx.save(model("Sigmoid", -1.0), paths[1])
    return paths


def compile_in_child(cache: Path, *paths: Path, ir: bool = False) -> None:
    """Compile ``paths`` (through the model cache, or as IR: the C cache alone) in another process."""
    load = "onnxc.frontend.load_model(p)" if ir else "p"
    script = f"import sys, onnxc, onnxc.frontend\nfor p in sys.argv[2:]: onnxc.compile({load}, threads=1, cache_dir=sys.argv[1])"
    r = subprocess.run([sys.executable, "-c", script, str(cache), *map(str, paths)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def entry_file(cache: Path, name: str, path: Path) -> Path:
    """File ``name`` of the model-cache entry of the model file ``path`` (compiled with threads=1)."""
    _, key = api._model_key(path, cache, 1, api.compiler_config(), False)
    return model_cache.entry_dir(cache, key) / name


def c_library(cache: Path, entry_so: Path) -> Path:
    """The C cache's library that the model-cache entry's model.so is a hard link to."""
    ino = entry_so.stat().st_ino
    (lib,) = [p for p in cache.glob("??/*.so") if p.stat().st_ino == ino]
    return lib


def write_through(path: Path, data: bytes, truncate: bool = True) -> None:
    """Write ``data`` into the file itself (through every hard link to it)."""
    with open(path, "r+b") as f:
        f.write(data)
        if truncate:
            f.truncate()


def compile_warns(path, cache, *fragments: str, ir: bool = False, want: np.ndarray | None = None):
    """Compile ``path``: CacheWarnings whose messages hold each of ``fragments``, correct results."""
    with pytest.warns(onnxc.CacheWarning) as got:
        m = onnxc.compile(load_model(path) if ir else path, threads=1, cache_dir=cache)
    text = "\n".join(str(w.message) for w in got)
    for f in fragments:
        assert f in text, text
    np.testing.assert_allclose(m(X), reference(path) if want is None else want, rtol=1e-5, atol=1e-5)
    return text


def compile_clean(path, cache, ir: bool = False) -> dict:
    """Compile ``path`` with warnings as errors: correct results; the counters' change."""
    before = dict(c_cache.stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error", onnxc.CacheWarning)
        m = onnxc.compile(load_model(path) if ir else path, threads=1, cache_dir=cache)
    np.testing.assert_allclose(m(X), reference(path), rtol=1e-5, atol=1e-5)
    return {k: c_cache.stats[k] - before[k] for k in before}


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_damaged_library_is_rebuilt(two, cache, damage):
    """The entry's model.so is a hard link to the C cache's library: damaged in place, both are bad.
    Before: OSError from dlopen on every later compile (or SIGBUS/SIGSEGV)."""
    a = two[0]
    compile_in_child(cache, a)
    so = entry_file(cache, "model.so", a)
    lib = c_library(cache, so)
    size = so.stat().st_size
    if damage == "truncate":
        os.truncate(so, size // 3)
    elif damage == "garbage":
        write_through(so, os.urandom(size), truncate=False)  # same size: caught by the sha256
    else:
        os.truncate(so, 0)
    compile_warns(a, cache, str(so), str(lib))
    assert compile_clean(a, cache)["model_hits"] == 1, "the rebuilt entry is good"


@pytest.mark.parametrize("how", ["in_place", "renamed"])
def test_swapped_libraries_do_not_serve_the_other_model(two, cache, how):
    """Before: A's entry served B's code (B's outputs for A's inputs), silently."""
    a, b = two
    compile_in_child(cache, a, b)
    so_a, so_b = entry_file(cache, "model.so", a), entry_file(cache, "model.so", b)
    data_a, data_b = so_a.read_bytes(), so_b.read_bytes()
    if how == "in_place":  # through the hard links: the C cache's libraries are swapped too
        write_through(so_a, data_b)
        write_through(so_b, data_a)
    else:  # new files renamed over the entries' links: the C cache's libraries are intact
        for so, data in ((so_a, data_b), (so_b, data_a)):
            (so.parent / "new.so").write_bytes(data)
            os.replace(so.parent / "new.so", so)
    compile_warns(a, cache, str(so_a))
    compile_warns(b, cache, str(so_b))
    compile_clean(a, cache)
    compile_clean(b, cache)


@pytest.mark.parametrize("damage", ["swapped", "truncated"])
def test_damaged_weights_are_rebuilt(two, cache, damage):
    a, b = two
    compile_in_child(cache, a, b)
    w_a, w_b = entry_file(cache, "model.weights", a), entry_file(cache, "model.weights", b)
    assert w_a.stat().st_size == w_b.stat().st_size
    if damage == "swapped":
        w_a.write_bytes(w_b.read_bytes())
    else:
        os.truncate(w_a, w_a.stat().st_size // 2)
    compile_warns(a, cache, str(w_a))
    compile_clean(b, cache)


def test_damaged_c_cache_library_alone_is_rebuilt(two, cache):
    """A model given as IR goes through the C cache only. Before: 'invalid ELF header' on every compile."""
    a = two[0]
    compile_in_child(cache, a, ir=True)
    (lib,) = cache.glob("??/*.so")
    write_through(lib, b"\0" * 4096, truncate=False)
    compile_warns(a, cache, str(lib), ir=True)
    assert compile_clean(a, cache, ir=True)["hits"] == 1


def test_unchanged_files_are_not_hashed(two, cache, monkeypatch):
    """The hot path: a hit stats the checked files; a full hash runs only when a stat changed, after
    which the refreshed record makes the next hit one stat again."""
    a = two[0]
    compile_in_child(cache, a)
    compile_in_child(cache, a, ir=True)
    hashed: list[str] = []
    real = cache_integrity.sha256_file

    def counting(path):
        hashed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(cache_integrity, "sha256_file", counting)
    assert compile_clean(a, cache)["model_hits"] == 1
    assert compile_clean(a, cache, ir=True)["hits"] == 1
    hashed[:] = [p for p in hashed if p.startswith(str(cache))]  # (not the model file: it is new)
    assert hashed == []
    so = entry_file(cache, "model.so", a)
    st = so.stat()
    os.utime(so, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # (the C cache's library: the same file)
    assert compile_clean(a, cache)["model_hits"] == 1
    assert compile_clean(a, cache, ir=True)["hits"] == 1
    assert compile_clean(a, cache)["model_hits"] == 1
    assert compile_clean(a, cache, ir=True)["hits"] == 1
    in_cache = [p for p in hashed if p.startswith(str(cache))]
    assert in_cache == [str(so), str(c_library(cache, so))], "one hash each, then the records were refreshed"


def test_damaged_runtime_files_are_rebuilt(tmp_path):
    """Before: a truncated runtime object failed every later link ('file format not recognized'), a
    truncated precompiled header every later compile ('cannot read ... .gch')."""
    cfg = CompilerConfig()
    cache = tmp_path / "cache"
    srcs = sources_for('#include "onnxc_value.h"\n')
    objs = runtime_objects(cfg, srcs, cache)
    damaged = objs + [p for p in (objs[0].parent / f"{PCH}.gch",) if p.exists()]
    sizes = {p: p.stat().st_size for p in damaged}
    for p in damaged:
        os.truncate(p, 10)
    with pytest.warns(onnxc.CacheWarning) as got:
        assert runtime_objects(cfg, srcs, cache) == objs
    text = "\n".join(str(w.message) for w in got)
    assert all(str(p) in text for p in damaged), text
    assert all(p.stat().st_size > 10 for p in damaged), sizes
    assert all(cache_integrity.problem(p) is None for p in damaged)
    # end to end: a compile that links the object rebuilds it
    os.truncate(objs[0], 0)
    path = tmp_path / "sigmoid.onnx"
    onnx.save(act_model("Sigmoid"), path)
    compile_warns(path, cache, str(objs[0]), want=1 / (1 + np.exp(-X)))


def act_model(act: str) -> onnx.ModelProto:
    """y = act(x): no weights; its C needs only the runtime's value helpers (onnxc_value.c)."""
    g = helper.make_graph([helper.make_node(act, ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", N])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_cache_folders_are_private_and_files_not_writable_by_others(tmp_path):
    """Every folder a compile creates (the cache root and its missing parents included) is 0700 and no
    file is group- or world-writable, even under a umask of 0."""
    path = tmp_path / "sigmoid.onnx"
    onnx.save(act_model("Sigmoid"), path)
    os.utime(path, (1e9, 1e9))  # an old file: its digest is memoized in the cache too
    cache = tmp_path / "new" / "cache"
    old = os.umask(0)
    try:
        onnxc.compile(path, threads=1, cache_dir=cache)
    finally:
        os.umask(old)
    dirs = [tmp_path / "new", cache] + [p for p in cache.rglob("*") if p.is_dir()]
    files = [p for p in cache.rglob("*") if p.is_file()]
    names = {p.suffix or p.name for p in files}
    assert {".so", ".c", ".sum", ".lock", ".o", ".gch", ".h", ".weights", ".json"} <= names, names
    assert (cache / "models" / "stat").is_dir()
    loose = [f"{p} {stat.S_IMODE(p.stat().st_mode):o}" for p in dirs if p.stat().st_mode & 0o077]
    assert not loose, loose
    writable = [f"{p} {stat.S_IMODE(p.stat().st_mode):o}" for p in files if p.stat().st_mode & 0o022]
    assert not writable, writable


def test_a_cache_others_can_write_is_reported(two, cache):
    cache.chmod(0o777)
    with pytest.warns(onnxc.CacheWarning, match=f"the cache folder {cache} is writable by everyone"):
        onnxc.compile(two[0], threads=1, cache_dir=cache)


def test_manifest_locations_go_through_the_confined_resolver(tmp_path, monkeypatch, cache):
    """A manifest whose external data record points outside the model's folder (at a file with the
    same bytes, which would pass the size and sha256 checks) is a bad entry: the file is never opened."""
    d = tmp_path / "m"
    d.mkdir()
    path = d / "ext.onnx"
    mp = model("Relu", 2.0)
    onnx.save(mp, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    secret = tmp_path / "secret.bin"
    secret.write_bytes((d / "ext.bin").read_bytes())
    compile_clean(path, cache)
    manifest = next(cache.glob("models/??/*/onnxc.json"))
    j = json.loads(manifest.read_text())
    assert [e["location"] for e in j["jit"]["external"]] == ["ext.bin"]
    j["jit"]["external"][0]["location"] = "../secret.bin"
    manifest.write_text(json.dumps(j))
    opened = []

    def spy(real):
        def wrapper(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)):
                opened.append(os.path.realpath(file))
            return real(file, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    monkeypatch.setattr(io, "open", spy(io.open))
    monkeypatch.setattr(os, "open", spy(os.open))
    with pytest.warns(onnxc.CacheWarning, match="'../secret.bin' escapes the model's directory"):
        m = onnxc.compile(path, threads=1, cache_dir=cache)
    assert str(secret.resolve()) not in opened
    np.testing.assert_allclose(m(X), reference(path), rtol=1e-5, atol=1e-5)
