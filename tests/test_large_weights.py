"""Large weights (issue #18): external tensors are mapped, not read, and let go of once the lowering has copied
them (frontend/external.py, ir/mapped.py); AOT artifacts above the embedding limit get a sidecar weights file
(onnxc/aot.py). The 1B-parameter figures come from ``python -m benchmarks.big_decoder OUT --measure``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import aot
from onnxc.frontend import external, load_model
from onnxc.ir.mapped import backing_map, release


def _mlp(tmp_path, n: int = 1024):
    """x [b, n] @ w [n, n] + relu, w (4 MiB) in an external data file."""
    w = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32) / n
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                          "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "mlp.onnx"
    onnx.save(m, path, save_as_external_data=True, location="mlp.data", size_threshold=0)
    return path, w


def test_big_external_tensors_are_mapped_and_released(tmp_path):
    path, w = _mlp(tmp_path)
    assert w.nbytes >= external.MAP_MIN_BYTES
    m = load_model(str(path))
    const = m.graph.initializers["w"].const
    assert backing_map(const) is not None and not const.flags.writeable
    np.testing.assert_array_equal(const, w)
    release(const)  # the pages go; the data stays readable from the file
    np.testing.assert_array_equal(const, w)
    x = np.random.default_rng(1).standard_normal((3, w.shape[0])).astype(np.float32)
    got = onnxc.compile(str(path)).run({"x": x})["y"]
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-5)


def test_artifact_weights_above_the_limit_go_beside_the_library(tmp_path, monkeypatch):
    path, w = _mlp(tmp_path, 256)
    monkeypatch.setattr(aot, "EMBED_MAX_BYTES", 1024)
    with pytest.warns(UserWarning, match="written to mlp.weights beside the library"):
        d = onnxc.build(str(path), tmp_path / "art", name="mlp")
    assert (d / "mlp.weights").stat().st_size >= w.nbytes
    x = np.ones((2, 256), np.float32)
    np.testing.assert_allclose(onnxc.load(d).run({"x": x})["y"], np.maximum(x @ w, 0), rtol=1e-4, atol=1e-5)
