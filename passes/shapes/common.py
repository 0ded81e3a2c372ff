"""Shared helpers for shape rules: broadcasting, axis normalization, typed errors, run-time dims."""

from __future__ import annotations

import numpy as np

from onnxc.ir import Dim, DType, Node, ShapeError, TensorType, Value
from onnxc.ir.contracts import Contract, broadcast_name
from onnxc.ir.dims import Expr, as_dim, evaluate, free_symbols, is_static, sym


def fail(node: Node, msg: str) -> ShapeError:
    return ShapeError(f"{node.describe()}: {msg}")


# Python exceptions a shape rule or expansion may raise on inputs or attributes it did not expect
RULE_ERRORS = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, AttributeError)


def rule_failure(node: Node, what: str, e: Exception) -> ShapeError:
    """The error of a shape rule (or expansion) that failed with a Python exception: the node's inputs
    and attributes are not what it expected (the frontend checks the ONNX schemas, so this is rare: an
    op outside them, or a combination the schema allows and the rule does not handle). The message
    shows what the rule was given; the caller chains ``e`` as the cause, so a rule's bug stays visible."""
    ins = ", ".join("absent" if v is None else f"{v.name!r}: {v.type}" for v in node.inputs) or "none"
    attrs = ", ".join(f"{a.name}={a.kind} {_brief(a.value)}" for a in node.attrs.values()) or "none"
    return ShapeError(f"{node.describe()}: {what} failed ({type(e).__name__}: {e}); inputs: {ins}; "
                      f"attributes: {attrs}")


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def tensor_type(node: Node, i: int) -> TensorType:
    """Type of input ``i``; errors name the node when it is absent or not a tensor."""
    v = node.input(i)
    if v is None:
        raise fail(node, f"input {i} is required")
    t = v.type
    if not isinstance(t, TensorType):
        raise fail(node, f"input {i} ({v.name!r}) must be a tensor, got {t}")
    return t


def shape_of(node: Node, i: int) -> tuple:
    t = tensor_type(node, i)
    if t.shape is None:
        raise fail(node, f"rank of input {i} ({node.inputs[i].name!r}) is unknown")
    return t.shape


def broadcast_dims(node: Node, shapes: list[tuple], names: list[str] | None = None, record: bool = True) -> tuple:
    """Numpy-style multidirectional broadcast of symbolic shapes.

    Where the answer depends on run-time values it records a contract (ir/contracts.py) the run
    function checks: a symbol against a static extent k > 1 must be 1 or k (the output has k); two
    different symbols broadcast into a new dimension variable, ``broadcast(M, N)`` (a broadcast of a
    broadcast variable with one of its parts is that variable). ``names[i]`` names shape i in messages
    ("input 1" by default). ``record=False``: only compute (a rewrite trying shapes)."""
    rank = max((len(s) for s in shapes), default=0)
    names = names or [f"input {i}" for i in range(len(shapes))]
    out: list[Dim] = []
    for ax in range(rank):
        here = [(s[ax - (rank - len(s))], f"{n} axis {ax - (rank - len(s))}")
                for s, n in zip(shapes, names) if ax - (rank - len(s)) >= 0]
        unsure = [(d, lab) for d, lab in here if d != 1]
        statics = {d for d, _ in unsure if is_static(d)}
        if len(statics) > 1:
            raise fail(node, f"cannot broadcast shapes {[list(x) for x in shapes]} (axis {ax}: "
                             f"{' vs '.join(str(d) for d in sorted(statics))})")
        if len({d for d, _ in unsure}) <= 1:
            out.append(unsure[0][0] if unsure else 1)
            continue
        if statics:  # the output has the static extent; the symbols must be 1 or equal to it
            out.append(next(iter(statics)))
            if record:
                add_contract(node, "broadcast", unsure)
            continue
        parts = _broadcast_parts(node, [d for d, _ in unsure])
        if len(parts) == 1:
            out.append(parts[0])
            continue
        wide = next((p for p in parts if all(_one_implies_one(p, q) for q in parts if q is not p)), None)
        if wide is not None:  # the result is always ``wide``: the others must be 1 or equal to it
            out.append(wide)
            if record:
                label = next((lab for d, lab in unsure if d == wide), "the broadcast size")
                add_contract(node, "broadcast_to", [(wide, label), *[x for x in unsure if x[0] != wide]])
            continue
        name = _fresh(node, broadcast_name(parts))
        if record:
            add_contract(node, "broadcast", unsure, defines=name)
        out.append(sym(name))
    return tuple(out)


def _one_implies_one(p: Dim, q: Dim) -> bool:
    """Whether ``p == 1`` forces ``q == 1`` (``q = min(64, p)``, say), so broadcasting them gives ``p``."""
    syms = free_symbols(p)
    if len(syms) != 1 or p != sym(next(iter(syms))) or not free_symbols(q) <= syms:
        return False
    try:
        return evaluate(q, {next(iter(syms)): 1}) == 1
    except (ZeroDivisionError, KeyError):
        return False


def _broadcast_parts(node: Node, dims: list[Dim]) -> list[Dim]:
    """``dims`` with every broadcast variable replaced by the dims it broadcasts, without repeats."""
    defined = node.graph.defined_by if node.graph is not None else {}
    parts: dict[Dim, None] = {}
    stack = list(reversed(dims))
    while stack:
        d = stack.pop()
        c = defined.get(str(d)) if isinstance(d, Expr) else None
        if c is not None and d == sym(c.defines):
            stack.extend(reversed([p for p in c.dims if p != 1]))
        else:
            parts[d] = None
    return list(parts)


