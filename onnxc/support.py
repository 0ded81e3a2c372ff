"""Up-front support check: every unsupported (domain, op, version) of a model in one error."""

from __future__ import annotations

from onnxc.codegen.kernels import registry as kernels
from onnxc.ir import Model, Node, UnsupportedOpError
from onnxc.passes.expand_function_ops import has_expansion
from onnxc.passes.shapes import registry as shapes
from onnxc.passes.shapes.common import RULE_ERRORS, rule_failure


def node_support(node: Node, model: Model) -> str | None:
    """None when onnxc can compile ``node``; otherwise the reason."""
    if (node.domain, node.op_type, node.overload) in model.functions:
        return None
    if shapes.rule_for(node) is None:
        if has_expansion(node):  # a standard function op, expanded into supported ops
            return None
        return "no shape rule" if (node.domain, node.op_type) not in shapes.SHAPE_RULES else \
            f"opset version {node.version} not supported"
    if kernels.lookup(node) is None and shapes.fold_for(node) is None:
        return "no kernel"
    try:  # a kernel's up-front check reads attributes before any shape rule has validated them
        return kernels.unsupported_reason(node) if kernels.lookup(node) is not None else None
    except RULE_ERRORS as e:
        raise rule_failure(node, "the kernel support check", e) from e


def check_supported(model: Model) -> None:
    """Raise one UnsupportedOpError naming every unsupported op and the nodes that use it."""
    bad: dict[tuple[str, str, int], list[str]] = {}
    reasons: dict[tuple[str, str, int], str] = {}
    for node in model.graph.walk():
        reason = node_support(node, model)
        if reason is None:
            continue
        key = (node.domain or "ai.onnx", node.op_type, node.version)
        bad.setdefault(key, []).append(node.name or f"<unnamed, outputs {[o.name for o in node.outputs]}>")
        reasons[key] = reason
    if not bad:
        return
    lines = []
    for key in sorted(bad):
        nodes = bad[key]
        shown = ", ".join(repr(n) for n in nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        lines.append(f"  {key[0]}::{key[1]} (opset {key[2]}): {reasons[key]}; used by {shown}")
    raise UnsupportedOpError(f"the model uses {len(bad)} unsupported operator(s):\n" + "\n".join(lines),
                             sorted(bad))
