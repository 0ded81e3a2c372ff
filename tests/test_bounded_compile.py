"""Compile time and memory stay bounded on hostile models (issue #15, "Denial of service").

- a chain of 2,000 elementwise nodes compiles and runs (the fusion pass used to recurse once per node);
- functions that call the previous one twice: 8 levels (256 leaf calls) compile and run, 16 levels
  (65,536 leaf nodes) are refused at once with a ModelError naming the function, and so is a function
  that calls itself;
- a Reshape whose shape input is declared with 2^31 elements is refused at once (it used to create
  one run-time dimension per element);
- constants too large to materialize (ConstantOfShape, Expand, Range, Tile of constants) are left to
  run time instead of being folded.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.ir import ModelError, ShapeError
from onnxc.passes.fuse_elementwise import MAX_DEPTH
from onnxc.passes.shapes.fused import Op

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)


def _depth(e) -> int:
    """Levels of ops in an expression tree."""
    depth, stack = 0, [(e, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, Op):
            depth = max(depth, d)
            stack.extend((a, d + 1) for a in x.args)
    return depth


# -- long chains ----------------------------------------------------------------------------------

CHAIN_OPS = ["Add", "Mul", "Relu", "Sub", "Abs", "Neg"]
NUMPY = {"Add": lambda a: a + np.float32(0.25), "Mul": lambda a: a * np.float32(0.25),
         "Sub": lambda a: a - np.float32(0.25), "Relu": lambda a: np.maximum(a, np.float32(0)),
         "Abs": np.abs, "Neg": np.negative}


def test_long_elementwise_chain_compiles_and_runs() -> None:
    """2,000 elementwise nodes (onnxruntime runs 1,000): fused into bounded trees, results as numpy's."""
    nodes, prev = [], "x"
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    want = x.copy()
    for i in range(2000):
        op = CHAIN_OPS[i % len(CHAIN_OPS)]
        nodes.append(helper.make_node(op, [prev, "c"] if op in ("Add", "Mul", "Sub") else [prev], [f"t{i}"]))
        prev = f"t{i}"
        want = NUMPY[op](want)
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    m = _model(nodes, [helper.make_tensor_value_info("x", FLOAT, ["N", 4])],
               [helper.make_tensor_value_info("y", FLOAT, ["N", 4])],
               [numpy_helper.from_array(np.array(0.25, np.float32), "c")])
    cm = onnxc.compile(m)
    np.testing.assert_allclose(cm(x), want, rtol=1e-5, atol=1e-6)
    chains = [nd for nd in cm.ir.graph.nodes if nd.op_type == "ElementwiseChain"]
    assert len(chains) >= 2000 // MAX_DEPTH
    assert all(_depth(nd.attr("expr")) <= MAX_DEPTH for nd in chains)


def test_long_chain_with_shared_reads_compiles_and_runs() -> None:
    """Each step reads the previous value twice (Add(t, t) then Mul): shared subtrees, 1,000 steps."""
    nodes, prev = [], "x"
    for i in range(500):
        nodes += [helper.make_node("Add", [prev, prev], [f"a{i}"]), helper.make_node("Mul", [f"a{i}", "h"], [f"t{i}"])]
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    h = numpy_helper.from_array(np.array(0.5, np.float32), "h")
    m = _model(nodes, [helper.make_tensor_value_info("x", FLOAT, [5])], [helper.make_tensor_value_info("y", FLOAT, [5])], [h])
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(onnxc.compile(m)(x), x)  # (t + t) * 0.5 == t exactly


# -- nested model-local functions ------------------------------------------------------------------

