"""passes/fuse_depthwise_pointwise.py: a depthwise Conv read only by a 1x1 Conv becomes one
onnxc::DepthwisePointwise node (IR before, expected IR after); pairs that must stay apart (a small map, a
strided or grouped pointwise, a public or shared depthwise output, the switch off) are left equal; the
compiled pair matches onnxruntime. Kernel paths and epilogues are covered in tests/ops/test_conv_dwpw.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxc
from onnxc.ir.checker import check_model
from onnxc.passes import fuse_depthwise_pointwise as fdp
from onnxc.passes.infer_shapes import infer_shapes

from .onnxutil import dump, load, model, ops, ort_run, vi

n = helper.make_node
C, M = 8, 16
rng = np.random.default_rng(11)
INITS = {"wd": rng.standard_normal((C, 1, 3, 3)).astype(np.float32), "bd": rng.standard_normal(C).astype(np.float32),
         "wp": rng.standard_normal((M, C, 1, 1)).astype(np.float32),
         "wg": rng.standard_normal((M, C // 2, 1, 1)).astype(np.float32)}


def _pair(hw: int = 64, pw: dict | None = None, public: bool = False, shared: bool = False, wp: str = "wp"):
    nodes = [n("Conv", ["x", "wd", "bd"], ["d"], group=C, pads=[1, 1, 1, 1], name="dw"),
             n("Conv", ["d", wp], ["y"], name="pw", **(pw or {}))]
    outs = ["y"] + (["d"] if public else [])
    if shared:
        nodes.append(n("Relu", ["d"], ["r"]))
        outs.append("r")
    return model(nodes, [vi("x", ["N", C, hw, hw])], outs, INITS)


def _inferred(**kw):
    m = load(_pair(**kw))
    infer_shapes(m)
    return m


def test_pair_becomes_one_node():
    m = _inferred()
    assert ops(m.graph) == ["Conv", "Conv"]
    assert fdp.fuse_depthwise_pointwise(m).changed
    assert dump(m.graph).split(") {\n")[1] == """\
  init %wd: float[8, 1, 3, 3]
  init %bd: float[8]
  init %wp: float[16, 8, 1, 1]
  init %wg: float[16, 4, 1, 1]
  %y = DepthwisePointwise(%x, %wd, %bd, %wp) {kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], \
dilations=[1, 1]}
  return %y
}"""
    node = m.graph.nodes[0]
    assert (node.domain, node.op_type, node.name) == (fdp.DOMAIN, fdp.OP, "pw_dwpw")
    check_model(m, typed=True)
    assert not fdp.fuse_depthwise_pointwise(m).changed


@pytest.mark.parametrize("case", ["small_map", "strided_pointwise", "grouped_pointwise", "public", "shared"])
def test_pairs_that_stay_apart(case):
    kw = {"small_map": {"hw": 8}, "strided_pointwise": {"pw": {"strides": [2, 2]}},
          "grouped_pointwise": {"pw": {"group": 2}, "wp": "wg"}, "public": {"public": True},
          "shared": {"shared": True}}[case]
    m = _inferred(**kw)
    before = dump(m.graph)
    assert not fdp.fuse_depthwise_pointwise(m).changed
    assert dump(m.graph) == before


def test_switch_off_leaves_the_pair(monkeypatch):
    monkeypatch.setenv(fdp.ENV_SWITCH, "0")
    m = _inferred()
    assert not fdp.fuse_depthwise_pointwise(m).changed and ops(m.graph) == ["Conv", "Conv"]


def test_compiled_pair_matches_onnxruntime():
    mp = _pair()
    compiled = onnxc.compile(mp)
    for batch in (1, 2):
        x = rng.standard_normal((batch, C, 64, 64)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), ort_run(mp, {"x": x})[0], rtol=1e-4, atol=1e-4)
