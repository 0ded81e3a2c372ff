"""The ``onnxc`` command line: run, info, ops, and one-line errors with non-zero exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxc.cli import main, supported_ops

W = np.array([1, -2, 3], np.float32)


def save_model(path: Path, n: str | int = "N", custom_op: bool = False) -> str:
    """y = relu(x + w) * relu(x + w); z = y < w.  ``custom_op`` adds a node no one supports."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["y"]), helper.make_node("Less", ["y", "w"], ["z/0"])]
    opsets = [helper.make_opsetid("", 17)]
    if custom_op:
        nodes.append(helper.make_node("Frobnicate", ["y"], ["f"], domain="com.example"))
        opsets.append(helper.make_opsetid("com.example", 1))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 3]),
            helper.make_tensor_value_info("z/0", TensorProto.BOOL, [n, 3])]
    if custom_op:
        outs.append(helper.make_tensor_value_info("f", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [x], outs, [numpy_helper.from_array(W, "w")])
    onnx.save(helper.make_model(g, opset_imports=opsets), path)
    return str(path)


def expected(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = np.maximum(x + W, 0)
    return r * r, r * r < W


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, err: str, *fragments: str) -> None:
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxc: error: "), err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


# --------------------------------------------------------------------------------------------- run

def test_run_with_input_file_and_output_dir(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx")
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'x.npy'}",
                           "--output-dir", str(tmp_path / "out"))
    assert rc == 0, err
    assert "output y  float32  [4, 3]  min " in out
    assert "output z/0  bool  [4, 3]" in out
    y, z = expected(x)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), y, rtol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "z_0.npy"), z)  # '/' made file-safe


