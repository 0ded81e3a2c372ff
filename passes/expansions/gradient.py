"""Gradient (ai.onnx.preview.training, opset 1): reverse-mode differentiation of part of the graph.

The node names a tensor ``y`` and the independent tensors ``xs`` (differentiated) and ``zs`` (held
fixed); its inputs are the values of xs then zs at which the derivatives are wanted, and output i is
d(sum of y)/d xs[i] (for a scalar y, dy/dxs[i]; an output whose x does not influence y is zero).

The expansion finds the nodes between xs/zs and y. When the node's inputs are the xs/zs tensors
themselves, the forward values are reused (the spec's "intermediate variables can be reused");
otherwise those nodes are cloned reading the node's inputs. Then it emits the backward graph: a seed
of ones for y, and for each forward node in reverse order the vector-Jacobian products of its rule
below, summed where a value feeds several nodes. Broadcast operands get their gradient summed over
the broadcast axes. Supported forward ops: elementwise arithmetic and math (Add, Sub, Mul, Div, Pow,
Neg, Abs, Exp, Log, Sqrt, Reciprocal, Sin, Cos, Tanh, Sigmoid, Relu, Identity, Sum, float Cast),
MatMul of rank >= 2, Transpose and the reshaping ops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxc.ir import DType, Node, TensorType, Value

from ..shapes.registry import rule_for
from .builder import Builder
from .registry import expansion

TRAINING_DOMAIN = "ai.onnx.preview.training"
GRAD_TYPES = (DType.FLOAT16, DType.FLOAT, DType.DOUBLE)

# A rule maps (builder, forward node, gradient of its first output, which inputs need a gradient) to
# one gradient (or None) per input, each shaped like the node's output unless it says otherwise.
Rule = Callable[[Builder, Node, Value, list[bool]], list]


def _shape(v: Value) -> tuple:
    return v.type.shape


def unbroadcast(b: Builder, g: Value, from_shape: tuple, target: Value) -> Value:
    """``g`` (of ``from_shape``, a broadcast of ``target``'s shape) summed back to ``target``'s shape."""
    ts = _shape(target)
    if tuple(from_shape) == tuple(ts):
        return g
    k = len(from_shape) - len(ts)
    axes = list(range(k))
    for a, d in enumerate(ts):
        if d == from_shape[k + a]:
            continue
        if d != 1:
            raise b.unsupported(f"cannot tell how {target.name!r} of shape {list(ts)} broadcasts to {list(from_shape)}")
        axes.append(k + a)
    return b.reshape(b.reduce("ReduceSum", g, axes, keepdims=1), b.op("Shape", target))


def _one(b: Builder, v: Value) -> Value:
    return b.scalar(1, v.type.dtype)


def _elementwise(local: Callable[[Builder, Node], Value]) -> Rule:
    """A unary op whose derivative ``local(b, node)`` is elementwise: g * local."""
    return lambda b, n, g, need: [b.op("Mul", g, local(b, n)) if need[0] else None]


def _add(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    out = _shape(n.outputs[0])
    return [unbroadcast(b, g, out, v) if ok else None for v, ok in zip(n.inputs, need)]


def _sub(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    out = _shape(n.outputs[0])
    a, c = n.inputs
    return [unbroadcast(b, g, out, a) if need[0] else None,
            unbroadcast(b, b.op("Neg", g), out, c) if need[1] else None]


def _mul(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    out = _shape(n.outputs[0])
    a, c = n.inputs
    return [unbroadcast(b, b.op("Mul", g, c), out, a) if need[0] else None,
            unbroadcast(b, b.op("Mul", g, a), out, c) if need[1] else None]


def _div(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    out = _shape(n.outputs[0])
    a, c = n.inputs
    y = n.outputs[0]
    return [unbroadcast(b, b.op("Div", g, c), out, a) if need[0] else None,
            unbroadcast(b, b.op("Neg", b.op("Div", b.op("Mul", g, y), c)), out, c) if need[1] else None]


def _pow(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    out = _shape(n.outputs[0])
    a, c = n.inputs
    if c.type.dtype != a.type.dtype:
        raise b.unsupported("Pow with an exponent of another element type is not differentiable here")
    da = db = None
    if need[0]:  # c * a^(c - 1)
        da = unbroadcast(b, b.op("Mul", g, b.op("Mul", c, b.op("Pow", a, b.op("Sub", c, _one(b, c))))), out, a)
    if need[1]:  # a^c * log(a)
        db = unbroadcast(b, b.op("Mul", g, b.op("Mul", n.outputs[0], b.op("Log", a))), out, c)
    return [da, db]


def _matmul(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    a, c = n.inputs
    ra, rc = len(_shape(a)), len(_shape(c))
    if ra < 2 or rc < 2:
        raise b.unsupported("MatMul with a 1-D operand is not differentiable here")
    out = _shape(n.outputs[0])

    def swap(v: Value) -> Value:
        r = len(_shape(v))
        return b.transpose(v, [*range(r - 2), r - 1, r - 2])

    da = db = None
    if need[0]:  # g @ c^T: [batch..., M, K]
        da = unbroadcast(b, b.op("MatMul", g, swap(c)), (*out[:-2], *_shape(a)[-2:]), a)
    if need[1]:  # a^T @ g: [batch..., K, N]
        db = unbroadcast(b, b.op("MatMul", swap(a), g), (*out[:-2], *_shape(c)[-2:]), c)
    return [da, db]


def _reshape(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    return [b.reshape(g, b.op("Shape", n.inputs[0])) if need[0] else None] + [None] * (len(n.inputs) - 1)


def _transpose(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    r = len(_shape(n.inputs[0]))
    perm = n.attr("perm")
    perm = list(range(r))[::-1] if perm is None else [int(p) for p in perm]
    return [b.transpose(g, list(np.argsort(perm))) if need[0] else None]


def _cast(b: Builder, n: Node, g: Value, need: list[bool]) -> list:
    src = n.inputs[0].type.dtype
    if src not in GRAD_TYPES or n.outputs[0].type.dtype not in GRAD_TYPES:
        raise b.unsupported(f"Cast from {src.short} is not differentiable")
    return [b.cast(g, src) if need[0] else None]


def _relu_mask(b: Builder, n: Node) -> Value:
    a = n.inputs[0]
    return b.cast(b.op("Greater", a, b.scalar(0, a.type.dtype)), a.type.dtype)


RULES: dict[str, Rule] = {
    "Add": _add, "Sum": _add, "Sub": _sub, "Mul": _mul, "Div": _div, "Pow": _pow, "MatMul": _matmul,
    "Identity": lambda b, n, g, need: [g if need[0] else None],
    "Neg": lambda b, n, g, need: [b.op("Neg", g) if need[0] else None],
    "Exp": _elementwise(lambda b, n: n.outputs[0]),
    "Log": lambda b, n, g, need: [b.op("Div", g, n.inputs[0]) if need[0] else None],
    "Sqrt": lambda b, n, g, need: [b.op("Div", g, b.op("Add", n.outputs[0], n.outputs[0])) if need[0] else None],
    "Reciprocal": _elementwise(lambda b, n: b.op("Neg", b.op("Mul", n.outputs[0], n.outputs[0]))),
    "Abs": _elementwise(lambda b, n: b.op("Sign", n.inputs[0])),
    "Sin": _elementwise(lambda b, n: b.op("Cos", n.inputs[0])),
    "Cos": _elementwise(lambda b, n: b.op("Neg", b.op("Sin", n.inputs[0]))),
    "Tanh": _elementwise(lambda b, n: b.op("Sub", _one(b, n.outputs[0]),
                                           b.op("Mul", n.outputs[0], n.outputs[0]))),
    "Sigmoid": _elementwise(lambda b, n: b.op("Mul", n.outputs[0],
                                              b.op("Sub", _one(b, n.outputs[0]), n.outputs[0]))),
    "Relu": _elementwise(_relu_mask),
    "Cast": _cast, "Transpose": _transpose,
    "Reshape": _reshape, "Flatten": _reshape, "Squeeze": _reshape, "Unsqueeze": _reshape,
}


# -- the forward part ---------------------------------------------------------------------------

def _lookup(b: Builder, name: str) -> Value:
    g = b.graph
    while g is not None:
        for v in (*g.inputs, *g.initializers.values(), *(o for n in g.nodes for o in n.outputs)):
            if v.name == name:
                return v
        g = g.parent
    raise b.fail(f"no tensor named {name!r} in scope")


def _cone(y: Value, sources: set[int]) -> list[Node]:
    """The nodes computing ``y`` from the values with ids in ``sources`` (and constants), in order."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Value, bool]] = [(y, False)]
    while stack:  # iterative post-order
        v, done = stack.pop()
        n = v.producer
        if id(v) in sources or n is None:
            continue
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n.outputs[0], True))
        stack.extend((i, False) for i in n.inputs if i is not None)
    return order


