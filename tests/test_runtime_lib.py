"""The runtime library (codegen/runtime_lib.py) and the model C around it (codegen/emit.py): runtime
objects built once per compiler and flags, the runtime files a piece of C needs, identical kernels
emitted once, a model spread over several translation units, artifacts that carry only what they use."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc.codegen import emit
from onnxc.codegen.compiler import CompilerConfig, runtime_dir
from onnxc.codegen.runtime_lib import public_headers, runtime_files_for, runtime_objects, sources_for


def _names(paths) -> set[str]:
    return {p.name for p in paths}


def test_sources_follow_the_include_closure():
    # onnxc_conv.h includes onnxc_gemm.h, which includes onnxc_sgemm.h: the three .c come along
    assert {"onnxc_conv.c", "onnxc_gemm.c", "onnxc_sgemm.c"} <= _names(sources_for('#include "onnxc_conv.h"\n'))
    assert sources_for('#include "onnxc.h"\n') == []  # the ABI header is header-only
    headers, _ = runtime_files_for('#include "onnxc_value.h"\n')
    assert {"onnxc.h", "onnxc_value.h"} <= _names(headers)
    assert "onnxc_image.c" not in _names(sources_for('#include "onnxc_value.h"\n#include "onnxc_gemm.h"\n'))


def test_public_headers_exist_and_include_the_abi():
    names = public_headers()
    assert "onnxc.h" in names and "onnxc_gemm.h" in names
    assert all((runtime_dir() / n).is_file() for n in names)
    assert "onnxc_sgemm_kern.h" not in names  # internal to the runtime's .c files


def test_runtime_objects_are_built_once(tmp_path, monkeypatch):
    cfg = CompilerConfig()
    srcs = sources_for('#include "onnxc_value.h"\n')
    objs = runtime_objects(cfg, srcs, tmp_path)
    assert objs and all(o.is_file() for o in objs)
    monkeypatch.setenv("ONNXC_FAIL_ON_COMPILE", "1")  # a second call compiles nothing
    assert runtime_objects(cfg, srcs, tmp_path) == objs
    with pytest.raises(onnxc.CompileError, match="ONNXC_FAIL_ON_COMPILE"):  # another source would need a compile
        runtime_objects(cfg, sources_for('#include "onnxc_signal.h"\n'), tmp_path)


def _twin_model() -> onnx.ModelProto:
    """Two identical LayerNormalization + Softmax branches on two inputs, added."""
    nodes, inits = [], []
    for b in "ab":
        inits += [helper.make_tensor(f"g{b}", TensorProto.FLOAT, [8], np.linspace(0.5, 1.5, 8).tolist()),
                  helper.make_tensor(f"s{b}", TensorProto.FLOAT, [8], np.linspace(-1, 1, 8).tolist())]
        nodes += [helper.make_node("LayerNormalization", [b, f"g{b}", f"s{b}"], [f"ln{b}"], name=f"ln_{b}"),
                  helper.make_node("Softmax", [f"ln{b}"], [f"sm{b}"], axis=-1, name=f"softmax_{b}")]
    nodes.append(helper.make_node("Add", ["sma", "smb"], ["y"], name="add"))
    g = helper.make_graph(nodes, "twins", [helper.make_tensor_value_info(b, TensorProto.FLOAT, ["N", 8]) for b in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _twin_expected(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    def branch(v):
        m, s = v.mean(-1, keepdims=True), v.std(-1, keepdims=True)
        t = (v - m) / np.sqrt(s * s + 1e-5) * np.linspace(0.5, 1.5, 8) + np.linspace(-1, 1, 8)
        e = np.exp(t - t.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return branch(x.astype(np.float64)) + branch(z.astype(np.float64))


def test_identical_nodes_share_one_kernel():
    m = onnxc.compile(_twin_model())
    src = m.c_source
    # the two LayerNormalization nodes (and the two Softmax nodes) are one C function each ...
    assert src.count("/* LayerNormalization") == 1 and src.count("/* Softmax") == 1
    rng = np.random.default_rng(0)
    x, z = rng.standard_normal((3, 8), np.float32), rng.standard_normal((3, 8), np.float32)
    np.testing.assert_allclose(m(x, z), _twin_expected(x, z), rtol=1e-5, atol=1e-6)


def test_errors_still_name_their_node():
    """The shared kernel of two Gather nodes reports the node that failed (its name is an argument)."""
    nodes = [helper.make_node("Gather", ["t", "i"], ["a"], name="first_gather"),
             helper.make_node("Gather", ["t", "j"], ["b"], name="second_gather"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    t = helper.make_tensor("t", TensorProto.FLOAT, [4, 2], list(range(8)))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [3]) for n in "ij"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [t])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m.c_source.count("/* Gather") == 1
    ok = np.array([0, 1, 3], np.int64)
    with pytest.raises(onnxc.RuntimeFailure, match="second_gather"):
        m(ok, np.array([0, 9, 1], np.int64))
    with pytest.raises(onnxc.RuntimeFailure, match="first_gather"):
        m(np.array([7, 0, 0], np.int64), ok)


def test_a_model_in_several_units(monkeypatch, tmp_path):
    """With a low unit threshold, even a small model is spread over units compiled apart and linked;
    the results are those of the one-unit build."""
    model = _twin_model()
    rng = np.random.default_rng(1)
    x, z = rng.standard_normal((5, 8), np.float32), rng.standard_normal((5, 8), np.float32)
    one = onnxc.compile(model)
    monkeypatch.setattr(emit, "UNIT_MIN_LINES", 1)
    many = onnxc.compile(model, cache_dir=tmp_path)  # (not the model cache's one-unit entry)
    units = emit.split_units(many.c_source)
    assert len(units) >= 2 and len(emit.split_units(one.c_source)) == 1
    assert "ONNXC_KERNEL_EXTERN" in units[0] and all("ONNXC_KERNEL_EXTERN" in u for u in units[1:])
    np.testing.assert_array_equal(many(x, z), one(x, z))


def test_artifact_carries_only_the_runtime_it_needs(tmp_path):
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    out = onnxc.build(m, tmp_path / "a", name="relu", emit_only=True)
    files = {p.name for p in out.iterdir()}
    assert "onnxc.h" in files and "onnxc_image.c" not in files and "onnxc_sgemm.c" not in files
    needed = _names(sources_for((out / "model.c").read_text() + (out / "api.c").read_text()))
    assert needed <= files
    assert all(s in (out / "Makefile").read_text() for s in needed)
