"""Helpers shared by the passes that rewrite an inference BatchNormalization around its neighbours
(merge_bn_affine, spell_out_batchnorm)."""

from __future__ import annotations

from onnxc.ir import Node, TensorType, Value


def bn_channels(bn: Node) -> int | None:
    """The BN's static channel count (axis 1 of its input), else None."""
    x = bn.input(0)
    if x is None or not isinstance(x.type, TensorType) or x.shape is None or len(x.shape) < 2:
        return None
    c = x.shape[1]
    return c if isinstance(c, int) else None


def sole_reader(v: Value) -> Node | None:
    """The one node of v's graph that reads v (v not a graph output), else None."""
    g = v.graph
    readers = v.uses()
    if g is None or v in g.outputs or len(readers) != 1:
        return None
    node = readers[0][0]
    return node if node.graph is g else None
