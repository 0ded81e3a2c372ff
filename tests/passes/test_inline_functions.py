"""Inlining of model-local functions: nesting, attribute references, defaults, opset imports."""

from onnxc.ir import Attr, Function, FunctionNode
from onnxc.ir.checker import check_model
from onnxc.passes.inline_functions import inline_functions

from .irutil import make, node


def test_nested_functions_with_attribute_refs_and_defaults():
    m, v = make({"x": (4,)})
    inner = Function("Leaky", "local", "", ["a"], ["b"], ["alpha"], {"alpha": Attr("alpha", "FLOAT", 0.5)},
                     [FunctionNode("LeakyRelu", "", ["a"], ["b"], {"alpha": Attr("alpha", "FLOAT", None, ref="alpha")})],
                     {"": 18})
    outer = Function("Twice", "local", "", ["p"], ["q"], [], {},
                     [FunctionNode("Leaky", "local", ["p"], ["t"], {}),
                      FunctionNode("Leaky", "local", ["t"], ["q"], {"alpha": Attr("alpha", "FLOAT", 0.1)})],
                     {"": 18, "local": 1})
    m.functions = {("local", "Leaky", ""): inner, ("local", "Twice", ""): outer}
    (y,) = node(m, "Twice", [v["x"]])
    m.graph.nodes[-1].domain = "local"
    m.graph.outputs = [y]
    assert inline_functions(m).changed
    ops = [(n.op_type, n.attr("alpha"), n.version) for n in m.graph.nodes]
    assert ops == [("LeakyRelu", 0.5, 18), ("LeakyRelu", 0.1, 18)]
    assert m.graph.nodes[-1].outputs[0] is y
    check_model(m)
