"""The quantized-model suite's machinery (benchmarks/quant, benchmarks/quant_suite.py).

A small conv classifier made with the onnx helper is quantized by the suite's own builder (static QDQ
through onnxruntime.quantization) and benchmarked as one variant with a tiny budget: two compiles (the
quantized model and its float source). The accuracy measures, the tolerance rule, failure rows and the
writers are checked on that run and on hand-made outputs. Never asserts a time or a ratio.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxc.bench import Budget

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # benchmarks/ is beside the package, not inside it
    sys.path.insert(0, str(REPO))
pytest.importorskip("onnxruntime.quantization")
quant = importlib.import_module("benchmarks.quant")
build = importlib.import_module("benchmarks.quant.build")
acc = importlib.import_module("benchmarks.quant.accuracy")
suite = importlib.import_module("benchmarks.quant_suite")

TINY = Budget(min_runs=2, seconds=0.0, max_seconds=0.5, max_runs=3, warmup=1)


def _feeds(rng: np.random.Generator, b: int) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((b, 3, 12, 12), dtype=np.float32)}


def _tiny_cnn(path: Path) -> Path:
    """Conv + Relu, Conv + Relu, GlobalAveragePool, Flatten, Gemm to 10 classes; symbolic batch."""
    rng = np.random.default_rng(0)
    w = lambda name, *shape: numpy_helper.from_array((0.3 * rng.standard_normal(shape)).astype(np.float32), name)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
                          [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 16, 8, 3, 3), w("w3", 10, 16), w("b3", 10)])
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The tiny CNN quantized to static QDQ and benchmarked at batch 1 and 3 (the module's two compiles)."""
    from onnxc.codegen.cache import cache_dir

    tmp = tmp_path_factory.mktemp("quant")
    fpath = _tiny_cnn(tmp / "tiny.onnx")
    qpath = build.quantize("qdq", fpath, tmp / "tiny-qdq.onnx", build.calibration(_feeds, n=4))
    v = quant.QuantVariant("tiny/qdq", "CNN", "tiny", "qdq", _feeds, (1, 3), classifier=True)
    runtime = cache_dir(None) / "runtime"  # the tests' cache: its runtime objects are shared, not rebuilt
    runtime.mkdir(parents=True, exist_ok=True)
    opts = suite.Options(threads=1, budget=TINY, top1=24, work=tmp / "work", runtime=runtime)
    floats: dict = {}
    rows = suite.bench_variant(v, qpath, fpath, opts, floats)
    return {"v": v, "qpath": qpath, "fpath": fpath, "opts": opts, "floats": floats, "rows": rows}


