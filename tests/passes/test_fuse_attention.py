"""passes/fuse_attention.py on the IR: split-heads attention with a scale, a mask and a merge-heads
transpose becomes one onnxc::FusedAttention node with the transposes as permutations (IR before,
expected IR after); a softmax over another axis, a public score tensor and a non-constant scale stay;
the compiled model matches onnxruntime. Exporter variants are covered in tests/test_fuse_attention.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes.fuse_attention import DOMAIN, OP, fuse_attention
from onnxc.passes.infer_shapes import infer_shapes

from .onnxutil import dump, load, model, ops, ort_run, vi

n = helper.make_node
rng = np.random.default_rng(17)
QKV = [vi(x, ["B", "L", 2, 4]) for x in "qkv"]


def _attention(axis: int = -1, public_scores: bool = False, runtime_scale: bool = False):
    nodes = [n("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]), n("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
             n("Transpose", ["v"], ["vt"], perm=[0, 2, 1, 3]), n("MatMul", ["qt", "kt"], ["s"]),
             n("Div", ["s", "c"], ["s2"]), n("Add", ["s2", "mask"], ["s3"]), n("Softmax", ["s3"], ["p"], axis=axis),
             n("MatMul", ["p", "vt"], ["o"]), n("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    inputs = QKV + [vi("mask", ["B", 1, 1, "L"])] + ([vi("c", [])] if runtime_scale else [])
    inits = {} if runtime_scale else {"c": np.float32(2.0)}
    return model(nodes, inputs, ["y"] + (["s"] if public_scores else []), inits)


def test_attention_becomes_one_node():
    m = load(_attention())
    infer_shapes(m)
    assert ops(m.graph) == ["Transpose"] * 3 + ["MatMul", "Div", "Add", "Softmax", "MatMul", "Transpose"]
    assert fuse_attention(m).changed
    assert dump(m.graph).split(") {\n")[1] == """\
  init %c: float[]
  %y = FusedAttention(%q, %k, %v, %mask) {q_perm=[0, 2, 1, 3], k_perm=[0, 2, 3, 1], v_perm=[0, 2, 1, 3], \
out_perm=[0, 2, 1, 3], scale_mode=2, scale=2.0}
  return %y
}"""
    assert m.graph.nodes[0].domain == DOMAIN and m.graph.nodes[0].op_type == OP
    check_model(m, typed=True)
    assert not fuse_attention(m).changed


@pytest.mark.parametrize("kw", [{"axis": 2}, {"public_scores": True}, {"runtime_scale": True}],
                         ids=["softmax_axis_2", "public_scores", "runtime_scale"])
def test_cases_that_stay(kw):
    m = load(_attention(**kw))
    infer_shapes(m)
    before = dump(m.graph)
    assert not fuse_attention(m).changed
    assert dump(m.graph) == before


def test_compiled_model_matches_onnxruntime():
    mp = _attention()
    compiled = onnxc.compile(mp)
    for b, seq in ((1, 1), (2, 5)):
        feeds = {x: rng.standard_normal((b, seq, 2, 4)).astype(np.float32) for x in "qkv"}
        feeds["mask"] = np.where(rng.random((b, 1, 1, seq)) < 0.3, -1e4, 0).astype(np.float32)
        np.testing.assert_allclose(compiled.run(feeds)["y"], ort_run(mp, feeds)[0], rtol=1e-4, atol=1e-5)
