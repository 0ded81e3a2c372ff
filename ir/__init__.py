"""onnxc's intermediate representation: graphs of typed values with symbolic dimensions."""

from .dims import (
    Dim,
    Expr,
    as_dim,
    ceildiv,
    dmax,
    dmin,
    evaluate,
    floordiv,
    free_symbols,
    is_static,
    mod,
    sym,
    to_c,
)
from .errors import (
    CacheWarning,
    CompileError,
    InputError,
    ModelError,
    OnnxcError,
    RuntimeFailure,
    ShapeError,
    UnsupportedOpError,
)
from .graph import Attr, Function, FunctionNode, Graph, Model, Node, Value
from .types import (
    CONTAINER_TYPES,
    DType,
    MapType,
    OptionalType,
    SequenceType,
    TensorType,
    dtype_from_numpy,
    innermost,
)

__all__ = [
    "Dim", "Expr", "as_dim", "ceildiv", "dmax", "dmin", "evaluate", "floordiv", "free_symbols", "is_static",
    "mod", "sym", "to_c", "CacheWarning", "CompileError", "InputError", "ModelError", "OnnxcError", "RuntimeFailure",
    "ShapeError", "UnsupportedOpError", "Attr", "Function", "FunctionNode", "Graph", "Model", "Node", "Value",
    "CONTAINER_TYPES", "DType", "MapType", "OptionalType", "SequenceType", "TensorType", "dtype_from_numpy", "innermost",
]
