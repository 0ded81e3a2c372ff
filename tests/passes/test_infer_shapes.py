"""passes/infer_shapes.py: types with dimension variables (IR before, expected IR and types after): a
Shape -> Gather -> Concat -> Reshape chain becomes a constant target over the symbols, a second run
reports no change, declared types are checked and limits enforced with errors naming the node, and the
compiled model matches onnxruntime at several batch sizes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir import ShapeError, UnsupportedOpError
from onnxc.ir.checker import check_model
from onnxc.passes.infer_shapes import infer_shapes

from .onnxutil import dump, load, model, ort_run, vi

n = helper.make_node


def _reshape_chain():
    return model([n("Shape", ["x"], ["sh"]), n("Gather", ["sh", "i0"], ["b"], axis=0),
                  n("Concat", ["b", "m1"], ["tgt"], axis=0), n("Reshape", ["x", "tgt"], ["r"]),
                  n("Relu", ["r"], ["y"])],
                 [vi("x", ["N", 3, 4])], ["y"], {"i0": np.array([0], np.int64), "m1": np.array([-1], np.int64)})


def test_shape_chain_becomes_static_in_symbols():
    m = load(_reshape_chain())
    assert all(v.type is None for n_ in m.graph.nodes for v in n_.outputs)
    assert infer_shapes(m).changed
    assert dump(m.graph).split(") {\n")[1] == """\
  init %i0: int64[1]
  init %m1: int64[1]
  init %tgt_const_0: int64[2]
  %sh = Shape(%x)
  %b = Gather(%sh, %i0) {axis=0}
  %tgt = Concat(%b, %m1) {axis=0}
  %r = Reshape(%x, %tgt_const_0)
  %y = Relu(%r)
  return %y
}"""
    types = {v.name: str(v.type) for v in m.graph.all_values()}
    assert types["sh"] == "int64[3]" and types["r"] == "float[N, 12]" and types["y"] == "float[N, 12]"
    assert [str(d) for d in m.graph.nodes[2].outputs[0].sym_value] == ["N", "-1"]
    check_model(m, typed=True)


def test_second_run_reports_no_change():
    m = load(_reshape_chain())
    infer_shapes(m)
    before = dump(m.graph)
    assert not infer_shapes(m).changed
    assert dump(m.graph) == before


def test_declared_element_type_must_be_the_inferred_one():
    mp = model([n("Cast", ["x"], ["y"], to=TP.INT32)], [vi("x", [2])], [vi("y", [2], TP.INT64)])
    with pytest.raises(ShapeError, match=r"Cast .*'y'.*declared int64 but the node computes int32"):
        infer_shapes(load(mp))


def test_limits_and_missing_rules_name_the_node():
    big = model([n("Expand", ["x", "s"], ["y"])], [vi("x", [1])], ["y"], {"s": np.array([1 << 40, 1 << 30], np.int64)})
    with pytest.raises(ShapeError, match=r"Expand .*output 'y'"):
        infer_shapes(load(big))
    odd = model([n("NoSuchOp", ["x"], ["y"], domain="com.example")], [vi("x", [2])], ["y"])
    odd.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError, match=r"no shape rule for com.example::NoSuchOp .*'y'"):
        infer_shapes(load(odd))


def test_compiled_model_matches_onnxruntime():
    mp = _reshape_chain()
    compiled = onnxc.compile(mp)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
        np.testing.assert_array_equal(compiled(x), ort_run(mp, {"x": x})[0])
