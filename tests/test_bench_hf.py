"""benchmarks/hf_models.py and its rows of benchmarks/optimized_exports.py (needs the bench extra: torch,
transformers; skipped otherwise). T5 saved after onnxruntime's transformer optimizer carries
RelativePositionBias, which onnxruntime runs on CUDA only: onnxc compiles it and matches onnxruntime running the
file before optimization, at both sizes. Never asserts a time.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import onnx
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("sympy")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("benchmarks.hf_models"), importlib.import_module("benchmarks.optimized_exports")


def test_every_architecture_has_two_feed_sets_of_its_inputs(bench):
    hf, _ = bench
    assert {"roberta", "distilbert", "clip_text", "clip_vision", "t5", "bart", "whisper_encoder",
            "whisper_decoder"} <= set(hf.MODELS)
    for arch, spec in hf.MODELS.items():
        first, second = hf.feed_sets(arch)
        assert list(first) == list(spec.dynamic) == list(second)
        assert any(first[k].shape != second[k].shape for k in first), arch


def test_optimized_t5_with_relative_position_bias(bench, tmp_path):
    hf, opt = bench
    [(name, make, feeds, transformer)] = opt.entries("t5/legacy")
    assert name == "t5/legacy" and transformer == ("t5", hf.HEADS, hf.HIDDEN)
    source = hf.model_path(name, cache=tmp_path)
    made = opt.optimized(source, "t5", tmp_path, transformer)["transformers optimizer, fusions only"]
    ops = {n.op_type for n in onnx.load(str(made)).graph.node if n.domain == "com.microsoft"}
    assert "RelativePositionBias" in ops
    status, errs = opt.check(made, feeds, source)
    assert status == "ok (vs. source)" and len(errs) == 2 and max(errs) < 1e-5
    with pytest.raises(Exception, match="RelativePositionBias"):  # onnxruntime alone cannot run the file
        opt.check(made, feeds)