def _doubling_functions(levels: int):
    """f0(x) = x + 1; f_k(x) = f_{k-1}(f_{k-1}(x)): f_levels adds 2^levels."""
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    fns = [helper.make_function("local", "f0", ["x"], ["y"], [
        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
        helper.make_node("Add", ["x", "one"], ["y"])], ops)]
    for k in range(1, levels + 1):
        fns.append(helper.make_function("local", f"f{k}", ["x"], ["y"], [
            helper.make_node(f"f{k - 1}", ["x"], ["t"], domain="local"),
            helper.make_node(f"f{k - 1}", ["t"], ["y"], domain="local")], ops))
    g = helper.make_graph([helper.make_node(f"f{levels}", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", FLOAT, [3])],
                          [helper.make_tensor_value_info("y", FLOAT, [3])])
    return helper.make_model(g, opset_imports=ops, functions=fns)


def test_functions_nested_8_levels_compile_and_run() -> None:
    x = np.array([0.0, 1.0, -2.0], np.float32)
    np.testing.assert_array_equal(onnxc.compile(_doubling_functions(8))(x), x + 256)


def test_functions_nested_16_levels_are_refused_quickly() -> None:
    """2^16 calls of f0 (2 nodes each): refused before inlining anything."""
    t = time.perf_counter()
    with pytest.raises(ModelError, match=r"function local::f16 expands to 131,072 nodes \(17 levels"):
        onnxc.compile(_doubling_functions(16))
    assert time.perf_counter() - t < 10


def test_functions_nested_deeper_than_the_limit_are_refused() -> None:
    """f_k calls f_{k-1} once: small, but MAX_DEPTH + 1 levels deep."""
    from onnxc.passes.inline_functions import MAX_DEPTH

    ops = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    fns = [helper.make_function("local", "g0", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])], ops)]
    fns += [helper.make_function("local", f"g{k}", ["x"], ["y"], [helper.make_node(f"g{k - 1}", ["x"], ["y"], domain="local")], ops)
            for k in range(1, MAX_DEPTH + 1)]
    g = helper.make_graph([helper.make_node(f"g{MAX_DEPTH}", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", FLOAT, [3])], [helper.make_tensor_value_info("y", FLOAT, [3])])
    with pytest.raises(ModelError, match=rf"function local::g{MAX_DEPTH} nests calls .* {MAX_DEPTH + 1} deep"):
        onnxc.compile(helper.make_model(g, opset_imports=ops, functions=fns))


def test_recursive_function_is_refused() -> None:
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    f = helper.make_function("local", "loop", ["x"], ["y"], [helper.make_node("loop", ["x"], ["y"], domain="local")], ops)
    g = helper.make_graph([helper.make_node("loop", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", FLOAT, [3])], [helper.make_tensor_value_info("y", FLOAT, [3])])
    with pytest.raises(ModelError, match=r"local::loop.*calls itself"):
        onnxc.compile(helper.make_model(g, opset_imports=ops, functions=[f]))


# -- shape inputs declared with huge lengths --------------------------------------------------------

@pytest.mark.parametrize("op,extra", [("Reshape", []), ("Expand", []), ("ConstantOfShape", None)])
def test_shape_input_with_2_31_elements_is_refused_quickly(op: str, extra) -> None:
    ins = ["s"] if extra is None else ["x", "s"]
    g_ins = [helper.make_tensor_value_info("s", INT64, [2**31])]
    if extra is not None:
        g_ins.insert(0, helper.make_tensor_value_info("x", FLOAT, [2, 3]))
    m = _model([helper.make_node(op, ins, ["y"])], g_ins, [helper.make_tensor_value_info("y", FLOAT, None)])
    t = time.perf_counter()
    with pytest.raises(ShapeError, match=r"2147483648.*rank.*16"):
        onnxc.compile(m)
    assert time.perf_counter() - t < 10


def test_reshape_to_a_run_time_shape_still_works() -> None:
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])],
               [helper.make_tensor_value_info("x", FLOAT, [2, 3]), helper.make_tensor_value_info("s", INT64, [3])],
               [helper.make_tensor_value_info("y", FLOAT, None)])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = onnxc.compile(m)(x, np.array([3, 1, 2], np.int64))
    np.testing.assert_array_equal(got, x.reshape(3, 1, 2))


# -- compile-time materialization of large constants ------------------------------------------------

def _const(name: str, a) -> TensorProto:
    return numpy_helper.from_array(np.asarray(a), name)


BIG_CONSTANTS = {
    # ConstantOfShape of a constant shape: 2^40 floats (4 TiB)
    "ConstantOfShape": ([helper.make_node("ConstantOfShape", ["s"], ["y"],
                                          value=numpy_helper.from_array(np.array([1.0], np.float32)))],
                        [_const("s", np.array([2**20, 2**20], np.int64))]),
    "Expand": ([helper.make_node("Expand", ["c", "s"], ["y"])],
               [_const("c", np.ones(1, np.float32)), _const("s", np.array([2**20, 2**20], np.int64))]),
    "Range": ([helper.make_node("Range", ["a", "b", "d"], ["y"])],
              [_const("a", np.array(0, np.int64)), _const("b", np.array(2**40, np.int64)), _const("d", np.array(1, np.int64))]),
    "Tile": ([helper.make_node("Tile", ["c", "r"], ["y"])],
             [_const("c", np.ones((2, 2), np.float32)), _const("r", np.array([2**20, 2**20], np.int64))]),
}


@pytest.mark.parametrize("op", sorted(BIG_CONSTANTS))
def test_large_constants_are_not_materialized(op: str) -> None:
    nodes, inits = BIG_CONSTANTS[op]
    m = _model(nodes, [], [helper.make_tensor_value_info("y", FLOAT if op != "Range" else INT64, None)], inits)
    cm = onnxc.compile(m)  # compiles: the node stays a kernel, nothing of that size is allocated now
    assert [n.op_type for n in cm.ir.graph.nodes] == [op]
    assert not cm.ir.graph.outputs[0].is_const


def test_small_constants_are_still_folded() -> None:
    nodes, inits = [helper.make_node("Tile", ["c", "r"], ["y"])], [_const("c", np.ones((2, 2), np.float32)),
                                                                   _const("r", np.array([3, 2], np.int64))]
    m = _model(nodes, [], [helper.make_tensor_value_info("y", FLOAT, None)], inits)
    cm = onnxc.compile(m)
    assert cm.ir.graph.outputs[0].is_const
    np.testing.assert_array_equal(cm.run({})["y"], np.ones((6, 4), np.float32))
