"""The IR's rules, checkable after every pass: SSA, defined-before-use, consistent links, types."""

from __future__ import annotations

from .errors import OnnxcError
from .graph import Graph, Model
from .types import TensorType


class IRCheckError(OnnxcError):
    """A pass left the IR inconsistent (a bug in onnxc, not in the model)."""


def _check_uses(v, alive: set[int]) -> None:
    """Every use recorded on ``v`` is a live node (of the graph or its bodies) reading ``v`` there."""
    for n, i in v._uses:
        if id(n) not in alive or i >= len(n.inputs) or n.inputs[i] is not v:
            raise IRCheckError(f"value {v.name!r} records a use by {n.describe()} input {i} that does not read it "
                               "(a node dropped or rewired without updating its links)")


def _check_initializer(v) -> None:
    t, c = v.type, v.const
    if not isinstance(t, TensorType) or not hasattr(c, "dtype"):
        return
    if c.dtype != t.dtype.np or (t.is_static and tuple(c.shape) != tuple(t.shape)):
        raise IRCheckError(f"initializer {v.name!r} is declared {t} but holds {c.dtype} {list(c.shape)}")


def check_graph(g: Graph, outer: frozenset[int] = frozenset(), typed: bool = False,
                alive: set[int] | None = None) -> None:
    """Raise IRCheckError at the first broken rule of ``g`` (and its bodies); ``outer``: the values the
    enclosing graphs define; ``typed``: after shape inference (types present and consistent)."""
    defined: set[int] = set(outer)
    names: set[str] = set()
    own = []  # the values this graph defines, whose recorded uses are checked last
    if alive is None:
        alive = {id(n) for n in g.walk()}

    def define(v, what: str) -> None:
        if v.id in defined:
            raise IRCheckError(f"value {v.name!r} ({what}) defined twice in graph {g.name!r}")
        defined.add(v.id)
        names.add(v.name)
        own.append(v)

    for v in g.inputs:
        define(v, "graph input")
    for v in g.initializers.values():
        if v.const is None:
            raise IRCheckError(f"initializer {v.name!r} has no constant value")
        if typed:
            _check_initializer(v)
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
            check_graph(sg, frozenset(defined), typed, alive)
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
    for v in own:
        _check_uses(v, alive)


def check_model(model: Model, typed: bool = False) -> None:
    check_graph(model.graph, typed=typed)
