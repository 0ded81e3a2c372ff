"""The real-model suite (benchmarks/real, benchmarks/real_suite.py, benchmarks/real_report.py).

Without torch: the suite's plumbing on a model written with the onnx helper (rows grouped by family,
failures as rows, the JSON) and the harness's comparison of ZipMap outputs. With torch (the bench
extra, skipped otherwise): the smallest model, exported by both exporters, run through the suite.
Never asserts a time or a ratio.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxc.bench import max_rel_error

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def real():
    """(benchmarks.real, benchmarks.real_suite); benchmarks/ is beside the package, not inside it."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("benchmarks.real"), importlib.import_module("benchmarks.real_suite")


def test_zipmap_outputs_compare_by_keys_then_values():
    want = {"label": np.array([0, 1]), "probs": [{0: 0.75, 1: 0.25}, {0: 0.5, 1: 0.5}]}
    close = {"label": np.array([0, 1]), "probs": [{0: 0.75 + 1e-8, 1: 0.25}, {0: 0.5, 1: 0.5}]}
    assert max_rel_error(close, want) < 1e-6
    off = {"label": np.array([0, 1]), "probs": [{0: 0.7, 1: 0.3}, {0: 0.5, 1: 0.5}]}
    assert max_rel_error(off, want) == pytest.approx(0.05 / 0.75)
    other_keys = {"label": np.array([0, 1]), "probs": [{0: 0.75, 2: 0.25}, {0: 0.5, 2: 0.5}]}
    assert max_rel_error(other_keys, want) == float("inf")
    mixed = {"label": np.array([0, 1]), "probs": [{0: 0.75, 1: 0.25}, {0: 0.5, 2: 0.5}]}
    assert max_rel_error(mixed, want) == float("inf")
    assert max_rel_error({"label": np.array([0, 1]), "probs": np.array([[0.75, 0.25], [0.5, 0.5]])}, want) == float("inf")
    assert max_rel_error({"label": np.array([0, 1]), "probs": want["probs"][:1]}, want) == float("inf")


def _tiny_mlp() -> bytes:
    """A dynamic-batch Gemm + Relu + Gemm made with the onnx helper (no torch needed)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 16)).astype(np.float32), "w2")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
                           helper.make_node("Gemm", ["r", "w2"], ["y"], transB=1)], "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w1, w2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _broken() -> bytes:
    raise ImportError("No module named 'torch'")


def test_suite_groups_rows_by_family_and_reports_failures(real, tmp_path, monkeypatch):
    pkg, suite = real
    RealModel = importlib.import_module("benchmarks.real.common").RealModel
    feeds = lambda rng, b: {"x": rng.standard_normal((b, 8), dtype=np.float32)}  # noqa: E731
    fake = {"tiny_mlp/helper": RealModel("tiny_mlp/helper", "classic ML", "onnx helper", "MLP", _tiny_mlp, feeds, (1, 5)),
            "needs_torch/legacy": RealModel("needs_torch/legacy", "CNN", "torch legacy", "x", _broken, feeds, (1, 2))}
    monkeypatch.setattr(pkg, "MODELS", fake)
    out = tmp_path / "r.json"
    assert suite.main(["--quick", "--cache", str(tmp_path / "models"), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    rows = {r["model"]: r for r in d["models"]}
    assert set(rows) == {"tiny_mlp/helper@b1", "tiny_mlp/helper@b5", "needs_torch/legacy@b1", "needs_torch/legacy@b2"}
    for name in ("tiny_mlp/helper@b1", "tiny_mlp/helper@b5"):
        assert rows[name]["status"] == "ok", rows[name]
        assert rows[name]["ratio"] > 0 and rows[name]["max_rel_err"] < 1e-5
        assert rows[name]["family"] == "classic ML"
    assert rows["needs_torch/legacy@b1"]["status"] == "export failed"
    assert "torch" in rows["needs_torch/legacy@b1"]["error"] and rows["needs_torch/legacy@b1"]["ratio"] is None
    fams = {f["family"]: f for f in d["families"]}
    assert fams["CNN"]["failed"] == 2 and fams["CNN"]["geomean"] is None
    assert fams["classic ML"]["timed"] == 2 and fams["classic ML"]["geomean"] > 0
    assert d["geomean_ratio"] == pytest.approx(fams["classic ML"]["geomean"])
    text = suite.report([{**r, "onnxc_peak_mb": None, "ort_peak_mb": None} for r in d["models"]])
    assert "== CNN" in text and "export failed" in text and "overall geomean" in text


def test_every_model_has_a_known_family_and_two_sizes(real):
    pkg, _ = real
    fams = importlib.import_module("benchmarks.real.common").FAMILIES
    assert len(pkg.MODELS) >= 20
    assert {m.family for m in pkg.MODELS.values()} == set(fams)
    assert {m.source for m in pkg.MODELS.values()} >= {"torch legacy", "torch dynamo", "skl2onnx"}
    for m in pkg.MODELS.values():
        assert m.family in fams and len(m.sizes) == 2 and m.sizes[0] == 1 < m.sizes[1]


def test_report_writes_a_png_and_a_table(real, tmp_path):
    pytest.importorskip("matplotlib")
    rep = importlib.import_module("benchmarks.real_report")
    rows = [{"model": "a@b1", "family": "CNN", "status": "ok", "ratio": 0.8, "max_rel_err": 1e-7,
             "onnxc": {"median_ms": 0.8}, "onnxruntime": {"median_ms": 1.0}},
            {"model": "b@b1", "family": "decoder", "status": "onnxc failed", "error": "UnsupportedOpError: X",
             "ratio": None}]
    fams = [{"family": "CNN", "rows": 1, "timed": 1, "geomean": 0.8}, {"family": "decoder", "rows": 1, "timed": 0,
                                                                        "geomean": None}]
    files = []
    for threads in (1, 2):
        f = tmp_path / f"t{threads}.json"
        f.write_text(json.dumps({"environment": {"threads": threads}, "geomean_ratio": 0.8, "models": rows,
                                 "families": fams}))
        files.append(str(f))
    png, md = tmp_path / "c.png", tmp_path / "r.md"
    assert rep.main([*files, "--out", str(png), "--md", str(md)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md.read_text()
    assert "| CNN | a@b1 | 0.80 (0.8 / 1 ms) | 0.80 (0.8 / 1 ms) |" in text
    assert "onnxc failed: UnsupportedOpError: X" in text and "| decoder | n/a | n/a |" in text


def test_smallest_torch_model_runs_through_the_suite_with_both_exporters(real, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # the dynamo exporter's
    _, suite = real
    out = tmp_path / "r.json"
    assert suite.main(["--quick", "--models", "byte_cnn", "--cache", str(tmp_path / "models"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["models"]
    assert [r["model"] for r in rows] == ["byte_cnn/legacy@b1", "byte_cnn/legacy@b8", "byte_cnn/dynamo@b1",
                                          "byte_cnn/dynamo@b8"]
    for r in rows:  # exported with a dynamic batch, compiled, run and compared at both sizes
        assert r["status"] == "ok", (r["model"], r["status"], r.get("error"))
        assert r["max_rel_err"] < 1e-3 and r["ratio"] > 0
