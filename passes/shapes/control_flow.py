"""Shape rules of If, Loop and Scan: infer the bodies with the types their formals receive.

Bodies are closed (passes/lift_captures.py): their trailing formal inputs are the node's captured
values, typed like them, so a body's output dims are expressions over the node's own input symbols
where they can be. Output dims over anything else (a body's run-time dims, a loop's trip count,
shapes that differ between If branches) become run-time dims the node defines: its kernel reports
them when it returns.

Loop-carried values (and Scan states) may change shape across iterations: the body is inferred
with the initial types first; every axis whose output dim differs from the input dim is then
generalized to a symbol of its own (bound at run time from the value each iteration receives) and
the body inferred again, until the carried types are stable.
"""

from __future__ import annotations

from onnxc.ir import (
    Attr,
    DType,
    Graph,
    Node,
    OptionalType,
    SequenceType,
    ShapeError,
    TensorType,
    UnsupportedOpError,
    Value,
)
from onnxc.ir.dims import free_symbols, is_static, sym

from ..lift_captures import captures, onnx_inputs
from .common import fail, runtime_dim, tensor_type
from .registry import shape_rule
from .sequences import hint

BOOL_SCALAR = TensorType(DType.BOOL, ())
INT64_SCALAR = TensorType(DType.INT64, ())


def infer_body(node: Node, body: Graph, formal_types: list) -> list:
    """Type the body's formals (the ONNX ones, then the captures) and infer it; its output types."""
    from ..infer_shapes import infer_graph  # the pass imports the rules: import late

    if not isinstance(body, Graph):  # the frontend checks the schemas; nodes made by passes could still err
        raise fail(node, f"a body attribute must be a graph, got {type(body).__name__}")
    formal_types = list(formal_types) + [v.type for v in captures(node)]
    if len(formal_types) != len(body.inputs):
        raise fail(node, f"body {body.name!r} has {len(body.inputs) - len(captures(node))} inputs, expected "
                         f"{len(formal_types) - len(captures(node))}")
    for v, t in zip(body.inputs, formal_types):
        v.type = t
    infer_graph(body)
    return [o.type for o in body.outputs]


def known_symbols(node: Node) -> set[str]:
    out: set[str] = set()
    for v in node.inputs:
        if v is not None:
            out |= _symbols(v.type)
    return out


def _symbols(t) -> set[str]:
    if isinstance(t, TensorType):
        return t.symbols()
    if isinstance(t, (SequenceType, OptionalType)):
        return _symbols(t.elem)
    return set()


