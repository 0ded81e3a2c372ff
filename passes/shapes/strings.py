"""Shape and fold rules of the string ops: StringConcat, RegexFullMatch, StringSplit, StringNormalizer.

String tensors are ``DType.STRING`` (numpy object arrays of ``str`` when constant). StringSplit's
last output dim (the most substrings of any element) and StringNormalizer's kept count (when it has
stopwords) depend on the data: they are run-time dims computed by the kernels' shape functions.
Fold rules follow the kernels: Python's ``str.split`` is what StringSplit implements in C, and
StringConcat is plain concatenation. RegexFullMatch and StringNormalizer are not folded: their C
kernels (POSIX regex, locale case mapping) are the definition, not Python's ``re`` or ``str.upper``.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType

from .common import broadcast_dims, fail, runtime_dim, shape_of, tensor_type
from .registry import fold_rule, shape_rule

CASE_ACTIONS = ("NONE", "LOWER", "UPPER")


def _string_input(node: Node, i: int) -> tuple:
    """Shape of input ``i``, which must be a string tensor."""
    t = tensor_type(node, i)
    if t.dtype != DType.STRING:
        raise fail(node, f"input {i} must be a string tensor, got {t.dtype.short}")
    return shape_of(node, i)


def _as_str(s) -> str:
    return s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)


def _str_array(values: list, shape: tuple) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


# -- StringConcat ---------------------------------------------------------------------------------

@shape_rule("StringConcat", versions=(20, 10**9))
def _concat(node: Node) -> list:
    return [TensorType(DType.STRING, broadcast_dims(node, [_string_input(node, 0), _string_input(node, 1)]))]


@fold_rule("StringConcat")
def _fold_concat(node: Node, xs: list) -> list:
    a, b = np.broadcast_arrays(np.asarray(xs[0], dtype=object), np.asarray(xs[1], dtype=object))
    return [_str_array([_as_str(x) + _as_str(y) for x, y in zip(a.reshape(-1), b.reshape(-1))], a.shape)]


# -- RegexFullMatch -------------------------------------------------------------------------------

@shape_rule("RegexFullMatch", versions=(20, 10**9))
def _regex(node: Node) -> list:
    shape = _string_input(node, 0)
    if not isinstance(node.attr("pattern"), (str, bytes)):
        raise fail(node, "attribute 'pattern' is required")
    return [TensorType(DType.BOOL, shape)]


# -- StringSplit ----------------------------------------------------------------------------------

def split_args(node: Node) -> tuple[str | None, int]:
    """(delimiter or None for runs of whitespace, maxsplit or -1 for no limit)."""
    delim = node.attr("delimiter")
    delim = _as_str(delim) if delim is not None else None
    if delim is not None and "\0" in delim:
        raise fail(node, "the delimiter must not contain NUL characters")
    maxsplit = node.attr("maxsplit")
    maxsplit = -1 if maxsplit is None or int(maxsplit) < 0 else int(maxsplit)
    return (delim or None), maxsplit


@shape_rule("StringSplit", versions=(20, 10**9))
def _split(node: Node) -> list:
    shape = _string_input(node, 0)
    split_args(node)
    n = tensor_type(node, 0).numel()
    last = 0 if n == 0 else runtime_dim(node, 0, len(shape))
    return [TensorType(DType.STRING, shape + (last,)), TensorType(DType.INT64, shape)]


@fold_rule("StringSplit")
def _fold_split(node: Node, xs: list) -> list:
    delim, maxsplit = split_args(node)
    x = np.asarray(xs[0], dtype=object)
    parts = [_as_str(s).split(delim, maxsplit) for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    flat = [s for p in parts for s in p + [""] * (width - len(p))]
    counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return [_str_array(flat, (*x.shape, width)), counts]


# -- StringNormalizer -----------------------------------------------------------------------------

def normalizer_args(node: Node) -> tuple[str, bool, list[str], str | None]:
    """(case_change_action, is_case_sensitive, stopwords, locale) with the spec's defaults."""
    action = _as_str(node.attr("case_change_action", "NONE"))
    if action not in CASE_ACTIONS:
        raise fail(node, f"case_change_action must be one of {list(CASE_ACTIONS)}, got {action!r}")
    stops = [_as_str(s) for s in node.attr("stopwords", []) or []]
    if any("\0" in s for s in stops):
        raise fail(node, "stopwords must not contain NUL characters")
    loc = node.attr("locale")
    return action, bool(node.attr("is_case_sensitive", 0)), stops, (_as_str(loc) if loc is not None else None)


@shape_rule("StringNormalizer", versions=(10, 10**9))
def _normalizer(node: Node) -> list:
    shape = _string_input(node, 0)
    _, _, stops, _ = normalizer_args(node)
    if len(shape) not in (1, 2) or (len(shape) == 2 and isinstance(shape[0], int) and shape[0] != 1):
        raise fail(node, f"the input must have shape [C] or [1, C], got {list(shape)}")
    if not stops:
        return [TensorType(DType.STRING, shape)]
    kept = runtime_dim(node, 0, len(shape) - 1)  # >= 1: all dropped gives one empty string
    return [TensorType(DType.STRING, (1, kept) if len(shape) == 2 else (kept,))]
