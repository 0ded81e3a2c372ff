"""The public compile/run contract: caching across processes, errors that name what was wrong."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc


def add_relu_model(name_x: str = "x", name_y: str = "y", out: str = "out") -> onnx.ModelProto:
    nodes = [helper.make_node("Add", [name_x, name_y], ["t"], name="add"),
             helper.make_node("Relu", ["t"], [out], name="relu")]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(name_x, TensorProto.FLOAT, ["N", 3]),
                           helper.make_tensor_value_info(name_y, TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_second_compile_in_new_process_compiles_no_c(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(add_relu_model(), path)
    script = textwrap.dedent(f"""
        import numpy as np, onnxc
        from onnxc.codegen import cache
        m = onnxc.compile({str(path)!r})
        x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
        assert np.array_equal(m(x, x), np.maximum(2 * x, 0))
        print(cache.stats["hits"], cache.stats["misses"])
    """)
    env = dict(os.environ, ONNXC_CACHE_DIR=str(tmp_path / "cache"))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["0", "1"]
    env["ONNXC_FAIL_ON_COMPILE"] = "1"
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["1", "0"]


def test_fail_on_compile_switch_blocks_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXC_FAIL_ON_COMPILE", "1")
    with pytest.raises(onnxc.CompileError, match="ONNXC_FAIL_ON_COMPILE"):
        onnxc.compile(add_relu_model(), cache_dir=tmp_path)


def test_unsupported_ops_are_listed_together():
    nodes = [helper.make_node("FrobA", ["x"], ["a"], domain="com.example", name="first"),
             helper.make_node("FrobB", ["a"], ["b"], domain="com.example", name="second"),
             helper.make_node("FrobA", ["b"], ["c"], domain="com.example", name="third")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 3)])
    with pytest.raises(onnxc.UnsupportedOpError) as e:
        onnxc.compile(m)
    msg = str(e.value)
    assert "com.example::FrobA (opset 3)" in msg and "com.example::FrobB (opset 3)" in msg
    assert "'first'" in msg and "'third'" in msg and "'second'" in msg
    assert sorted(e.value.ops) == [("com.example", "FrobA", 3), ("com.example", "FrobB", 3)]


@pytest.fixture(scope="module")
def add_relu():
    return onnxc.compile(add_relu_model())


def test_inputs_outputs_describe_symbolic_shapes(add_relu):
    assert [(i.name, i.dtype, i.shape) for i in add_relu.inputs] == [("x", np.float32, ("N", 3)),
                                                                     ("y", np.float32, ("N", 3))]
    assert add_relu.outputs[0].shape == ("N", 3)


@pytest.mark.parametrize("n", [0, 1, 7])
def test_runs_at_any_batch(add_relu, n):
    x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
    out = add_relu.run({"x": x, "y": x})["out"]
    assert out.shape == (n, 3) and np.array_equal(out, np.maximum(x + x, 0))


def test_input_errors_name_the_problem(add_relu):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(onnxc.InputError, match="missing input 'y'"):
        add_relu.run({"x": x})
    with pytest.raises(onnxc.InputError, match="input 'x': expected element type float.*float64"):
        add_relu.run({"x": x.astype(np.float64), "y": x})
    with pytest.raises(onnxc.InputError, match="input 'y': expected rank 2, got 1"):
        add_relu.run({"x": x, "y": np.zeros(3, np.float32)})
    with pytest.raises(onnxc.InputError, match="input 'y' axis 0: dimension 'N' is 2 \\(from input 'x' axis 0\\) "
                                               "but got 4"):
        add_relu.run({"x": x, "y": np.zeros((4, 3), np.float32)})
    with pytest.raises(onnxc.InputError, match="unknown input"):
        add_relu.run({"x": x, "y": x, "z": x})
    with pytest.raises(onnxc.InputError, match=r"unknown output\(s\) \['nope'\]; the model's outputs are \['out'\]"):
        add_relu.run({"x": x, "y": x}, ["nope"])


def test_python_lists_take_the_input_type():
    """Lists and scalars convert to the input's element type (not float64); an integer input takes only
    numbers it holds exactly."""
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Cast", ["k"], ["kf"], to=1),
                           helper.make_node("Add", ["s", "kf"], ["out"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])])
    m = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    out = m.run({"x": [0.5, 1.5], "y": (1, 2), "k": [3.0, 4]})["out"]
    np.testing.assert_array_equal(out, np.array([4.5, 7.5], np.float32))
    with pytest.raises(onnxc.InputError, match="input 'k': expected int64 values, got numbers it cannot hold exactly"):
        m.run({"x": [0, 0], "y": [0, 0], "k": [1.5, 2]})
    for bad, shown in (("ab", "str that holds none: 'ab'"), ([None, 1], "list that holds none: [None, 1]")):
        with pytest.raises(onnxc.InputError, match=re.escape(f"input 'x': expected float numbers, got a Python {shown}")):
            m.run({"x": bad, "y": [0, 0], "k": [1, 2]})


@pytest.mark.hostile
def test_hostile_names_never_reach_c_unescaped():
    evil = 'x*/ "%s%n\\\n#include <evil>'
    m = onnxc.compile(add_relu_model(name_x=evil, out="o\"ut"))
    x = np.ones((1, 3), np.float32)
    assert np.array_equal(m.run({evil: x, "y": x})['o"ut'], 2 * x)
    with pytest.raises(onnxc.InputError) as e:
        m.run({evil: np.ones((1, 4), np.float32), "y": x})
    assert evil in str(e.value)


def test_non_contiguous_and_readonly_inputs(add_relu):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = base[:, :3]
    y = np.ones((3, 3), np.float32)
    y.setflags(write=False)
    assert np.array_equal(add_relu(x, y), np.maximum(x + 1, 0))


def test_model_metadata_on_compile_cache_hit_and_artifact(tmp_path, capsys):
    """metadata_props (a detector's class names...), producer, version and doc string come with the compiled
    model, from a fresh compile, a model-cache hit and an AOT artifact; onnxc info shows them."""
    m = add_relu_model()
    m.producer_name, m.producer_version, m.model_version, m.doc_string = "exporter", "2.1", 7, "adds then clips"
    helper.set_model_props(m, {"names": "{0: 'person', 1: 'bicycle'}", "stride": "32"})
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    want = {"names": "{0: 'person', 1: 'bicycle'}", "stride": "32"}
    first = onnxc.compile(path, cache_dir=tmp_path / "cache")
    hit = onnxc.compile(path, cache_dir=tmp_path / "cache")
    art = onnxc.load(onnxc.build(path, tmp_path / "art", name="m"))
    for cm in (first, hit, art):
        assert cm.metadata == want
        assert cm.about["producer"] == "exporter 2.1" and cm.about["model_version"] == 7
        assert cm.about["doc_string"] == "adds then clips"
    from onnxc.cli import main
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metadata:\n  names: {0: 'person', 1: 'bicycle'}\n  stride: 32" in out and "model version 7" in out
