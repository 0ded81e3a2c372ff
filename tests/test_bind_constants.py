"""Inputs bound to constants at compile time (passes/bind_constants.py): compile(constants=...), --const."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from onnxc.ir import ModelError


def _vad_like() -> onnx.ModelProto:
    """The sample rate picks a branch: 16000 scales x by 2, anything else adds 1."""
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "sr16k", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Add", ["x", "one"], ["e"])], "sr8k", [],
                              [helper.make_tensor_value_info("e", TP.FLOAT, None)])
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", TP.FLOAT, ["b", 4]),
                                         helper.make_tensor_value_info("sr", TP.INT64, [])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, ["b", 4])],
                          [one, two, numpy_helper.from_array(np.array(16000, np.int64), "k16")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_bound_input_folds_the_branch_and_leaves_the_inputs():
    m = _vad_like()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for sr in (16000, 8000):  # two entries of the model cache, not one
        cm = onnxc.compile(m, constants={"sr": sr})
        assert [i.name for i in cm.inputs] == ["x"]
        assert not [n for n in cm.ir.graph.nodes if n.op_type == "If"]
        np.testing.assert_array_equal(cm.run({"x": x})["y"], sess.run(None, {"x": x, "sr": np.array(sr)})[0])


@pytest.mark.parametrize("constants, message", [
    ({"rate": 16000}, "has no input 'rate'"),
    ({"sr": [16000, 8000]}, r"input 'sr' has shape \[\], got a value of shape \[2\]"),
    ({"sr": 1.5}, "does not fit input 'sr'"),
    ({"sr": "fast"}, "needs numbers"),
])
def test_bad_constants_are_refused_by_name(constants, message):
    with pytest.raises(ModelError, match=message):
        onnxc.compile(_vad_like(), constants=constants)


def test_cli_const(tmp_path):
    path = tmp_path / "vad.onnx"
    onnx.save(_vad_like(), path)
    cli = [sys.executable, "-m", "onnxc.cli"]
    info = subprocess.run(cli + ["info", str(path), "--const", "sr=16000"], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    assert "sr: bound to 16000" in info.stdout and " If(" not in info.stdout
    run = subprocess.run(cli + ["run", str(path), "-c", "sr=8000", "-d", "b=1"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    bad = subprocess.run(cli + ["run", str(path), "--const", "sr=abc"], capture_output=True, text=True)
    assert bad.returncode != 0 and "'abc' is not a number" in bad.stderr