def _clone(b: Builder, nodes: list[Node], mapping: dict[int, Value]) -> None:
    """Copies of ``nodes`` reading mapped values, inserted before the Gradient node and typed."""
    for n in nodes:
        if any(True for _ in n.subgraphs()):
            raise b.unsupported(f"{n.describe()} has subgraphs and cannot be differentiated")
        ins = [None if v is None else mapping.get(id(v), v) for v in n.inputs]
        outs = [Value(b.graph.fresh_name(f"{b.base}_{o.name}")) for o in n.outputs]
        c = Node(n.op_type, ins, outs, dict(n.attrs), domain=n.domain, name=f"{b.base}/{n.name or n.op_type}",
                 version=n.version, overload=n.overload)
        b.graph.insert_before(b.node, c)
        b.nodes.append(c)
        rule = rule_for(c)
        if rule is None:
            raise b.unsupported(f"{n.describe()} has no shape rule, so it cannot be differentiated")
        c.defines_dims = []
        for o, t in zip(outs, rule.infer(c)):
            o.type = t
        for o, oc in zip(n.outputs, outs):
            mapping[id(o)] = oc


@expansion("Gradient", domain=TRAINING_DOMAIN)
def gradient(b: Builder) -> None:
    xs = [str(s.decode() if isinstance(s, bytes) else s) for s in b.attr("xs") or []]
    zs = [str(s.decode() if isinstance(s, bytes) else s) for s in b.attr("zs") or []]
    yname = b.attr("y")
    if not xs or yname is None:
        raise b.fail("attributes xs and y are required")
    yname = yname.decode() if isinstance(yname, bytes) else str(yname)
    if len(b.node.inputs) != len(xs) + len(zs):
        raise b.fail(f"has {len(b.node.inputs)} inputs for {len(xs)} xs and {len(zs)} zs")
    if len(b.node.outputs) > len(xs):
        raise b.fail(f"has {len(b.node.outputs)} outputs for {len(xs)} xs")
    named = [_lookup(b, s) for s in xs + zs]
    y = _lookup(b, yname)
    given = [b.input(i) for i in range(len(named))]
    if any(v is None for v in given):
        raise b.fail("every input (the values of xs and zs) is required")
    nodes = _cone(y, {id(v) for v in named})
    typed = all(isinstance(o.type, TensorType) and o.type.shape is not None for n in nodes for o in n.outputs)
    mapping = {id(v): g for v, g in zip(named, given)}
    if not typed or any(v is not g for v, g in zip(named, given)):
        _clone(b, nodes, mapping)
        nodes = [mapping[id(n.outputs[0])].producer for n in nodes]
    y = mapping.get(id(y), y)
    if not isinstance(y.type, TensorType) or y.type.dtype not in GRAD_TYPES:
        raise b.unsupported(f"y ({yname!r}) must be a float16/float/double tensor, got {y.type}")

    # values that depend on xs: only they need gradients
    active = {id(v) for v in given[:len(xs)]}
    for n in nodes:
        if any(v is not None and id(v) in active for v in n.inputs):
            active.update(id(o) for o in n.outputs)
    grads: dict[int, Value] = {}
    shape = y.type.shape
    if all(isinstance(d, int) for d in shape):
        grads[id(y)] = b.const(np.ones(shape, dtype=y.type.dtype.np), tag="seed")
    else:
        grads[id(y)] = b.op("Expand", _one(b, y), b.op("Shape", y), tag="seed")
    for n in reversed(nodes):
        gs = [grads.get(id(o)) for o in n.outputs]
        if all(g is None for g in gs):
            continue
        if len(gs) != 1:
            raise b.unsupported(f"{n.describe()} has several outputs and cannot be differentiated")
        g = gs[0]
        rule = RULES.get(n.op_type) if n.domain in ("", "ai.onnx") else None
        if rule is None:
            raise b.unsupported(f"no derivative rule for {n.op_type} ({n.describe()})")
        need = [v is not None and id(v) in active for v in n.inputs]
        for v, gv in zip(n.inputs, rule(b, n, g, need)):
            if gv is None or v is None or id(v) not in active:
                continue
            prev = grads.get(id(v))
            grads[id(v)] = gv if prev is None else b.op("Add", prev, gv)
    for i, x in enumerate(given[:len(xs)]):
        if not b.used(i):
            continue
        g = grads.get(id(x))
        if g is None:  # y does not depend on x
            g = b.op("ConstantOfShape", b.op("Shape", x), value=np.zeros(1, dtype=x.type.dtype.np))
        b.identity(g, out=b.output(i))

