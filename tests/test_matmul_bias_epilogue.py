"""MatMul's ``onnxc_bias`` epilogue (codegen/kernels/epilogue.py) and its fusion (passes/fuse_epilogues.py):
``MatMul(A[..., K], B[K, N]) -> Add(bias [N] or [1, .., N])`` becomes one MatMul node with the bias as
input 3, followed by the usual residual / activation fusion. Each case checks the IR after the pipeline,
the kernel path that ran (blocked GEMM, GEMV, batched) and the numbers against onnx.reference or numpy,
with static and symbolic batch / sequence dims."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

RNG = np.random.default_rng(5)
F = TensorProto.FLOAT


def rand(*shape: int, dt=np.float32) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(dt)


def model(nodes: list, inputs: dict[str, list], consts: dict[str, np.ndarray], elem=F) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, elem, s) for n, s in inputs.items()],
                          [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                          initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def ops_after(m: onnx.ModelProto) -> list:
    return list(optimize(load_model(m), check=True).graph.nodes)


def the_matmul(nodes: list):
    (n,) = [n for n in nodes if n.op_type in ("MatMul", "Gemm")]
    return n


def check(m: onnx.ModelProto, feeds: dict[str, np.ndarray], path: str | None = None, threads: int = 1,
          rtol=1e-4, atol=1e-4) -> onnxc.CompiledModel:
    cm = onnxc.compile(m, threads=threads)
    if path is not None:
        assert path in cm.c_source
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    got = cm.run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return cm


def dense(bias_shape: tuple, act: str | None = None, residual: bool = False) -> list:
    """Nodes y = act(MatMul(a, w) + bias [+ r])."""
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Add", ["t", "bias"], ["u"])]
    last = "u"
    if residual:
        nodes.append(helper.make_node("Add", ["r", last], ["v"]))
        last = "v"
    if act:
        nodes.append(helper.make_node(act, [last], ["z"]))
        last = "z"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    return nodes


@pytest.mark.parametrize("a_shape,bias_shape", [
    ([2, 20, 16], (24,)), ([2, 20, 16], (1, 1, 24)), ([2, 3, 7, 16], (1, 24)), ([3, 1, 16], (24,)),
    ([1, 128, 16], (24,)),
])
def test_bias_fused_static(a_shape, bias_shape):
    m = model(dense(bias_shape), {"a": a_shape}, {"w": rand(16, 24), "bias": rand(*bias_shape)})
    nodes = ops_after(m)
    mm = the_matmul(nodes)
    assert mm.op_type == "MatMul" and mm.attr("onnxc_bias") == 1 and len(mm.inputs) == 4
    assert mm.input(2) is None and tuple(mm.input(3).shape) == (24,)
    assert not any(n.op_type == "Add" for n in nodes)
    path = "onnxc_gemv(" if np.prod(a_shape[:-1]) <= 8 else "onnxc_sgemm_ex("
    check(m, {"a": rand(*a_shape)}, path)


@pytest.mark.parametrize("act", [None, "Relu", "Tanh"])
def test_bias_residual_activation_symbolic(act):
    m = model(dense((1, 1, 24), act=act, residual=True), {"a": ["B", "S", 16], "r": ["B", "S", 24]},
              {"w": rand(16, 24), "bias": rand(1, 1, 24)})
    nodes = ops_after(m)
    mm = the_matmul(nodes)
    assert mm.attr("onnxc_bias") == 1 and mm.attr("onnxc_residual") == 1
    assert (mm.attr("onnxc_activation") or None) == act
    assert [n.op_type for n in nodes if n.op_type != "Identity"] == ["MatMul"]
    cm = onnxc.compile(m)
    ref = ReferenceEvaluator(m)
    for b, s in ((2, 13), (1, 1), (3, 40), (0, 5)):
        feeds = {"a": rand(b, s, 16), "r": rand(b, s, 24)}
        np.testing.assert_allclose(cm.run(feeds)["y"], ref.run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_gemv_rows_bias_residual():
    m = model(dense((24,), act="Relu", residual=True), {"a": [1, 3, 16], "r": [1, 3, 24]},
              {"w": rand(16, 24), "bias": rand(24)})
    mm = the_matmul(ops_after(m))
    assert mm.attr("onnxc_bias") == 1 and mm.attr("onnxc_residual") == 1
    check(m, {"a": rand(1, 3, 16), "r": rand(1, 3, 24)}, "onnxc_gemv(")


def test_bert_like_dense_two_threads():
    """A BERT dense layer ([1, 128, 256] x [256, 512]): large enough for the threaded blocked GEMM."""
    m = model(dense((512,), residual=True), {"a": [1, 128, 256], "r": [1, 128, 512]},
              {"w": rand(256, 512) * 0.1, "bias": rand(512)})
    assert the_matmul(ops_after(m)).attr("onnxc_bias") == 1
    feeds = {"a": rand(1, 128, 256), "r": rand(1, 128, 512)}
    check(m, feeds, "onnxc_sgemm_ex(", threads=2)
    check(m, feeds, "onnxc_sgemm_ex(", threads=1)


def test_bias_then_erf_gelu_fused():
    """FFN1 with an Erf GELU: the bias and the GELU (named by passes/name_activations.py) fuse into the
    MatMul."""
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Add", ["bias", "t"], ["f"]),
             helper.make_node("Div", ["f", "sq2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["f", "e1"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["y"])]
    consts = {"w": rand(16, 40), "bias": rand(40), "sq2": np.float32(np.sqrt(2.0)), "one": np.float32(1),
              "half": np.float32(0.5)}
    m = model(nodes, {"a": ["B", 9, 16]}, consts)
    ops = ops_after(m)
    mm = the_matmul(ops)
    assert mm.attr("onnxc_bias") == 1 and mm.attr("onnxc_activation") == "Gelu" and mm.outputs[0].name == "y"
    cm = onnxc.compile(m)
    feeds = {"a": rand(2, 9, 16)}
    np.testing.assert_allclose(cm.run(feeds)["y"], ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,op", [(21, "Gemm"), (9, "MatMul")])
def test_two_dim_a_is_left_to_gemm(opset, op):
    """A 2-D MatMul + bias becomes a Gemm with C (opset >= 11), or stays two nodes (opset < 11)."""
    m = model(dense((24,)), {"a": [5, 16]}, {"w": rand(16, 24), "bias": rand(24)})
    m.opset_import[0].version = opset
    nodes = ops_after(m)
    mm = the_matmul(nodes)
    assert mm.op_type == op and mm.attr("onnxc_bias") is None
    check(m, {"a": rand(5, 16)})


@pytest.mark.parametrize("case", ["bias_input", "row_bias", "scalar_bias", "batched_b", "bias_broadcasts_t"])
def test_not_fused(case):
    inputs: dict[str, list] = {"a": [2, 10, 16]}
    consts = {"w": rand(16, 24), "bias": rand(24)}
    if case == "bias_input":  # not a constant
        del consts["bias"]
        inputs["bias"] = [24]
    elif case == "row_bias":
        consts["bias"] = rand(10, 1)
    elif case == "scalar_bias":
        consts["bias"] = rand(1)
    elif case == "batched_b":
        consts["w"] = rand(2, 16, 24)
    elif case == "bias_broadcasts_t":  # the Add broadcasts the product's output itself
        consts["bias"] = rand(3, 1, 1, 24)
    m = model(dense((24,)), inputs, consts)
    nodes = ops_after(m)
    mm = the_matmul(nodes)
    assert mm.attr("onnxc_bias") is None and len(mm.inputs) == 2
    feeds = {"a": rand(2, 10, 16)} | ({"bias": rand(24)} if case == "bias_input" else {})
    check(m, feeds)


@pytest.mark.parametrize("elem,dt", [(TensorProto.INT32, np.int32), (TensorProto.DOUBLE, np.float64)])
def test_other_types_not_fused(elem, dt):
    m = model(dense((24,)), {"a": [2, 10, 16]}, {"w": rand(16, 24, dt=dt) if dt != np.int32 else
                                                 RNG.integers(-5, 5, (16, 24)).astype(dt),
                                                 "bias": np.arange(24).astype(dt)}, elem=elem)
    nodes = ops_after(m)
    assert the_matmul(nodes).attr("onnxc_bias") is None
    a = rand(2, 10, 16, dt=dt) if dt != np.int32 else RNG.integers(-5, 5, (2, 10, 16)).astype(dt)
    check(m, {"a": a})


def _handmade(b_shape: list, dtype=np.float32, residual: bool = False) -> onnx.ModelProto:
    """A MatMul node carrying the epilogue attributes directly (as the fusion pass writes them)."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ins = ["a", "w", "r" if residual else "", "bias"]
    attrs = {"onnxc_bias": 1} | ({"onnxc_residual": 1} if residual else {})
    node = helper.make_node("MatMul", ins, ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("a", elem, ["B", 6, 8]),
              helper.make_tensor_value_info("w", elem, b_shape)]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", elem, [b_shape[0] if len(b_shape) > 2 else "B", 6, 12]))
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)],
                          initializer=[numpy_helper.from_array(np.linspace(-1, 1, 12).astype(dtype), "bias")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("b_shape,dtype,residual", [
    ([8, 12], np.float32, False),      # plain (non-constant) B, blocked GEMM
    ([3, 8, 12], np.float32, True),    # batched B: the bias runs in the rows epilogue
    ([8, 12], np.float64, True),       # double: rows epilogue after the GEMM
])
def test_kernel_bias_paths(b_shape, dtype, residual):
    m = _handmade(b_shape, dtype, residual)
    cm = onnxc.compile(m)
    a, w = RNG.standard_normal((3, 6, 8)).astype(dtype), RNG.standard_normal(b_shape).astype(dtype)
    feeds = {"a": a, "w": w}
    want = np.matmul(a, w) + np.linspace(-1, 1, 12).astype(dtype)
    if residual:
        feeds["r"] = RNG.standard_normal((3, 6, 12)).astype(dtype)
        want = want + feeds["r"]
    np.testing.assert_allclose(cm.run(feeds)["y"], want, rtol=1e-5, atol=1e-5)


def test_kernel_rejects_bad_bias():
    m = _handmade([8, 12])
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros(5, np.float32), "bias"))
    with pytest.raises(onnxc.OnnxcError if hasattr(onnxc, "OnnxcError") else Exception, match="bias"):
        onnxc.compile(m)
