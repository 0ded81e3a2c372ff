"""Fuse chains of float elementwise ops into one onnxc::ElementwiseChain node (passes/shapes/fused.py).

A run of elementwise ops writes and re-reads a full tensor per op; fused, the whole expression is
computed per element in one loop (codegen/kernels/fused_elementwise.py) with the intermediates in
registers. Rewrites (per graph; subgraph bodies are optimized on their own when they are lowered):

- a *root* is a fusable node; it absorbs the producer of an input when that producer is fusable
  too, computes in the same float type, has one output, and that output is read only by nodes of the
  group (not by a subgraph, not a graph output) and has exactly the root's output shape (so nothing
  is recomputed per broadcast element); absorption repeats through the producer's inputs;
- the other inputs become leaves: scalar constants are written into the code, everything else is an
  input of the fused node (broadcast numpy-style, like the ops did);
- activations spelled out op by op (GELU erf/tanh forms, SiLU/Swish, HardSwish) are renamed by
  passes/fuse_patterns.py;
- a group of one node stays as it was (its own kernel computes the same);
- a group stops growing when its tree would exceed MAX_OPS ops (a value read several times counted
  once per read: the tree functions walk it that way) or MAX_DEPTH levels: a longer chain (2,000 Adds)
  becomes several fused nodes, each a tree the recursive tree functions (fuse_patterns, the kernel's
  renderer) walk within Python's recursion limit; deep sharing (t = t * t, repeated) is cut where the
  spelled-out tree would grow past MAX_OPS.

Fusable: float32/float64 elementwise ops with a float formula (unary math and activations,
Add/Sub/Mul/Div/Mod, Pow with an exponent of the base's type, comparisons feeding Where's condition,
Where, PRelu, Max/Min/Sum/Mean, Clip with constant or absent bounds). Integer, bool-only and
half-precision ops are never touched (half types round after every op; fusing would change their
results). Run after constant folding and CSE so those see the original ops, and after any pass that
fuses activations / residual adds into Conv, Gemm or MatMul epilogues (codegen/kernels/epilogue.py):
those belong in the product's output tiles, and this pass takes whatever elementwise work is left.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from onnxc.ir import DType, Graph, Model, Node, ShapeError, TensorType, Value

from .base import PassResult
from .fuse_patterns import recognize
from .shapes.common import broadcast_dims
from .shapes.elementwise import check_enum_attr, prelu_slope_shape
from .shapes.elementwise_np import SELU_V1
from .shapes.fused import BOOL_OPS, DOMAIN, OP, Expr, In, Lit, Op, chain_attrs, walk

FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})
UNARY = frozenset({
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sigmoid",
    "HardSigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Softplus",
    "Softsign", "HardSwish", "Mish", "Swish", "Gelu", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
    "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN", "IsInf", "Shrink"})
BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Pow", "PRelu"}) | BOOL_OPS - {"IsNaN", "IsInf"}
VARIADIC = frozenset({"Max", "Min", "Sum", "Mean"})
FUSABLE = UNARY | BINARY | VARIADIC | {"Where", "Clip"}
LEGACY_ATTRS = frozenset({"broadcast", "axis", "consumed_inputs"})
MAX_OPS = 256  # largest tree (shared subtrees counted per occurrence) a fused node carries
MAX_DEPTH = 64  # deepest tree: the tree functions recurse once per level (a longer chain is cut in pieces)


def _typed_input(node: Node) -> Value | None:
    """The input whose element type is the op's computation type (Where: X)."""
    return node.input(1 if node.op_type == "Where" else 0)


def _scalar(v: Value | None) -> float | int | bool | None:
    """The value of a one-element constant, else None."""
    if v is None or v.const is None or not isinstance(v.const, np.ndarray) or v.const.size != 1:
        return None
    return v.const.reshape(-1)[0].item()


