"""AOT artifact polish: the model's metadata in the C API (awkward strings, via the example program's
--info, a C program and ctypes), README link lines that work from any working directory (folder name
taken from the actual output folder), the example refusing bad arguments, the header comment layout.

Two artifacts are built (embedded weights + metadata + a symbolic dim; sidecar weights, no metadata,
static shapes, a folder name with a space and a comma); everything else is plain gcc on them."""

from __future__ import annotations

import ctypes
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc

LONG = "".join(chr(0x20 + i % 90) for i in range(20000))
METADATA = {
    "labels": "cat,dog,bird",
    "quote\"key": 'a"b\\c\nd\te\r\x01\x7f*/ ??= é€😀',
    "long": LONG,
    "empty": "",
    "ключ with spaces": "значение",
}
DOC = "first line\nsecond \"line\" \\ with ü\n"
PRODUCER = 'maker "x"'
VERSION = 2**62 + 5


def _model_a():
    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "W")
    b = numpy_helper.from_array(np.array([0.5, -0.25, 0.0, 1.0], np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])], "graph_a",
        [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["N", 4]), helper.make_tensor_value_info("z", T.FLOAT, ["N", 4])],
        [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name=PRODUCER,
                          model_version=VERSION, doc_string=DOC)
    helper.set_model_props(m, METADATA)
    return m


