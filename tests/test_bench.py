"""The measuring harness: benchmarks/run.py, ``onnxc bench``, and per-step profiling builds.

Never asserts an absolute time or a speed ratio: only that the numbers exist, are consistent
(step times add up to the run time) and that failures become rows, not crashes.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.bench import Budget, interleaved, max_rel_error, peak_memory_mb
from onnxc.cli import main
from onnxc.codegen.emit import emit_c
from onnxc.ir import OnnxcError, UnsupportedOpError
from onnxc.profile import read_profile, reset_profile

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench_run():
    """benchmarks/run.py as a module (benchmarks/ is beside the package, not inside it)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("benchmarks.run")


def matmul_chain(path: Path, n: int = 96, layers: int = 4, sym: bool = False) -> str:
    """x @ W1 -> Relu -> ... -> Softmax: steps whose time is dominated by kernels."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        x = f"r{i}"
    nodes.append(helper.make_node("Softmax", [x], ["y"], axis=-1))
    rows = "N" if sym else n
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, n])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def if_model(path: Path) -> str:
    """y = cond ? x * 2 : x - 1, then Relu: a step with a subprogram."""
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("If", ["c"], ["v"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Relu", ["v"], ["y"])]
    g = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [two, one])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


# --------------------------------------------------------------------------------------- profile

def test_profile_lists_every_step_and_sums_to_total(tmp_path):
    m = onnxc.compile(matmul_chain(tmp_path / "c.onnx"), threads=1, profile=True)
    x = np.random.default_rng(1).standard_normal((96, 96)).astype(np.float32)
    m.run({"x": x})
    reset_profile(m)
    p0 = read_profile(m)
    assert p0.runs == 0 and p0.total == 0 and all(s.seconds == 0 for s in p0.steps)
    for _ in range(20):
        m.run({"x": x})
    p = read_profile(m)
    kernel_steps = [st for st in m.program.steps if st.body is not None or st.shape_body is not None]
    assert [s.node for s in p.steps] == [st.node for st in kernel_steps]
    assert p.runs == 20
    assert all(s.seconds > 0 for s in p.steps)
    assert 0.5 * p.total < p.step_sum <= p.total
    text = p.format()
    for s in p.steps:
        assert s.node in text
    ops = {op for op, _, _ in p.by_op()}
    assert {"MatMul", "Softmax"} <= ops  # each Relu is fused into its MatMul (passes/fuse_epilogues.py)
    # the listing is sorted by time, slowest first
    listed = [float(line.split()[1]) for line in text.splitlines()[2:2 + len(p.steps)]]
    assert listed == sorted(listed, reverse=True)
    # the profiled build computes the same outputs
    plain = onnxc.compile(matmul_chain(tmp_path / "c.onnx"), threads=1)
    np.testing.assert_array_equal(m.run({"x": x})["y"], plain.run({"x": x})["y"])


def test_profile_off_generates_the_same_c(tmp_path):
    m = onnxc.compile(matmul_chain(tmp_path / "c.onnx", sym=True), threads=1)
    assert emit_c(m.program) == m.c_source == emit_c(m.program, profile=False)
    assert "prof_" not in m.c_source and "onnxc_model_profile" not in m.c_source
    prof = emit_c(m.program, profile=True)
    assert prof != m.c_source and "onnxc_model_profile(double *out, int n)" in prof
    with pytest.raises(OnnxcError, match="profile=True"):
        read_profile(m)


def test_profile_with_subprogram_and_symbolic_dims(tmp_path):
    m = onnxc.compile(if_model(tmp_path / "if.onnx"), threads=1, profile=True)
    x = np.array([-3, -1, 0.5, 2], np.float32)
    np.testing.assert_array_equal(m.run({"c": np.array(True), "x": x})["y"], np.maximum(x * 2, 0))
    np.testing.assert_array_equal(m.run({"c": np.array(False), "x": x})["y"], np.maximum(x - 1, 0))
    p = read_profile(m)
    assert p.runs == 2 and len(p.steps) >= 1 and p.step_sum <= p.total
    s = onnxc.compile(matmul_chain(tmp_path / "s.onnx", n=32, sym=True), threads=1, profile=True)
    for rows in (1, 7, 3):
        s.run({"x": np.ones((rows, 32), np.float32)})
    assert read_profile(s).runs == 3


# ------------------------------------------------------------------------------------- measuring

def test_max_rel_error():
    a = np.array([1.0, 2.0, 100.0], np.float32)
    assert max_rel_error({"y": a}, {"y": a}) == 0
    assert max_rel_error({"y": a + np.float32(1)}, {"y": a}) == pytest.approx(0.01)
    assert max_rel_error({"y": a[:2]}, {"y": a}) == float("inf")
    assert max_rel_error({}, {"y": a}) == float("inf")
    assert max_rel_error({"i": np.array([1, 2])}, {"i": np.array([1, 3])}) == float("inf")
    nan = np.array([np.nan, 1.0])
    assert max_rel_error({"y": nan}, {"y": nan}) == 0
    assert max_rel_error({"y": np.array([0.0, 1.0])}, {"y": nan}) == float("inf")


def test_interleaved_alternates_and_respects_budget():
    calls: list[str] = []
    times = interleaved([lambda: calls.append("a"), lambda: calls.append("b")],
                        Budget(min_runs=5, seconds=0.0, warmup=2), block=0.0)
    assert [len(t) for t in times] == [5, 5]
    assert calls[:4] == ["a", "a", "b", "b"]  # warm-up of each
    assert calls[4:] == ["a", "b"] * 5


def test_interleaved_fast_functions_run_in_blocks_without_their_first_run():
    import time as _t

    calls: list[str] = []

    def slow():
        calls.append("s")
        _t.sleep(0.004)

    times = interleaved([slow, lambda: calls.append("f")], Budget(min_runs=3, seconds=0.0, warmup=1), block=0.01)
    body = "".join(calls[2:])
    turns = [t for t in body.replace("sf", "s|f").replace("fs", "f|s").split("|") if t]
    s_turn, f_turn = len(turns[0]), len(turns[1])
    assert set(turns[0]) == {"s"} and set(turns[1]) == {"f"}
    assert 2 <= s_turn <= 4 and f_turn > 10  # blocks of >= 10 ms, plus the unrecorded first run
    assert len(times[0]) == (s_turn - 1) * (len(turns) // 2) and len(times[0]) >= 3
    assert all(t >= 0.004 for t in times[0])


def test_peak_memory_children(tmp_path):
    path = matmul_chain(tmp_path / "c.onnx", n=256, layers=2)
    feeds = {"x": np.ones((256, 256), np.float32)}
    for engine in ("onnxc", "onnxruntime"):
        mb = peak_memory_mb(engine, path, feeds, 1, tmp_path / "cache")
        assert mb is not None and mb >= 0, engine
    assert peak_memory_mb("onnxc", tmp_path / "missing.onnx", feeds, 1) is None


# -------------------------------------------------------------------------------- benchmarks/run

def test_run_quick_writes_table_and_json(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--models", "mlp", "--cache",
                        str(tmp_path / "models"), "--json", str(out)], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    for col in ("model", "onnxruntime ms", "onnxc ms", "ratio", "compile s cold/warm", "max rel err"):
        assert col in r.stdout
    assert "geomean ratio onnxc/onnxruntime over 1 model(s)" in r.stdout
    d = json.loads(out.read_text())
    row, = d["models"]
    assert row["model"] == "mlp" and row["status"] == "ok"
    assert row["onnxc"]["median_ms"] > 0 and row["onnxruntime"]["median_ms"] > 0
    assert row["ratio"] == pytest.approx(row["onnxc"]["median_ms"] / row["onnxruntime"]["median_ms"])
    assert d["geomean_ratio"] == pytest.approx(row["ratio"])
    assert row["compile_cold_s"] > 0 and row["compile_warm_s"] > 0
    assert row["max_rel_err"] < 1e-4 and not row["mismatch"]
    assert d["environment"]["threads"] == 1


def test_run_reports_a_model_onnxc_cannot_compile(tmp_path, bench_run, monkeypatch):
    path = matmul_chain(tmp_path / "c.onnx", n=16, layers=1)

    def refuse(*a, **k):
        raise UnsupportedOpError("no kernel for Frobnicate (outputs 'y')")

    monkeypatch.setattr(bench_run.onnxc, "compile", refuse)
    row = bench_run.bench_one("chain", path, {"x": np.ones((16, 16), np.float32)}, 1, Budget(3, 0, 1, 10, 1),
                              memory=False)
    assert row["status"] == "onnxc failed" and "Frobnicate" in row["error"]
    assert row["onnxc"] is None and row["ratio"] is None and row["onnxruntime"]["runs"] >= 3
    text = bench_run.format_table([row])
    assert "onnxc failed" in text and "over 0 model(s)" in text


def test_run_reports_a_model_neither_engine_runs(tmp_path, bench_run):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "custom.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]),
              path)
    row = bench_run.bench_one("custom", path, {"x": np.ones(2, np.float32)}, 1, Budget(3, 0, 1, 10, 1), memory=True)
    assert row["status"] == "onnxc failed" and row["ort_error"]
    assert row["onnxc"] is None and row["onnxruntime"] is None and row["onnxc_peak_mb"] is None
    assert "custom" in bench_run.format_table([row])


def test_benchmark_models_are_built_as_described(tmp_path, bench_run):
    from benchmarks.models import make_feeds, model_path

    sq = onnx.load(str(model_path("squeezenet", tmp_path)))
    assert not any(n.op_type == "ConstantOfShape" for n in sq.graph.node)
    orig = onnx.load(str(importlib.import_module("benchmarks.models").light_dir() / "light_squeezenet.onnx"))
    shapes = {i.name: list(numpy_helper.to_array(i)) for i in orig.graph.initializer}
    fills = {n.output[0]: shapes[n.input[0]] for n in orig.graph.node if n.op_type == "ConstantOfShape"}
    weights = {t.name: numpy_helper.to_array(t) for t in sq.graph.initializer}
    assert fills and all(list(weights[k].shape) == v for k, v in fills.items())
    w = [a for a in weights.values() if a.ndim == 4]
    assert all(np.unique(a).size > 1 for a in w)  # random, not constant fills
    assert [i.name for i in sq.graph.input] == ["data_0"]
    assert model_path("squeezenet", tmp_path) == model_path("squeezenet", tmp_path)  # cached
    b = onnx.load(str(model_path("bert", tmp_path)), load_external_data=False)
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in b.graph.input]
    assert dims == [["batch", "seq"], ["batch", "seq"]]
    assert {"LayerNormalization", "Erf", "Softmax", "MatMul"} <= {n.op_type for n in b.graph.node}
    f = make_feeds("bert")
    assert f["input_ids"].shape == (1, 128) and set(np.unique(f["attention_mask"])) == {0, 1}


# ----------------------------------------------------------------------------------- onnxc bench

def test_cli_bench_with_profile_and_json(tmp_path, capsys):
    path = matmul_chain(tmp_path / "c.onnx", n=32, sym=True)
    out = tmp_path / "b.json"
    assert main(["bench", path, "--threads", "1", "--runs", "3", "--seconds", "0", "--dim", "N=5", "--profile",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "onnxc compile:" in text and "input  x  float32  [5, 32]" in text
    assert "ratio onnxc/onnxruntime:" in text and "outputs agree" in text
    assert "profile:" in text and "by operator:" in text and "MatMul" in text
    d = json.loads(out.read_text())
    assert d["threads"] == 1 and d["onnxc"]["runs"] >= 3 and d["ratio"] > 0
    ours, theirs = text.split("onnxruntime profile:")
    kernel_steps = [line for line in ours.splitlines() if "(outputs '" in line]
    assert len(kernel_steps) == len(d["profile"]["steps"]) >= 5  # 4 MatMul (+ fused Relu), Softmax
    # onnxruntime's own per-node profile beside it (onnxc/ort_profile.py), by operator and per node
    assert re.search(r"\n  MatMul +4 node\(s\) +[0-9.]+ ms/run", theirs)
    assert "per node, slowest onnxc steps first" in theirs
    assert sorted(n["op"] for n in d["ort_profile"]["nodes"].values()).count("MatMul") == 4


def test_cli_bench_without_onnxruntime_and_errors(tmp_path, capsys):
    path = matmul_chain(tmp_path / "c.onnx", n=16, layers=1, sym=True)
    assert main(["bench", path, "--threads", "1", "--runs", "2", "--seconds", "0", "--no-ort", "-d", "N=2"]) == 0
    text = capsys.readouterr().out
    assert "onnxc " in text and "onnxruntime " not in text and "ratio" not in text
    assert main(["bench", path, "--runs", "2"]) == 1  # symbolic dim N not given
    assert "--dim N=SIZE" in capsys.readouterr().err


def test_report_targets_table_from_measurements():
    report = importlib.import_module("benchmarks.report")
    gemm_out = ("micro-kernel: avx512, threads 1; numpy single thread\n"
                "           M x N x K    numpy    onnxc  A packed  B packed  ratio  GFLOP/s\n"
                "    1024 x 1024 x 1024    129.0    136.0     140.1     139.9   1.05\n")
    assert report._gflops(gemm_out) == (129.0, 136.0)
    call_out = ("onnxc run(dict)      3.10 us per call (median of 15 rounds of 20000)\n"
                "onnxc call           2.50 us per call (median of 15 rounds of 20000)\n"
                "onnxruntime run      8.00 us per call (median of 15 rounds of 20000)\n")
    assert report._overhead(call_out) == (2.5, 8.0)
    models = [{"model": "resnet50", "ratio": 0.9, "onnxc_peak_mb": 200.0, "ort_peak_mb": 250.0,
               "compile_cold_s": 3.0, "compile_warm_s": 0.2},
              {"model": "mlp", "ratio": 0.6, "onnxc_peak_mb": 30.0, "ort_peak_mb": 20.0,
               "compile_cold_s": 1.0, "compile_warm_s": 0.1}]
    rows = report.targets({1: {"geomean_ratio": 0.73, "models": models}}, (129.0, 136.0), (2.5, 8.0))
    text = "\n".join(rows)
    assert "| geomean ratio onnxc/onnxruntime, 1 thread(s) <= 1.0 | 0.730 | yes |" in text
    assert "| no model above 1.5, 1 thread(s) | max 0.90 (resnet50) | yes |" in text
    assert "| mlp ratio <= 0.5, 1 thread(s) | 0.60 | no |" in text
    assert "| peak memory <= onnxruntime's, 1 thread(s) | 1/2 models; above: mlp 30/20 MB | no |" in text
    assert "| ResNet-50 cached re-compile <= 0.5 s | 0.20 s | yes |" in text
    assert "(105%) | yes |" in text and "2.50 µs (onnxruntime 8.00 µs) | yes |" in text


def test_report_busy_rows():
    report = importlib.import_module("benchmarks.report")
    busy = {"geomean_ratio": 1.2, "models": [{"model": "bert", "ratio": 1.7}, {"model": "mlp", "ratio": 0.8}]}
    text = "\n".join(report.targets({}, None, None, busy))
    assert "| geomean ratio, 2 threads, one busy process <= 1.0 | 1.200 | no |" in text
    assert "| no model above 1.5, 2 threads, one busy process | max 1.70 (bert) | no |" in text


def test_busy_load_spins_and_stops():
    import time

    from benchmarks.busy import BusyLoad

    def cpu_s(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    with BusyLoad(1) as load:
        p, = load.procs
        c0 = cpu_s(p.pid)
        time.sleep(1.5)
        assert cpu_s(p.pid) - c0 > 0.05  # it burns CPU (a share of a core, small on a crowded machine)
    assert p.poll() is not None and not load.procs


def test_quantized_models_are_compared_at_quantization_tolerance(tmp_path):
    """``onnxc bench`` judges a model that computes with quantized integers at about two 8-bit steps
    (QUANT_TOL), a float model at 1e-3."""
    from onnxc.bench import QUANT_TOL, compare, is_quantized

    a = helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 4])
    q = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "q", [a],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(np.arange(12, dtype=np.int8).reshape(4, 3), "b")])
    quant = onnxc.compile(helper.make_model(q, opset_imports=[helper.make_opsetid("", 13)]))
    f = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "f",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    plain = onnxc.compile(helper.make_model(f, opset_imports=[helper.make_opsetid("", 13)]))
    assert is_quantized(quant) and not is_quantized(plain)
    assert 1e-3 < QUANT_TOL < 0.05
    path = tmp_path / "q.onnx"
    onnx.save(helper.make_model(q, opset_imports=[helper.make_opsetid("", 13)]), path)
    res = compare(path, {"a": np.ones((2, 4), np.uint8)}, 1, Budget(min_runs=1, seconds=0.01), quant, tol=QUANT_TOL)
    assert res["ort_error"] is None and res["mismatch"] is False and res["max_rel_err"] == 0.0


def test_int8_weights_encoder_rewrite():
    """benchmarks/int8_weights_encoder.py: every large MatMul / Gather weight becomes int8 + Cast -> Mul, and
    the int8 encoder computes what the float one does up to the quantization error (onnxruntime)."""
    import onnxruntime as ort

    enc = importlib.import_module("benchmarks.int8_weights_encoder")
    fm, feeds = enc.float_encoder(1, 8)
    qm = enc.int8_weights(fm)
    big = [i for i in qm.graph.initializer if np.prod(i.dims) >= enc.MIN_ENTRIES]
    assert big and all(i.data_type == onnx.TensorProto.INT8 for i in big)
    assert sum(n.op_type == "Cast" for n in qm.graph.node) == len(big)
    run = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
           for m in (fm, qm)]
    np.testing.assert_allclose(run[1], run[0], atol=0.1)
    assert not np.array_equal(run[1], run[0])
