"""passes/fold_constants.py run on its own (shape inference without folding first): all-constant nodes and
shape tensors of static shapes become initializers (IR before, expected IR after, the folded shape
computations recorded), a result over the size cap stays a node, a second run finds nothing, and the
compiled model matches onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.fold_constants import MAX_FOLD_BYTES, fold_constants
from onnxc.passes.infer_shapes import infer_graph

from .onnxutil import dump, load, model, ort_run, vi

n = helper.make_node
BIG = [2048, 1024]  # 8 MiB of float32 from 16 bytes of shape: over the cap


def _model():
    half = helper.make_tensor("v", TP.FLOAT, [1], [0.5])
    return model([n("Add", ["a", "a"], ["a2"]), n("Shape", ["x"], ["sh"]), n("Cast", ["sh"], ["shf"], to=TP.FLOAT),
                  n("ConstantOfShape", ["big"], ["z"], value=half), n("ReduceSum", ["z"], ["zs"], keepdims=0),
                  n("Mul", ["x", "a2"], ["xa"]), n("Add", ["xa", "zs"], ["xz"]), n("Reshape", ["xz", "sh"], ["y"])],
                 [vi("x", [2, 3])], ["y"], {"a": np.float32([1, 2, 3]), "big": np.array(BIG, np.int64)})


def _inferred():
    m = load(_model())
    infer_graph(m.graph, fold=False)
    return m


def test_constants_and_static_shapes_fold_and_the_big_fill_stays():
    m = _inferred()
    assert [k.op_type for k in m.graph.nodes] == ["Add", "Shape", "Cast", "ConstantOfShape", "ReduceSum", "Mul",
                                                  "Add", "Reshape"]
    assert 4 * BIG[0] * BIG[1] > MAX_FOLD_BYTES
    assert fold_constants(m).changed
    assert dump(m.graph).split(") {\n")[1] == """\
  init %a: float[3]
  init %big: int64[2]
  init %sh_const_0: int64[2]
  init %a2: float[3]
  init %sh: int64[2]
  init %shf: float[2]
  %z = ConstantOfShape(%big) {value=<tensor float32[1]>}
  %zs = ReduceSum(%z) {keepdims=0}
  %xa = Mul(%x, %a2)
  %xz = Add(%xa, %zs)
  %y = Reshape(%xz, %sh_const_0)
  return %y
}"""
    ini = m.graph.initializers
    np.testing.assert_array_equal(ini["a2"].const, np.float32([2, 4, 6]))
    np.testing.assert_array_equal(ini["sh"].const, np.int64([2, 3]))
    assert ini["shf"].const.dtype == np.float32 and ini["sh"].producer is None
    assert m.graph.folded == ["Shape (outputs 'sh')", "Cast (outputs 'shf')"]
    check_model(m, typed=True)


def test_second_run_finds_nothing():
    m = _inferred()
    fold_constants(m)
    before = dump(m.graph)
    assert not fold_constants(m).changed
    assert dump(m.graph) == before


def test_compiled_model_matches_onnxruntime():
    mp = _model()
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(onnxc.compile(mp)(x), ort_run(mp, {"x": x})[0], rtol=1e-6)
