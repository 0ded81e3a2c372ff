"""Concat without copies (codegen/concat_inplace.py) and BN affine folding (passes/merge_bn_affine.py,
passes/spell_out_batchnorm.py): results against onnx.reference, and the intended path checked on the lowered Program."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _w(name: str, *shape: int, positive: bool = False) -> onnx.TensorProto:
    a = RNG.standard_normal(shape).astype(np.float32)
    return numpy_helper.from_array(np.abs(a) + 0.5 if positive else a, name)


def _bn(inits: list, nodes: list, x: str, y: str, c: int) -> None:
    names = [f"{y}_s", f"{y}_b", f"{y}_m", f"{y}_v"]
    inits += [_w(names[0], c), _w(names[1], c), _w(names[2], c), _w(names[3], c, positive=True)]
    nodes.append(helper.make_node("BatchNormalization", [x, *names], [y], epsilon=1e-5))


def _conv(inits: list, nodes: list, x: str, y: str, cin: int, cout: int) -> None:
    inits.append(_w(f"{y}_w", cout, cin, 1, 1))
    nodes.append(helper.make_node("Conv", [x, f"{y}_w"], [y]))


def _model(nodes, inits, x_shape, outs, out_names=None) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", F, x_shape)],
                          [helper.make_tensor_value_info(o, F, None) for o in (out_names or outs)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check(model: onnx.ModelProto, x: np.ndarray) -> onnxc.CompiledModel:
    want = ReferenceEvaluator(model).run(None, {"x": x})
    cm = onnxc.compile(model)
    got = cm.run({"x": x})
    for o, w in zip(model.graph.output, want):
        np.testing.assert_allclose(got[o.name], w, rtol=1e-4, atol=1e-4)
    return cm


def _concat_steps(cm) -> int:
    return sum(1 for st in cm.program.steps if st.node.startswith("Concat"))


def _slices(cm) -> int:
    return sum(1 for b in cm.program.buffers.values() if b.kind == "slice")


def _densenet(layers: int, x_shape) -> onnx.ModelProto:
    """Dense block: each layer BN-Mul-Add-Relu-Conv on the running concat, concatenated to it."""
    nodes, inits = [], []
    cur, c, g = "x", 4, 3
    for i in range(layers):
        _bn(inits, nodes, cur, f"bn{i}", c)
        inits += [_w(f"sc{i}", c, 1, 1), _w(f"sh{i}", c, 1, 1)]
        nodes += [helper.make_node("Mul", [f"bn{i}", f"sc{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"sh{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"])]
        _conv(inits, nodes, f"r{i}", f"c{i}", c, g)
        nodes.append(helper.make_node("Concat", [cur, f"c{i}"], [f"cat{i}"], axis=1))
        cur, c = f"cat{i}", c + g
    nodes.append(helper.make_node("Relu", [cur], ["y"]))
    return _model(nodes, inits, x_shape, ["y"])


def test_densenet_chain_in_place():
    model = _densenet(4, [1, 4, 6, 5])
    cm = _check(model, RNG.standard_normal((1, 4, 6, 5)).astype(np.float32))
    # the first Concat input is the graph input: that Concat copies; the three nested ones do not
    assert _concat_steps(cm) == 1
    assert _slices(cm) >= 5
    assert not any(st.node.startswith("BatchNormalization") for st in cm.program.steps)


def test_densenet_symbolic_batch_copies():
    """Batch N: the slices are not contiguous blocks, every Concat copies."""
    model = _densenet(3, ["N", 4, 6, 5])
    for n in (1, 2):
        cm = _check(model, RNG.standard_normal((n, 4, 6, 5)).astype(np.float32))
    assert _concat_steps(cm) == 3 and _slices(cm) == 0


def _branches(x_shape, axis: int = 1, extra_out: str | None = None, read_twice: bool = False):
    nodes, inits = [], []
    for i, c in enumerate((3, 5, 2)):
        _conv(inits, nodes, "x", f"b{i}", 4, c)
    nodes.append(helper.make_node("MaxPool", ["x"], ["b3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Concat", ["b0", "b1", "b2", "b3"], ["cat"], axis=axis))
    nodes.append(helper.make_node("Relu", ["cat"], ["y"]))
    outs = ["y"]
    if read_twice:
        nodes.append(helper.make_node("Sigmoid", ["b1"], ["s"]))
        outs.append("s")
    if extra_out:
        outs.append(extra_out)
    return _model(nodes, inits, x_shape, outs)


def test_inception_four_branches_in_place():
    cm = _check(_branches([1, 4, 7, 6]), RNG.standard_normal((1, 4, 7, 6)).astype(np.float32))
    assert _concat_steps(cm) == 0 and _slices(cm) == 4
    assert "/* Concat" not in cm.c_source


def test_input_read_by_another_node():
    cm = _check(_branches([1, 4, 7, 6], read_twice=True), RNG.standard_normal((1, 4, 7, 6)).astype(np.float32))
    assert _concat_steps(cm) == 0


def test_input_is_graph_output_copies():
    cm = _check(_branches([1, 4, 7, 6], extra_out="b2"), RNG.standard_normal((1, 4, 7, 6)).astype(np.float32))
    assert _concat_steps(cm) == 1 and _slices(cm) == 0


def test_axis_1_batch_2_copies():
    cm = _check(_branches([2, 4, 7, 6]), RNG.standard_normal((2, 4, 7, 6)).astype(np.float32))
    assert _concat_steps(cm) == 1 and _slices(cm) == 0


def test_axis_0_in_place_and_negative_axis():
    cm = _check(_branches([1, 4, 7, 6], axis=-3), RNG.standard_normal((1, 4, 7, 6)).astype(np.float32))
    assert _concat_steps(cm) == 0
    nodes, inits = [], []
    _conv(inits, nodes, "x", "p", 4, 4)
    nodes += [helper.make_node("Relu", ["x"], ["q"]),
              helper.make_node("Concat", ["p", "q"], ["cat"], axis=0),
              helper.make_node("Neg", ["cat"], ["y"])]
    model = _model(nodes, inits, [1, 4, 5, 5], ["y"])
    cm = _check(model, RNG.standard_normal((1, 4, 5, 5)).astype(np.float32))
    assert _concat_steps(cm) == 0


def test_symbolic_spatial_in_place():
    """Symbolic H, W at batch 1: offsets are C expressions."""
    model = _branches([1, 4, "H", "W"])
    for hw in ((7, 6), (3, 9)):
        cm = _check(model, RNG.standard_normal((1, 4, *hw)).astype(np.float32))
    assert _concat_steps(cm) == 0 and _slices(cm) == 4


def test_nested_concat_and_duplicate_input():
    nodes, inits = [], []
    _conv(inits, nodes, "x", "p", 4, 2)
    _conv(inits, nodes, "x", "q", 4, 3)
    nodes += [helper.make_node("Concat", ["p", "q"], ["inner"], axis=1),
              helper.make_node("Sigmoid", ["x"], ["s"]),
              helper.make_node("Concat", ["s", "inner"], ["outer"], axis=1),
              helper.make_node("Concat", ["outer", "outer"], ["twice"], axis=1),
              helper.make_node("Relu", ["twice"], ["y"])]
    cm = _check(_model(nodes, inits, [1, 4, 3, 3], ["y"]), RNG.standard_normal((1, 4, 3, 3)).astype(np.float32))
    assert _concat_steps(cm) == 1  # the Concat reading one value twice copies


@pytest.mark.parametrize("shape", [[1, 4, 6, 5], [2, 4, 3], ["N", 4, 5]])
def test_bn_mul_add_relu_one_pass(shape):
    nodes, inits = [], []
    _bn(inits, nodes, "x", "bn", 4)
    k = len(shape) - 2
    inits += [_w("sc", 4, *([1] * k)), _w("sh", 1, 4, *([1] * k))]
    nodes += [helper.make_node("Mul", ["sc", "bn"], ["m"]),
              helper.make_node("Add", ["m", "sh"], ["a"]),
              helper.make_node("Relu", ["a"], ["y"])]
    model = _model(nodes, inits, shape, ["y"])
    concrete = [2 if isinstance(d, str) else d for d in shape]
    cm = _check(model, RNG.standard_normal(concrete).astype(np.float32))
    assert len(cm.program.steps) == 1


def test_conv_bn_mul_add_folds_into_conv():
    nodes, inits = [], []
    _conv(inits, nodes, "x", "c", 3, 4)
    _bn(inits, nodes, "c", "bn", 4)
    inits += [_w("sc", 4, 1, 1), _w("sh", 4, 1, 1)]
    nodes += [helper.make_node("Mul", ["bn", "sc"], ["m"]),
              helper.make_node("Add", ["m", "sh"], ["y"])]
    cm = _check(_model(nodes, inits, [1, 3, 5, 5], ["y"]), RNG.standard_normal((1, 3, 5, 5)).astype(np.float32))
    assert [st.node.split()[0] for st in cm.program.steps] == ["Conv"]


def test_bn_mul_not_per_channel_stays():
    """A Mul whose constant varies along W is not a per-channel affine map: kept as it is."""
    nodes, inits = [], []
    _bn(inits, nodes, "x", "bn", 4)
    inits.append(_w("sc", 5))
    nodes.append(helper.make_node("Mul", ["bn", "sc"], ["y"]))
    _check(_model(nodes, inits, [1, 4, 3, 5], ["y"]), RNG.standard_normal((1, 4, 3, 5)).astype(np.float32))
