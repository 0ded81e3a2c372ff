"""Tests of the conformance harness itself: comparison rules and the reporting plugin (with fake cases)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .cases import assert_same
from .plugin import build_report

TESTS_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("got, want", [
    (np.array([1.0, np.nan], np.float32), np.array([1.0005, np.nan], np.float32)),
    (np.array([3], np.int64), np.array([3], np.int64)),
    (np.array(["a", "b"]), np.array(["a", "b"], dtype=object)),
    ([np.zeros(2, np.float32)], [np.zeros(2, np.float32)]),
    (None, None),
])
def test_harness_equal(got, want) -> None:
    assert_same("output 'y'", got, want, 1e-3, 1e-7)


@pytest.mark.parametrize("got, want, message", [
    (np.zeros(3, np.float64), np.zeros(3, np.float32), "got float64[3], expected float32[3]"),
    (np.zeros((3, 1), np.float32), np.zeros(3, np.float32), "got float32[3, 1], expected float32[3]"),
    (np.array([1, 2], np.int64), np.array([1, 3], np.int64), "1/2 elements differ; first at (1,): got 2"),
    (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.1], np.float32), "1/2 elements differ beyond rtol"),
    (np.array([np.nan], np.float32), np.array([1.0], np.float32), "1/1 elements differ"),
    ([np.zeros(2)], [np.zeros(2), np.zeros(2)], "sequence length 1, expected 2"),
    (np.zeros(1), None, "expected an empty optional"),
])
def test_harness_mismatch(got, want, message) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        assert_same("output 'y'", got, want, 1e-3, 1e-7)


def test_harness_report_document() -> None:
    recs = [{"name": "a", "kind": "node", "suite": "node", "status": "passed", "reason": "", "seconds": 1.0},
            {"name": "b", "kind": "node", "suite": "node", "status": "xfail", "reason": "unsupported: X",
             "seconds": 0.1, "unsupported_ops": ["ai.onnx::X", "ai.onnx::Y"]},
            {"name": "c", "kind": "model", "suite": "simple", "status": "failed", "reason": "boom",
             "seconds": 0.2},
            {"name": "d", "kind": "model", "suite": "simple", "status": "xfail", "reason": "unsupported: X",
             "seconds": 0.1, "unsupported_ops": ["ai.onnx::X"]}]
    doc = build_report(recs)
    assert doc["line"] == "conformance: 1/2 node, 0/2 model"
    assert doc["blocking_ops"] == {"ai.onnx::X": 2, "ai.onnx::Y": 1}
    assert doc["failures"] == [{"name": "c", "kind": "model", "suite": "simple", "reason": "boom"}]
    assert doc["summary"]["model"] == {"total": 2, "passed": 0, "failed": 1, "xfail": 1, "skipped": 0}


FAKE_CASES = '''
import os
import pytest

@pytest.mark.parametrize("name", ["test_ok", "test_bad", "test_unsup", "test_crash"])
def test_node_case(name, request):
    if name == "test_bad":
        assert 1 == 2, "output 'y': 1/1 elements differ"
    if name == "test_unsup":
        request.node.user_properties.append(("unsupported_ops", ["ai.onnx::Foo"]))
        pytest.xfail("unsupported: the model uses 1 unsupported operator(s): ai.onnx::Foo (opset 1)")
    if name == "test_crash" and os.environ.get("PYTEST_XDIST_WORKER"):
        os._exit(3)

@pytest.mark.parametrize("name", ["test_m"])
def test_model_case(name):
    pass
'''


def _fake_run(tmp_path: Path, *args: str, nested: bool = False) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the plugin on fake cases in a scratch project; return the process and the report."""
    proj = tmp_path / "proj"
    cases_dir = proj / "sub" if nested else proj
    cases_dir.mkdir(parents=True)
    (proj / "pytest.ini").write_text("[pytest]\n")
    (cases_dir / "test_conformance.py").write_text(FAKE_CASES)
    (cases_dir / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        from conformance.plugin import ensure_registered

        def pytest_configure(config):
            ensure_registered(config)
        """))
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["ONNXC_CONFORMANCE_REPORT"] = str(report)
    env["TMPDIR"] = str(tmp_path)  # shards and hang logs stay in the scratch directory
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=proj,
                       env=env, capture_output=True, text=True, timeout=300)
    assert report.exists(), p.stdout + p.stderr
    return p, json.loads(report.read_text())


def _statuses(doc: dict) -> dict:
    return {c["name"]: c["status"] for c in doc["cases"]}


def test_harness_plugin_without_xdist(tmp_path) -> None:
    p, doc = _fake_run(tmp_path, "-p", "no:xdist")
    assert "conformance: 2/4 node, 1/1 model" in p.stdout
    assert "node: 1 xfail (unsupported), 1 failed" in p.stdout
    assert _statuses(doc) == {"test_ok": "passed", "test_bad": "failed", "test_unsup": "xfail",
                              "test_crash": "passed", "test_m": "passed"}
    bad = next(c for c in doc["cases"] if c["name"] == "test_bad")
    assert bad["reason"] == "AssertionError: output 'y': 1/1 elements differ" and bad["kind"] == "node"
    assert doc["blocking_ops"] == {"ai.onnx::Foo": 1}


def test_harness_plugin_with_xdist_controller(tmp_path) -> None:
    p, doc = _fake_run(tmp_path, "-n", "2")
    assert "conformance: 1/4 node, 1/1 model" in p.stdout
    st = _statuses(doc)
    assert st == {"test_ok": "passed", "test_bad": "failed", "test_unsup": "xfail", "test_crash": "failed",
                  "test_m": "passed"}
    crash = next(c for c in doc["cases"] if c["name"] == "test_crash")
    assert "crashed" in crash["reason"]


def test_harness_plugin_workers_merge_without_controller(tmp_path) -> None:
    """The controller does not load sub/conftest.py (pytest only loads conftest files of the command
    line paths): the workers write shards and merge them into the report."""
    p, doc = _fake_run(tmp_path, "-n", "2", ".", nested=True)
    st = _statuses(doc)
    assert {k: v for k, v in st.items() if k != "test_crash"} == {
        "test_ok": "passed", "test_bad": "failed", "test_unsup": "xfail", "test_m": "passed"}


class _Request:
    """The part of pytest's request object compile_or_xfail uses."""

    def __init__(self) -> None:
        self.node = type("N", (), {"user_properties": []})()


def _broken_relu(monkeypatch, tmp_path, exc: Exception) -> None:
    """Replace the Relu kernel's lowering by one that raises ``exc``, with an empty compile cache (a cached
    library would not lower anything)."""
    from onnxc.codegen.kernels.base import KERNELS

    def broken(ctx):
        raise exc

    monkeypatch.setattr(KERNELS[("", "Relu")], "fn", broken)
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path))


