"""Inline calls of model-local functions (ONNX FunctionProto) into the calling graph.

Handles nested calls (inlined nodes are revisited), attribute references (``ref_attr_name``) with
the function's default values, the IR-10 ``overload`` field, and the function's own opset imports
(body nodes take their versions from them). Body values get fresh names.

Inlining is bounded before it starts: the size each function expands to (its nodes, with every call
replaced by the callee's size, subgraph bodies included) and its nesting depth are computed once per
function over the call graph, so a function that calls itself, calls nested deeper than MAX_DEPTH,
or calls that would create more than MAX_NODES nodes (functions calling the previous one twice: 2^k
nodes at k levels) are a ModelError naming the function, found in time linear in the functions'
text. Inlining itself is one pass over a work stack per graph: linear in the nodes it creates.
"""

from __future__ import annotations

from collections.abc import Iterable

from onnxc.frontend.op_schema import check_node
from onnxc.ir import Attr, Function, Graph, Model, ModelError, Node, Value

from .base import PassResult

MAX_DEPTH = 64  # deepest chain of nested calls
MAX_NODES = 50_000  # most nodes inlining may create (8 levels of doubling: 256; 16 levels: 65,536)


def _key(node: Node) -> tuple[str, str, str]:
    return (node.domain, node.op_type, node.overload)


def _attrs(fnode_attrs: dict[str, Attr], call: Node, fn: Function) -> dict[str, Attr]:
    out = {}
    for name, a in fnode_attrs.items():
        if a.ref is None:
            out[name] = a
            continue
        src = call.attrs.get(a.ref) or fn.attribute_defaults.get(a.ref)
        if src is not None:
            out[name] = Attr(name, src.kind, src.value)
    return out


def inline_call(g: Graph, call: Node, fn: Function, model: Model) -> list[Node]:
    """The nodes of ``fn``'s body bound to ``call``'s values, in order; ``call`` is detached from its
    inputs and its outputs now come from the body. The caller puts the nodes in ``g.nodes`` in place
    of ``call``."""
    env: dict[str, Value | None] = {}
    for i, formal in enumerate(fn.inputs):
        env[formal] = call.input(i)
    for i, formal in enumerate(fn.outputs):
        if i < len(call.outputs):
            env[formal] = call.outputs[i]
    new_nodes = []
    call_outs = list(call.outputs)
    local_ops = {(d, name) for d, name, _ in model.functions}
    call.detach()
    for fnode in fn.nodes:
        ins = []
        for name in fnode.inputs:
            if name == "":
                ins.append(None)
            elif name in env:
                ins.append(env[name])
            else:
                raise ModelError(f"function {fn.domain}::{fn.name}: node {fnode.op_type} reads undefined "
                                 f"value {name!r}")
        outs = []
        for name in fnode.outputs:
            v = env.get(name) if name in fn.outputs else None
            if v is None:
                v = Value(g.fresh_name(f"{fn.name}_{name}" if name else f"{fn.name}_unused"))
                env[name] = v
            else:
                v.producer = None
            outs.append(v)
        dom = "" if fnode.domain == "ai.onnx" else fnode.domain
        version = fn.opset_imports.get(dom, fn.opset_imports.get("ai.onnx" if dom == "" else dom,
                                                                 model.opset(dom)))
        attrs = _attrs(fnode.attrs, call, fn)
        if any(a.ref is not None for a in fnode.attrs.values()) and (dom, fnode.op_type) not in local_ops:
            # the caller's values now stand for the references: they must have the types the op declares
            attrs = check_node(fnode.op_type, dom, version, list(fnode.inputs), attrs,
                               f"function {fn.domain}::{fn.name}: node {fnode.op_type} called by "
                               f"{call.op_type} {call.name!r}")
        n = Node(fnode.op_type, ins, outs, attrs, domain=dom,
                 name=f"{call.name or fn.name}/{fnode.name or fnode.op_type}", version=version,
                 overload=fnode.overload)
        n.graph = g
        for o in outs:
            o.graph = g
        new_nodes.append(n)
    for o in call_outs:
        if o.producer is None:
            raise ModelError(f"function {fn.domain}::{fn.name} does not define output {o.name!r}")
    return new_nodes


