"""The sanitizer mode: ``ONNXC_SANITIZE`` puts ``-fsanitize=...`` into every compile and link of model
libraries, runtime objects and artifacts and into every cache key; ``python -m tests.sanitize`` runs
pytest with the sanitizer runtime loaded and fails on any sanitizer report."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc import api
from onnxc.codegen import artifact, cache, runtime_lib
from onnxc.codegen.compiler import CompilerConfig, compile_shared, compiler_env, sanitize_flags

ROOT = Path(__file__).resolve().parent.parent
ASAN_UBSAN = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-g1")


def _add_model():
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_sanitize_flags_from_the_environment(monkeypatch):
    assert sanitize_flags("address,undefined") == ASAN_UBSAN
    assert sanitize_flags(" address , undefined ") == ASAN_UBSAN
    assert sanitize_flags("") == () and sanitize_flags(",") == ()
    monkeypatch.delenv("ONNXC_SANITIZE", raising=False)
    assert CompilerConfig().sanitize == ()
    monkeypatch.setenv("ONNXC_SANITIZE", "address,undefined")
    assert CompilerConfig().sanitize == ASAN_UBSAN
    with pytest.raises(onnxc.CompileError, match=r"ONNXC_SANITIZE='address;rm -rf /': 'address;rm -rf /' is not a "
                                                 r"sanitizer name"):
        sanitize_flags("address;rm -rf /")


def test_sanitizer_flags_reach_every_command_and_cache_key(monkeypatch, tmp_path):
    monkeypatch.delenv("ONNXC_SANITIZE", raising=False)
    plain = CompilerConfig()
    monkeypatch.setenv("ONNXC_SANITIZE", "address,undefined")
    san = CompilerConfig()
    src, out = Path("m.c"), Path("m.so")
    commands = [san.command(src, out), san.object_command(src, out), san.link_command([src], out),
                runtime_lib.object_command(san, src, out), runtime_lib.object_command(san, src, out, ("-O1",))]
    (tmp_path / "model.c").write_text("")
    commands.append(artifact.build_command(tmp_path, "net", san, "portable", False, []))
    for cmd in commands:
        assert cmd[cmd.index(ASAN_UBSAN[0]):][:4] == list(ASAN_UBSAN), cmd
    assert cache.cache_key("int x;", san) != cache.cache_key("int x;", plain)
    assert runtime_lib.archive_key(san) != runtime_lib.archive_key(plain)
    assert runtime_lib.runtime_folder(san, tmp_path) != runtime_lib.runtime_folder(plain, tmp_path)
    root = cache.cache_dir(tmp_path)
    data = _add_model().SerializeToString()
    assert api._model_key(data, root, 1, san, False)[1] != api._model_key(data, root, 1, plain, False)[1]


def test_compilers_run_without_the_preloaded_sanitizer_runtime(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so /opt/libother.so")
    assert compiler_env()["LD_PRELOAD"] == "/opt/libother.so"
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libubsan.so.1")
    assert "LD_PRELOAD" not in compiler_env()


UB_C = "int shift(int x, int n) { return x << n; }\n"


def test_undefined_behaviour_aborts_a_sanitized_library(tmp_path):
    """A library compiled with the sanitizer flags stops at undefined behaviour (no recovery)."""
    (tmp_path / "ub.c").write_text(UB_C)
    compile_shared(tmp_path / "ub.c", tmp_path / "ub.so", CompilerConfig(sanitize=sanitize_flags("undefined")))
    code = f"import ctypes; lib = ctypes.CDLL({str(tmp_path / 'ub.so')!r}); print(lib.shift(1, 3)); lib.shift(1, 40)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "8"
    assert r.returncode != 0 and "runtime error: shift exponent 40 is too large" in r.stderr, r.stderr


def test_a_model_compiles_and_runs_with_ubsan(tmp_path, monkeypatch):
    """ONNXC_SANITIZE=undefined (no preload needed): the model library links libubsan, results hold,
    and the plain build of the same model is another cache entry."""
    monkeypatch.setenv("ONNXC_SANITIZE", "undefined")
    cm = onnxc.compile(_add_model(), threads=1, cache_dir=tmp_path)
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(cm(x), x + x)
    lib = Path(cm._native.path)
    assert "libubsan" in subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
    monkeypatch.delenv("ONNXC_SANITIZE")
    before = dict(cache.stats)
    plain = onnxc.compile(_add_model(), threads=1, cache_dir=tmp_path)
    assert cache.stats["model_misses"] - before["model_misses"] == 1
    assert Path(plain._native.path) != lib


PROBE = textwrap.dedent('''
    """Run by test_sanitize_mode.py through python -m tests.sanitize (not collected on its own)."""
    import ctypes, pathlib, tempfile
    from onnxc.codegen.compiler import CompilerConfig, compile_shared

    C = ("#include <stdlib.h>\\nint poke(int i) { int *p = calloc(4, sizeof(int)); p[i] = 1; int v = p[0]; free(p); return v; }\\n"
         "int stale(void) { volatile int *p = calloc(4, sizeof(int)); free((void *)p); return p[1]; }\\n")

    def _lib():
        d = pathlib.Path(tempfile.mkdtemp())
        (d / "poke.c").write_text(C)
        compile_shared(d / "poke.c", d / "poke.so", CompilerConfig(flags=("-O1",)))
        return ctypes.CDLL(str(d / "poke.so"))

    def test_in_bounds():
        assert _lib().poke(3) == 0

    def test_out_of_bounds():
        _lib().poke(4)

    def test_use_after_free():
        _lib().stale()
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD of the ASan runtime")
def test_runner_fails_on_a_sanitizer_report(tmp_path):
    probe = tmp_path / "sanitize_probe.py"
    probe.write_text(PROBE)
    env = {**os.environ, "ONNXC_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ONNXC_SANITIZE", None)

    def runner(*args):
        return subprocess.run([sys.executable, "-m", "tests.sanitize", str(probe), "-q", "-p", "no:cacheprovider",
                               *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    ok = runner("-k", "in_bounds")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0 sanitizer report file(s), 0 report line(s)" in ok.stdout and "1 passed" in ok.stdout
    bad = runner("-k", "out_of_bounds")
    assert bad.returncode != 0
    # UBSan (object size) sees the store first and stops the process
    assert "runtime error: store to address" in bad.stdout and "in poke" in bad.stdout, bad.stdout
    assert "0 report line(s)" not in bad.stdout
    uaf = runner("-k", "use_after_free")  # ASan's report goes to a file of the report folder, then is printed
    assert uaf.returncode != 0
    assert "1 sanitizer report file(s)" in uaf.stdout and "ERROR: AddressSanitizer: heap-use-after-free" in uaf.stdout


def test_report_files_count_errors_not_warnings(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("onnxc_tests_sanitize", ROOT / "tests" / "sanitize.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    (tmp_path / "asan.1").write_text("==1==WARNING: AddressSanitizer failed to allocate 0x200000000000 bytes\n")
    (tmp_path / "asan.2").write_text("==2==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020\n")
    (tmp_path / "other.json").write_text("ERROR: AddressSanitizer")
    assert [p.name for p in runner.reports(tmp_path)] == ["asan.2"]