def require_equal(node: Node, pairs: list[tuple[Dim, str]], rule: str = "") -> Dim:
    """The common value of dims that the op requires to be equal (``pairs``: dim and where it comes
    from, "input 1 axis 2"). Two different static values are a compile-time error; otherwise, when they
    are not provably equal, a contract makes the run function check them. Returns a static one if any."""
    distinct = list(dict.fromkeys(d for d, _ in pairs))
    statics = [d for d in distinct if is_static(d)]
    if len(statics) > 1:
        raise fail(node, " vs ".join(f"{lab} is {d}" for d, lab in pairs) + (f" ({rule})" if rule else ""))
    if len(distinct) > 1:
        add_contract(node, "equal", pairs, rule=rule)
    return statics[0] if statics else distinct[0]


def require_broadcast_to(node: Node, target: tuple, pairs: list[tuple[tuple, str]], rule: str = "") -> None:
    """Each shape of ``pairs`` (shape, name) broadcasts to ``target`` one way (numpy: right-aligned, each
    dim 1 or the target's). Static mismatches fail now; symbolic ones become contracts."""
    for shape, name in pairs:
        if len(shape) > len(target):
            raise fail(node, f"{name} of shape {list(shape)} has more axes than {list(target)}")
        for k, d in enumerate(shape):
            t = target[len(target) - len(shape) + k]
            if d == 1 or d == t:
                continue
            if is_static(d) and is_static(t):
                raise fail(node, f"{name} of shape {list(shape)} does not broadcast to {list(target)}"
                                 + (f" ({rule})" if rule else ""))
            add_contract(node, "broadcast_to", [(t, f"axis {len(target) - len(shape) + k} of {list(target)}"),
                                                (d, f"{name} axis {k}")], rule)


def add_contract(node: Node, kind: str, pairs: list[tuple[Dim, str]], rule: str = "",
                 defines: str | None = None) -> None:
    g = node.graph
    if g is None:
        return
    g.add_contract(Contract(kind, tuple(as_dim(d) for d, _ in pairs), tuple(lab for _, lab in pairs),
                            node.describe(), rule, defines))


def norm_axis(node: Node, axis: int, rank: int, name: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise fail(node, f"{name} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def const_ints(node: Node, i: int) -> list[int] | None:
    """Input ``i`` as a list of Python ints when it is a compile-time constant."""
    v = node.input(i)
    if v is None or v.const is None:
        return None
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def sym_ints(v: Value | None) -> list[Dim] | None:
    """Element values of an int tensor as Dims, from its constant or symbolic value. (A float tensor
    may carry the symbolic values of a dim cast to float: only float Range reads them, shape_ops.py.)"""
    if v is None:
        return None
    if v.const is not None and np.asarray(v.const).dtype.kind in "iu":
        return [int(x) for x in np.asarray(v.const).reshape(-1)]
    if v.sym_value is not None and isinstance(v.type, TensorType) and v.type.dtype.is_int:
        return [as_dim(x) for x in v.sym_value]
    return None


def same(node: Node, i: int = 0, dtype: DType | None = None) -> TensorType:
    t = tensor_type(node, i)
    return TensorType(dtype or t.dtype, t.shape)


# -- data-dependent dims ------------------------------------------------------------------------------

def runtime_dim(node: Node, out_index: int, axis: int) -> Dim:
    """A new dimension variable for ``axis`` of output ``out_index`` whose value only the input *data*
    determines (NonZero's count, Reshape to a run-time shape, ...).

    The variable is recorded in ``node.defines_dims``; the node's C shape function computes it (>= 0)
    at run time before the kernel runs. Its name is public (model outputs, the AOT header): a graph
    output's ``"<output>[<axis>]"``, else ``"<op>_len<axis>"`` numbered per op (``nonzero2_len1``), never
    an internal tensor name. Names are kept on the root graph, so asking again (re-inference, the
    kernel's lowering) returns the same variable.
    """
    out = node.outputs[out_index]
    root = node.graph
    while root is not None and root.parent is not None:
        root = root.parent
    if root is None or (node.graph is root and any(o is out for o in root.outputs)):
        return _define(node, f"{out.name}[{axis}]")
    named = root.__dict__.setdefault("runtime_dim_ops", {})  # value name -> (op, number)
    if out.name not in named:
        op = node.op_type.lower()
        named[out.name] = (op, 1 + sum(1 for o, _ in named.values() if o == op))
    op, k = named[out.name]
    return _define(node, f"{op}{k if k > 1 else ''}_len{axis}")


def runtime_sym(node: Node, label: str) -> Dim:
    """An auxiliary run-time integer of ``node`` (a slice start or step, a pad), computed by its shape
    function. It may be negative, so it must only appear in kernels (``ctx.dim``), never in a shape:
    shape reasoning assumes dimension variables are >= 0."""
    return _define(node, f"{node.outputs[0].name}.{label}")


def _fresh(node: Node, base: str) -> str:
    """``base``, primed until no input dim of the model has that name."""
    g = node.graph
    while g is not None and g.parent is not None:
        g = g.parent
    taken: set[str] = set()
    for v in g.inputs if g is not None else ():
        for d in getattr(v.type, "shape", None) or ():
            taken |= free_symbols(d)
    while base in taken:
        base += "'"
    return base


def _define(node: Node, base: str) -> Dim:
    name = _fresh(node, base)  # a model's own dim names win; ours get a prime
    if name not in node.defines_dims:
        node.defines_dims.append(name)
    return sym(name)