def test_quantized_variant_row(run):
    import onnx

    ops = {n.op_type for n in onnx.load(str(run["qpath"])).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops  # the builder wrote QDQ around float ops
    rows = run["rows"]
    assert [r["model"] for r in rows] == ["tiny/qdq@b1", "tiny/qdq@b3"]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["format"] == "static QDQ" and r["family"] == "CNN"
        assert all(r[k]["runs"] >= 2 for k in ("onnxc", "onnxruntime", "onnxc_f32"))
        assert r["ratio"] > 0 and r["speedup"] > 0
        assert r["vs_ort"]["steps"] <= r["tol_steps"] * 1.001 or r["vs_ort_ref"]["steps"] <= r["tol_steps"] * 1.001
        assert r["int8_err"]["steps"] > 0  # quantizing changed the outputs, and that was measured
    assert rows[0]["compile_s"] > 0 and rows[1]["compile_s"] is None  # the second size reuses the compile
    assert rows[0]["top1_n"] == 24 and rows[0]["top1"] >= 0.8 and rows[0]["top1_ort_ref"] >= 0.8
    assert "top1" not in rows[1] or rows[1]["top1"] is None


def test_failed_compile_is_a_row_and_others_still_time(run, monkeypatch):
    from onnxc.ir import UnsupportedOpError

    def refuse(*a, **k):
        raise UnsupportedOpError("the model uses 1 unsupported operator(s):\n  com.example::Foo (opset 1): no kernel; "
                                 "used by 'n1'")

    monkeypatch.setattr(suite.onnxc, "compile", refuse)  # the float model is already in run["floats"]
    rows = suite.bench_variant(run["v"], run["qpath"], run["fpath"], run["opts"], run["floats"], sizes=(2,))
    (r,) = rows
    assert r["status"] == "onnxc failed" and r["onnxc"] is None and r["ratio"] is None
    assert r["error"] == "UnsupportedOpError: the model uses 1 unsupported operator(s): com.example::Foo"
    assert r["onnxruntime"]["runs"] >= 2 and r["onnxc_f32"]["runs"] >= 2  # still timed
    assert r["top1"] is None and r["top1_ort_ref"] is not None
    text = suite.format_table(rows)
    assert "onnxc failed: UnsupportedOpError" in text and "static QDQ" in text


def test_writers_and_format_geomeans(run, tmp_path):
    rows = run["rows"] + [suite.new_row("tiny/qdq@b9", run["v"], 9) | {"status": "quantize failed", "error": "boom"}]
    (f,) = suite.format_summary(rows)
    assert (f["format"], f["rows"], f["timed"], f["failed"], f["mismatch"]) == ("static QDQ", 3, 2, 1, 0)
    assert f["geomean_ratio"] == pytest.approx(np.sqrt(rows[0]["ratio"] * rows[1]["ratio"]))
    text = suite.format_table(rows)
    assert "geomean ratio" in text and "quantize failed: boom" in text
    md = suite.markdown(rows, {"threads": 1, "onnxruntime": "x", "cpu": "cpu", "cc": "gcc", "date": "today"})
    lines = md.splitlines()
    assert lines[0].startswith("# Quantized models") and "| tiny/qdq@b1 | static QDQ |" in md
    assert sum(1 for x in lines if x.startswith("|---")) == 2  # the rows' table and the formats' table


def test_deviation_in_steps():
    want = {"q": np.array([[3, 200]], np.uint8), "f": np.array([0.0, 1.0, 2.55], np.float32)}
    got = {"q": np.array([[4, 198]], np.uint8), "f": np.array([0.0, 1.02, 2.55], np.float32)}
    d = acc.deviation(got, want, {"q": 1.0, "f": None})  # f's step: its range / 255 = 0.01
    assert d["steps"] == pytest.approx(2.0) and d["max_abs"] == pytest.approx(2.0)
    d = acc.deviation({"f": got["f"]}, {"f": want["f"]}, {"f": 0.005})  # a DequantizeLinear's scale
    assert d["steps"] == pytest.approx(4.0, rel=1e-4) and d["max_rel"] == pytest.approx(0.02 / 2.55, rel=1e-4)
    assert acc.deviation({"f": got["f"][:2]}, {"f": want["f"]})["steps"] == float("inf")
    assert acc.deviation({"f": np.array([np.nan, 1, 2], np.float32)}, {"f": want["f"]})["max_abs"] == float("inf")
    assert acc.deviation({}, {"f": want["f"]})["max_rel"] == float("inf")
    assert acc.deviation({"f": np.ones(3)}, {"f": np.ones(3)})["steps"] == 0.0  # constant output: no range


def test_output_steps_read_from_the_graph(tmp_path):
    scale = numpy_helper.from_array(np.array([0.5, 0.25], np.float32), "s")
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["dq"], axis=1), helper.make_node("Add", ["x", "x"], ["a"]),
             helper.make_node("Identity", ["q"], ["qi"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("q", TensorProto.INT8, [1, 2]),
                                       helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("dq", TensorProto.FLOAT, [1, 2]),
                           helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2]),
                           helper.make_tensor_value_info("qi", TensorProto.INT8, [1, 2])], [scale])
    p = tmp_path / "g.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert acc.output_steps(p) == {"dq": 0.25, "a": None, "qi": 1.0}


def test_tolerance_rule():
    def row(dev: float, ref: float, spread: float, int8: float | None) -> dict:
        r = {"status": "ok", "vs_ort": {"steps": dev}, "vs_ort_ref": {"steps": ref}, "ort_spread": {"steps": spread},
             "int8_err": None if int8 is None else {"steps": int8}}
        suite.judge(r, 1.0)
        return r

    assert row(1.0000001, 3.0, 0.0, 5.0)["status"] == "ok"  # one step, as float arithmetic measures it
    assert row(3.0, 0.5, 0.0, None)["status"] == "ok"  # close to the graph as written
    assert row(2.5, 2.5, 3.0, None)["status"] == "ok"  # within onnxruntime's own spread
    r = row(1.6, 1.6, 0.0, 2.0)
    assert r["status"] == "ok" and r["drift"].startswith("1.6 steps > 1.0, within the int8 error 2.0")
    assert row(2.5, 2.5, 0.0, 2.0)["status"] == "MISMATCH"
    assert row(1.5, 1.5, 0.0, None)["status"] == "MISMATCH"


def test_top1_and_bad_inputs():
    a = np.array([[0.0, 1.0], [2.0, 1.0], [0.0, 3.0]])
    assert acc.top1_agreement(a, np.array([[0.0, 2.0], [0.0, 1.0], [1.0, 3.0]])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"two \[N, classes\] arrays of one shape, got \(3, 2\) and \(2, 2\)"):
        acc.top1_agreement(a, a[:2])
    with pytest.raises(ValueError, match="unknown quantization method 'int3'; expected one of qdq, qoperator"):
        build.quantize("int3", "in.onnx", "out.onnx", [])
    with pytest.raises(KeyError, match="unknown quant-suite model 'nope'"):
        quant.quantized_path("nope")


def test_suite_lists_its_models(capsys):
    from benchmarks.run import main

    assert main(["--suite", "quant", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("resnet18/qdq", "mobilenet_v2/qoperator", "bert/dynamic", "llama/nbits4"):
        assert name in out
    assert "MatMulNBits 4-bit" in out and "from llama/legacy" in out