def _label(key: tuple[str, str, str]) -> str:
    domain, name, overload = key
    return f"{domain}::{name}" + (f" (overload {overload!r})" if overload else "")


def _graph_nodes(graphs: Iterable[Graph]) -> Iterable:
    """Every node of ``graphs`` and of the subgraphs nested in them (no recursion)."""
    stack = list(graphs)
    while stack:
        g = stack.pop()
        for n in g.nodes:
            yield n
            stack.extend(n.subgraphs())


def _body_nodes(fn: Function) -> Iterable:
    """The nodes of a function body (FunctionNodes) and of the subgraphs in their attributes."""
    for fnode in fn.nodes:
        yield fnode
        for a in fnode.attrs.values():
            if a.kind == "GRAPH" and a.value is not None:
                yield from _graph_nodes([a.value])
            elif a.kind == "GRAPHS" and a.value is not None:
                yield from _graph_nodes(a.value)


def check_expansion(model: Model) -> None:
    """ModelError when inlining the functions the model calls would not end (a function calling
    itself), nest deeper than MAX_DEPTH or create more than MAX_NODES nodes; names the function."""
    fns = model.functions
    size: dict[tuple, int] = {}    # nodes a call of the function expands to
    depth: dict[tuple, int] = {}   # levels of nested calls, the function's own included
    calls = {k: [_key(n) for n in _body_nodes(fn) if _key(n) in fns] for k, fn in fns.items()}
    for start in {_key(n) for n in _graph_nodes([model.graph]) if _key(n) in fns}:
        if start in size:
            continue
        path, on_path = [start], {start}
        todo = [iter(calls[start])]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:  # every callee of path[-1] is done: its size and depth are known
                k = path.pop()
                on_path.discard(k)
                todo.pop()
                body = sum(1 for n in _body_nodes(fns[k]) if _key(n) not in fns)
                size[k] = body + sum(size[c] for c in calls[k])
                depth[k] = 1 + max((depth[c] for c in calls[k]), default=0)
                if depth[k] > MAX_DEPTH:
                    raise ModelError(f"function {_label(k)} nests calls of model-local functions {depth[k]} deep; "
                                     f"onnxc inlines at most {MAX_DEPTH} levels")
                continue
            if nxt in on_path:
                cycle = " -> ".join(_label(c) for c in path[path.index(nxt):] + [nxt])
                raise ModelError(f"function {_label(nxt)} calls itself ({cycle}): recursive functions "
                                 "cannot be inlined")
            if nxt not in size:
                path.append(nxt)
                on_path.add(nxt)
                todo.append(iter(calls[nxt]))
    called = [k for k in (_key(n) for n in _graph_nodes([model.graph])) if k in size]
    total = sum(size[k] for k in called)
    if total > MAX_NODES:
        big = max(called, key=lambda k: size[k])
        raise ModelError(f"inlining model-local functions would create {total:,} nodes, more than onnxc's limit "
                         f"of {MAX_NODES:,}: function {_label(big)} expands to {size[big]:,} nodes "
                         f"({depth[big]} levels of nested calls)")


def _inline_graph(g: Graph, model: Model) -> bool:
    """Replace every call in ``g`` (and, after, in its subgraphs) by the callee's body, in place and in
    order, with a work stack: inlined nodes are examined again for the calls they make."""
    if not any(_key(n) in model.functions for n in g.nodes):
        changed = False
    else:
        changed = True
        out: list[Node] = []
        stack = list(reversed(g.nodes))
        while stack:
            n = stack.pop()
            fn = model.functions.get(_key(n))
            if fn is None:
                out.append(n)
            else:
                stack.extend(reversed(inline_call(g, n, fn, model)))
        g.nodes = out
    for n in g.nodes:
        for sg in n.subgraphs():
            changed |= _inline_graph(sg, model)
    return changed


def inline_functions(model: Model) -> PassResult:
    if not model.functions:
        return PassResult(model, False)
    check_expansion(model)
    return PassResult(model, _inline_graph(model.graph, model))