def test_run_random_inputs_are_seeded(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx", n=2)  # static dims: no --dim needed
    rc, out, _ = run_cli(capsys, "run", model, "-o", str(tmp_path / "a"))
    assert rc == 0 and "input  x  float32  [2, 3]  random (seed 0)" in out
    rc, _, _ = run_cli(capsys, "run", model, "-o", str(tmp_path / "b"))
    rc2, _, _ = run_cli(capsys, "run", model, "--seed", "7", "-o", str(tmp_path / "c"))
    a, b, c = (np.load(tmp_path / d / "y.npy") for d in "abc")
    assert rc == rc2 == 0
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_run_prints_and_saves_sequences_and_maps(tmp_path, capsys) -> None:
    """Non-tensor outputs (a sequence of tensors, ZipMap's list of dicts) are summarized and pickled."""
    import pickle

    mt = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    g = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=0),
         helper.make_node("ZipMap", ["x"], ["probs"], domain="ai.onnx.ml", classlabels_int64s=[4, 2])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None),
         helper.make_value_info("probs", helper.make_sequence_type_proto(mt))])
    model = tmp_path / "s.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 1)]),
              model)
    x = np.array([[0.5, 1.5], [2.5, 3.5]], np.float32)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = run_cli(capsys, "run", str(model), "-i", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o"))
    assert rc == 0, err
    assert "output parts  seq(float[?, 2])  2 item(s): float32[1, 2]" in out
    assert "output probs  seq(map(int64, float[]))  2 item(s): {2: 1.5, 4: 0.5}; {2: 3.5, 4: 2.5}" in out
    probs = pickle.loads((tmp_path / "o" / "probs.pkl").read_bytes())
    assert probs == [{2: 1.5, 4: 0.5}, {2: 3.5, 4: 2.5}]
    parts = pickle.loads((tmp_path / "o" / "parts.pkl").read_bytes())
    np.testing.assert_array_equal(np.concatenate(parts), x)


def test_run_symbolic_dims_need_dim_or_input(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx")
    rc, _, err = run_cli(capsys, "run", model)
    assert_one_line_error(rc, err, "symbolic dim 'N'", "--dim N=SIZE", "--input x=FILE")
    rc, out, err = run_cli(capsys, "run", model, "--dim", "N=5")
    assert rc == 0, err
    assert "output y  float32  [5, 3]" in out


@pytest.mark.parametrize("args, fragments", [
    (["--input", "x"], ["--input 'x'", "NAME=VALUE"]),
    (["--input", "x=/nonexistent.npy"], ["/nonexistent.npy", "does not exist"]),
    (["--input", "q=X"], ["unknown input(s) ['q']", "['x']"]),
    (["--dim", "N=many"], ["--dim N", "integer"]),
    (["--input", "x=INT64"], ["input 'x'", "int64"]),
    (["--dim", "N=2", "--dim", "FOO=3"], ["--dim FOO", "no such symbolic dim", "(N)"]),
])
def test_run_errors(tmp_path, capsys, args, fragments) -> None:
    model = save_model(tmp_path / "m.onnx")
    np.save(tmp_path / "xi.npy", np.ones((2, 3), np.int64))
    np.save(tmp_path / "X.npy", np.ones((2, 3), np.float32))
    args = [a.replace("=INT64", f"={tmp_path / 'xi.npy'}").replace("=X", f"={tmp_path / 'X.npy'}") for a in args]
    rc, _, err = run_cli(capsys, "run", model, *args)
    assert_one_line_error(rc, err, *fragments)


@pytest.mark.hostile
def test_missing_and_malformed_models(tmp_path, capsys) -> None:
    rc, _, err = run_cli(capsys, "run", str(tmp_path / "none.onnx"))
    assert_one_line_error(rc, err, "none.onnx", "does not exist")
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07garbage\xff\xff")
    rc, _, err = run_cli(capsys, "info", str(tmp_path / "bad.onnx"))
    assert_one_line_error(rc, err, "bad.onnx")


def test_unsupported_op_is_one_line(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx", custom_op=True)
    rc, _, err = run_cli(capsys, "run", model, "--dim", "N=2")
    assert_one_line_error(rc, err, "com.example::Frobnicate")
    rc, out, err = run_cli(capsys, "info", model)
    assert_one_line_error(rc, err, "com.example::Frobnicate")
    assert "unsupported:" in out and "used by" in out  # info lists the nodes on stdout


def test_debug_shows_the_exception(tmp_path, capsys) -> None:
    with pytest.raises(Exception, match="does not exist"):
        main(["run", str(tmp_path / "none.onnx"), "--debug"])
    with pytest.raises(Exception, match="does not exist"):
        main(["--debug", "info", str(tmp_path / "none.onnx")])


def test_help_and_usage(capsys) -> None:
    assert main(["run", "--help"]) == 0
    assert "seeded random data" in " ".join(capsys.readouterr().out.split())
    assert main([]) == 2
    assert main(["frobnicate"]) == 2


# -------------------------------------------------------------------------------------------- info

def test_info_shows_types_ir_c_and_arena(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx")
    rc, out, err = run_cli(capsys, "info", model, "--emit-c", str(tmp_path / "m.c"))
    assert rc == 0, err
    assert "  x: float[N, 3]" in out and "  z/0: bool[N, 3]" in out
    assert "IR after passes (2 nodes):" in out  # Add, Relu and Mul fused (passes/fuse_elementwise.py)
    assert "%y: float[N, 3] = onnxc::ElementwiseChain(%x, %w) {expr=Mul(Relu(Add(%0, %1)), Relu(Add(%0, %1)))" in out
    assert "dimension variables: N" in out
    assert "arena: no intermediate buffers" in out
    c_size = (tmp_path / "m.c").stat().st_size
    assert f"C source: {c_size} bytes" in out


def test_info_static_arena_and_dump(tmp_path, capsys) -> None:
    model = save_model(tmp_path / "m.onnx", n=4)
    rc, out, err = run_cli(capsys, "info", model, "--dump-after", "infer_shapes")
    assert rc == 0, err
    assert "--- IR after infer_shapes ---" in out
    # the temporaries a and r live in registers of the fused loop (passes/fuse_elementwise.py)
    assert "arena: no intermediate buffers" in out
    rc, _, err = run_cli(capsys, "info", model, "--dump-after", "nope")
    assert_one_line_error(rc, err, "not a pipeline step", "infer_shapes")


# --------------------------------------------------------------------------------------------- ops

def test_ops_are_generated_from_the_registries(capsys) -> None:
    from onnxc.codegen.kernels.registry import KERNELS
    from onnxc.passes.shapes.registry import SHAPE_RULES

    rc, out, _ = run_cli(capsys, "ops")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == ["domain", "op", "opsets", "implementation", "element", "types"]
    listed = {(ln.split()[0], ln.split()[1]) for ln in lines[1:] if ln.strip() and not ln[0].isdigit()}
    for dom, op in set(SHAPE_RULES) | set(KERNELS):
        assert (dom or "ai.onnx", op) in listed or dom == "onnxc"
    assert not [dom for dom, _ in listed if dom == "onnxc"]  # onnxc's own fused ops: only with --internal
    rc, out, _ = run_cli(capsys, "ops", "--internal")
    assert any(ln.split()[:2] == ["onnxc", "ElementwiseChain"] for ln in out.splitlines())
    add = next(ln for ln in lines if ln.split()[:2] == ["ai.onnx", "Add"])
    assert add.split()[2:4] == ["1+", "kernel"] and "i8..i64" in add and "bool" not in add
    assert next(ln for ln in lines if ln.split()[:2] == ["ai.onnx", "Reshape"]).split()[3:] == ["view", "any"]
    assert "as its expansion" in next(ln for ln in lines if ln.split()[:2] == ["ai.onnx", "Attention"])
    assert next(ln for ln in lines if ln.split()[:2] == ["ai.onnx", "Constant"]).split()[3] == "fold-only"
    rc, out, _ = run_cli(capsys, "ops", "--json")
    rows = json.loads(out)
    assert rows == [r for r in supported_ops() if r["domain"] != "onnxc"]
    add = next(r for r in rows if r["op"] == "Add")
    assert add["compiles"] and add["shape_rule"] and add["implementation"] == "kernel"


def test_ops_types_are_the_kernels_declarations() -> None:
    """The types column is each kernel's ``types=`` (never a hand-written table), in compact names."""
    from onnxc.codegen.kernels.registry import KERNELS
    from onnxc.codegen.kernels.typesets import type_names
    from onnxc.ir import DType

    rows = {(r["domain"], r["op"]): r for r in supported_ops()}
    for (dom, op), kd in KERNELS.items():
        row = rows[(dom or "ai.onnx", op)]
        assert row["family"] == kd.family
        assert row["types"] == (None if kd.types is None else type_names(kd.types)), op
    cast = KERNELS[("", "Cast")]
    assert cast.typed == "out0" and DType.FLOAT8E4M3FN in cast.types
    assert "f8e4m3fn" in rows[("ai.onnx", "Cast")]["types"] and "i4" in rows[("ai.onnx", "Cast")]["types"]
    assert rows[("ai.onnx", "Where")]["types"] == type_names(KERNELS[("", "Where")].types)
    assert KERNELS[("", "Where")].typed == "in1"
    assert rows[("ai.onnx", "Softmax")]["types"] == ["float", "double", "f16", "bf16"]
    assert rows[("ai.onnx", "Attention")]["types"] == "as its expansion"


def test_every_kernel_declares_its_element_types() -> None:
    from onnxc.codegen.kernels.registry import KERNELS

    undeclared = sorted(f"{kd.family}: {dom + '::' if dom else ''}{op}" for (dom, op), kd in KERNELS.items()
                        if kd.types is None)
    assert not undeclared, f"kernels without types=: {undeclared}"
    for r in supported_ops():
        if r["implementation"] in ("kernel", "view"):
            assert r["types"], r


def test_equal_lists_numeric_types_and_string() -> None:
    """Equal has one kernel (strings.py) that wraps the numeric one: its row shows both."""
    row = next(r for r in supported_ops() if (r["domain"], r["op"]) == ("ai.onnx", "Equal"))
    assert row["family"] == "strings"
    assert {"float", "double", "f16", "bf16", "i8", "i64", "u8", "u64", "bool", "string"} <= set(row["types"])


# ---------------------------------------------------------------------------------------- process

def test_installed_command_in_a_subprocess(tmp_path) -> None:
    model = save_model(tmp_path / "m.onnx")
    script = Path(sys.executable).parent / "onnxc"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "onnxc.cli"]
    env = dict(os.environ)
    p = subprocess.run([*cmd, "run", model, "-d", "N=3"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "output y  float32  [3, 3]" in p.stdout
    p = subprocess.run([*cmd, "run", model], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1 and p.stdout.count("\n") == 0
    assert p.stderr.startswith("onnxc: error: ") and p.stderr.count("\n") == 1
