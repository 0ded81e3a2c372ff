"""Compile once, run at any shape: exporter-style models with dynamic dims against onnxruntime.

Each model compiles once; the test then forbids compiling (``ONNXC_FAIL_ON_COMPILE``) and runs it at
several shapes, so one library serves them all. The IR after the passes must hold no shape
computation: the Shape -> Gather -> Unsqueeze -> Concat chains fold into static-in-symbols shapes.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest

import onnxc
from onnxc.codegen import cache
from onnxc.frontend import load_model
from onnxc.ir import InputError, free_symbols, sym
from onnxc.passes import pipeline

from . import builders

CNN_SHAPES = [(1, 3, 16, 16), (2, 3, 20, 24), (3, 3, 33, 17), (1, 3, 7, 9)]
ENCODER_SHAPES = [(1, 5), (2, 8), (3, 13), (1, 1), (2, 64)]


def _ort(model, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _compare(model, compiled, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    want = _ort(model, feeds)
    got = compiled.run(feeds)
    assert list(got) == [o.name for o in model.graph.output]
    for w, (name, g) in zip(want, got.items()):
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)


def _image(shape: tuple) -> dict:
    return {"input": np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)}


def _tokens(batch: int, seq: int) -> dict:
    rng = np.random.default_rng(batch * 100 + seq)
    mask = np.ones((batch, seq), np.int64)
    mask[0, seq - seq // 3:] = 0  # padding at the end of the first sequence
    return {"input_ids": rng.integers(0, builders.VOCAB, (batch, seq)).astype(np.int64), "attention_mask": mask}


@pytest.fixture(scope="module")
def cnn():
    model = builders.cnn()
    return model, onnxc.compile(model)


@pytest.fixture(scope="module")
def encoder():
    model = builders.transformer()
    return model, onnxc.compile(model)


def _no_compiles(monkeypatch, model, feeds_list, compiled) -> None:
    """Run at every shape with compiling forbidden, then compile the model again: a cache hit."""
    misses = cache.stats["misses"]
    monkeypatch.setenv("ONNXC_FAIL_ON_COMPILE", "1")
    for feeds in feeds_list:
        _compare(model, compiled, feeds)
    again = onnxc.compile(model)  # same C source for the same model: no shape was baked in
    assert again.c_source == compiled.c_source
    assert cache.stats["misses"] == misses


def test_cnn_compiles_once_and_runs_at_every_shape(cnn, monkeypatch):
    model, compiled = cnn
    assert [i.shape for i in compiled.inputs] == [("N", 3, "H", "W")]
    assert [o.shape for o in compiled.outputs] == [("N", 10)]
    _no_compiles(monkeypatch, model, [_image(s) for s in CNN_SHAPES], compiled)


def test_encoder_compiles_once_and_runs_at_every_shape(encoder, monkeypatch):
    model, compiled = encoder
    assert [i.shape for i in compiled.inputs] == [("batch", "seq"), ("batch", "seq")]
    assert [o.shape for o in compiled.outputs] == [("batch", "seq", builders.HIDDEN), ("batch", builders.HIDDEN)]
    _no_compiles(monkeypatch, model, [_tokens(b, s) for b, s in ENCODER_SHAPES], compiled)


@pytest.mark.parametrize("dims", [("p2o.DynamicDimension.0", "unk__3", "?"), (None, None, None)])
def test_cnn_with_other_exporters_dim_names_and_unnamed_dims(dims):
    """Names that are not C identifiers and dims with neither a name nor a value: each an unknown dim of its own,
    a fresh variable named after the input and axis (frontend/types.py)."""
    model = builders.cnn(dims=dims)
    compiled = onnxc.compile(model)
    (shape,) = [i.shape for i in compiled.inputs]
    assert shape[1] == 3 and all(isinstance(d, str) for d in (shape[0], shape[2], shape[3]))
    assert len(set(shape)) == 4 and compiled.outputs[0].shape == (shape[0], 10)
    assert shape == ("input:0", 3, "input:2", "input:3")
    for s in CNN_SHAPES[:2]:
        _compare(model, compiled, _image(s))


# -- the IR after passes: shape subgraphs folded ------------------------------------------------------

SHAPE_READERS = {("Expand", 1), ("Slice", 1), ("Slice", 2), ("Range", 1)}  # may read an onnxc::SymValue


def _check_no_shape_computation(g) -> None:
    for n in g.nodes:
        assert n.op_type not in ("Shape", "Size"), n.describe()
        if n.domain == "onnxc" and n.op_type in ("ElementwiseChain", "FusedAttention"):  # fused float math
            assert all(o.type.dtype.is_float for o in n.outputs), n.describe()
            continue
        if n.domain == "onnxc":
            assert n.op_type == "SymValue"
            # run-time materialization of symbolic dims, read only where a data op needs the values
            for reader, i in n.outputs[0].uses():
                assert (reader.op_type, i) in SHAPE_READERS, f"{n.describe()} feeds {reader.describe()}"
            continue
        # Gather/Concat/Unsqueeze/Range/... on shape tensors: their outputs would carry symbolic values
        assert all(o.sym_value is None for o in n.outputs), f"shape computation left: {n.describe()}"
        if n.op_type == "Reshape":
            assert n.inputs[1].const is not None, f"{n.describe()} reads a run-time shape"


def test_cnn_shape_subgraphs_fold_away(cnn):
    _, compiled = cnn
    g = compiled.ir.graph
    _check_no_shape_computation(g)
    reshapes = [n.outputs[0].type.shape for n in g.nodes if n.op_type == "Reshape"]
    assert reshapes[0] == (sym("N"), 16)
    assert reshapes[1][:2] == (sym("N"), 16) and free_symbols(reshapes[1][2]) == {"H", "W"}
    folded = Counter(d.split(" ", 1)[0] for d in g.folded)
    assert folded == {"Shape": 3, "Gather": 3, "Unsqueeze": 3, "Concat": 2}


def test_encoder_shape_subgraphs_fold_away(encoder):
    _, compiled = encoder
    g = compiled.ir.graph
    _check_no_shape_computation(g)
    b, s = sym("batch"), sym("seq")
    heads, hd = builders.HEADS, builders.HIDDEN // builders.HEADS
    reshapes = Counter(n.outputs[0].type.shape for n in g.nodes if n.op_type == "Reshape")
    assert reshapes == {(b, s, heads, hd): 6, (b, s, builders.HIDDEN): 2}
    folded = Counter(d.split(" ", 1)[0] for d in g.folded)
    assert folded == {"Shape": 18, "Gather": 16, "Unsqueeze": 16, "Concat": 9, "Div": 2, "Slice": 2}
    # what stays: seq for Range's limit and Slice's end, (batch, seq) for Expand; CSE kept one of each
    syms = sorted((str(n.outputs[0].type), n.attr("dims")) for n in g.nodes if n.op_type == "SymValue")
    assert syms == [("int64[1]", (s,)), ("int64[2]", (b, s)), ("int64[]", (s,))]
    shapes = {n.inputs[1].name: n.inputs[1].const.tolist() for n in g.nodes if n.op_type == "Reshape"}
    assert sorted(shapes.values()) == [[0, 0, heads, hd], [0, 0, builders.HIDDEN]]


def test_info_reports_folded_shape_nodes(tmp_path, capsys):
    import onnx

    from onnxc.cli import main

    path = tmp_path / "cnn.onnx"
    onnx.save(builders.cnn(), path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "folded: 11 shape-computation nodes (Gather x3, Shape x3, Unsqueeze x3, Concat x2)" in out
    assert "dimension variables: N, H, W" in out


# -- inconsistent inputs ------------------------------------------------------------------------------

def test_inconsistent_dims_name_input_axis_variable_and_values(encoder):
    _, compiled = encoder
    feeds = {"input_ids": np.zeros((2, 8), np.int64), "attention_mask": np.ones((2, 9), np.int64)}
    with pytest.raises(InputError) as e:
        compiled.run(feeds)
    msg = str(e.value)
    for part in ("'attention_mask'", "axis 1", "'seq'", "8", "9", "'input_ids'"):
        assert part in msg, msg
    feeds = {"input_ids": np.zeros((2, 8), np.int64), "attention_mask": np.ones((3, 8), np.int64)}
    with pytest.raises(InputError, match=r"'attention_mask' axis 0: dimension 'batch' is 2 .* got 3"):
        compiled.run(feeds)


def test_static_dim_mismatch_names_input_axis_and_values(cnn):
    _, compiled = cnn
    with pytest.raises(InputError, match=r"'input' axis 1: expected 3, got 4"):
        compiled.run({"input": np.zeros((1, 4, 8, 8), np.float32)})
    with pytest.raises(InputError, match=r"'input': expected rank 4, got 3"):
        compiled.run({"input": np.zeros((3, 8, 8), np.float32)})


def test_out_of_range_token_fails_cleanly(encoder):
    _, compiled = encoder
    feeds = _tokens(1, 4)
    feeds["input_ids"][0, 2] = builders.VOCAB
    with pytest.raises(onnxc.ir.OnnxcError):
        compiled.run(feeds)


# -- model-local functions ----------------------------------------------------------------------------

@pytest.mark.parametrize("overload", [True, False])
def test_nested_local_functions_match_onnxruntime(overload):
    model = builders.functions_model(overload=overload)
    compiled = onnxc.compile(model)
    for n in (1, 3, 5):
        _compare(model, compiled, {"x": np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)},
                 rtol=1e-5, atol=1e-6)
    # the inlined IR before the fusion passes (they merge the LeakyRelus into fused chains)
    m = load_model(model.SerializeToString())
    for name, step in pipeline.steps():
        if not name.startswith("fuse_"):
            m = step(m).model
    g = m.graph
    assert all(n.domain == "" for n in g.nodes)
    # alpha: passed by the caller (0.05), the callee's default (0.2), or absent in the caller -> default
    assert [n.attr("alpha") for n in g.nodes if n.op_type == "LeakyRelu"] == pytest.approx([0.05, 0.2, 0.2, 0.2])
    assert [n.attr("transB") for n in g.nodes if n.op_type == "Gemm"] == [1, 0, 1, 0]
    if overload:
        assert sorted(float(n.inputs[1].const) for n in g.nodes if n.op_type == "Mul") == [0.5, 2.0]
