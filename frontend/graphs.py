"""GraphProto -> ir.Graph, with lexical scoping of subgraphs.

Every value is one ``Value`` object: node inputs point at the Value defined by a graph input, an
initializer or an earlier node of the same graph, or, for subgraphs (If/Loop/Scan bodies), of an
enclosing graph; the innermost definition wins. Graph inputs that also have an initializer are
initializers (old exporters listed every weight as an input), not runtime inputs. Declared types of
``value_info`` entries and graph outputs are recorded in ``Graph.value_info``; node outputs are left
untyped for shape inference. Empty output names get fresh unique names; empty input names are None.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnxc.ir import Graph, ModelError, Node, TensorType, Value
from onnxc.ir.limits import too_big

from .attrs import convert_attr
from .external import DataDir
from .op_schema import check_node
from .tensors import sparse_to_array, tensor_to_array
from .types import convert_dtype, convert_type, loose_dim_names
from .validate import node_label, order_nodes, subgraphs


def normalize_domain(domain: str) -> str:
    """The IR spelling of an operator-set domain: the default domain is "" (not "ai.onnx")."""
    return "" if domain == "ai.onnx" else domain


@dataclass
class BuildContext:
    """What building a graph needs besides the GraphProto: opsets in effect, data directory, names."""

    opsets: dict[str, int]
    known_domains: set[str]  # domains a node may use: imported ones and model-local function domains
    base_dir: DataDir | str | None  # where external data is read (the loader passes its DataDir)
    taken: set[str] = field(default_factory=set)  # every value name of the model; fresh names avoid them
    local_ops: set[tuple[str, str]] = field(default_factory=set)  # (domain, name) of model-local functions
    in_function: bool = False  # building a subgraph of a function body
    _counter: int = 0

    def fresh(self, base: str) -> str:
        """A value name used nowhere in the model."""
        while True:
            name = f"{base}_{self._counter}"
            self._counter += 1
            if name not in self.taken:
                self.taken.add(name)
                return name


class Scope:
    """Value names visible while building one graph, falling back to the enclosing graphs' scopes."""

    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.values: dict[str, Value] = {}

    def lookup(self, name: str) -> Value | None:
        v = self.values.get(name)
        if v is None and self.parent is not None:
            return self.parent.lookup(name)
        return v


def all_names(gp: Any, out: set[str] | None = None) -> set[str]:
    """Every value name mentioned in a GraphProto and its subgraphs."""
    out = set() if out is None else out
    for group in (gp.input, gp.output, gp.value_info):
        out.update(v.name for v in group)
    out.update(t.name for t in gp.initializer)
    out.update(s.values.name for s in gp.sparse_initializer)
    for n in gp.node:
        out.update(n.input)
        out.update(n.output)
        for sg in subgraphs(n):
            all_names(sg, out)
    return out


def build_graph(gp: Any, ctx: BuildContext, parent: Graph | None = None, outer: Scope | None = None,
                where: str | None = None) -> Graph:
    """The IR graph of GraphProto ``gp``; ``parent``/``outer`` are the enclosing graph and its scope."""
    g = Graph(gp.name or ("main" if parent is None else "body"), parent)
    g.doc = gp.doc_string
    where = where or f"graph {g.name!r}"
    scope = Scope(outer)
    predefined: dict[str, str] = {}
    if parent is None:
        _warn_loose_dim_names(gp, where)
    for t in gp.initializer:
        _add_const(g, scope, predefined, t.name, t.data_type, where,
                   lambda t=t: tensor_to_array(t, ctx.base_dir, f"{where}: initializer {t.name!r}"))
    for sp in gp.sparse_initializer:
        name = sp.values.name
        _add_const(g, scope, predefined, name, sp.values.data_type, where,
                   lambda sp=sp, name=name: sparse_to_array(sp, ctx.base_dir, f"{where}: sparse initializer {name!r}"))
    for vi in gp.input:
        if not vi.name:
            raise ModelError(f"{where}: a graph input has no name")
        if vi.name in g.initializers:
            continue
        if vi.name in predefined:
            raise ModelError(f"{where}: graph input {vi.name!r} is listed twice")
        v = Value(vi.name, _input_type(vi, where, parent is None))
        v.doc = vi.doc_string
        g.add_input(v)
        scope.values[vi.name] = v
        predefined[vi.name] = "a graph input"
    for vi in list(gp.value_info) + list(gp.output):
        if vi.HasField("type"):
            g.value_info[vi.name] = convert_type(vi.type, vi.name)
    for i in order_nodes(gp.node, predefined, where):
        _add_node(gp.node[i], g, scope, ctx, where)
    for vo in gp.output:
        if not vo.name:
            raise ModelError(f"{where}: a graph output has no name")
        v = scope.lookup(vo.name)
        if v is None:
            raise ModelError(f"{where}: graph output {vo.name!r} is not produced by any node, input or "
                             "initializer")
        g.outputs.append(v)
    return g


