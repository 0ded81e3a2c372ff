"""Inline calls of model-local functions (ONNX FunctionProto) into the calling graph.

Handles nested calls (inlined nodes are revisited), attribute references (``ref_attr_name``) with
the function's default values, the IR-10 ``overload`` field, and the function's own opset imports
(body nodes take their versions from them). Body values get fresh names.
"""

from __future__ import annotations

from onnxc.ir import Attr, Function, Graph, Model, ModelError, Node, Value

from .base import PassResult

MAX_DEPTH = 64


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
    env: dict[str, Value | None] = {}
    for i, formal in enumerate(fn.inputs):
        env[formal] = call.input(i)
    for i, formal in enumerate(fn.outputs):
        if i < len(call.outputs):
            env[formal] = call.outputs[i]
    new_nodes = []
    call_outs = list(call.outputs)
    g.remove(call)
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
        n = Node(fnode.op_type, ins, outs, _attrs(fnode.attrs, call, fn), domain=dom,
                 name=f"{call.name or fn.name}/{fnode.name or fnode.op_type}", version=version,
                 overload=fnode.overload)
        new_nodes.append(n)
    # keep graph order: the call's position is where the body goes
    for n in new_nodes:
        g.append(n)
    for o in call_outs:
        if o.producer is None:
            raise ModelError(f"function {fn.domain}::{fn.name} does not define output {o.name!r}")
    return new_nodes


def _inline_graph(g: Graph, model: Model) -> bool:
    changed = False
    depth = 0
    while True:
        calls = [n for n in g.nodes if _key(n) in model.functions]
        if not calls:
            break
        depth += 1
        if depth > MAX_DEPTH:
            raise ModelError(f"model-local functions nest deeper than {MAX_DEPTH} (recursive call of "
                             f"{calls[0].domain}::{calls[0].op_type}?)")
        for call in calls:
            pos = g.nodes.index(call)
            tail = g.nodes[pos + 1:]
            g.nodes = g.nodes[:pos + 1]
            inline_call(g, call, model.functions[_key(call)], model)
            g.nodes.extend(tail)
        changed = True
    for n in g.nodes:
        for sg in n.subgraphs():
            changed |= _inline_graph(sg, model)
    return changed


def inline_functions(model: Model) -> PassResult:
    changed = bool(model.functions) and _inline_graph(model.graph, model)
    return PassResult(model, changed)
