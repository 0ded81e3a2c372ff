"""passes/bind_constants.py on the IR: bound inputs become initializers of their declared element type and
the given shape (IR before, expected IR after), shape inference then keeps only the If branch the bound
value takes, and bad values are ModelErrors naming the input. The compiled, bound models against
onnxruntime and the ``--const`` command line are in tests/test_bind_constants.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from onnxc.ir import ModelError
from onnxc.ir.checker import check_model
from onnxc.passes.bind_constants import bind_constants, parse_const
from onnxc.passes.infer_shapes import infer_shapes

from .onnxutil import body, dump, load, model, vi

n = helper.make_node


def _model():
    then = body("then", [n("Relu", ["x"], ["t"])], ["t"])
    els = body("else", [n("Neg", ["x"], ["e"])], ["e"])
    return load(model([n("Greater", ["sr", "k"], ["c"]), n("If", ["c"], ["z"], then_branch=then, else_branch=els),
                       n("Reshape", ["z", "shape"], ["y"])],
                      [vi("x", ["N", 4]), vi("sr", [], TP.INT64), vi("shape", [2], TP.INT64)], ["y"],
                      {"k": np.array(8000, np.int64)}))


def test_bound_inputs_become_initializers_and_the_if_folds():
    m = _model()
    bind_constants(m, {"sr": 16000, "shape": [-1, 2]})
    assert [v.name for v in m.graph.inputs] == ["x"]
    assert dump(m.graph).split("\ngraph else(")[0] == """\
graph g(
    %x: float[N, 4],
) {
  init %k: int64[]
  init %sr: int64[]
  init %shape: int64[2]
  %c = Greater(%sr, %k)
  %z = If(%c) {else_branch=<graph else>, then_branch=<graph then>}
  %y = Reshape(%z, %shape)
  return %y
}"""
    assert m.bound["sr"].dtype == np.int64 and m.bound["shape"].tolist() == [-1, 2]
    check_model(m)
    infer_shapes(m)
    assert repr(m.graph.nodes) == "[%t = Relu(%x), %y = Reshape(%t, %shape)]"
    assert str(m.graph.outputs[0].type) == "float[2*N, 2]"


def test_scalar_fills_a_shape_of_ones_and_nothing_bound_changes_nothing():
    m = load(model([n("Add", ["x", "b"], ["y"])], [vi("x", [2]), vi("b", [1, 1])], ["y"]))
    before = dump(m.graph)
    bind_constants(m, {})
    assert dump(m.graph) == before and m.bound == {}
    bind_constants(m, {"b": 2.5})
    assert m.graph.initializers["b"].const.shape == (1, 1) and m.graph.initializers["b"].const.dtype == np.float32


@pytest.mark.parametrize("value, match", [
    ({"nope": 1}, r"the model has no input 'nope' \(inputs: x, sr, shape\)"),
    ({"sr": 1.5}, r"1.5 does not fit input 'sr' \(int64\)"),
    ({"shape": [1, 2, 3]}, r"input 'shape' has shape \[2\], got a value of shape \[3\]"),
    ({"sr": "a"}, r"input 'sr' needs numbers, got 'a'"),
])
def test_bad_values_name_the_input(value, match):
    with pytest.raises(ModelError, match=match):
        bind_constants(_model(), value)


def test_parse_const():
    assert parse_const("sr=16000") == ("sr", 16000)
    assert parse_const("s=1,2.5,true") == ("s", [1, 2.5, True])
    with pytest.raises(ModelError, match=r"--const expects NAME=VALUE, got 'sr'"):
        parse_const("sr")
    with pytest.raises(ModelError, match=r"--const sr: 'x1' is not a number"):
        parse_const("sr=x1")
