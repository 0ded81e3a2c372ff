"""Shape, fold and symbolic-value rules of elementwise ops (unary, broadcasting n-ary, Where, Clip).

Fold rules use the numpy twins of the C kernels in ``elementwise_np.py``. Integer arithmetic on small
int64 shape tensors also propagates ``sym_value`` (Dims), so ``Shape -> Gather -> Mul -> Reshape``
chains give static-in-symbols shapes; division and modulo propagate only where C's truncating
semantics and the Dim algebra's floor semantics agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType, dmax, dmin, floordiv, mod
from onnxc.ir.dims import Expr, Sym, as_dim

from .common import broadcast_dims, fail, norm_axis, same, shape_of, sym_ints, tensor_type
from .elementwise_np import NUMPY
from .registry import fold_rule, shape_rule

UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sigmoid",
         "HardSigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Softplus",
         "Softsign", "HardSwish", "Mish", "Swish", "Gelu", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
         "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Not", "BitwiseNot", "Shrink"]
UNARY_BOOL = ["IsNaN", "IsInf"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
          "And", "Or", "Xor"]
COMPARE = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
VARIADIC = ["Max", "Min", "Sum", "Mean"]
# ops whose inputs may have different element types
MIXED_TYPES = {"Pow"}
# opset < 7 ops with the legacy 'broadcast'/'axis' attributes
LEGACY_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "And", "Or", "Xor"}

_ENUM_ATTRS = {"Gelu": ("approximate", "none", ("none", "tanh")),
               "BitShift": ("direction", None, ("LEFT", "RIGHT")),
               "Mod": ("fmod", 0, (0, 1))}


def check_enum_attr(node: Node) -> None:
    """Reject invalid values of string/flag attributes that select the op's semantics."""
    spec = _ENUM_ATTRS.get(node.op_type)
    if spec is None:
        return
    name, default, allowed = spec
    v = node.attr(name, default)
    if v not in allowed:
        raise fail(node, f"attribute {name}={v!r} must be one of {list(allowed)}")


def legacy_b_shape(node: Node, a_shape: tuple, b_shape: tuple) -> tuple:
    """B's shape as numpy broadcasting sees it under opset < 7 ``broadcast=1, axis=k``.

    The old rule aligns B with A's dims starting at ``axis``; that equals numpy broadcasting of B padded
    with trailing 1s. Without ``axis`` it is suffix alignment, which numpy already does.
    """
    if node.op_type not in LEGACY_BROADCAST or node.version >= 7 or not node.attr("broadcast", 0):
        return tuple(b_shape)
    axis = node.attr("axis")
    if axis is None:
        return tuple(b_shape)
    axis = norm_axis(node, axis, len(a_shape))
    pad = len(a_shape) - axis - len(b_shape)
    if pad < 0:
        raise fail(node, f"input B of rank {len(b_shape)} does not fit input A of rank {len(a_shape)} at "
                         f"axis {axis}")
    return tuple(b_shape) + (1,) * pad


def _broadcast(node: Node, n: int) -> tuple:
    """Output shape of ``n`` inputs broadcast together; checks that their element types agree."""
    shapes = [shape_of(node, i) for i in range(n)]
    if n == 2:
        shapes[1] = legacy_b_shape(node, shapes[0], shapes[1])
    if node.op_type not in MIXED_TYPES:
        types = {tensor_type(node, i).dtype for i in range(n)}
        if len(types) > 1:
            raise fail(node, f"inputs must share one element type, got {sorted(t.short for t in types)}")
    return broadcast_dims(node, shapes)


@shape_rule(*UNARY)
def _unary(node: Node) -> list:
    check_enum_attr(node)
    out = same(node)
    if node.op_type in ("Neg", "Abs"):
        _set_sym(node, 1, _SYM[node.op_type])
    return [out]


@shape_rule(*UNARY_BOOL)
def _unary_bool(node: Node) -> list:
    return [same(node, dtype=DType.BOOL)]


@shape_rule(*BINARY)
def _binary(node: Node) -> list:
    check_enum_attr(node)
    out = TensorType(tensor_type(node, 0).dtype, _broadcast(node, 2))
    key = "Mod:fmod" if node.op_type == "Mod" and node.attr("fmod", 0) else node.op_type
    if key in _SYM:
        _set_sym(node, 2, _SYM[key])
    return [out]


@shape_rule(*COMPARE)
def _compare(node: Node) -> list:
    out = TensorType(DType.BOOL, _broadcast(node, 2))
    _set_sym(node, 2, lambda a, b: _compare_dims(node.op_type, a, b))  # 0/1 where the dims decide it
    return [out]


