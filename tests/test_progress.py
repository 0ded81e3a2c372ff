"""Progress of a compile (onnxc/progress.py): INFO/DEBUG records of the "onnxc" logger, the status line
on a terminal (a pty as the CLI's stderr), and silence when stderr is not a terminal or with --quiet.

Each compiled model has a fresh static width, so its C misses the compile cache (the runtime objects
stay cached) and the compile runs the C compiler: three compiles (and a model-cache hit) in all. That
stderr stays silent when it is not a terminal is checked in-process (pytest's capture is no terminal).
"""

from __future__ import annotations

import io
import logging
import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import progress

ROOT = Path(__file__).resolve().parents[1]
PHASES = ["load", "passes", "codegen", "cc"]


def fresh_model(path: Path | None = None) -> tuple[onnx.ModelProto, np.ndarray]:
    """y = relu(x + w) for x of shape [2, k], k new on every call (so the C is new); saved to ``path``."""
    k = 1000 + uuid.uuid4().int % 900_000
    w = np.linspace(-1, 1, k, dtype=np.float32)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, k])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if path is not None:
        onnx.save(m, path)
    return m, w


def phase_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "onnxc" and r.levelno == logging.INFO]


# ------------------------------------------------------------------------------------------ logging

def test_log_records_per_phase_in_order_with_times(caplog, capfd, monkeypatch) -> None:
    monkeypatch.setenv("ONNXC_PROGRESS_AFTER", "0")  # a terminal would show the line at once: stderr is none
    m, w = fresh_model()
    with caplog.at_level(logging.DEBUG, logger="onnxc"):
        cm = onnxc.compile(m)
    x = np.random.default_rng(0).standard_normal((2, w.size)).astype(np.float32)
    np.testing.assert_array_equal(cm(x), np.maximum(x + w, 0))
    recs = phase_records(caplog)
    names = [r.onnxc_phase for r in recs]
    assert [n for n in names if n != "runtime"] == PHASES, names  # (runtime: when its objects were missing)
    for r in recs:
        assert r.onnxc_seconds >= 0 and r.getMessage().startswith(f"{r.onnxc_phase}: ")
        assert r.getMessage().split(": ")[1].split()[1] == "s", r.getMessage()
    assert recs[-1].getMessage().endswith("(1 unit)")
    assert sum(r.onnxc_seconds for r in recs if r.onnxc_phase != "runtime") <= cm.timings["total"] + 0.05
    units = [r for r in caplog.records if r.levelno == logging.DEBUG and getattr(r, "onnxc_unit", None)]
    assert [(r.onnxc_phase, r.onnxc_unit) for r in units if r.onnxc_phase == "cc"] == [("cc", "model.c")]
    assert "cc: model.c 1/1 in " in units[-1].getMessage()
    assert capfd.readouterr().err == ""  # not a terminal: no status line

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="onnxc"):
        onnxc.compile(m)  # the model cache: nothing but the load
    assert [r.onnxc_phase for r in phase_records(caplog)] == ["load"]


def test_failed_phase_is_not_logged_as_finished(caplog) -> None:
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with caplog.at_level(logging.DEBUG, logger="onnxc"), pytest.raises(onnxc.UnsupportedOpError, match="Frobnicate"):
        onnxc.compile(m)
    assert [r.onnxc_phase for r in phase_records(caplog)] == ["load"]
    assert any(r.getMessage().startswith("passes: failed after") for r in caplog.records)
    assert progress.current() is progress._IDLE  # the session ended


# -------------------------------------------------------------------------- the status line, in-process

class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_line_appears_after_threshold_and_is_erased(monkeypatch) -> None:
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("ONNXC_PROGRESS_AFTER", "0.2")
    with progress.session() as rep:  # done before the threshold: nothing
        rep.phase("load")
    assert term.getvalue() == ""
    with progress.session() as rep:
        rep.phase("passes")
        time.sleep(0.35)
        rep.phase("cc")
        rep.units(3)
        rep.unit_done("model.c")
        rep.unit_done("model_1.c")
        time.sleep(0.25)
    text = term.getvalue()
    assert "\ronnxc: optimizing  0." in text and "\ronnxc: compiling C 2/3 units  0." in text, text
    assert text.endswith("\r\x1b[K") and "\n" not in text
    with progress.session(quiet=True) as rep:
        rep.phase("passes")
        time.sleep(0.3)
    assert term.getvalue() == text


# ------------------------------------------------------------------------------------- the CLI on a pty

def run_cli(argv: list[str], timeout: float = 300) -> tuple[int, str, bytes]:
    """Run ``onnxc argv`` in a new process, stderr a pty, the status line shown at once (the compile
    takes about a second): (exit code, stdout, what stderr received)."""
    env = {**os.environ, "ONNXC_PROGRESS_AFTER": "0"}
    cmd = [sys.executable, "-m", "onnxc.cli", *argv]
    master, slave = os.openpty()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT)
    finally:
        os.close(slave)
    err = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                err += chunk
            elif p.poll() is not None:
                break
        out = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0].decode()
    finally:
        os.close(master)
    return p.returncode, out, err


def test_cli_shows_phases_on_a_terminal(tmp_path) -> None:
    fresh_model(tmp_path / "m.onnx")
    rc, out, err = run_cli(["run", str(tmp_path / "m.onnx")])
    assert rc == 0, (out, err)
    text = err.decode()
    assert "\ronnxc: compiling C 0/1 unit" in text and "\x1b[K" in text, text
    assert "starting" not in text
    assert text.endswith("\r\x1b[K") and "\n" not in text, text  # erased; nothing else on stderr
    assert "output y  float32" in out


def test_cli_quiet_is_silent_on_a_terminal(tmp_path) -> None:
    fresh_model(tmp_path / "a.onnx")
    rc, out, err = run_cli(["build", str(tmp_path / "a.onnx"), "-o", str(tmp_path / "a"), "--quiet"])
    assert rc == 0 and err == b"", (out, err)
    assert "wrote the library" in out and (tmp_path / "a" / "liba.so").is_file()
