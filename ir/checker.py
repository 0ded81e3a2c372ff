"""The IR's rules, checkable after every pass: SSA, defined-before-use, consistent links, types."""

from __future__ import annotations

from .errors import OnnxcError
from .graph import Graph, Model
from .types import TensorType


class IRCheckError(OnnxcError):
    """A pass left the IR inconsistent (a bug in onnxc, not in the model)."""


def check_graph(g: Graph, outer: frozenset[int] = frozenset(), typed: bool = False) -> None:
    defined: set[int] = set(outer)
    names: set[str] = set()

    def define(v, what: str) -> None:
        if v.id in defined:
            raise IRCheckError(f"value {v.name!r} ({what}) defined twice in graph {g.name!r}")
        defined.add(v.id)
        names.add(v.name)

    for v in g.inputs:
        define(v, "graph input")
    for v in g.initializers.values():
        if v.const is None:
            raise IRCheckError(f"initializer {v.name!r} has no constant value")
        define(v, "initializer")
    for n in g.nodes:
        if n.graph is not g:
            raise IRCheckError(f"{n.describe()} is listed in graph {g.name!r} but linked elsewhere")
        for i, v in enumerate(n.inputs):
            if v is None:
                continue
            if v.id not in defined:
                raise IRCheckError(f"{n.describe()} reads {v.name!r} (input {i}) before it is defined")
            if (n, i) not in v._uses:
                raise IRCheckError(f"{n.describe()} input {i} {v.name!r} lacks its use link")
        for sg in n.subgraphs():
            check_graph(sg, frozenset(defined), typed)
        for o in n.outputs:
            if o.producer is not n:
                raise IRCheckError(f"output {o.name!r} of {n.describe()} names another producer")
            define(o, f"output of {n.op_type}")
            if typed and o.type is None:
                raise IRCheckError(f"output {o.name!r} of {n.describe()} has no type")
            if typed and isinstance(o.type, TensorType) and o.type.shape is not None:
                for d in o.type.shape:
                    if isinstance(d, int) and d < 0:
                        raise IRCheckError(f"{o.name!r} has negative dim {d}")
    for v in g.outputs:
        if v.id not in defined:
            raise IRCheckError(f"graph output {v.name!r} of graph {g.name!r} is not defined")


def check_model(model: Model, typed: bool = False) -> None:
    check_graph(model.graph, typed=typed)
