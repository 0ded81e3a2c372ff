"""What the ONNX operator schemas require of a node: attribute types, required attributes and inputs.

A node of a standard domain (ai.onnx, ai.onnx.ml, ai.onnx.preview[.training]) is checked against the
schema of its opset version before it becomes IR, like onnxruntime does when it loads a model:

- an attribute the schema declares must have the declared type: ``strides=[1.5, 1.5]`` (FLOATS for
  INTS), ``axis="1"`` or ``then_branch=3`` are ModelErrors naming the node and the attribute, never
  a value truncated to an int or a Python exception inside a shape rule. One leniency: an integer
  where a float is declared (``alpha=1``, which onnx.helper writes as INT) is widened to that float;
- a required attribute must be present (If without ``else_branch``, Cast without ``to``);
- every input up to the last required one (the leading non-optional, non-variadic formal inputs)
  must be given, with a non-empty name (If without its condition, Cast of ``""``). Extra inputs are
  not refused: onnxc's own epilogue form of Conv/Gemm/MatMul (passes/fuse_epilogues.py) adds some.

Attributes the schema does not declare are left alone (onnxc's own, or from newer specs), except
graphs (a body no kernel runs, whose outer-scope captures would still count as reads); so are ops of
other domains, except the onnxruntime contrib ops onnxc implements (contrib_schema.py, written from
onnxruntime's ContribOperators.md). The table (op_schema_table.py) is generated from the pinned
``onnx`` package, which onnxc does not need at run time: ``python -m onnxc.frontend.gen_op_schema``
rewrites it, and a test checks it matches the installed ``onnx``.
"""

from __future__ import annotations

import reprlib

from onnxc.ir import Attr, ModelError

from .contrib_schema import CONTRIB
from .op_schema_table import SCHEMAS

_WIDEN = {("FLOAT", "INT"): float, ("FLOATS", "INTS"): lambda v: [float(x) for x in v]}
_short = reprlib.Repr()
_short.maxlist = _short.maxstring = 24


def check_node(op_type: str, domain: str, version: int, inputs: list[str], attrs: dict[str, Attr],
               label: str) -> dict[str, Attr]:
    """``attrs`` with widened integers, after checking the node against its schema (ModelError)."""
    entry = SCHEMAS.get((domain, op_type)) or CONTRIB.get((domain, op_type))
    if entry is None:
        return attrs
    kinds, versions = entry
    for name, a in attrs.items():
        if name not in kinds and a.kind in ("GRAPH", "GRAPHS"):  # a body no kernel runs, yet it would capture values
            raise ModelError(f"{label}: attribute {name!r} is a graph, but {op_type} has no graph attribute "
                             f"of that name")
    spec = None
    for since, *rest in versions:
        if since <= version:
            spec = rest
    if spec is None:  # the op does not exist at this opset version: the op tables say so later
        return attrs
    required_inputs, required_attrs = spec
    for i, formal in enumerate(required_inputs):
        if i >= len(inputs) or not inputs[i]:
            raise ModelError(f"{label}: input {i} ({formal!r}) is required")
    out = dict(attrs)
    for name, a in attrs.items():
        want = kinds.get(name)
        if want is None and a.kind in ("GRAPH", "GRAPHS"):  # a body nothing runs, yet it would capture values
            raise ModelError(f"{label}: attribute {name!r} is a graph, but {op_type} has no graph attribute "
                             f"of that name")
        if want is None or a.ref is not None or a.kind in want.split("|"):
            continue
        widen = _WIDEN.get((want, a.kind))
        if widen is None:
            raise ModelError(f"{label}: attribute {name!r} must be {want.replace('|', ' or ')}, got {a.kind} "
                             f"{_short.repr(a.value)}")
        out[name] = Attr(name, want, widen(a.value))
    for name in required_attrs:
        if name not in attrs:
            raise ModelError(f"{label}: required attribute {name!r} is missing")
    return out
