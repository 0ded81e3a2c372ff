"""The fuzz harness itself: the seed corpus is valid and computes what onnxruntime computes, and the
worker pool tells results, OnnxcErrors, other exceptions, crashes and hangs apart, replacing dead or
stuck workers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import onnxc

from .child import random_input
from .corpus import BUILDERS, seed_bytes, seed_model
from .mutations import mutate_structure
from .pool import WorkerPool
from .run import FuzzRun, signature


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_seed_models_match_onnxruntime(name):
    cm = onnxc.compile(seed_bytes(name), threads=1)
    rng = np.random.default_rng(0)
    feeds = {i.name: random_input(i, rng) for i in cm.inputs}
    got = cm.run(feeds)
    want = ort.InferenceSession(seed_bytes(name)).run(None, feeds)
    assert list(got) == [o.name for o in ort.InferenceSession(seed_bytes(name)).get_outputs()]
    for (k, v), w in zip(got.items(), want):
        np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5, err_msg=f"{name}: output {k}")


def test_pool_tells_outcomes_apart_and_replaces_workers():
    results = []
    env = {**os.environ, "ONNXC_FUZZ_SELFTEST": "1"}
    with tempfile.TemporaryDirectory() as d:
        pool = WorkerPool(1, timeout=20.0, log_dir=Path(d), env=env,
                          on_result=lambda task, out: results.append((task, out)))
        try:
            for task, data in [("abort", b"#abort"), ("garbage", b"\x08\xff"), ("raise", b"#raise"),
                               ("exit", b"#exit"), ("valid", seed_bytes("elementwise"))]:
                pool.submit(task, data)
            pool.drain()
            pool.timeout = 2.0
            pool.submit("hang", b"#hang")
            pool.drain()
        finally:
            pool.close()
    out = dict(results)
    assert [t for t, _ in results] == ["abort", "garbage", "raise", "exit", "valid", "hang"]
    assert out["abort"]["status"] == "crash" and out["abort"]["error"] == "killed by SIGABRT"
    assert "Fatal Python error: Aborted" in out["abort"]["trace"]  # the worker's output (faulthandler)
    assert out["garbage"]["status"] == "clean" and out["garbage"]["error"] == "ModelError"
    assert out["raise"]["status"] == "internal" and out["raise"]["error"] == "KeyError"
    assert "selftest" in out["raise"]["trace"]
    assert out["exit"]["status"] == "crash" and out["exit"]["error"] == "exited with status 3"
    assert out["valid"]["status"] == "ok" and out["valid"]["ran"]
    assert out["hang"]["status"] == "hang" and "in _selftest" in out["hang"]["trace"]  # where it hung
    assert pool.spawned == 4  # the first worker, then one after each crash and after the hang
    assert out["exit"]["previous"] == ["garbage", "raise"]  # what that worker ran before


def test_a_crash_carries_its_asan_report(tmp_path):
    results = []
    env = {**os.environ, "ONNXC_FUZZ_SELFTEST": "1", "ASAN_OPTIONS": f"detect_leaks=0:log_path={tmp_path / 'asan'}"}
    pool = WorkerPool(1, timeout=20.0, log_dir=tmp_path / "logs", env=env,
                      on_result=lambda task, out: results.append(out))
    try:
        pool.submit("asan", b"#asan")
        pool.drain()
    finally:
        pool.close()
    assert results[0]["status"] == "crash" and results[0]["error"] == "exited with status 1"
    assert "AddressSanitizer: heap-buffer-overflow (selftest)" in results[0]["trace"]


def test_failures_are_saved_as_reproducers(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXC_FUZZ_REPROS", str(tmp_path))
    monkeypatch.setenv("ONNXC_FUZZ_SELFTEST", "1")
    with FuzzRun("selftest", prebuild=False) as run:
        run.submit(b"#raise", ["selftest mutation"])
        run.submit(b"#raise", ["again"])
        run.submit(b"\x08\xff", ["garbage"])
        run.submit(b"#ircheck", ["inconsistent IR"])
        run.drain()
        summary = run.summary()
    assert summary["examples"] == 4 and summary["clean_errors"] == {"ModelError": 1, "IRCheckError": 1}
    assert summary["suspects"] == {"suspect IRCheckError: value '.' has no type": 1}
    assert [p.name for p in tmp_path.glob("suspect-IRCheckError-*.onnx")]
    assert summary["failures"] == {"internal": 2}
    (sig, info), = summary["failure_signatures"].items()
    assert len(info["reproducers"]) == 1  # the same bytes are saved once
    assert sig.startswith("internal KeyError") and info["count"] == 2
    saved = Path(info["reproducers"][0])
    assert saved.read_bytes() == b"#raise"
    notes = saved.with_suffix(".txt").read_text()
    assert "selftest mutation" in notes and "python -m tests.fuzz.child" in notes and "KeyError" in notes


def test_signature_names_the_innermost_onnxc_frame():
    trace = ('File "/x/onnxc/api.py", line 10, in compile\n'
             'File "/x/passes/shapes/cast.py", line 42, in rule\nAttributeError: ...')
    assert signature({"status": "internal", "error": "AttributeError", "trace": trace}) == \
        "internal AttributeError at passes/shapes/cast.py:42"


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_structure_mutations_stay_small(data):
    """A mutated model stays within a few MB (no mutation grows exponentially: the harness process
    builds every one)."""
    m = seed_model(data.draw(st.sampled_from(sorted(BUILDERS))))
    mutate_structure(data, m)
    assert m.ByteSize() < (4 << 20)


def test_crash_signature_names_the_sanitizer_or_allocator_message():
    ubsan = "model.c:96:20: runtime error: index 16 out of bounds for type 'int64_t [16]'\n    #0 in k0"
    asan = "==539==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000040200 at pc 0x7f"
    glibc = "free(): invalid next size (fast)\nFatal Python error: Aborted\n"
    assert signature({"status": "crash", "error": "exited with status 1", "trace": ubsan}) == \
        "crash exited with status 1: index N out of bounds for type '.'"
    assert signature({"status": "crash", "error": "exited with status 1", "trace": asan}) == \
        "crash exited with status 1: heap-buffer-overflow"
    assert signature({"status": "crash", "error": "killed by SIGABRT", "trace": glibc}) == \
        "crash killed by SIGABRT: free(): invalid next size (fast)"
