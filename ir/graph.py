"""Graph, Node and Value: the IR onnxc optimizes and lowers.

Values know their producer and their uses; ``uses()`` returns a snapshot so passes can rewrite the
graph while they iterate. A Value holding a compile-time constant has ``const`` set (a numpy array,
or for non-tensor constants a Python list/None). Subgraph attributes (If/Loop/Scan bodies) are
Graphs whose ``parent`` is the enclosing graph; they may read outer values directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .contracts import Contract
from .types import TensorType, dtype_from_numpy

_ids = itertools.count()


class Value:
    __slots__ = ("name", "type", "producer", "_uses", "const", "graph", "id", "sym_value", "doc")

    def __init__(self, name: str, type: Any = None, const: Any = None):
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self._uses: list[tuple[Node, int]] = []
        self.const = const
        self.graph: Graph | None = None
        self.id = next(_ids)
        # For small int64 shape tensors: the element values as Dims (symbolic shape values).
        self.sym_value: tuple | None = None
        self.doc = ""

    def uses(self) -> list[tuple[Node, int]]:
        """Snapshot of (node, input index) pairs reading this value."""
        return list(self._uses)

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def dtype(self):
        return getattr(self.type, "dtype", None)

    @property
    def shape(self):
        return getattr(self.type, "shape", None)

    def replace_all_uses_with(self, other: Value) -> None:
        for node, i in self.uses():
            node.set_input(i, other)
        if self.graph is not None:
            g = self.graph
            g.outputs = [other if o is self else o for o in g.outputs]

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass
class Attr:
    """A node attribute. ``kind`` is the ONNX attribute type name (FLOAT, INTS, GRAPH, ...)."""

    name: str
    kind: str
    value: Any
    ref: str | None = None  # ref_attr_name inside a function body

    def __repr__(self) -> str:
        if self.ref:
            return f"{self.name}=@{self.ref}"
        if self.kind == "GRAPH":
            return f"{self.name}=<graph {self.value.name}>"
        if self.kind == "TENSOR":
            return f"{self.name}=<tensor {self.value.dtype}{list(self.value.shape)}>"
        return f"{self.name}={self.value!r}"


class Node:
    __slots__ = ("op_type", "domain", "version", "name", "attrs", "inputs", "outputs", "graph",
                 "id", "doc", "overload", "defines_dims")

    def __init__(self, op_type: str, inputs: Iterable[Value | None], outputs: Iterable[Value],
                 attrs: dict[str, Attr] | None = None, domain: str = "", name: str = "",
                 version: int = 0, overload: str = ""):
        self.op_type = op_type
        self.domain = domain
        self.version = version  # opset version of the node's domain in effect
        self.name = name
        self.attrs: dict[str, Attr] = dict(attrs or {})
        self.inputs: list[Value | None] = []
        self.outputs: list[Value] = []
        self.graph: Graph | None = None
        self.id = next(_ids)
        self.doc = ""
        self.overload = overload
        # Dimension variables whose values this node computes at run time from its input data
        # (data-dependent output shapes: NonZero's count, Reshape to a run-time shape, ...). Set by
        # shape inference (passes/shapes/common.py ``runtime_dim``); bound by the node's C shape function.
        self.defines_dims: list[str] = []
        for v in inputs:
            self.add_input(v)
        for v in outputs:
            self.add_output(v)

    # -- edges ---------------------------------------------------------------------------
    def add_input(self, v: Value | None) -> None:
        self.inputs.append(v)
        if v is not None:
            v._uses.append((self, len(self.inputs) - 1))

    def set_input(self, i: int, v: Value | None) -> None:
        old = self.inputs[i]
        if old is not None:
            old._uses.remove((self, i))
        self.inputs[i] = v
        if v is not None:
            v._uses.append((self, i))

    def add_output(self, v: Value) -> None:
        v.producer = self
        self.outputs.append(v)

    def detach(self) -> None:
        for i, v in enumerate(self.inputs):
            if v is not None:
                v._uses.remove((self, i))
        self.inputs = []

    # -- attributes ----------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        return default if a is None else a.value

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def input(self, i: int) -> Value | None:
        """Input ``i``, or None when absent (optional input omitted or out of range)."""
        return self.inputs[i] if i < len(self.inputs) else None

    def subgraphs(self) -> Iterator[Graph]:
        for a in self.attrs.values():
            if a.kind == "GRAPH":
                yield a.value
            elif a.kind == "GRAPHS":
                yield from a.value

    def describe(self) -> str:
        """Short human description naming the node, for error messages."""
        dom = f"{self.domain}::" if self.domain else ""
        nm = f" '{self.name}'" if self.name else ""
        return f"{dom}{self.op_type}{nm} (outputs {', '.join(repr(o.name) for o in self.outputs)})"

    def __repr__(self) -> str:
        ins = ", ".join("%" + v.name if v is not None else "_" for v in self.inputs)
        outs = ", ".join("%" + v.name for v in self.outputs)
        attrs = ", ".join(repr(a) for a in self.attrs.values())
        return f"{outs} = {self.op_type}({ins}){' {' + attrs + '}' if attrs else ''}"


class Graph:
    def __init__(self, name: str = "main", parent: Graph | None = None):
        self.name = name
        self.parent = parent
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.initializers: dict[str, Value] = {}
        # Types the model declares for values (ONNX value_info and graph outputs), by value name.
        # Shape inference treats them as hints; the types on Values are what passes computed.
        self.value_info: dict[str, Any] = {}
        # Descriptions of shape-computing nodes the passes replaced by compile-time values (folded to
        # constants, or dead once their symbolic values were used); ``onnxc info`` summarizes them.
        self.folded: list[str] = []
        # Relations between dims that shape rules assumed; the run function checks them (ir/contracts.py).
        # Keyed by (kind, dims, defines) so re-stating one is a no-op. Reset when the graph is re-inferred.
        self.contracts: dict[tuple, Contract] = {}
        self.defined_by: dict[str, Contract] = {}  # dimension variables that contracts define
        self.doc = ""

    # -- building ------------------------------------------------------------------------
    def add_contract(self, c: Contract) -> None:
        dims = tuple(str(d) for d in c.dims)
        order_free = c.kind != "broadcast_to"  # its first dim is the target
        c = self.contracts.setdefault((c.kind, tuple(sorted(dims)) if order_free else dims, c.defines), c)
        if c.defines:
            self.defined_by.setdefault(c.defines, c)

    def reset_contracts(self) -> None:
        self.contracts = {}
        self.defined_by = {}

    def add_input(self, v: Value) -> Value:
        v.graph = self
        self.inputs.append(v)
        return v

    def add_initializer(self, v: Value) -> Value:
        v.graph = self
        self.initializers[v.name] = v
        return v

    def append(self, node: Node) -> Node:
        node.graph = self
        for o in node.outputs:
            o.graph = self
        self.nodes.append(node)
        return node

    def insert_before(self, anchor: Node, node: Node) -> Node:
        node.graph = self
        for o in node.outputs:
            o.graph = self
        self.nodes.insert(self.nodes.index(anchor), node)
        return node

    def remove(self, node: Node) -> None:
        node.detach()
        self.nodes.remove(node)

    def constant(self, array: np.ndarray, name: str | None = None) -> Value:
        """A new constant value (an initializer) holding ``array``."""
        array = np.asarray(array)
        v = Value(name or self.fresh_name("const"), TensorType(dtype_from_numpy(array.dtype), array.shape),
                  const=array)
        return self.add_initializer(v)

    def fresh_name(self, base: str) -> str:
        root = self._root()
        taken = root._names()
        nxt = root.__dict__.setdefault("_name_next", {})  # per base, the next suffix to try (names stay taken)
        i = nxt.get(base, 0)
        while f"{base}_{i}" in taken:
            i += 1
        name = f"{base}_{i}"
        taken.add(name)
        nxt[base] = i + 1
        return name

    def _root(self) -> Graph:
        root = self
        while root.parent is not None:
            root = root.parent
        return root

    def _names(self) -> set[str]:
        root = self._root()
        cache = getattr(root, "_name_cache", None)
        if cache is None:
            cache = set()
            for v in root.all_values():
                cache.add(v.name)
            root._name_cache = cache  # type: ignore[attr-defined]
        return cache

    # -- walking -------------------------------------------------------------------------
    def all_values(self) -> Iterator[Value]:
        yield from self.inputs
        yield from self.initializers.values()
        for n in self.nodes:
            yield from n.outputs
            for sg in n.subgraphs():
                yield from sg.all_values()

    def walk(self) -> Iterator[Node]:
        """Every node of this graph and, recursively, of its subgraphs."""
        for n in list(self.nodes):
            yield n
            for sg in n.subgraphs():
                yield from sg.walk()

    def __repr__(self) -> str:
        lines = [f"graph {self.name}("]
        lines += [f"    {v!r}," for v in self.inputs]
        lines.append(") {")
        for v in self.initializers.values():
            lines.append(f"  init {v!r}")
        for n in self.nodes:
            lines.append(f"  {n!r}")
        lines.append(f"  return {', '.join('%' + v.name for v in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)


@dataclass
class Function:
    """A model-local function (ONNX FunctionProto)."""

    name: str
    domain: str
    overload: str
    inputs: list[str]
    outputs: list[str]
    attributes: list[str]
    attribute_defaults: dict[str, Attr]
    nodes: list[Any]  # list of FunctionNode templates (names, not Values)
    opset_imports: dict[str, int]
    doc: str = ""


@dataclass
class FunctionNode:
    """A node of a function body, kept by value names until the function is inlined."""

    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Attr]
    name: str = ""
    overload: str = ""


@dataclass
class Model:
    graph: Graph
    opset_imports: dict[str, int] = field(default_factory=dict)
    functions: dict[tuple[str, str, str], Function] = field(default_factory=dict)
    ir_version: int = 0
    producer_name: str = ""
    producer_version: str = ""
    model_version: int = 0
    doc: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    path: str | None = None  # file the model came from, if any
    data_files: list[str] = field(default_factory=list)  # external data files its tensors were read from (real paths)
    bound: dict[str, Any] = field(default_factory=dict)  # inputs bound to constants (passes/bind_constants.py)

    def opset(self, domain: str) -> int:
        d = "" if domain == "ai.onnx" else domain
        return self.opset_imports.get(d, 0)
