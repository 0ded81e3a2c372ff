"""Shape and fold rules of MatMul (numpy semantics) and Gemm (all versions)."""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, Node, TensorType
from onnxc.ir.types import EMULATED_FLOATS

from .common import broadcast_dims, fail, require_broadcast_to, require_equal, shape_of, tensor_type
from .registry import fold_rule, shape_rule


def _check_k(node: Node, ka: Dim, kb: Dim, where: tuple[str, str] = ("A's inner dim", "B's inner dim")) -> None:
    require_equal(node, [(ka, where[0]), (kb, where[1])], "the inner dims of a matrix product")


def matmul_shape(node: Node, a: tuple, b: tuple) -> tuple:
    """Output shape of numpy matmul of shapes ``a`` and ``b`` (1-D operands promoted then dropped)."""
    if len(a) == 0 or len(b) == 0:
        raise fail(node, "MatMul operands must have rank >= 1")
    a2 = (1, a[0]) if len(a) == 1 else a
    b2 = (b[0], 1) if len(b) == 1 else b
    _check_k(node, a2[-1], b2[-2], (f"input 0 axis {len(a) - 1}", "input 1 axis 0" if len(b) == 1 else f"input 1 axis {len(b) - 2}"))
    batch = broadcast_dims(node, [a2[:-2], b2[:-2]])
    out = list(batch)
    if len(a) > 1:
        out.append(a2[-2])
    if len(b) > 1:
        out.append(b2[-1])
    return tuple(out)


@shape_rule("MatMul")
def _matmul(node: Node) -> list:
    ta, tb = tensor_type(node, 0), tensor_type(node, 1)
    if ta.dtype != tb.dtype:
        raise fail(node, f"operand element types differ: {ta.dtype.short} vs {tb.dtype.short}")
    return [TensorType(ta.dtype, matmul_shape(node, shape_of(node, 0), shape_of(node, 1)))]


def gemm_dims(node: Node) -> tuple[Dim, Dim, Dim]:
    """(M, N, K) of a Gemm node."""
    a, b = shape_of(node, 0), shape_of(node, 1)
    if len(a) != 2 or len(b) != 2:
        raise fail(node, f"A and B must be 2-D, got shapes {list(a)} and {list(b)}")
    ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    m, ka = (a[1], a[0]) if ta else (a[0], a[1])
    kb, n = (b[1], b[0]) if tb else (b[0], b[1])
    _check_k(node, ka, kb)
    return m, n, ka


@shape_rule("Gemm")
def _gemm(node: Node) -> list:
    t = tensor_type(node, 0)
    m, n, _ = gemm_dims(node)
    if node.input(2) is not None:
        c = shape_of(node, 2)
        if len(c) > 2:
            raise fail(node, f"C must have rank <= 2, got shape {list(c)}")
        require_broadcast_to(node, (m, n), [(c, "input 2 (C)")], "Gemm adds C to A x B")
    return [TensorType(t.dtype, (m, n))]


def _emulated(node: Node) -> bool:
    """float16/bfloat16 (bit-pattern storage) are left to the kernel, which rounds like the reference."""
    t = node.inputs[0].type
    return isinstance(t, TensorType) and t.dtype in EMULATED_FLOATS


@fold_rule("MatMul")
def _fold_matmul(node: Node, xs: list) -> list | None:
    if _emulated(node):
        return None
    return [np.matmul(xs[0], xs[1]).astype(xs[0].dtype)]


@fold_rule("Gemm")
def _fold_gemm(node: Node, xs: list) -> list | None:
    if _emulated(node):
        return None
    a, b = xs[0], xs[1]
    if node.attr("transA", 0):
        a = a.T
    if node.attr("transB", 0):
        b = b.T
    dt = a.dtype
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if dt.kind in "iu":
        alpha, beta = int(alpha), int(beta)
    y = np.matmul(a, b) * dt.type(alpha) if alpha != 1 else np.matmul(a, b)
    if len(xs) > 2 and xs[2] is not None and beta != 0:
        y = y + dt.type(beta) * xs[2]
    return [np.asarray(y).astype(dt)]