@shape_rule(*VARIADIC)
def _variadic(node: Node) -> list:
    n = len(node.inputs)
    if n == 0 or any(v is None for v in node.inputs):
        raise fail(node, "needs one or more inputs, none absent")
    out = TensorType(tensor_type(node, 0).dtype, _broadcast(node, n))
    if node.op_type in _SYM:
        _set_sym(node, n, _SYM[node.op_type])
    return [out]


def prelu_slope_shape(node: Node, x: tuple, slope: tuple) -> tuple:
    """The shape the slope broadcasts with: its own, or, for a 1-D slope that does not broadcast
    numpy-style (old PyTorch exports: X [N, C, L] with slope [C]), aligned with the one axis of X of
    that size (what the ONNX reference implementation does)."""
    if len(slope) != 1 or slope[0] == 1 or not x or slope[0] == x[-1]:
        return tuple(slope)
    hits = [i for i, d in enumerate(x) if d == slope[0]]
    if len(hits) != 1:
        return tuple(slope)
    return tuple(slope[0] if i == hits[0] else 1 for i in range(len(x)))


@shape_rule("PRelu")
def _prelu(node: Node) -> list:
    x = shape_of(node, 0)
    slope = prelu_slope_shape(node, x, shape_of(node, 1))
    out = broadcast_dims(node, [x, slope])
    if tensor_type(node, 1).dtype != tensor_type(node, 0).dtype:
        raise fail(node, "X and slope must share one element type")
    if len(out) != len(x) or any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(out, x)):
        raise fail(node, f"slope of shape {list(shape_of(node, 1))} must broadcast to X of shape {list(x)}")
    return [TensorType(tensor_type(node, 0).dtype, x)]


@shape_rule("Where")
def _where(node: Node) -> list:
    if tensor_type(node, 0).dtype != DType.BOOL:
        raise fail(node, f"condition must be bool, got {tensor_type(node, 0).dtype.short}")
    tx, ty = tensor_type(node, 1), tensor_type(node, 2)
    if tx.dtype != ty.dtype:
        raise fail(node, f"X and Y must share one element type, got {tx.dtype.short} and {ty.dtype.short}")
    out = TensorType(tx.dtype, broadcast_dims(node, [shape_of(node, i) for i in range(3)]))
    cond = node.inputs[0].const
    if cond is not None and cond.size == 1:
        pick = node.inputs[1] if bool(cond.reshape(-1)[0]) else node.inputs[2]
        if pick.sym_value is not None and shape_of(node, 1 if pick is node.inputs[1] else 2) == out.shape:
            node.outputs[0].sym_value = pick.sym_value
    elif node.inputs[0].sym_value is not None:  # a condition the dims decide (Equal(Shape(x), -1)...)
        _set_sym(node, 3, lambda c, x, y: x if c else y, first=1)
    return [out]


@shape_rule("Clip")
def _clip(node: Node) -> list:
    t = tensor_type(node, 0)
    for i in (1, 2):
        v = node.input(i)
        if v is None:
            continue
        ti = tensor_type(node, i)
        if ti.dtype != t.dtype:
            raise fail(node, f"input {i} must have the input's element type {t.dtype.short}, got {ti.dtype.short}")
        if ti.shape is not None and isinstance(ti.numel(), int) and ti.numel() != 1:
            raise fail(node, f"input {i} ({'min' if i == 1 else 'max'}) must be a scalar, got shape "
                             f"{list(ti.shape)}")
    return [same(node)]


def _fold(node: Node, xs: list) -> list | None:
    fn = NUMPY[node.op_type]
    with np.errstate(all="ignore"):
        if node.op_type in LEGACY_BROADCAST and len(xs) == 2:
            xs = [xs[0], xs[1].reshape(legacy_b_shape(node, xs[0].shape, xs[1].shape))]
        if node.op_type == "PRelu":
            xs = [xs[0], xs[1].reshape(prelu_slope_shape(node, xs[0].shape, xs[1].shape))]
        if node.op_type == "Clip":
            return [fn(node, *xs)]
        if any(x is None for x in xs):
            return None
        return [np.asarray(fn(node, *xs))]


fold_rule(*UNARY, *UNARY_BOOL, *BINARY, *COMPARE, *VARIADIC, "PRelu", "Where", "Clip")(_fold)


# ---- symbolic values of small integer shape tensors ---------------------------------------------------

