"""onnxc::ElementwiseChain: one node computing a tree of elementwise ops per output element.

passes/fuse_elementwise.py builds these nodes from chains of float elementwise ops; the kernel is
codegen/kernels/fused_elementwise.py. The node's attributes:

- ``expr`` (kind ``EXPR``): the expression tree. Leaves are :class:`In` (input ``k`` of the node,
  broadcast numpy-style to the output) and :class:`Lit` (a scalar constant written into the code,
  with the shape it had, which may raise the output's rank); inner nodes are :class:`Op` (an ONNX
  elementwise op type with its attributes resolved to explicit values: defaults of the node's opset
  filled in, Clip's bounds as ``min``/``max``);
- ``dtype`` (INT): the float type every op of the tree computes in (float or double). Comparisons
  (and IsNaN/IsInf) produce bool, which only Where's condition or the output may be.

The output has the broadcast shape of the inputs and literals; its type is bool when the root op is
a comparison, else ``dtype``. The fold rule evaluates the tree with the numpy twins of the elementwise
kernels (``elementwise_np.NUMPY``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxc.ir import Attr, DType, Node, TensorType

from .common import broadcast_dims, fail, shape_of
from .elementwise_np import NUMPY
from .registry import fold_rule, shape_rule

DOMAIN = "onnxc"
OP = "ElementwiseChain"
BOOL_OPS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf"})


@dataclass(frozen=True)
class In:
    """Leaf: input ``k`` of the fused node."""

    k: int

    def __repr__(self) -> str:
        return f"%{self.k}"


@dataclass(frozen=True)
class Lit:
    """Leaf: a scalar constant (a Python float, int or bool) that had shape ``shape``."""

    value: float | int | bool
    shape: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return repr(self.value) + (f"{list(self.shape)}" if self.shape else "")


@dataclass(frozen=True)
class Op:
    """An elementwise op applied to ``args``; ``attrs`` are (name, value) pairs, sorted."""

    op: str
    args: tuple
    attrs: tuple = ()

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def __repr__(self) -> str:
        extra = [f"{k}={v!r}" for k, v in self.attrs]
        return f"{self.op}({', '.join([repr(a) for a in self.args] + extra)})"


Expr = In | Lit | Op


def op(name: str, *args, **attrs) -> Op:
    """An :class:`Op` with its attributes sorted (so equal trees compare and hash equal)."""
    return Op(name, tuple(args), tuple(sorted(attrs.items())))


def walk(e: Expr):
    """Every node of the tree, parents before children."""
    yield e
    if isinstance(e, Op):
        for a in e.args:
            yield from walk(a)


def out_dtype(expr: Expr, dtype: DType) -> DType:
    """Element type of the tree's value: bool for a comparison at the root, else ``dtype``."""
    return DType.BOOL if isinstance(expr, Op) and expr.op in BOOL_OPS else dtype


def chain_attrs(expr: Expr, dtype: DType) -> dict[str, Attr]:
    return {"expr": Attr("expr", "EXPR", expr), "dtype": Attr("dtype", "INT", int(dtype))}


@shape_rule(OP, domain=DOMAIN)
def _chain(node: Node) -> list:
    expr = node.attr("expr")
    dtype = DType(int(node.attr("dtype", int(DType.FLOAT))))
    if not isinstance(expr, (In, Lit, Op)):
        raise fail(node, "attribute expr must hold an expression tree")
    n = len(node.inputs)
    shapes = [shape_of(node, i) for i in range(n)]
    for e in walk(expr):
        if isinstance(e, In) and not 0 <= e.k < n:
            raise fail(node, f"expression reads input {e.k} of {n}")
    shapes += [e.shape for e in walk(expr) if isinstance(e, Lit)]
    return [TensorType(out_dtype(expr, dtype), broadcast_dims(node, shapes))]


def evaluate(expr: Expr, xs: list[np.ndarray], dtype: DType) -> np.ndarray:
    """The tree's value over arrays ``xs`` (numpy broadcasting), computed like the separate ops."""
    if isinstance(expr, In):
        return xs[expr.k]
    if isinstance(expr, Lit):
        v = expr.value
        arr = np.asarray(v, dtype=np.bool_ if isinstance(v, bool) else dtype.np)
        return arr.reshape(expr.shape)
    args = [evaluate(a, xs, dtype) for a in expr.args]
    if expr.op == "Clip":
        x, lo, hi = args[0], expr.attr("min"), expr.attr("max")
        if lo is not None:
            x = np.where(x < lo, np.asarray(lo, x.dtype), x)
        if hi is not None:
            x = np.where(x > hi, np.asarray(hi, x.dtype), x)
        return np.asarray(x, dtype=args[0].dtype)
    if expr.op == "Pow":
        return np.power(args[0], args[1]).astype(args[0].dtype)
    fake = Node(expr.op, [], [], {k: Attr(k, "STRING" if isinstance(v, str) else "FLOAT", v)
                                  for k, v in expr.attrs}, version=10**6)
    return np.asarray(NUMPY[expr.op](fake, *args))


@fold_rule(OP, domain=DOMAIN)
def _fold(node: Node, xs: list) -> list | None:
    if any(x is None for x in xs):
        return None
    dtype = DType(int(node.attr("dtype", int(DType.FLOAT))))
    expr = node.attr("expr")
    with np.errstate(all="ignore"):
        out = evaluate(expr, [np.asarray(x) for x in xs], dtype)
    t = node.outputs[0].type
    shape = t.shape if isinstance(t, TensorType) and t.is_static else np.broadcast_shapes(
        *[np.shape(x) for x in xs], *[e.shape for e in walk(expr) if isinstance(e, Lit)])
    return [np.broadcast_to(out, shape).astype(out_dtype(expr, dtype).np)]
