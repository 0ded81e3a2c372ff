"""Spell out an inference BatchNormalization that feeds a fused elementwise chain as per-channel Mul
and Add.

A BN that still stands alone after fold_batchnorm (no Conv/Gemm before it) and whose output only a
fusable elementwise op reads becomes ``Mul(x, a) + shift`` with ``a, shift`` per-channel constants, so
fuse_elementwise makes BN-Relu (BN-Mul-Add-Relu) one pass. Runs right before fuse_elementwise.

Applies only to inference BNs that bn_coefficients accepts (constant 1-D statistics of the static
channel count, float/double, no training outputs read) on inputs of rank >= 2.
"""

from __future__ import annotations

from onnxc.ir import Graph, Model, Node, TensorType, Value

from .base import PassResult
from .bn_common import bn_channels, sole_reader
from .fold_batchnorm import bn_coefficients
from .fuse_elementwise import chain_dtype


def spell_out_graph(g: Graph) -> bool:
    changed = False
    for bn in list(g.nodes):
        if bn.op_type != "BatchNormalization" or bn.graph is not g:
            continue
        channels = bn_channels(bn)
        coef = None if channels is None else bn_coefficients(bn, channels)
        reader = sole_reader(bn.outputs[0])
        if coef is None or reader is None or chain_dtype(reader) is None:
            continue
        x, y = bn.inputs[0], bn.outputs[0]
        shape = (channels,) + (1,) * (len(x.shape) - 2)
        dt = x.dtype.np
        a = g.constant(coef[0].reshape(shape).astype(dt), g.fresh_name(f"{bn.name or y.name}_scale"))
        shift = g.constant(coef[1].reshape(shape).astype(dt), g.fresh_name(f"{bn.name or y.name}_shift"))
        mid = Value(g.fresh_name(f"{y.name}_mul"), TensorType(x.dtype, x.shape))
        name = bn.name or y.name
        mul = Node("Mul", [x, a], [mid], name=g.fresh_name(f"{name}_mul"), version=14)
        g.insert_before(bn, mul)
        g.remove(bn)
        y.producer = None
        add = Node("Add", [mid, shift], [y], name=name, version=14)
        at = g.nodes.index(mul) + 1  # where the BN was
        if at < len(g.nodes):
            g.insert_before(g.nodes[at], add)
        else:
            g.append(add)
        changed = True
    return changed


def spell_out_batchnorm(model: Model) -> PassResult:
    return PassResult(model, spell_out_graph(model.graph))