def _warn_loose_dim_names(gp: Any, where: str) -> None:
    """Warn when dims of the graph's inputs and outputs share a name that is not a C identifier: each is an
    unrelated unknown dim (frontend/types.py), though the model may have meant one variable."""
    shapes = [vi.type.tensor_type.shape for vi in list(gp.input) + list(gp.output)
              if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape")]
    names = loose_dim_names(shapes)
    if names:
        warnings.warn(f"{where}: dimension names {', '.join(map(repr, names))} are not identifiers; each dim so "
                      "named is an unknown dim of its own, not one shared variable", stacklevel=4)


def _input_type(vi: Any, where: str, main: bool) -> Any:
    """The declared type of a graph input. The main graph's inputs are what callers pass: a tensor of
    element type 0 (UNDEFINED) or beyond the size limits (ir/limits.py) is a ModelError."""
    if not vi.HasField("type"):
        return None
    t = convert_type(vi.type, vi.name)
    if not main:
        return t
    if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type == 0:
        raise ModelError(f"{where}: graph input {vi.name!r} has element type 0 (UNDEFINED)")
    if isinstance(t, TensorType) and t.shape is not None:
        why = too_big(t.dtype, [d for d in t.shape if isinstance(d, int)])
        if why is not None:
            raise ModelError(f"{where}: graph input {vi.name!r}: {why}")
    return t


def _add_const(g: Graph, scope: Scope, predefined: dict[str, str], name: str, data_type: int, where: str,
               decode: Any) -> None:
    if not name:
        raise ModelError(f"{where}: an initializer has no name")
    if name in predefined:
        raise ModelError(f"{where}: value {name!r} is defined twice: as {predefined[name]} and as an initializer")
    array: np.ndarray = decode()
    v = Value(name, TensorType(convert_dtype(data_type, f"{where}: initializer {name!r}"), array.shape),
              const=array)
    g.add_initializer(v)
    scope.values[name] = v
    predefined[name] = "an initializer"


def _add_node(n: Any, g: Graph, scope: Scope, ctx: BuildContext, where: str) -> None:
    label = node_label(n)
    if not n.op_type:
        raise ModelError(f"{where}: {label} has no op_type")
    domain = normalize_domain(n.domain)
    check_domain(domain, ctx, f"{where}: {label}")
    inputs: list[Value | None] = []
    for name in n.input:
        if not name:
            inputs.append(None)
            continue
        v = scope.lookup(name)
        if v is None:
            raise ModelError(f"{where}: {label} reads {name!r}, which is not defined in this graph or an "
                             "enclosing one")
        inputs.append(v)

    def sub(gp: Any, sub_where: str) -> Graph:
        return build_graph(gp, ctx, g, scope, sub_where)

    attrs = {}
    for a in n.attribute:
        if a.name in attrs:
            raise ModelError(f"{where}: {label} has attribute {a.name!r} twice")
        attrs[a.name] = convert_attr(a, f"{where}: {label}", ctx.base_dir, sub)
        if attrs[a.name].ref is not None:
            raise ModelError(f"{where}: {label} attribute {a.name!r} refers to attribute {a.ref_attr_name!r}: "
                             "only the nodes of a function body may refer to the function's attributes"
                             + (" (onnxc does not resolve references inside a body's subgraphs)"
                                if ctx.in_function else ""))
    if (domain, n.op_type) not in ctx.local_ops:
        attrs = check_node(n.op_type, domain, ctx.opsets.get(domain, 0), list(n.input), attrs, f"{where}: {label}")
    outputs = [Value(o or ctx.fresh(f"{n.op_type}_unused")) for o in n.output]
    node = Node(n.op_type, inputs, outputs, attrs, domain=domain, name=n.name,
                version=ctx.opsets.get(domain, 0), overload=n.overload)
    node.doc = n.doc_string
    g.append(node)
    for v in outputs:
        scope.values[v.name] = v


def check_domain(domain: str, ctx: BuildContext, label: str) -> None:
    """ModelError unless nodes may use ``domain`` (imported, or the domain of a model-local function)."""
    if domain not in ctx.known_domains:
        have = ", ".join(repr(d) for d in sorted(ctx.known_domains)) or "none"
        raise ModelError(f"{label} uses operator domain {domain or 'ai.onnx'!r}, which the model does not "
                         f"import (opset_import has {have})")