def nonneg(d: Dim) -> bool:
    """True when ``d`` is >= 0 for every binding of its (nonnegative) dimension variables."""
    d = as_dim(d)
    if isinstance(d, int):
        return d >= 0
    for mono, coeff in d.terms:
        if coeff < 0:
            return False
        for atom, _p in mono:
            if not isinstance(atom, Sym) and not all(nonneg(a) for a in atom.args):
                return False
    return True


def _c_div(a: Dim, b: Dim) -> Dim | None:
    """C truncating division as the kernel does it (x / 0 -> 0), when the Dim algebra can express it."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            return 0
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    if nonneg(a) and nonneg(b) and (isinstance(b, Expr) or b > 0):
        return floordiv(a, b)  # both nonnegative: truncation == floor
    return None


def _py_mod(a: Dim, b: Dim) -> Dim | None:
    """Mod with fmod=0 (sign of the divisor, like the Dim algebra); x mod 0 -> 0."""
    if isinstance(b, int) and b == 0:
        return 0
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if isinstance(b, int) or nonneg(b):
        return mod(a, b)
    return None


def _c_mod(a: Dim, b: Dim) -> Dim | None:
    """Mod with fmod=1 (sign of the dividend); equals floor mod when both are nonnegative."""
    if isinstance(a, int) and isinstance(b, int):
        return 0 if b == 0 else int(np.fmod(a, b))
    if nonneg(a) and nonneg(b):
        return _py_mod(a, b)
    return None


_SYM: dict[str, Callable[..., Dim | None]] = {
    "Add": lambda a, b: as_dim(a) + b, "Sub": lambda a, b: as_dim(a) - b, "Mul": lambda a, b: as_dim(a) * b,
    "Div": _c_div, "Mod": _py_mod, "Mod:fmod": _c_mod,
    "Neg": lambda a: -as_dim(a), "Abs": lambda a: a if nonneg(a) else (abs(a) if isinstance(a, int) else None),
    "Max": lambda *xs: _chain(dmax, xs), "Min": lambda *xs: _chain(dmin, xs),
    "Sum": lambda *xs: _chain(lambda a, b: as_dim(a) + b, xs),
}


def _chain(fn: Callable, xs: tuple) -> Dim:
    r = xs[0]
    for x in xs[1:]:
        r = fn(r, x)
    return r


def _cond_ints(v) -> list[int] | None:
    """A bool tensor's elements as 0/1, from its constant or the symbolic value a comparison of dims gave it."""
    if v.const is not None:
        return [int(x) for x in np.asarray(v.const).reshape(-1)]
    return None if v.sym_value is None else [int(x) for x in v.sym_value]


MAX_SYM = 64  # longest shape tensor whose element values are tracked


def _compare_dims(op: str, a: Dim, b: Dim) -> int | None:
    """1 or 0 when comparison ``op`` of ``a`` and ``b`` holds or fails for every binding of the (nonnegative)
    dimension variables, else None: Equal(dim, -1) is 0, GreaterOrEqual(n + 1, n) is 1."""
    diff = as_dim(a) - as_dim(b)
    if isinstance(diff, int):
        return int({"Equal": diff == 0, "Less": diff < 0, "Greater": diff > 0, "LessOrEqual": diff <= 0,
                    "GreaterOrEqual": diff >= 0}[op])
    pos, nonneg_, neg, nonpos = nonneg(diff - 1), nonneg(diff), nonneg(-diff - 1), nonneg(-diff)
    yes, no = {"Equal": (False, pos or neg), "Greater": (pos, nonpos), "GreaterOrEqual": (nonneg_, neg),
               "Less": (neg, nonneg_), "LessOrEqual": (nonpos, pos)}[op]
    return 1 if yes else 0 if no else None


def _set_sym(node: Node, n: int, fn: Callable[..., Dim | None], first: int = 0) -> None:
    """Set the output's sym_value from the inputs' constant or symbolic values, when all are known
    (inputs ``first``.. are the int operands whose element type is checked: Where's condition is bool)."""
    out = node.outputs[0]
    if tensor_type(node, first).dtype not in (DType.INT64, DType.INT32):
        return
    vals = [_cond_ints(node.input(i)) if i < first else sym_ints(node.input(i)) for i in range(n)]
    if any(v is None for v in vals) or all(node.inputs[i].sym_value is None for i in range(n)):
        return
    ranks = [len(shape_of(node, i)) for i in range(n)]
    size = max(len(v) for v in vals)
    if max(ranks) > 1 or size > MAX_SYM or any(len(v) not in (1, size) for v in vals):
        return
    res = []
    for k in range(size):
        r = fn(*[v[k] if len(v) > 1 else v[0] for v in vals])
        if r is None:
            return
        res.append(as_dim(r))
    out.sym_value = tuple(res)