def export_type(node: Node, k: int, t, known: set[str], lead: int = 0):
    """Body type ``t`` as the type of node output ``k``: dims over unknown symbols become run-time
    dims of the node. ``lead`` axes (a scan output's stacking axis) were prepended by the caller."""
    if isinstance(t, TensorType):
        if t.shape is None:
            raise UnsupportedOpError(f"{node.describe()}: the rank of output {k} is unknown",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
        dims = [d if free_symbols(d) <= known else runtime_dim(node, k, a) for a, d in enumerate(t.shape)]
        return TensorType(t.dtype, tuple(dims))
    if isinstance(t, SequenceType):
        return SequenceType(_loose(t.elem))
    if isinstance(t, OptionalType):
        return OptionalType(_loose(t.elem) if isinstance(t.elem, SequenceType) else t.elem)
    raise fail(node, f"output {k} has unsupported type {t}")


def _loose(t):
    """Element type of a sequence crossing a body boundary: its dims are only known at run time."""
    if isinstance(t, TensorType):
        return hint(t)
    if isinstance(t, SequenceType):
        return SequenceType(_loose(t.elem))
    return t


class RankVaries(UnsupportedOpError):
    """An If output whose rank differs between the branches (shape inference may sink the code that reads
    it into the branches: passes/sink_into_if.py)."""


def merge_types(node: Node, k: int, a, b, known: set[str]):
    """Type of If output ``k`` from the two branch types."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype != b.dtype:
            raise fail(node, f"output {k}: then_branch gives {a.dtype.short}, else_branch {b.dtype.short}")
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            raise RankVaries(f"{node.describe()}: output {k} has a different rank in each branch ({a} vs {b})",
                             [(node.domain or "ai.onnx", node.op_type, node.version)])
        dims = [da if da == db and free_symbols(da) <= known else runtime_dim(node, k, ax)
                for ax, (da, db) in enumerate(zip(a.shape, b.shape))]
        return TensorType(a.dtype, tuple(dims))
    if type(a) is not type(b):
        if isinstance(a, OptionalType) or isinstance(b, OptionalType):
            opt = a if isinstance(a, OptionalType) else b
            return export_type(node, k, opt, known)
        raise fail(node, f"output {k}: then_branch gives {a}, else_branch {b}")
    return export_type(node, k, a, known)


@shape_rule("If")
def _if(node: Node) -> list:
    cond = tensor_type(node, 0)
    if cond.dtype != DType.BOOL:
        raise fail(node, f"the condition (input 0) must be a bool tensor, got {cond.dtype.short}")
    if cond.shape is not None and any(is_static(d) and d != 1 for d in cond.shape):
        raise fail(node, f"the condition (input 0) must have one element, got shape {list(cond.shape)}")
    then_t, else_t = _branch_types(node)
    if len(then_t) != len(node.outputs) or len(else_t) != len(node.outputs):
        raise fail(node, f"the branches return {len(then_t)} and {len(else_t)} values, the node has "
                         f"{len(node.outputs)} outputs")
    known = known_symbols(node)
    return [merge_types(node, k, a, b, known) for k, (a, b) in enumerate(zip(then_t, else_t))]


SUNK = "onnxc_sunk"  # an If that passes/sink_into_if.py made or grew: a branch may be invalid for its shapes


def _branch_types(node: Node) -> tuple[list, list]:
    """The output types of both branches. In an If marked SUNK, a branch that is invalid for its shapes (a
    ShapeError) becomes an onnxc::Fail body typed like the other branch: it errs only when taken at run time."""
    keys = ("then_branch", "else_branch")
    got, errs = {}, {}
    for key in keys:
        try:
            got[key] = infer_body(node, node.attr(key), [])
        except ShapeError as e:
            if not node.attr(SUNK):
                raise
            errs[key] = e
    if len(errs) == 2:
        raise errs["then_branch"]
    for key, e in errs.items():
        other = got[keys[1 - keys.index(key)]]
        if not all(isinstance(t, TensorType) and t.shape is not None for t in other):
            raise e
        node.attrs[key] = Attr(key, "GRAPH", _fail_body(node, node.attr(key), str(e), other))
        got[key] = infer_body(node, node.attr(key), [])
    return got["then_branch"], got["else_branch"]


def _fail_body(node: Node, old: Graph, message: str, types: list) -> Graph:
    """A body with ``old``'s formal inputs whose outputs, of ``types``, come from one onnxc::Fail node."""
    g = Graph(old.name, node.graph)
    for v in old.inputs:
        g.add_input(Value(g.fresh_name(v.name), v.type))
    outs = [Value(g.fresh_name(f"{old.name}_failed")) for _ in types]
    g.append(Node(FAIL_OP, [], outs, {"message": Attr("message", "STRING", message),
                                      "dtypes": Attr("dtypes", "INTS", [int(t.dtype) for t in types]),
                                      "ranks": Attr("ranks", "INTS", [len(t.shape) for t in types])},
                  domain=FAIL_DOMAIN, name=f"{node.name}/{old.name}_fails", version=1))
    g.outputs = outs
    return g


def _same(a, b, free: frozenset = frozenset()) -> bool:
    """Whether carried formal type ``a`` covers body result ``b``; axes whose formal dim is one of
    the ``free`` (generalized) symbols match any dim: it is bound anew every iteration."""
    if isinstance(a, OptionalType) and not isinstance(b, OptionalType):
        return _same(a.elem, b)  # a present optional and its element share one run-time form
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype != b.dtype or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return a == b
        return all(x == y or (free_symbols(x) <= free and free_symbols(x) and x == sym(next(iter(free_symbols(x)))))
                   for x, y in zip(a.shape, b.shape))
    if isinstance(a, (SequenceType, OptionalType)) and type(a) is type(b):
        return _same(a.elem, b.elem) or (isinstance(a.elem, TensorType) and isinstance(b.elem, TensorType)
                                         and a.elem.dtype == b.elem.dtype)
    return a == b


def _generalize(node: Node, formal_name: str, t_in, t_out):
    """A type covering both ``t_in`` and ``t_out``: differing axes get symbols of their own."""
    if isinstance(t_in, TensorType) and isinstance(t_out, TensorType):
        if t_in.dtype != t_out.dtype:
            raise fail(node, f"loop-carried value {formal_name!r} changes type: {t_in} -> {t_out}")
        if t_in.shape is None or t_out.shape is None or len(t_in.shape) != len(t_out.shape):
            raise UnsupportedOpError(f"{node.describe()}: loop-carried value {formal_name!r} changes rank "
                                     f"({t_in} -> {t_out})", [(node.domain or "ai.onnx", node.op_type,
                                                               node.version)])
        dims = tuple(a if a == b else sym(f"{formal_name}[{ax}]")
                     for ax, (a, b) in enumerate(zip(t_in.shape, t_out.shape)))
        return TensorType(t_in.dtype, dims)
    if isinstance(t_out, OptionalType) and not isinstance(t_in, OptionalType):
        return _generalize(node, formal_name, OptionalType(t_in), t_out)
    if isinstance(t_in, OptionalType) and not isinstance(t_out, OptionalType):
        return OptionalType(_generalize(node, formal_name, t_in.elem, t_out))
    if isinstance(t_in, (SequenceType, OptionalType)):
        return type(t_in)(_loose(t_in.elem))
    raise fail(node, f"loop-carried value {formal_name!r}: unsupported type {t_in}")


def infer_carried(node: Node, body: Graph, head: list, carried: list, tail: list, n_out_carried: int,
                  offset: int) -> tuple[list, list]:
    """Infer a loop body until the carried types are stable. ``head``/``tail`` are the formal types
    before/after the carried ones; body outputs ``offset...offset+n`` are the carried results.
    Returns (carried formal types, body output types)."""
    carried = list(carried)
    free: set[str] = set()
    for _ in range(4):
        outs = infer_body(node, body, head + carried + tail)
        new = outs[offset:offset + n_out_carried]
        if all(_same(a, b, frozenset(free)) for a, b in zip(carried, new)):
            return carried, outs
        base = len(head)
        carried = [c if _same(c, o, frozenset(free)) else _generalize(node, body.inputs[base + j].name, c, o)
                   for j, (c, o) in enumerate(zip(carried, new))]
        for j, c in enumerate(carried):  # the symbols _generalize made
            if isinstance(c, TensorType) and c.shape is not None:
                free |= {f"{body.inputs[base + j].name}[{ax}]" for ax in range(len(c.shape))}
    raise UnsupportedOpError(f"{node.describe()}: the shapes of its loop-carried values do not settle",
                             [(node.domain or "ai.onnx", node.op_type, node.version)])


@shape_rule("Loop")
def _loop(node: Node) -> list:
    body: Graph = node.attr("body")
    ins = onnx_inputs(node)
    init = [v.type for v in ins[2:]]
    n = len(init)
    carried, outs = infer_carried(node, body, [INT64_SCALAR, BOOL_SCALAR], init, [], n, 1)
    if len(outs) != 1 + len(node.outputs):
        raise fail(node, f"the body returns {len(outs)} values, expected 1 + {len(node.outputs)}")
    known = known_symbols(node)
    result = []
    for j in range(n):
        result.append(export_type(node, j, carried[j], known))
    for k, t in enumerate(outs[1 + n:], start=n):
        if not isinstance(t, TensorType) or t.shape is None:
            raise UnsupportedOpError(f"{node.describe()}: scan output {k} of type {t} is not supported",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
        elem = export_type(node, k, TensorType(t.dtype, (0,) + t.shape), known)
        result.append(TensorType(t.dtype, (runtime_dim(node, k, 0),) + elem.shape[1:]))
    return result


def scan_layout(node: Node) -> tuple[int, int, int, list[int], list[int]]:
    """(first state input, number of states, number of scan inputs, input axes, output axes)."""
    ins = onnx_inputs(node)
    first = 1 if node.version < 9 else 0
    n_scan = node.attr("num_scan_inputs")
    if n_scan is None:
        raise fail(node, "attribute 'num_scan_inputs' is required")
    n_state = len(ins) - first - n_scan
    if n_state < 0:
        raise fail(node, f"num_scan_inputs={n_scan} but the node has {len(ins) - first} inputs")
    in_axes = list(node.attr("scan_input_axes", [0] * n_scan)) if node.version >= 9 else [1] * n_scan
    n_scan_out = len(node.outputs) - n_state
    # opset 8 (batched): outputs are [batch, time, ...]; the time axis is 0 once batch is set aside
    out_axes = list(node.attr("scan_output_axes", [0] * n_scan_out)) if node.version >= 9 else [0] * n_scan_out
    return first, n_state, n_scan, in_axes, out_axes


@shape_rule("Scan")
def _scan(node: Node) -> list:
    body: Graph = node.attr("body")
    ins = onnx_inputs(node)
    first, n_state, n_scan, in_axes, out_axes = scan_layout(node)
    batched = node.version < 9
    states = [v.type for v in ins[first:first + n_state]]
    slices, lengths = [], []
    for j, v in enumerate(ins[first + n_state:]):
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise fail(node, f"scan input {j} must be a tensor of known rank")
        ax = in_axes[j] + (len(t.shape) if in_axes[j] < 0 else 0)
        if not 0 <= ax < len(t.shape):
            raise fail(node, f"scan_input_axes[{j}]={in_axes[j]} is out of range for rank {len(t.shape)}")
        lengths.append(t.shape[ax])
        dims = [d for a, d in enumerate(t.shape) if a != ax]
        slices.append(TensorType(t.dtype, tuple(dims[1:] if batched else dims)))
    if batched:
        states = [TensorType(t.dtype, t.shape[1:]) if isinstance(t, TensorType) and t.shape else t for t in states]
    if not lengths:
        raise fail(node, "Scan needs at least one scan input")
    carried, outs = infer_carried(node, body, [], states, slices, n_state, 0)
    known = known_symbols(node)
    batch = ins[first + n_state].type.shape[0] if batched else None
    result = []
    for j in range(n_state):
        t = export_type(node, j, carried[j], known)
        result.append(TensorType(t.dtype, (batch,) + t.shape) if batched else t)
    for k, t in enumerate(outs[n_state:], start=n_state):
        if not isinstance(t, TensorType) or t.shape is None:
            raise fail(node, f"scan output {k} must be a tensor of known rank, got {t}")
        elem = export_type(node, k, t, known)
        r = len(elem.shape) + 1
        ax = out_axes[k - n_state]
        ax = ax + r if ax < 0 else ax
        if not 0 <= ax < r:
            raise fail(node, f"scan_output_axes[{k - n_state}]={out_axes[k - n_state]} is out of range")
        dims = list(elem.shape)
        dims.insert(ax, lengths[0])
        result.append(TensorType(t.dtype, ((batch,) if batched else ()) + tuple(dims)))
    return result


@shape_rule("SequenceMap")
def _sequence_map(node: Node) -> list:
    body: Graph = node.attr("body")
    formal = []
    for j, v in enumerate(onnx_inputs(node)):
        t = v.type
        if j == 0 and not isinstance(t, SequenceType):
            raise fail(node, f"input 0 must be a sequence, got {t}")
        if isinstance(t, SequenceType):
            e = t.elem
            if not isinstance(e, TensorType) or e.shape is None:
                raise UnsupportedOpError(f"{node.describe()}: the rank of input {j}'s tensors is unknown",
                                         [(node.domain or "ai.onnx", node.op_type, node.version)])
            t = TensorType(e.dtype, tuple(d if isinstance(d, int) else sym(f"{body.inputs[j].name}[{ax}]")
                                          for ax, d in enumerate(e.shape)))
        formal.append(t)
    outs = infer_body(node, body, formal)
    if len(outs) != len(node.outputs):
        raise fail(node, f"the body returns {len(outs)} values, the node has {len(node.outputs)} outputs")
    for k, t in enumerate(outs):
        if not isinstance(t, TensorType):
            raise fail(node, f"body output {k} must be a tensor, got {t}")
    return [SequenceType(hint(t)) for t in outs]


FAIL_DOMAIN, FAIL_OP = "onnxc", "Fail"  # a branch made by passes/sink_into_if.py that is invalid for its shapes


@shape_rule(FAIL_OP, domain=FAIL_DOMAIN)
def _fail_node(node: Node) -> list:
    """onnxc::Fail (attributes ``message``, ``dtypes``, ``ranks``): outputs of those element types and ranks
    whose dims are run-time dims of the node; at run time its shape function reports ``message``."""
    dtypes, ranks = node.attr("dtypes"), node.attr("ranks")
    return [TensorType(DType(dt), tuple(runtime_dim(node, k, a) for a in range(r)))
            for k, (dt, r) in enumerate(zip(dtypes, ranks))]
