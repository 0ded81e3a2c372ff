"""passes/shapes/elementwise.py: comparisons of shape values that the dims decide (dims are >= 0, so a dim
never equals -1) give the Where that follows a symbolic value: the ``Where(Equal(Shape(x), -1), 1, Shape(x))``
that PyTorch's tracer writes before an Expand keeps the input's dims instead of run-time variables."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir.dims import sym
from onnxc.passes.infer_shapes import infer_shapes
from onnxc.passes.shapes.elementwise import _compare_dims

from .onnxutil import load, model, ort_run, vi

n = helper.make_node


@pytest.mark.parametrize(("op", "a", "b", "want"), [
    ("Equal", "N", -1, 0), ("Equal", "N", "N", 1), ("Equal", "N", 0, None), ("Equal", "N+1", 0, 0),
    ("Greater", "N+1", 0, 1), ("Greater", "N", 0, None), ("Greater", -1, "N", 0),
    ("GreaterOrEqual", "N", 0, 1), ("GreaterOrEqual", -1, "N", 0), ("GreaterOrEqual", "N", "M", None),
    ("Less", "N", -1, 0), ("Less", -2, "N", 1), ("LessOrEqual", "N", -1, 0), ("LessOrEqual", 0, "N", 1),
    ("LessOrEqual", "N", 0, None), ("Less", 3, 5, 1), ("Equal", 4, 4, 1),
])
def test_compare_dims(op, a, b, want):
    def dim(x):
        return x if isinstance(x, int) else sym(x[0]) + (1 if x.endswith("+1") else 0)

    assert _compare_dims(op, dim(a), dim(b)) == want


def _expand_model():
    # y = Expand(t, Where(Equal(Shape(x), -1), ones, Shape(x))) + x: as the tracer writes `t.expand(x.shape)`
    return model([n("Shape", ["x"], ["sh"]), n("Equal", ["sh", "m1"], ["eq"]),
                  n("ConstantOfShape", ["two"], ["ones"], value=helper.make_tensor("v", TP.INT64, [1], [1])),
                  n("Where", ["eq", "ones", "sh"], ["tgt"]), n("Expand", ["t", "tgt"], ["e"]),
                  n("Add", ["e", "x"], ["y"])],
                 [vi("x", ["B", "S"])], [vi("y", ["B", "S"])],
                 {"m1": np.array([-1], np.int64), "two": np.array([2], np.int64),
                  "t": np.full((1, 1), 2.0, np.float32)})


def test_where_over_decided_comparison_keeps_dims():
    m = load(_expand_model())
    infer_shapes(m)
    vals = {v.name: v for v in m.graph.all_values()}
    assert [str(d) for d in vals["tgt"].sym_value] == ["B", "S"]
    assert [str(d) for d in vals["e"].type.shape] == ["B", "S"]


@pytest.mark.parametrize("batch", [1, 3])
def test_where_over_decided_comparison_runs(batch, tmp_path):
    proto = _expand_model()
    x = np.random.default_rng(batch).standard_normal((batch, 5)).astype(np.float32)
    got = onnxc.compile(proto, cache_dir=tmp_path)(x)
    np.testing.assert_allclose(got, ort_run(proto, {"x": x})[0], rtol=1e-6)