def chain_dtype(node: Node) -> DType | None:
    """The float type ``node`` computes in when it can join a fused chain, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in FUSABLE or len(node.outputs) != 1:
        return None
    out = node.outputs[0].type
    x = _typed_input(node)
    if x is None or not isinstance(out, TensorType) or out.shape is None or x.dtype not in FLOATS:
        return None
    if any(v is None or not isinstance(v.type, TensorType) or v.type.shape is None
           for v in node.inputs if v is not None):
        return None
    try:
        check_enum_attr(node)
    except ShapeError:
        return None
    if node.attr("broadcast", 0) or any(isinstance(a.value, (list, tuple, np.ndarray)) and a.name not in
                                        LEGACY_ATTRS for a in node.attrs.values()):
        return None
    op = node.op_type
    if op == "Pow" and node.input(1).dtype != x.dtype:
        return None
    if op == "PRelu" and tuple(prelu_slope_shape(node, x.shape, node.inputs[1].shape)) != tuple(node.inputs[1].shape):
        return None
    if op == "Clip" and node.version >= 11 and any(
            node.input(i) is not None and _scalar(node.input(i)) is None for i in (1, 2)):
        return None  # bounds computed at run time
    if op in VARIADIC and (not node.inputs or any(v is None for v in node.inputs)):
        return None
    return x.dtype


def op_attrs(node: Node) -> dict:
    """The node's attributes as the tree stores them: explicit scalar values, Clip bounds, Selu's
    opset-1 defaults (the kernel and the fold rule fill in every other default)."""
    attrs = {a.name: a.value for a in node.attrs.values()
             if a.name not in LEGACY_ATTRS and isinstance(a.value, (int, float, str, bytes))}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    if node.op_type == "Selu" and node.version < 6:
        attrs = {**SELU_V1, **attrs}
    if node.op_type == "Clip":
        attrs = {}
        for i, name in ((1, "min"), (2, "max")):
            v = node.attr(name) if node.version < 11 else _scalar(node.input(i))
            if v is not None:
                attrs[name] = float(v)
    return attrs


class _Builder:
    """The group of one root (the nodes it absorbs), its tree and its leaf inputs."""

    def __init__(self, g: Graph, root: Node, dtype: DType, taken: set[int]):
        self.g, self.root, self.dtype, self.taken = g, root, dtype, taken
        self.shape = tuple(root.outputs[0].type.shape)
        self.public = {v.id for v in g.outputs}
        self.leaves: list[Value] = []
        self.group: dict[int, Node] = {root.id: root}
        self.memo: dict[int, Expr] = {}

    def candidate(self, v: Value) -> bool:
        """Whether the producer of ``v`` may join: fusable in the same type, one output of the root's
        shape, not public, not yet part of another group."""
        p = v.producer
        if p is None or p.graph is not self.g or p.id in self.taken or p.id in self.group or v.id in self.public:
            return False
        return chain_dtype(p) == self.dtype and tuple(v.type.shape) == self.shape

    def grow(self) -> None:
        """Absorb producers whose every reader is a group node (several group nodes or input slots may
        read one), while the tree stays within MAX_OPS ops counted per occurrence and MAX_DEPTH levels.

        A producer joins only once all its readers are in, so its occurrences in the tree (the sum
        over its reading slots of the readers' occurrences) and its depth (one more than its deepest
        reader's) are final when it joins. A value's status changes only when one of its readers
        joins, so scanning each joining node's inputs once (breadth first) finds every producer."""
        occ, depth = {self.root.id: 1}, {self.root.id: 1}
        total = 1
        work = deque([self.root])
        while work:
            n = work.popleft()
            for v in n.inputs:
                if v is None or not self.candidate(v):
                    continue
                uses = v.uses()
                if not all(u.id in self.group and u.graph is self.g for u, _ in uses):
                    continue
                p = v.producer
                k = sum(occ[u.id] for u, _ in uses)
                d = 1 + max(depth[u.id] for u, _ in uses)
                if total + k > MAX_OPS or d > MAX_DEPTH:
                    continue
                self.group[p.id] = p
                occ[p.id], depth[p.id] = k, d
                total += k
                work.append(p)

    def leaf(self, v: Value) -> Expr:
        c = _scalar(v)
        if c is not None and (v.dtype == self.dtype or v.dtype == DType.BOOL):
            return Lit(bool(c) if v.dtype == DType.BOOL else float(c), tuple(v.const.shape))
        for k, w in enumerate(self.leaves):
            if w is v:
                return In(k)
        self.leaves.append(v)
        return In(len(self.leaves) - 1)

    def build(self, node: Node) -> Expr:
        """The tree of ``node``'s output; a value read several times is one shared subtree object.
        Depth first with an explicit stack of frames [node, next input, args] (no recursion); leaves
        are numbered in the order a recursive walk over the inputs would meet them."""
        stack = [[node, 0, []]]
        while stack:
            frame = stack[-1]
            n, i, args = frame
            if i == len(n.inputs):
                stack.pop()
                e = self.memo[n.id] = Op(n.op_type, tuple(args), tuple(sorted(op_attrs(n).items())))
                if stack:
                    stack[-1][2].append(e)
                continue
            frame[1] += 1
            v = n.inputs[i]
            if v is None or (n.op_type == "Clip" and i > 0):
                continue  # Clip's bounds are attributes of the tree
            p = v.producer
            if p is None or p.id not in self.group:
                args.append(self.leaf(v))
            elif p.id in self.memo:
                args.append(self.memo[p.id])
            else:
                stack.append([p, 0, []])
        return self.memo[node.id]


def _tree_shape(root: Node, expr: Expr, leaves: list[Value]) -> tuple | None:
    """The broadcast shape of the leaves the tree reads (None when they do not broadcast)."""
    used = {e.k for e in walk(expr) if isinstance(e, In)}
    shapes = [leaves[k].type.shape for k in sorted(used)] + [e.shape for e in walk(expr) if isinstance(e, Lit)]
    try:
        return tuple(broadcast_dims(root, shapes))
    except ShapeError:
        return None


def _renumber(expr: Expr, leaves: list[Value]) -> tuple[Expr, list[Value]]:
    """Drop leaves a rewrite no longer reads; number the rest in order."""
    used = sorted({e.k for e in walk(expr) if isinstance(e, In)})
    new = {k: i for i, k in enumerate(used)}

    def go(e: Expr) -> Expr:
        if isinstance(e, In):
            return In(new[e.k])
        if isinstance(e, Op):
            return Op(e.op, tuple(go(a) for a in e.args), e.attrs)
        return e

    return go(expr), [leaves[k] for k in used]


def fuse_graph(g: Graph) -> bool:
    taken: set[int] = set()
    fused_at: dict[int, Node] = {}  # root id -> the fused node that takes its place
    for root in reversed(list(g.nodes)):
        if root.id in taken:
            continue
        dtype = chain_dtype(root)
        if dtype is None:
            continue
        out = root.outputs[0]
        if out.type.dtype not in (dtype, DType.BOOL):
            continue
        b = _Builder(g, root, dtype, taken)
        b.grow()
        if len(b.group) < 2:
            continue
        expr = b.build(root)
        taken.update(b.group)
        named = recognize(expr)
        if named != expr and _tree_shape(root, named, b.leaves) == tuple(out.type.shape):
            expr = named
        expr, leaves = _renumber(expr, b.leaves)
        fused = Node(OP, leaves, [], chain_attrs(expr, dtype), domain=DOMAIN, name=root.name or out.name)
        for n in b.group.values():
            n.detach()
        fused.add_output(out)
        fused.graph, out.graph = g, g
        fused_at[root.id] = fused
    if not fused_at:
        return False
    # one rebuild of the node list (removing node by node is quadratic in long chains)
    g.nodes = [fused_at.get(n.id, n) for n in g.nodes if n.id not in taken or n.id in fused_at]
    return True


def fuse_elementwise(model: Model) -> PassResult:
    return PassResult(model, fuse_graph(model.graph))


