"""load_model: IR built from ONNX models, scoping, functions, external data and validation errors."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from _frontend_cases import all_models
from onnx import TensorProto, helper, numpy_helper

from onnxc.frontend import load_model
from onnxc.ir import DType, MapType, ModelError, OptionalType, SequenceType, TensorType, sym

F = TensorProto.FLOAT


def vi(name: str, shape=None, dt: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dt, shape)


def model(nodes, inputs=("x",), outputs=("y",), inits=(), opsets=(("", 21),), **kw) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [vi(i, [2]) if isinstance(i, str) else i for i in inputs],
                          [vi(o) if isinstance(o, str) else o for o in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], **kw)


def test_every_test_model_loads():
    for label, blob in all_models():
        ref = onnx.ModelProto.FromString(blob)
        m = load_model(blob)
        inits = {t.name for t in ref.graph.initializer}
        assert [v.name for v in m.graph.inputs] == [i.name for i in ref.graph.input if i.name not in inits], label
        assert len(m.graph.nodes) == len(ref.graph.node), label
        assert [v.name for v in m.graph.outputs] == [o.name for o in ref.graph.output], label
        assert all(n.version > 0 for n in m.graph.walk() if n.domain == ""), label


def test_model_fields_and_opset_normalization(tmp_path):
    mp = model([helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx")],
               opsets=(("ai.onnx", 13), ("", 17), ("ai.onnx.ml", 3), ("ai.onnx.ml", 2)), producer_name="p")
    mp.producer_version, mp.model_version, mp.doc_string = "1.2", 7, "doc"
    helper.set_model_props(mp, {"author": "me"})
    path = tmp_path / "m.onnx"
    onnx.save(mp, path)
    m = load_model(path)
    assert m.opset_imports == {"": 17, "ai.onnx.ml": 3}  # duplicates keep the highest version
    assert (m.producer_name, m.producer_version, m.model_version, m.doc) == ("p", "1.2", 7, "doc")
    assert m.metadata == {"author": "me"} and m.path == str(path) and m.ir_version == mp.ir_version
    node = m.graph.nodes[0]
    assert (node.domain, node.version) == ("", 17)
    assert load_model(mp).path is None  # an onnx.ModelProto message is accepted directly


def test_types_and_dimension_symbols():
    seq = helper.make_tensor_sequence_value_info("s", F, ["n"])
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [1])))
    mp_type = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(F, None))
    mapv = helper.make_value_info("m", mp_type)
    x = vi("x", ["batch_size", None, 3, -1])
    x.type.tensor_type.shape.dim[1].Clear()
    mp = model([helper.make_node("Identity", ["x"], ["y"])], inputs=(x, vi("u"), seq, opt, mapv),
               outputs=(vi("y", ["batch_size", 4]),))
    g = load_model(mp).graph
    types = {v.name: v.type for v in g.inputs}
    assert types["x"] == TensorType(DType.FLOAT, (sym("batch_size"), sym("x:1"), 3, sym("x:3")))
    assert types["u"] == TensorType(DType.FLOAT, None)
    assert types["s"] == SequenceType(TensorType(DType.FLOAT, (sym("n"),)))
    assert types["o"] == OptionalType(TensorType(DType.FLOAT, (1,)))
    assert types["m"] == MapType(DType.INT64, TensorType(DType.FLOAT, None))
    assert g.value_info["y"] == TensorType(DType.FLOAT, (sym("batch_size"), 4))


def test_dim_names_that_are_not_identifiers_are_unrelated_unknown_dims(recwarn):
    """Only C identifiers bind dims together; '?', '-1', '', tf2onnx's 'unk__N' and names with spaces each
    give a fresh variable (PaddleOCR declares [-1, 3, '?', '?'] and takes 48 x 192 images)."""
    x = vi("x", [-1, 3, "?", "?"])
    z = vi("z", ["unk__3", "unk__3", "-1", "n"])
    z.type.tensor_type.shape.dim[1].dim_param = ""
    mp = model([helper.make_node("Identity", ["x"], ["y"])], inputs=(x, z), outputs=(vi("y", [-1, 3, "?", "?"]),))
    g = load_model(mp).graph
    types = {v.name: v.type for v in g.inputs}
    assert types["x"].shape == (sym("x:0"), 3, sym("x:2"), sym("x:3"))
    assert types["z"].shape == (sym("z:0"), sym("z:1"), sym("z:2"), sym("n"))
    assert not [w for w in recwarn if "not identifiers" in str(w.message)]  # no letters: nothing to warn of
    spaced = model([helper.make_node("Identity", ["x"], ["y"])], inputs=(vi("x", ["batch size", 2]),),
                   outputs=(vi("y", ["batch size", 2]),))
    with pytest.warns(UserWarning, match="'batch size' are not identifiers"):
        g = load_model(spaced).graph
    assert g.inputs[0].type.shape == (sym("x:0"), 2)


def test_sizes_written_as_arithmetic_of_names_are_unknown_dims_without_a_warning(recwarn):
    """torch.export names output sizes by expressions ('past_seq + seq' for a KV cache): each such dim is an
    unknown dim of its own, and no warning says the name looks like a shared variable."""
    mp = model([helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["x"], ["z"])],
               inputs=(vi("x", ["b", "past_seq + seq"]),),
               outputs=(vi("y", ["b", "past_seq + seq"]), vi("z", ["b", "2*s0 + 1"])))
    g = load_model(mp).graph
    assert g.inputs[0].type.shape == (sym("b"), sym("x:1"))
    assert not [w for w in recwarn if "not identifiers" in str(w.message)]


def test_initializers_listed_as_inputs_are_constants():
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    mp = model([helper.make_node("Add", ["x", "w"], ["y"])], inputs=("x", "w"), inits=[w])
    mp.ir_version = 3
    g = load_model(mp).graph
    assert [v.name for v in g.inputs] == ["x"]
    assert g.initializers["w"].is_const and g.initializers["w"].type == TensorType(DType.FLOAT, (2,))
    assert g.nodes[0].inputs[1] is g.initializers["w"] and g.initializers["w"].graph is g


def test_sparse_initializer_densified():
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([3.0], np.float32), "w"),
                                   numpy_helper.from_array(np.array([1], np.int64)), [2])
    mp = model([helper.make_node("Add", ["x", "w"], ["y"])])
    mp.graph.sparse_initializer.append(sp)
    np.testing.assert_array_equal(load_model(mp).graph.initializers["w"].const, [0, 3])


def test_empty_names_optional_inputs_and_fresh_outputs():
    mp = model([helper.make_node("Clip", ["x", "", "x"], ["y"]),
                helper.make_node("Dropout", ["y"], ["z", ""]), helper.make_node("Dropout", ["z"], ["w", ""])],
               outputs=("w",))
    g = load_model(mp).graph
    assert g.nodes[0].inputs[1] is None and g.nodes[0].inputs[0] is g.nodes[0].inputs[2] is g.inputs[0]
    fresh = [g.nodes[1].outputs[1].name, g.nodes[2].outputs[1].name]
    assert all(fresh) and len(set(fresh)) == 2 and not set(fresh) & {"x", "y", "z", "w"}


def test_unsorted_nodes_are_sorted_stably():
    mp = model([helper.make_node("Neg", ["a"], ["y"], name="last"), helper.make_node("Relu", ["x"], ["b"], name="r"),
                helper.make_node("Abs", ["b"], ["a"], name="mid"), helper.make_node("Exp", ["x"], ["c"], name="e")])
    g = load_model(mp).graph
    assert [n.name for n in g.nodes] == ["r", "mid", "last", "e"]
    assert g.outputs[0] is g.nodes[2].outputs[0] and g.nodes[1].inputs[0] is g.nodes[0].outputs[0]


@pytest.mark.parametrize("nodes, message", [
    ([helper.make_node("Relu", ["nope"], ["y"], name="r")], "Relu 'r' reads 'nope', which is not defined"),
    ([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
     "value 'y' is defined twice: by node Relu 'a' and by node Neg 'b'"),
    ([helper.make_node("Relu", ["x"], ["x"], name="a")], "value 'x' is defined twice: as a graph input"),
    ([helper.make_node("Add", ["x", "b"], ["a"], name="p"), helper.make_node("Neg", ["a"], ["b"], name="q"),
      helper.make_node("Relu", ["a"], ["y"])], "cycle .*Add 'p' -> node Neg 'q' -> node Add 'p'"),
    ([helper.make_node("Relu", ["x"], ["y"], domain="com.acme")], "domain 'com.acme', which the model does not"),
    ([helper.make_node("", ["x"], ["y"], name="n")], "has no op_type"),
    ([helper.make_node("Relu", ["x"], ["z"])], "graph output 'y' is not produced"),
])
def test_invalid_graphs(nodes, message):
    with pytest.raises(ModelError, match=message):
        load_model(model(nodes))


@pytest.mark.hostile
def test_malformed_inputs(tmp_path):
    with pytest.raises(ModelError, match="could not parse 6 bytes as an ONNX ModelProto"):
        load_model(b"\xff\x00garb")
    (tmp_path / "t.onnx").write_text("this is not a model")
    with pytest.raises(ModelError, match="could not parse .*t.onnx"):
        load_model(tmp_path / "t.onnx")
    with pytest.raises(ModelError, match="no graph"):
        load_model(numpy_helper.from_array(np.zeros(3)).SerializeToString()[:2])
    with pytest.raises(ModelError, match="missing.onnx.* does not exist"):
        load_model(str(tmp_path / "missing.onnx"))
    with pytest.raises(ModelError, match="cannot read"):
        load_model(tmp_path)
    with pytest.raises(TypeError):
        load_model(3.5)  # type: ignore[arg-type]


def _if(name: str, cond: str, then_nodes, else_nodes, then_out: str, else_out: str) -> onnx.NodeProto:
    branch = lambda nodes, out: helper.make_graph(nodes, f"{name}_{out}", [], [vi(out)])  # noqa: E731
    return helper.make_node("If", [cond], [f"{name}_out"], name=name,
                            then_branch=branch(then_nodes, then_out), else_branch=branch(else_nodes, else_out))


def test_subgraphs_resolve_outer_scope_lexically():
    inner = _if("inner", "c", [helper.make_node("Neg", ["x"], ["t2"])], [helper.make_node("Abs", ["t"], ["e2"])],
                "t2", "e2")
    outer = _if("outer", "c", [helper.make_node("Relu", ["x"], ["t"]), inner], [], "inner_out", "x")
    mp = model([helper.make_node("Cast", ["x"], ["c"], to=TensorProto.BOOL), outer,
                helper.make_node("Identity", ["outer_out"], ["y"])])
    g = load_model(mp).graph
    x, c = g.inputs[0], g.nodes[0].outputs[0]
    then_g, else_g = g.nodes[1].attr("then_branch"), g.nodes[1].attr("else_branch")
    assert then_g.parent is g and else_g.outputs == [x]  # an outer value returned directly
    relu, inner_node = then_g.nodes
    assert relu.inputs[0] is x and inner_node.inputs[0] is c and relu.graph is then_g
    inner_then, inner_else = inner_node.attr("then_branch"), inner_node.attr("else_branch")
    assert inner_then.parent is then_g and inner_then.nodes[0].inputs[0] is x
    assert inner_else.nodes[0].inputs[0] is relu.outputs[0]
    assert inner_then.nodes[0].version == 21


def test_subgraph_capture_orders_nodes_and_undefined_capture_fails():
    body = _if("i", "c", [helper.make_node("Neg", ["late"], ["t"])], [helper.make_node("Abs", ["x"], ["e"])], "t", "e")
    mp = model([body, helper.make_node("Cast", ["x"], ["c"], to=TensorProto.BOOL), helper.make_node("Relu", ["x"], ["late"]),
                helper.make_node("Identity", ["i_out"], ["y"])])
    g = load_model(mp).graph
    assert [n.op_type for n in g.nodes] == ["Cast", "Relu", "If", "Identity"]
    mp.graph.node[2].output[0] = "other"
    with pytest.raises(ModelError, match="Neg.* reads 'late', which is not defined"):
        load_model(mp)


def test_model_local_function_with_refs_defaults_and_subgraph():
    body = [helper.make_node("Constant", [], ["k"], value_float=1.0),
            helper.make_node("Add", ["a", "k"], ["s"]),
            helper.make_node("LeakyRelu", ["s"], ["r"]),
            _if("f_if", "flag", [helper.make_node("Mul", ["r", "s"], ["m"])], [helper.make_node("Neg", ["r"], ["n"])],
                "m", "n")]
    body[2].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    fn = helper.make_function("local", "Fn", ["a", "flag"], ["f_if_out"], body,
                              [helper.make_opsetid("", 20)], attributes=["unused"])
    fn.attribute_proto.append(helper.make_attribute("alpha", 0.25))
    fn.overload = "v2"
    call = helper.make_node("Fn", ["x", "c"], ["y"], domain="local", alpha=0.5, overload="v2")
    mp = model([helper.make_node("Cast", ["x"], ["c"], to=TensorProto.BOOL), call])
    mp.functions.append(fn)
    m = load_model(mp)  # "local" is not imported: a function domain is enough
    f = m.functions[("local", "Fn", "v2")]
    assert f.inputs == ["a", "flag"] and f.outputs == ["f_if_out"] and f.opset_imports == {"": 20}
    assert f.attributes == ["unused", "alpha"] and f.attribute_defaults["alpha"].value == 0.25
    leaky = f.nodes[2]
    assert leaky.attrs["alpha"].ref == "alpha" and leaky.attrs["alpha"].value is None
    assert (leaky.inputs, leaky.outputs, leaky.domain) == (["s"], ["r"], "")
    then_g = f.nodes[3].attrs["then_branch"].value
    captured = {v.name: v for v in then_g.parent.inputs}
    assert set(captured) == {"r", "s"}  # placeholders for the body values the branches read
    assert then_g.nodes[0].inputs == [captured["r"], captured["s"]]
    node = m.graph.nodes[1]
    assert (node.domain, node.overload, node.attr("alpha")) == ("local", "v2", 0.5)


def test_function_errors():
    fn = helper.make_function("local", "Fn", ["a"], ["b"], [helper.make_node("Relu", ["zz"], ["b"])],
                              [helper.make_opsetid("", 20)])
    mp = model([helper.make_node("Fn", ["x"], ["y"], domain="local")])
    mp.functions.extend([fn])
    with pytest.raises(ModelError, match="function local::Fn: node Relu .* reads 'zz'"):
        load_model(mp)
    mp.functions[0].node[0].input[0] = "a"
    mp.functions[0].node.append(helper.make_node("Neg", ["a"], ["b"], name="again"))
    with pytest.raises(ModelError, match="function local::Fn: value 'b' is defined twice.*Neg 'again'"):
        load_model(mp)


def test_attribute_kinds():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["z"])], "sub", [], [vi("z")])
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([2], np.int64), "v"),
                                   numpy_helper.from_array(np.array([0], np.int64)), [2])
    node = helper.make_node("Custom", ["x"], ["y"], domain="my", f=1.5, i=3, s="h\u00e9", t=numpy_helper.from_array(
        np.arange(3, dtype=np.int64)), g=g, fs=[1.0, 2.5], i_s=[1, 2], ss=["a", "b"],
        ts=[numpy_helper.from_array(np.zeros(1, np.float32))], gs=[g, g], sp=sp,
        tp=helper.make_tensor_type_proto(F, [2]), tps=[helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))])
    node.attribute.append(helper.make_attribute("bad", b"\xff"))
    attrs = load_model(model([node], opsets=(("", 21), ("my", 1)))).graph.nodes[0].attrs
    kinds = {k: a.kind for k, a in attrs.items()}
    assert kinds == {"f": "FLOAT", "i": "INT", "s": "STRING", "t": "TENSOR", "g": "GRAPH", "fs": "FLOATS",
                     "i_s": "INTS", "ss": "STRINGS", "ts": "TENSORS", "gs": "GRAPHS", "sp": "SPARSE_TENSOR",
                     "tp": "TYPE_PROTO", "tps": "TYPE_PROTOS", "bad": "STRING"}
    assert attrs["f"].value == 1.5 and attrs["i"].value == 3 and attrs["s"].value == "h\u00e9"
    assert attrs["bad"].value == b"\xff" and attrs["ss"].value == ["a", "b"] and attrs["fs"].value == [1.0, 2.5]
    np.testing.assert_array_equal(attrs["t"].value, [0, 1, 2])
    np.testing.assert_array_equal(attrs["sp"].value, [2, 0])
    assert attrs["g"].value.nodes[0].inputs[0].name == "x" and len(attrs["gs"].value) == 2
    assert attrs["tp"].value == TensorType(DType.FLOAT, (2,))
    assert attrs["tps"].value == [SequenceType(TensorType(DType.FLOAT, None))]


def _external_model(tmp_path, location: str = "weights.bin") -> tuple[onnx.ModelProto, np.ndarray]:
    w = np.arange(24, dtype=np.float32).reshape(2, 12)
    mp = model([helper.make_node("MatMul", ["x", "w"], ["y"])], inputs=(vi("x", [1, 2]),),
               inits=[numpy_helper.from_array(w, "w")])
    onnx.external_data_helper.convert_model_to_external_data(mp, location=location, size_threshold=0)
    onnx.save(mp, tmp_path / "m.onnx")
    return onnx.load(tmp_path / "m.onnx", load_external_data=False), w


def test_external_data(tmp_path):
    mp, w = _external_model(tmp_path)
    np.testing.assert_array_equal(load_model(tmp_path / "m.onnx").graph.initializers["w"].const, w)
    with pytest.raises(ModelError, match="external file 'weights.bin'.*base_dir"):
        load_model(mp.SerializeToString())
    np.testing.assert_array_equal(load_model(mp, base_dir=tmp_path).graph.initializers["w"].const, w)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ModelError, match="holds 10 bytes at offset 0, expected 96|past the end"):
        load_model(tmp_path / "m.onnx")
    os.remove(tmp_path / "weights.bin")
    with pytest.raises(ModelError, match="'weights.bin' not found"):
        load_model(tmp_path / "m.onnx")


@pytest.mark.parametrize("location, message", [
    ("../w.bin", "escapes the model's directory"),
    ("sub/../../w.bin", "escapes the model's directory"),
    ("/etc/passwd", "is an absolute path"),
    ("C:\\w.bin", "is an absolute path"),
    ("link/w.bin", "outside the model's directory"),
])
def test_external_data_paths_must_stay_inside_model_dir(tmp_path, location, message):
    inside = tmp_path / "model"
    inside.mkdir()
    mp, w = _external_model(inside)
    (tmp_path / "w.bin").write_bytes(w.tobytes())
    os.symlink(tmp_path, inside / "link")
    for e in mp.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = location
    onnx.save(mp, inside / "m.onnx")
    with pytest.raises(ModelError, match=f"initializer 'w': external data location .*{message}"):
        load_model(inside / "m.onnx")
