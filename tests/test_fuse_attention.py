"""passes/fuse_attention.py and its kernel (codegen/kernels/attention.py): random attention graphs as
exporters write them, compared with onnx.reference, with checks that the fused node ran (or did not)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

F32 = TensorProto.FLOAT


def _ops(model: onnx.ModelProto) -> list[str]:
    """Op types of the optimized IR."""
    return [n.op_type for n in optimize(load_model(model)).graph.nodes]


def _attention_model(*, b: int = 2, h: int = 3, lq: int = 5, lk: int = 7, d: int = 4, dv: int = 6,
                     scale: str | None = "div", mask: str | None = "bcast", split_heads: bool = True,
                     merge_heads: bool = True, seq_sym: bool = False, opset: int = 17,
                     k_style: str = "direct") -> onnx.ModelProto:
    """A multi-head attention graph: inputs q [b, lq, h*d], k [b, lk, h*d], v [b, lk, h*dv] (split into
    heads by Reshape + Transpose) or q/k/v already [b, h, l, d]; optional scale and additive mask."""
    nodes, inits = [], []
    seq_q, seq_k = ("S", "S") if seq_sym else (lq, lk)

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(helper.make_tensor(name, F32 if arr.dtype == np.float32 else TensorProto.INT64, arr.shape,
                                        arr.reshape(-1).tolist()))
        return name

    if split_heads:
        ins = [helper.make_tensor_value_info("q", F32, [b, seq_q, h * d]),
               helper.make_tensor_value_info("k", F32, [b, seq_k, h * d]),
               helper.make_tensor_value_info("v", F32, [b, seq_k, h * dv])]
        const("shp_d", np.array([0, 0, h, d], np.int64))
        const("shp_dv", np.array([0, 0, h, dv], np.int64))
        nodes += [helper.make_node("Reshape", ["q", "shp_d"], ["q4"]),
                  helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["k", "shp_d"], ["k4"]),
                  helper.make_node("Reshape", ["v", "shp_dv"], ["v4"]),
                  helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3])]
        if k_style == "direct":  # BERT: one transpose to [b, h, d, lk]
            nodes.append(helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]))
        else:  # two transposes: to heads, then swap the matrix axes
            nodes += [helper.make_node("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
                      helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        ins = [helper.make_tensor_value_info("qh", F32, [b, h, seq_q, d]),
               helper.make_tensor_value_info("kt", F32, [b, h, d, seq_k]),
               helper.make_tensor_value_info("vh", F32, [b, h, seq_k, dv])]
    nodes.append(helper.make_node("MatMul", ["qh", "kt"], ["s0"]))
    s = "s0"
    if scale == "div":
        nodes.append(helper.make_node("Div", [s, const("c", np.array(math.sqrt(d), np.float32))], ["s1"]))
        s = "s1"
    elif scale == "mul":
        nodes.append(helper.make_node("Mul", [const("c", np.array(1 / math.sqrt(d), np.float32)), s], ["s1"]))
        s = "s1"
    elif scale == "div3":  # not a power of two: the kernel divides
        nodes.append(helper.make_node("Div", [s, const("c", np.array(3.0, np.float32))], ["s1"]))
        s = "s1"
    if mask is not None:
        shape = {"bcast": [b, 1, 1, seq_k], "full": [b, h, seq_q, seq_k], "rows": [seq_q, seq_k]}[mask]
        ins.append(helper.make_tensor_value_info("mask", F32, shape))
        nodes.append(helper.make_node("Add", ["mask", s] if mask == "rows" else [s, "mask"], ["s2"]))
        s = "s2"
    nodes.append(helper.make_node("Softmax", [s], ["p"], axis=-1 if opset >= 13 else 3))
    nodes.append(helper.make_node("MatMul", ["p", "vh"], ["o"]))
    if merge_heads:
        const("shp_m", np.array([0, 0, h * dv], np.int64))
        nodes += [helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["ot", "shp_m"], ["y"])]
        out = helper.make_tensor_value_info("y", F32, [b, seq_q, h * dv])
    else:
        nodes.append(helper.make_node("Identity", ["o"], ["y"]))
        out = helper.make_tensor_value_info("y", F32, [b, h, seq_q, dv])
    graph = helper.make_graph(nodes, "attention", ins, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _feeds(model: onnx.ModelProto, rng: np.random.Generator, dims: dict[str, int]) -> dict[str, np.ndarray]:
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in vi.type.tensor_type.shape.dim]
        if vi.name == "mask":  # 0 or -10000 (masked keys), as BERT writes it
            feeds[vi.name] = np.where(rng.random(shape) < 0.3, np.float32(-10000), np.float32(0)).astype(np.float32)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _check(model: onnx.ModelProto, fused: bool = True, threads: int = 2, dims: dict[str, int] | None = None,
           seed: int = 0) -> None:
    ops = _ops(model)
    assert ("FusedAttention" in ops) == fused, ops
    if fused:
        assert "Softmax" not in ops and "Transpose" not in ops, ops
    feeds = _feeds(model, np.random.default_rng(seed), dims or {})
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = onnxc.compile(model, threads=threads).run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", ["div", "mul", "div3", None])
@pytest.mark.parametrize("mask", ["bcast", "full", "rows", None])
def test_bert_pattern(scale: str | None, mask: str | None) -> None:
    _check(_attention_model(scale=scale, mask=mask))


@pytest.mark.parametrize("h,lq,lk,d,dv", [(1, 1, 1, 1, 1), (12, 9, 33, 8, 16), (2, 70, 130, 24, 20)])
@pytest.mark.parametrize("threads", [1, 2])
def test_head_counts_and_sizes(h: int, lq: int, lk: int, d: int, dv: int, threads: int) -> None:
    _check(_attention_model(b=1, h=h, lq=lq, lk=lk, d=d, dv=dv), threads=threads)


def test_long_keys_use_row_blocks() -> None:
    """Lk = 1500: the scratch holds 48 rows at a time, so the query rows run in several blocks."""
    _check(_attention_model(b=1, h=1, lq=100, lk=1500, d=8, dv=8), threads=1)


@pytest.mark.parametrize("seq", [1, 17, 64])
def test_symbolic_sequence(seq: int) -> None:
    _check(_attention_model(seq_sym=True, lq=seq, lk=seq), dims={"S": seq})


def test_two_transposes_on_k_and_old_softmax() -> None:
    _check(_attention_model(k_style="two"))
    _check(_attention_model(opset=11))


def test_heads_given_without_transposes() -> None:
    _check(_attention_model(split_heads=False, merge_heads=False))


def test_masked_rows_are_exact_and_fully_masked_rows_finite() -> None:
    """Every key masked with -10000 leaves the softmax uniform over the keys, as in the reference."""
    model = _attention_model(b=1, h=2, lq=4, lk=6, mask="bcast")
    feeds = _feeds(model, np.random.default_rng(3), {})
    feeds["mask"][:] = -10000
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = onnxc.compile(model, threads=1).run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_no_fusion_when_scores_are_read_twice() -> None:
    model = _attention_model()
    model.graph.output.append(helper.make_tensor_value_info("p", F32, None))
    ops = _ops(model)
    assert "FusedAttention" not in ops and "Softmax" in ops


def test_no_fusion_when_softmax_not_on_last_axis() -> None:
    model = _attention_model()
    for n in model.graph.node:
        if n.op_type == "Softmax":
            n.attribute[0].i = 2
    _check(model, fused=False)


def test_no_fusion_for_a_runtime_scale() -> None:
    model = _attention_model(scale="div")
    model.graph.initializer.pop(next(i for i, t in enumerate(model.graph.initializer) if t.name == "c"))
    model.graph.input.append(helper.make_tensor_value_info("c", F32, []))
    ops = _ops(model)
    assert "FusedAttention" not in ops and "Softmax" in ops


def test_no_fusion_for_double() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3, 4])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "x"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    assert "FusedAttention" not in _ops(model)


def test_no_fusion_when_pv_broadcasts() -> None:
    """V without the head axis (MatMul broadcasting) is left to the MatMul kernel."""
    q = helper.make_tensor_value_info("q", F32, [2, 3, 4, 5])
    kt = helper.make_tensor_value_info("kt", F32, [2, 3, 5, 6])
    v = helper.make_tensor_value_info("v", F32, [6, 7])
    y = helper.make_tensor_value_info("y", F32, [2, 3, 4, 7])
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [q, kt, v], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    _check(model, fused=False)


def test_output_transpose_moving_last_axis_stays() -> None:
    """An output transpose that moves the last axis is not absorbed (the kernel writes rows)."""
    model = _attention_model(merge_heads=False)
    for n in model.graph.node:
        if n.op_type == "Identity":
            n.op_type = "Transpose"
            n.attribute.append(helper.make_attribute("perm", [0, 1, 3, 2]))
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 6
    model.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 5
    ops = _ops(model)
    assert "FusedAttention" in ops and ops.count("Transpose") == 1
    feeds = _feeds(model, np.random.default_rng(1), {})
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(onnxc.compile(model, threads=1).run(feeds)["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seq_sym", [False, True])
def test_items_run_on_the_pool(seq_sym: bool) -> None:
    """Threads take (batch, row block) items on the runtime's pool (no OpenMP region), each with its own
    score block: the output equals the one-thread build bit for bit, also with few items (NB < threads,
    rows split) and a symbolic sequence."""
    for b, h in ((2, 4), (1, 1)):
        model = _attention_model(b=b, h=h, lq=96, lk=96, d=16, dv=16, seq_sym=seq_sym)
        feeds = _feeds(model, np.random.default_rng(1), {"S": 96})
        two, one = onnxc.compile(model, threads=2), onnxc.compile(model, threads=1)
        assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
        got = two.run(feeds)["y"]
        np.testing.assert_array_equal(got, one.run(feeds)["y"])
        np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-6)