def test_a_lowering_that_raises_key_error_fails_the_case_loudly(monkeypatch, tmp_path) -> None:
    """A bug in a lowering (here a KeyError) is an internal CompileError, which fails the conformance case:
    it is not turned into "unsupported", so it cannot hide as an expected failure."""
    import onnxc

    from .cases import node_cases
    from .test_conformance import compile_or_xfail

    _broken_relu(monkeypatch, tmp_path, KeyError("dims"))
    with pytest.raises(onnxc.CompileError, match=r"internal error .*Relu.*KeyError: 'dims'") as e:
        compile_or_xfail(node_cases()["test_relu"].model, _Request(), "test_relu")
    assert not isinstance(e.value, onnxc.UnsupportedOpError)


def test_an_unsupported_variant_fails_unless_listed(monkeypatch, tmp_path) -> None:
    """A kernel saying "not implemented" is an expected failure only for the cases listed in
    expected_unsupported.txt; for any other case it fails. The op-coverage audit still counts the op."""
    from tests.test_op_coverage import conformance_ops

    from .cases import node_cases
    from .test_conformance import compile_or_xfail, expected_unsupported

    _broken_relu(monkeypatch, tmp_path, NotImplementedError("this variant"))
    model = node_cases()["test_relu"].model
    with pytest.raises(pytest.fail.Exception, match=r"unsupported: .*Relu.*this variant.*not listed"):
        compile_or_xfail(model, _Request(), "test_relu")
    monkeypatch.setitem(expected_unsupported(), "test_relu", "a test of the harness")
    with pytest.raises(pytest.xfail.Exception, match="this variant"):
        compile_or_xfail(model, _Request(), "test_relu")
    monkeypatch.delitem(expected_unsupported(), "test_relu")
    assert "test_relu" in conformance_ops()["Relu"]


def test_the_expected_unsupported_list_names_real_cases() -> None:
    from .cases import model_cases, node_cases
    from .test_conformance import expected_unsupported

    unknown = sorted(set(expected_unsupported()) - set(node_cases()) - set(model_cases()))
    assert not unknown, f"expected_unsupported.txt lists cases the onnx package does not have: {unknown}"
