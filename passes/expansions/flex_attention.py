"""FlexAttention (ai.onnx.preview 1): scaled dot-product attention on rank-4 inputs with optional
``score_mod`` / ``prob_mod`` subgraphs applied to the scores and to the probabilities.

Scores and probabilities are in the softmax precision (``softmax_precision``, else float for
float/float16/bfloat16 inputs and double for double); each modifier subgraph is inlined on them: its nodes are copied with
fresh values, its initializers become constants, and values it reads from enclosing scopes stay
shared. Grouped query heads read K/V head h // (Hq / Hkv), as in Attention.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Graph, Node, Value

from .attention import grouped_matmul
from .builder import ALL_FLOATS, Builder
from .registry import expansion


def inline_modifier(b: Builder, g: Graph, x: Value, what: str) -> Value:
    """The output of single-input, single-output graph ``g`` applied to ``x``, inlined before the node."""
    if len(g.inputs) != 1 or len(g.outputs) != 1:
        raise b.fail(f"{what} must have exactly one input and one output, got {len(g.inputs)} and "
                     f"{len(g.outputs)}")
    env: dict[int, Value] = {g.inputs[0].id: x}
    for init in g.initializers.values():
        env[init.id] = b.const(init.const, tag=f"{what}_{init.name}")
    for n in g.nodes:
        if any(True for _ in n.subgraphs()):
            raise b.unsupported(f"{what}: nested subgraphs ({n.op_type}) are not supported yet")
        outs = [Value(b.graph.fresh_name(f"{b.base}_{what}_{o.name}")) for o in n.outputs]
        clone = Node(n.op_type, [None if v is None else env.get(v.id, v) for v in n.inputs], outs, dict(n.attrs),
                     domain=n.domain, name=f"{b.base}/{what}/{n.name or n.op_type}", version=n.version,
                     overload=n.overload)
        b.graph.insert_before(b.node, clone)
        b.nodes.append(clone)
        env.update({o.id: c for o, c in zip(n.outputs, outs)})
    return env.get(g.outputs[0].id, g.outputs[0])


@expansion("FlexAttention", domain="ai.onnx.preview", versions=(1, 10**9))
def flex_attention(b: Builder) -> None:
    b.require_types([0, 1, 2], ALL_FLOATS)
    dt = b.dtype(0)
    shapes = [b.shape(i) for i in range(3)]
    if any(len(s) != 4 for s in shapes) or b.dtype(1) != dt or b.dtype(2) != dt:
        raise b.fail(f"Q, K and V must be rank-4 tensors of one type, got {[list(s) for s in shapes]}")
    qh, kvh = shapes[0][1], shapes[1][1]
    if shapes[2][1] != kvh:
        raise b.fail(f"K and V must have the same number of heads, got {kvh} and {shapes[2][1]}")
    if qh != kvh and not (isinstance(qh, int) and isinstance(kvh, int) and kvh > 0 and qh % kvh == 0):
        raise b.fail(f"the query head count {qh} must be a static multiple of the K/V head count {kvh}")
    scale = b.attr("scale")
    if scale is None:
        if not isinstance(shapes[0][3], int):
            raise b.unsupported("the head size must be static when scale is not given")
        scale = np.float32(1) / np.sqrt(np.float32(shapes[0][3]))
    precision = b.attr("softmax_precision")
    if precision is None:
        work = DType.DOUBLE if dt == DType.DOUBLE else DType.FLOAT
    elif precision in tuple(int(t) for t in ALL_FLOATS):
        work = DType(precision)
    else:
        raise b.fail(f"softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), "
                     f"got {precision}")

    # as the function body: sqrt(scale) in float32, cast to the input type
    root = b.scalar(float(np.sqrt(np.float32(scale))), dt)
    kt = b.transpose(b.op("Mul", b.input(1), root), [0, 1, 3, 2])
    scores = grouped_matmul(b, b.op("Mul", b.input(0), root), kt, qh, kvh, "scores")
    if work != dt:
        scores = b.cast(scores, work)
    if b.attr("score_mod") is not None:
        scores = inline_modifier(b, b.attr("score_mod"), scores, "score_mod")
    probs = b.op("Softmax", scores, axis=-1, tag="probs")
    if b.attr("prob_mod") is not None:
        probs = inline_modifier(b, b.attr("prob_mod"), probs, "prob_mod")
    v = b.input(2) if work == dt else b.cast(b.input(2), work)
    if work == dt:
        grouped_matmul(b, probs, v, qh, kvh, "y", out=b.output(0))
    else:
        b.cast(grouped_matmul(b, probs, v, qh, kvh, "y"), dt, out=b.output(0))