def _model_b():
    c = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "C")
    g = helper.make_graph([helper.make_node("Mul", ["x", "C"], ["y"])], "graph_b",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])], [c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _pattern(shape: tuple[int, ...], i: int = 0) -> np.ndarray:
    """The input example.c fills: element k of input i is ((k*7 + i*3) % 11) * 0.125 - 0.5."""
    k = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (((k * 7 + i * 3) % 11) * 0.125 - 0.5).astype(np.float32).reshape(shape)


def _outputs(text: str) -> dict[str, np.ndarray]:
    outs, name = {}, None
    for line in text.splitlines():
        if line.startswith("output "):
            _, name, _, dims = line.split(" ", 3)
            outs[name] = ([int(d) for d in dims.strip("[]").split(",") if d], [])
        else:
            outs[name][1].append(float(line))
    return {n: np.array(v, np.float32).reshape(s) for n, (s, v) in outs.items()}


def _run(cmd: list[str] | str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def art_a(tmp_path_factory) -> Path:
    """Artifact A in folder "art a" (not its --name "polish"), its example built with the Makefile."""
    out = onnxc.build(_model_a(), tmp_path_factory.mktemp("a") / "art a", name="polish", target="portable")
    mk = _run(["make", "-s", "example"], out)
    assert mk.returncode == 0, mk.stderr
    return out


@pytest.fixture(scope="module")
def art_b(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("b") / "b dir,2"
    return onnxc.build(_model_b(), out, name="plain", target="portable", embed_weights=False)


def _info(text: str) -> dict:
    """``./example --info`` parsed: top-level items, and per section (metadata, inputs, outputs) its
    indented lines as (JSON-quoted name, rest); metadata values decoded too."""
    dec, info, section = json.JSONDecoder(), {}, None
    for line in text.splitlines():
        if line.startswith("  "):
            key, end = dec.raw_decode(line, 2)
            rest = line[end:].removeprefix(": ")
            info[section][key] = json.loads(rest) if section == "pairs" else rest
            continue
        section, _, value = line.partition(": ")
        info[section] = json.loads(value) if value[:1] in '"0123456789-' else value
        section = "pairs" if section == "metadata" else section + "_list"
        info[section] = {}
    return info


def test_example_runs_from_another_directory_and_prints_metadata(art_a, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    exe = str(art_a / "example")
    r = _run([exe, "N=3"], elsewhere)
    assert r.returncode == 0, r.stderr
    sess = ort.InferenceSession(_model_a().SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip(["y", "z"], sess.run(None, {"x": _pattern((3, 4))})))
    got = _outputs(r.stdout)
    for n in ("y", "z"):
        np.testing.assert_allclose(got[n], want[n], rtol=1e-6, atol=1e-6)
    info = _run([exe, "--info"], elsewhere)
    assert info.returncode == 0, info.stderr
    parsed = _info(info.stdout)
    assert parsed["pairs"] == METADATA
    assert list(parsed["pairs"]) == list(METADATA)  # file order
    assert (parsed["producer"], parsed["model_version"], parsed["doc_string"]) == (PRODUCER, VERSION, DOC)
    assert (parsed["model"], parsed["graph_name"], parsed["metadata"], parsed["dims"]) == ("polish", "graph_a", 5, "N")
    assert parsed["inputs_list"] == {"x": 'dtype 1, dims ["N", "4"]'} and list(parsed["outputs_list"]) == ["y", "z"]
    assert onnxc.load(art_a).metadata == METADATA


def test_metadata_through_ctypes(art_a):
    lib = ctypes.CDLL(str(art_a / "libpolish.so"))
    for f in ("metadata_key", "metadata_value", "metadata", "producer", "doc_string", "graph_name"):
        getattr(lib, f"polish_{f}").restype = ctypes.c_char_p
    lib.polish_model_version.restype = ctypes.c_int64
    lib.polish_metadata_key.argtypes = lib.polish_metadata_value.argtypes = [ctypes.c_int]
    lib.polish_metadata.argtypes = [ctypes.c_char_p]
    n = lib.polish_metadata_count()
    pairs = {lib.polish_metadata_key(i).decode(): lib.polish_metadata_value(i).decode() for i in range(n)}
    assert pairs == METADATA
    for key, value in METADATA.items():
        assert lib.polish_metadata(key.encode()).decode() == value
    assert lib.polish_metadata(b"absent") is None and lib.polish_metadata(None) is None
    assert lib.polish_metadata(b"labe") is None  # a prefix of a key is not the key
    assert lib.polish_metadata_key(-1) is None and lib.polish_metadata_value(n) is None
    assert lib.polish_producer().decode() == PRODUCER and lib.polish_doc_string().decode() == DOC
    assert lib.polish_model_version() == VERSION and lib.polish_graph_name() == b"graph_a"


APP = r"""
#include <stdio.h>
#include <string.h>
#include "%NAME%.h"
/* Prints the metadata value of argv[1] (or "absent"), then runs the model once on zeros. */
int main(int argc, char **argv) {
    const char *v = argc > 1 ? %NAME%_metadata(argv[1]) : NULL;
    printf("%s|%lld\n", v ? v : "absent", (long long)%NAME%_model_version());
    %NAME%_ctx *ctx; char err[256];
    if (%NAME%_create(&ctx, %WEIGHTS%, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    float x[8] = {0};
    onnxc_tensor in[1] = {{x, {%DIMS%}, 2, 1}}, out[2];
    memset(out, 0, sizeof out);
    if (%NAME%_run(ctx, in, out)) { fprintf(stderr, "%s\n", %NAME%_last_error(ctx)); return 1; }
    printf("ran %lld\n", (long long)out[0].dims[0]);
    %NAME%_free(out[0].data);
    %NAME%_destroy(ctx);
    return 0;
}
"""


def _readme_link_lines(folder: Path) -> list[str]:
    lines = [ln.strip() for ln in (folder / "README").read_text().splitlines() if ln.strip().startswith("cc ")]
    assert len(lines) == 2, lines
    return lines


@pytest.mark.parametrize("which", ["a", "b"])
def test_readme_link_lines_work_from_any_directory(which, art_a, art_b, tmp_path):
    folder = art_a if which == "a" else art_b
    name, dims = ("polish", "2, 4") if which == "a" else ("plain", "2, 3")
    weights = "NULL" if which == "a" else f'"{folder / "plain.weights"}"'
    readme = (folder / "README").read_text()
    assert f"onnxc.load({folder.name!r})" in readme and f"-o '{folder.name}' --name {name}" in readme
    parent = folder.parent
    src = APP.replace("%NAME%", name).replace("%WEIGHTS%", weights).replace("%DIMS%", dims)
    (parent / "app.c").write_text(src)
    elsewhere = tmp_path / "run here"
    elsewhere.mkdir()
    for i, line in enumerate(_readme_link_lines(folder)):
        assert "$(cd" in line if i == 0 else "$ORIGIN/" in line
        cc = _run(["sh", "-c", line], parent)
        assert cc.returncode == 0, (line, cc.stderr)
        r = _run([str(parent / "app"), "labels"], elsewhere)
        assert r.returncode == 0, (line, r.stderr)
        want = ("cat,dog,bird" if which == "a" else "absent") + f"|{VERSION if which == 'a' else 0}"
        assert r.stdout.splitlines() == [want, "ran 2"]
        (parent / "app").unlink()
    moved = tmp_path / "moved"  # the $ORIGIN line: the program and the folder move together
    moved.mkdir()
    assert _run(["sh", "-c", _readme_link_lines(folder)[1]], parent).returncode == 0
    shutil.move(str(parent / "app"), moved / "app")
    shutil.copytree(folder, moved / folder.name)
    assert _run([str(moved / "app")], elsewhere).stdout.splitlines()[-1] == "ran 2"


def test_sidecar_weights_no_metadata_and_cmake(art_b, tmp_path):
    build = tmp_path / "build"
    cfg = _run(["cmake", "-S", str(art_b), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"], tmp_path)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    mk = _run(["cmake", "--build", str(build), "-j", "2"], tmp_path)
    assert mk.returncode == 0, mk.stdout + mk.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _run([str(build / "plain_example")], elsewhere)  # finds plain.weights beside itself
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(_outputs(r.stdout)["y"], _pattern((2, 3)) * np.arange(6).reshape(2, 3), atol=1e-6)
    info = _info(_run([str(build / "plain_example"), "--info"], elsewhere).stdout)
    assert (info["metadata"], info["pairs"], info["producer"], info["doc_string"], info["model_version"],
            info["graph_name"], info["dims"]) == (0, {}, "", "", 0, "graph_b", "none")
    bad = _run([str(build / "plain_example"), "N=2"], elsewhere)
    assert bad.returncode == 2 and "unknown dimension 'N'; the model's dimensions are: (none)" in bad.stderr


@pytest.mark.parametrize("args, msg", [
    (["N=abc"], "the value of N must be a non-negative integer"),
    (["N=-1"], "the value of N must be a non-negative integer"),
    (["N=+3"], "the value of N must be a non-negative integer"),
    (["N= 3"], "the value of N must be a non-negative integer"),
    (["N=3x"], "the value of N must be a non-negative integer"),
    (["N=99999999999999999999"], "the value of N must be a non-negative integer"),
    (["N="], "the value of N must be a non-negative integer"),
    (["M=3"], "unknown dimension 'M'; the model's dimensions are: N"),
    (["N=2", "batch=1"], "unknown dimension 'batch'; the model's dimensions are: N"),
    (["--bogus"], "argument '--bogus': expected DIM=VALUE or --info"),
    (["=3"], "expected DIM=VALUE"),
])
def test_example_refuses_bad_arguments_with_usage(art_a, args, msg):
    r = _run(["./example", *args], art_a)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert msg in r.stderr and "usage: ./example [--info] [DIM=VALUE ...]" in r.stderr, r.stderr
    assert r.stdout == ""


def test_example_help_and_header_comment(art_a, art_b):
    r = _run(["./example", "--help"], art_a)
    assert r.returncode == 0 and r.stdout.startswith("usage: ./example") and "variables (default 1): N" in r.stdout
    header = (art_a / "polish.h").read_text()
    comment = header[:header.index("*/")]
    assert re.search(r"\n \* Inputs:\n \*   0: x  float\[N, 4\]\n \* Outputs:\n \*   0: y  float\[N, 4\]\n"
                     r" \*   1: z  float\[N, 4\]\n", comment), comment
    assert all(len(line) <= 110 for line in comment.splitlines())
    for fn in ("metadata_count(void)", "metadata_key(int i)", "metadata(const char *key)",
               "int64_t polish_model_version(void)", "doc_string(void)"):
        assert fn in header
    assert "Dimension variables (bound from the inputs at each run): none" in (art_b / "plain.h").read_text()
