"""frontend/op_schema.py: nodes checked against the ONNX operator schemas of their opset version."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from onnxc.frontend import load_model
from onnxc.frontend.gen_op_schema import generate
from onnxc.frontend.op_schema import check_node
from onnxc.ir import Attr, ModelError

F = TensorProto.FLOAT


def test_table_matches_the_installed_onnx() -> None:
    from pathlib import Path

    import onnxc.frontend

    table = Path(onnxc.frontend.__file__).with_name("op_schema_table.py").read_text()
    assert table == generate(), "run python -m onnxc.frontend.gen_op_schema"


def test_versions_are_resolved() -> None:
    """Pad takes pads as a required attribute before opset 11 and as a required input from 11 on."""
    with pytest.raises(ModelError, match=r"required attribute 'pads' is missing"):
        check_node("Pad", "", 2, ["x"], {}, "n")
    with pytest.raises(ModelError, match=r"n: input 1 \('pads'\) is required"):
        check_node("Pad", "", 11, ["x"], {}, "n")
    assert check_node("Pad", "", 11, ["x", "p"], {}, "n") == {}
    with pytest.raises(ModelError, match=r"attribute 'min' must be FLOAT, got STRING"):
        check_node("Clip", "", 6, ["x"], {"min": Attr("min", "STRING", "a")}, "n")


def test_unknown_ops_attributes_and_domains_are_left_alone() -> None:
    attrs = {"mine": Attr("mine", "FLOATS", [1.5])}
    assert check_node("Conv", "", 17, ["x", "w"], attrs, "n") == attrs
    assert check_node("NoSuchContribOp", "com.microsoft", 1, [], attrs, "n") == attrs
    assert check_node("NoSuchOp", "", 17, [], attrs, "n") == attrs


def test_widening_and_either_kind() -> None:
    out = check_node("LeakyRelu", "", 16, ["x"], {"alpha": Attr("alpha", "INT", 1)}, "n")
    assert out["alpha"] == Attr("alpha", "FLOAT", 1.0) and isinstance(out["alpha"].value, float)
    assert check_node("Cast", "", 1, ["x"], {"to": Attr("to", "STRING", "FLOAT")}, "n")["to"].kind == "STRING"


def test_function_body_nodes_are_checked_and_calls_are_not() -> None:
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    f = helper.make_function("local", "f", ["x"], ["y"],
                             [helper.make_node("Conv", ["x", "x"], ["y"], strides=[1.5])], ops)
    g = helper.make_graph([helper.make_node("f", ["x"], ["y"], domain="local", anything=2.5)], "g",
                          [helper.make_tensor_value_info("x", F, [1, 1, 3])], [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(ModelError, match=r"function local::f: node Conv.*'strides' must be INTS, got FLOATS"):
        load_model(helper.make_model(g, opset_imports=ops, functions=[f]))


def test_nodes_in_subgraphs_are_checked() -> None:
    body = helper.make_graph([helper.make_node("Cast", ["x"], ["o"])], "then", [],
                             [helper.make_tensor_value_info("o", F, None)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)], "g",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", F, [1])],
                          [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(ModelError, match=r"Cast.*required attribute 'to' is missing"):
        load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
