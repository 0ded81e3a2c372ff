"""Name gated activations written op by op: one activation node in place of the ops that spell it out.

Exporters write SiLU as ``Mul(t, Sigmoid(t))`` and GELU, HardSwish, Mish as small graphs that read
their input ``t`` two or three times. A product's output read twice cannot get an epilogue
(passes/fuse_epilogues.py folds only an op that is the one reader of ``t``), so every such activation
after a Conv / Gemm / MatMul ran as a loop of its own. This pass recognizes them with the matchers of
passes/fuse_patterns.py (the same ones fuse_elementwise applies to its fused trees) and puts one node
in their place, which fuse_epilogues folds like any unary activation and fuse_elementwise still fuses
when no product precedes. Rewrites (the output value, its name and place among the graph outputs
kept):

- ``t * Sigmoid(t)`` -> ``Swish(t)``; ``t * Sigmoid(alpha * t)`` (QuickGELU: 1.702) -> ``Swish(t, alpha)``;
- GELU, erf form ``0.5 * t * (1 + Erf(t / sqrt(2)))`` and tanh form -> ``Gelu(t)``,
  ``Gelu(t, approximate="tanh")`` (any order and association, as fuse_patterns lists them);
- ``t * HardSigmoid(t, 1/6, 1/2)``, ``t * Clip(t + 3, 0, 6) / 6`` -> ``HardSwish(t)``;
- ``t * Tanh(Softplus(t))`` -> ``Mish(t)``.

Conditions: the root (a float32 or float64 Mul or Div) and every op between it and ``t`` are
elementwise ops of the default domain in one graph, each output of exactly the root's shape and read
only by those ops (none a graph output); ``t`` itself has exactly the root's shape, is read only by
them and is not a graph output (otherwise the ops would stay for their other readers and ``t`` could
not take an epilogue anyway). A value's tree reaches back at most MAX_DEPTH ops and MAX_NODES nodes.
Run after constant folding and CSE (which merge the two reads of ``t``) and before fuse_epilogues.
"""

from __future__ import annotations

from onnxc.ir import Attr, Graph, Model, Node, Value

from .base import PassResult
from .fuse_elementwise import _scalar, chain_dtype, op_attrs
from .fuse_patterns import recognize
from .shapes.fused import Expr, In, Lit, Op

ROOTS = frozenset({"Mul", "Div"})
NAMED = frozenset({"Swish", "Gelu", "HardSwish", "Mish"})
MAX_DEPTH = 10  # the tanh form of GELU is 8 ops deep
MAX_NODES = 24  # ops in one tree (GELU's tanh form has 9)


class _Cone:
    """The expression tree of a root's output over its elementwise producers (bounded), the value each
    subtree computes and the node that produced it."""

    def __init__(self, g: Graph, root: Node):
        self.g, self.root = g, root
        self.dtype = chain_dtype(root)
        self.shape = tuple(root.outputs[0].shape or ())
        self.leaves: list[Value] = []
        self.memo: dict[int, Expr] = {}       # value id -> its tree
        self.value_of: dict[Expr, Value] = {}  # tree -> a value computing it (equal trees: equal values)
        self.nodes: dict[int, Node] = {}

    def expr(self, v: Value, depth: int) -> Expr:
        if v.id in self.memo:
            return self.memo[v.id]
        c = _scalar(v)
        p = v.producer
        if c is not None and v.dtype == self.dtype:
            e: Expr = Lit(float(c), tuple(v.const.shape))
        elif (p is not None and p.graph is self.g and depth < MAX_DEPTH and len(self.nodes) < MAX_NODES
              and chain_dtype(p) == self.dtype and tuple(v.shape or ()) == self.shape):
            self.nodes[p.id] = p
            args = tuple(self.expr(w, depth + 1) for i, w in enumerate(p.inputs)
                         if w is not None and not (p.op_type == "Clip" and i > 0))
            e = Op(p.op_type, args, tuple(sorted(op_attrs(p).items())))
        else:
            self.leaves.append(v)
            e = In(len(self.leaves) - 1)
        self.memo[v.id] = e
        self.value_of.setdefault(e, v)
        return e

    def between(self, t: Value) -> list[Node] | None:
        """The nodes from the root back to ``t`` (t's producer excluded), when the activation may replace
        them: every value they compute, and t, read only by them and not public; else None."""
        public = {v.id for v in self.g.outputs}
        found: dict[int, Node] = {}
        work = [self.root]
        while work:
            n = work.pop()
            if n.id in found:
                continue
            found[n.id] = n
            for v in n.inputs:
                if v is not None and v is not t and v.producer is not None and v.producer.id in self.nodes:
                    work.append(v.producer)
        if t.id in public or tuple(t.shape or ()) != self.shape:
            return None
        for v in [t] + [o for n in found.values() for o in n.outputs if n is not self.root]:
            if v.id in public or any(u.id not in found or u.graph is not self.g for u, _ in v.uses()):
                return None
        return list(found.values())


def _attrs(e: Op) -> dict[str, Attr]:
    kinds = {float: "FLOAT", str: "STRING", int: "INT"}
    return {k: Attr(k, kinds[type(v)], v) for k, v in e.attrs}


def _name_one(g: Graph, root: Node, removed: set[int]) -> bool:
    cone = _Cone(g, root)
    tree = cone.expr(root.outputs[0], 0)
    named = recognize(tree)
    if not (isinstance(named, Op) and named.op in NAMED and len(named.args) == 1):
        return False
    t = cone.value_of.get(named.args[0])
    ops = None if t is None else cone.between(t)
    if ops is None:
        return False
    y = root.outputs[0]
    act = Node(named.op, [t], [], _attrs(named), name=root.name or y.name, version=root.version)
    g.insert_before(root, act)
    for n in ops:
        g.remove(n)
        removed.add(n.id)
    act.add_output(y)
    return True


def name_graph(g: Graph) -> bool:
    """Name the gated activations of ``g`` (subgraph bodies are optimized when they are lowered)."""
    removed: set[int] = set()
    for root in reversed(list(g.nodes)):  # the outermost product of a formula first
        if root.id not in removed and root.op_type in ROOTS and root.domain in ("", "ai.onnx") and \
                chain_dtype(root) is not None and root.outputs[0].shape is not None:
            _name_one(g, root, removed)
    return bool(removed)


def name_activations(model: Model) -> PassResult:
    return PassResult(model, name_graph(model.graph))
