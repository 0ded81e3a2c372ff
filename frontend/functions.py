"""FunctionProto -> ir.Function (model-local functions), kept by value names until inlining.

A function body is a template: its nodes are ``FunctionNode``s naming their inputs and outputs
("" for an omitted optional one), attribute references are ``Attr(ref=...)``, and defaults come from
``attribute_proto``. Subgraph attributes inside a body (an If inside a function) are real ir.Graphs;
the body values they capture are placeholder Values, the inputs of a scope graph that is their
``parent`` (named after the function), which the inliner rebinds by name to the call site's values.
"""

from __future__ import annotations

from typing import Any

from onnxc.ir import Attr, Function, FunctionNode, Graph, ModelError, Value

from .attrs import convert_attr
from .external import DataDir
from .graphs import BuildContext, Scope, build_graph, check_domain, normalize_domain
from .op_schema import check_node
from .validate import node_label, order_nodes


def opset_dict(entries: Any) -> dict[str, int]:
    """opset_import entries as domain -> version; duplicates keep the highest version."""
    out: dict[str, int] = {}
    for e in entries:
        d = normalize_domain(e.domain)
        out[d] = max(out.get(d, 0), int(e.version))
    return out


class _BodyScope(Scope):
    """The scope subgraphs in a function body see: placeholders for the body's values, made on demand."""

    def __init__(self, graph: Graph, names: set[str]):
        super().__init__(None)
        self.graph = graph
        self.names = names

    def lookup(self, name: str) -> Value | None:
        v = self.values.get(name)
        if v is None and name in self.names:
            v = self.values[name] = self.graph.add_input(Value(name))
        return v


def convert_function(fp: Any, model_opsets: dict[str, int], function_domains: set[str],
                     base_dir: DataDir | str | None, local_ops: set[tuple[str, str]] | None = None) -> Function:
    """IR function of FunctionProto ``fp``; nodes are checked (SSA, definedness, op schemas: see
    op_schema.py; ``local_ops`` are the (domain, name) of the model's functions, which have none) and
    sorted."""
    if not fp.name:
        raise ModelError("a model-local function has no name")
    domain = normalize_domain(fp.domain)
    where = f"function {domain + '::' if domain else ''}{fp.name}" + (f" (overload {fp.overload!r})"
                                                                      if fp.overload else "")
    opsets = opset_dict(fp.opset_import)
    # Nodes may use the function's own imports; model imports are accepted too (exporters omit them).
    known = set(opsets) | set(model_opsets) | function_domains
    ctx = BuildContext({**model_opsets, **opsets}, known, base_dir, local_ops=set(local_ops or ()),
                       in_function=True)
    predefined: dict[str, str] = {}
    for name in fp.input:
        if name in predefined:
            raise ModelError(f"{where}: input {name!r} is listed twice")
        predefined[name] = "a function input"
    order = order_nodes(fp.node, predefined, where)
    body_names = set(fp.input) | {o for n in fp.node for o in n.output if o}
    ctx.taken |= body_names
    scope = _BodyScope(Graph(f"{domain}::{fp.name}"), body_names)
    defined = set(fp.input)
    nodes: list[FunctionNode] = []
    for i in order:
        n = fp.node[i]
        label = f"{where}: {node_label(n)}"
        if not n.op_type:
            raise ModelError(f"{label} has no op_type")
        node_domain = normalize_domain(n.domain)
        check_domain(node_domain, ctx, label)
        for x in n.input:
            if x and x not in defined:
                raise ModelError(f"{label} reads {x!r}, which is not defined in the function")

        def sub(gp: Any, sub_where: str) -> Graph:
            return build_graph(gp, ctx, scope.graph, scope, sub_where)

        attrs: dict[str, Attr] = {}
        for a in n.attribute:
            if a.name in attrs:
                raise ModelError(f"{label} has attribute {a.name!r} twice")
            attrs[a.name] = convert_attr(a, label, base_dir, sub)
        if (node_domain, n.op_type) not in ctx.local_ops:
            attrs = check_node(n.op_type, node_domain, ctx.opsets.get(node_domain, 0), list(n.input), attrs, label)
        nodes.append(FunctionNode(n.op_type, node_domain, list(n.input), list(n.output), attrs, n.name,
                                  n.overload))
        defined.update(o for o in n.output if o)
    for o in fp.output:
        if o not in defined:
            raise ModelError(f"{where}: output {o!r} is not produced by any node or input of the function")

    def default_graph(gp: Any, sub_where: str) -> Graph:
        return build_graph(gp, ctx, None, None, sub_where)

    defaults = {a.name: convert_attr(a, f"{where} default", base_dir, default_graph) for a in fp.attribute_proto}
    return Function(name=fp.name, domain=domain, overload=fp.overload, inputs=list(fp.input),
                    outputs=list(fp.output), attributes=list(fp.attribute) + list(defaults),
                    attribute_defaults=defaults, nodes=nodes, opset_imports=opsets, doc=fp.doc_string)
