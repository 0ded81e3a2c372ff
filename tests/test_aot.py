"""Ahead-of-time artifacts: `onnxc build`, the C API from a C program, `onnxc.load` without a compiler,
library dependencies, `--emit-c` + make in a clean folder, reproducible sources."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import onnxc
from onnxc.codegen.compiler import default_cc

EXAMPLE = Path(onnxc.__file__).parent / "examples" / "small_cnn.onnx"
ONNXC = [sys.executable, "-m", "onnxc.cli"]


def pattern_inputs(model: onnxc.CompiledModel, dims: dict[str, int]) -> dict[str, np.ndarray]:
    """The inputs example.c fills: element k of input i is ((k*7 + i*3) % 11) * 0.125 - 0.5."""
    feeds = {}
    for i, info in enumerate(model.inputs):
        shape = [d if isinstance(d, int) else dims.get(d, 1) for d in info.shape]
        k = np.arange(int(np.prod(shape)), dtype=np.int64)
        feeds[info.name] = (((k * 7 + i * 3) % 11) * 0.125 - 0.5).astype(info.dtype).reshape(shape)
    return feeds


def parse_example_output(text: str) -> dict[str, np.ndarray]:
    outs, name, shape, vals = {}, None, None, []
    for line in text.splitlines():
        if line.startswith("output "):
            if name is not None:
                outs[name] = np.array(vals, dtype=np.float64).reshape(shape)
            _, name, _, dims = line.split(" ", 3)
            shape = [int(x) for x in dims.strip("[]").split(",") if x]
            vals = []
        else:
            vals.append(float(line))
    if name is not None:
        outs[name] = np.array(vals, dtype=np.float64).reshape(shape)
    return outs


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("aot") / "cnn"
    r = subprocess.run([*ONNXC, "build", str(EXAMPLE), "-o", str(d), "--name", "cnn"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def test_c_program_matches_python_at_two_shapes(artifact):
    r = subprocess.run(["make", "-s", "example"], cwd=artifact, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    jit = onnxc.compile(str(EXAMPLE))
    for n in (1, 3):
        run = subprocess.run(["./example", f"N={n}"], cwd=artifact, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        got = parse_example_output(run.stdout)
        want = jit.run(pattern_inputs(jit, {"N": n}))
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7)


def test_load_without_a_compiler(artifact, tmp_path):
    jit = onnxc.compile(str(EXAMPLE))
    feeds = pattern_inputs(jit, {"N": 2})
    np.save(tmp_path / "x.npy", feeds["image"])
    np.save(tmp_path / "want.npy", jit.run(feeds)["probabilities"])
    script = textwrap.dedent(f"""
        import shutil, numpy as np, onnxc
        from onnxc.codegen.compiler import default_cc
        assert shutil.which(default_cc()) is None and shutil.which("gcc") is None, "a compiler is reachable"
        m = onnxc.load({str(artifact)!r})
        got = m.run({{"image": np.load({str(tmp_path / 'x.npy')!r})}})["probabilities"]
        np.testing.assert_allclose(got, np.load({str(tmp_path / 'want.npy')!r}), rtol=1e-6)
        print("ok", m.inputs, m.outputs)
    """)
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env["PATH"] = str(tmp_path)  # an empty folder: no cc, gcc or clang
    env["ONNXC_FAIL_ON_COMPILE"] = "1"
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout and "'N'" in r.stdout


def test_library_depends_only_on_libc_and_libm(artifact):
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd is not available")
    r = subprocess.run([ldd, str(artifact / "libcnn.so")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    libs = {line.split()[0].split("/")[-1].split(".so")[0] for line in r.stdout.splitlines() if line.strip()}
    assert libs <= {"linux-vdso", "libc", "libm", "libpthread", "ld-linux-x86-64", "ld-linux-aarch64"}, libs


API_CHECK = r"""
#include <stdio.h>
#include <string.h>
#include "cnn.h"
#define CHECK(c) do { if (!(c)) { printf("FAILED %s (line %d)\n", #c, __LINE__); return 1; } } while (0)
int main(void) {
    char err[256];
    cnn_ctx *ctx = NULL;
    CHECK(cnn_create(&ctx, NULL, 1, err, sizeof err) == 0);
    CHECK(cnn_num_inputs() == 1 && cnn_num_outputs() == 1);
    CHECK(strcmp(cnn_input_name(0), "image") == 0 && cnn_input_dtype(0) == 1 && cnn_input_rank(0) == 4);
    CHECK(strcmp(cnn_input_dim(0, 0), "N") == 0 && strcmp(cnn_input_dim(0, 3), "28") == 0);
    CHECK(cnn_input_dim(0, 4) == NULL && cnn_input_name(1) == NULL);
    CHECK(cnn_num_dims() == 1 && strcmp(cnn_dim_name(0), "N") == 0);
    int64_t dims[16];
    CHECK(cnn_output_shape(ctx, 0, dims) != 0 && strstr(cnn_last_error(ctx), "not bound"));
    CHECK(cnn_bind_dim(ctx, "N", 5) == 0);
    CHECK(cnn_output_shape(ctx, 0, dims) == 0 && dims[0] == 5 && dims[1] == 10);
    CHECK(cnn_bind_dim(ctx, "Q", 5) != 0 && strstr(cnn_last_error(ctx), "no dimension variable named Q"));
    float x[2 * 28 * 28] = {0};
    onnxc_tensor in[1], out[1];
    memset(in, 0, sizeof in);
    in[0].data = x; in[0].rank = 4; in[0].dtype = 11;
    in[0].dims[0] = 2; in[0].dims[1] = 1; in[0].dims[2] = 28; in[0].dims[3] = 28;
    CHECK(cnn_run(ctx, in, out) == 1 && strstr(cnn_last_error(ctx), "expected element type 1 (float), got 11 (double)"));
    in[0].dtype = 1; in[0].dims[1] = 2;
    CHECK(cnn_run(ctx, in, out) == 1 && strstr(cnn_last_error(ctx), "axis 1"));
    in[0].dims[1] = 1;
    CHECK(cnn_run(ctx, in, out) == 0 && out[0].rank == 2 && out[0].dims[0] == 2);
    cnn_free(out[0].data);
    cnn_destroy(ctx);
    printf("api ok\n");
    return 0;
}
"""


def test_c_api_introspection_binding_and_errors(artifact, tmp_path):
    src = tmp_path / "api_check.c"
    src.write_text(API_CHECK)
    exe = tmp_path / "api_check"
    cc = subprocess.run([default_cc(), "-O1", f"-I{artifact}", "-o", str(exe), str(src), f"-L{artifact}", "-lcnn",
                         f"-Wl,-rpath,{artifact}"], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and "api ok" in r.stdout, r.stdout + r.stderr


def test_emit_c_builds_with_make_in_a_clean_folder_and_weights_file_is_checked(tmp_path):
    src = tmp_path / "src"
    r = subprocess.run([*ONNXC, "build", str(EXAMPLE), "--emit-c", str(src), "--name", "cnn", "--weights", "file",
                        "--target", "portable"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    clean = tmp_path / "elsewhere"
    shutil.copytree(src, clean)
    mk = subprocess.run(["make", "-s", "example"], cwd=clean, capture_output=True, text=True)
    assert mk.returncode == 0, mk.stderr
    run = subprocess.run(["./example", "N=2"], cwd=clean, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert parse_example_output(run.stdout)["probabilities"].shape == (2, 10)
    w = clean / "cnn.weights"
    data = bytearray(w.read_bytes())
    data[len(data) // 2] ^= 1
    w.write_bytes(bytes(data))
    bad = subprocess.run(["./example", "N=2"], cwd=clean, capture_output=True, text=True)
    assert bad.returncode != 0 and "checksum mismatch" in bad.stderr
    with pytest.raises(onnxc.ModelError, match="checksum"):
        onnxc.load(clean)


def test_sources_are_reproducible(tmp_path):
    a, b = tmp_path / "a" / "cnn", tmp_path / "b" / "cnn"
    for d in (a, b):
        onnxc.build(str(EXAMPLE), d, name="cnn", emit_only=True)
    for f in sorted(p.name for p in a.iterdir()):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_build_failures_exit_nonzero_with_a_message(tmp_path):
    r = subprocess.run([*ONNXC, "build", str(EXAMPLE), "-o", str(tmp_path / "x"), "--name", "9bad"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "must be a C identifier" in r.stderr
    r = subprocess.run([*ONNXC, "build", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "y")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "missing.onnx" in r.stderr
    with pytest.raises(onnxc.ModelError, match="not an onnxc artifact"):
        onnxc.load(tmp_path)


def build_for_valgrind(model: Path, out: Path, name: str) -> Path:
    """``onnxc build`` of ``model`` into ``out`` (x86-64-v2 on x86: valgrind does not decode AVX-512)."""
    target = ["--target", "x86-64-v2"] if platform.machine() == "x86_64" else []
    r = subprocess.run([*ONNXC, "build", str(model), "-o", str(out), "--name", name, *target],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def run_c_check(source: str, out: Path, name: str, tmp_path: Path) -> list[str]:
    """Compile the C program ``source`` against the artifact in ``out`` (library ``name``), run it
    (under valgrind when available: no leak, no invalid access) and return its output lines."""
    src, exe = tmp_path / f"{name}_check.c", tmp_path / f"{name}_check"
    src.write_text(source)
    cc = subprocess.run([default_cc(), "-O1", f"-I{out}", "-o", str(exe), str(src), f"-L{out}", f"-l{name}",
                         f"-Wl,-rpath,{out}"], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    cmd = [str(exe)]
    if shutil.which("valgrind"):
        cmd = ["valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=9", *cmd]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.splitlines()


SEQ_CHECK = r"""
#include <stdio.h>
#include "sq.h"
#include "onnxc_value.h"
int main(void) {
    char err[256];
    sq_ctx *ctx = NULL;
    if (sq_create(&ctx, NULL, 1, err, sizeof err)) { printf("create: %s\n", err); return 1; }
    float x[7] = {1, 2, 3, 4, 5, 6, 7};
    onnxc_tensor in[1] = {{0}}, out[1];
    in[0].data = x; in[0].rank = 1; in[0].dtype = 1; in[0].dims[0] = 7;
    if (sq_run(ctx, in, out)) { printf("run: %s\n", sq_last_error(ctx)); return 1; }
    if (out[0].dtype != ONNXC_VALUE_DTYPE || sq_output_dtype(0) != ONNXC_VALUE_DTYPE) return 2;
    const onnxc_value *v = (const onnxc_value *)out[0].data;
    printf("kind %d elem %d n %lld\n", v->kind, v->elem_dtype, (long long)v->n);
    for (int64_t i = 0; i < v->n; i++) {
        const onnxc_tensor *t = &v->items[i]->t;
        printf("item %lld:", (long long)i);
        for (int64_t j = 0; j < t->dims[0]; j++) printf(" %g", ((const float *)t->data)[j]);
        printf("\n");
    }
    sq_free_value(out[0].data);
    sq_destroy(ctx);
    return 0;
}
"""


def test_sequence_output_through_the_c_api(tmp_path):
    """A sequence output reaches C as an onnxc_value tree the header documents; <name>_free_value
    releases it (run under valgrind when available: no leak, no invalid access)."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x", "s"], ["seq"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
        [helper.make_tensor("s", TensorProto.INT64, [], [3])])
    model = tmp_path / "sq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), model)
    out = build_for_valgrind(model, tmp_path / "sq", "sq")
    header = (out / "sq.h").read_text()
    assert "sq_free_value" in header and "dtype 1000" in header
    assert run_c_check(SEQ_CHECK, out, "sq", tmp_path) == ["kind 2 elem 1 n 3", "item 0: 1 2 3", "item 1: 4 5 6", "item 2: 7"]


ZIPMAP_CHECK = r"""
#include <stdio.h>
#include "zm.h"
#include "onnxc_value.h"
int main(void) {
    char err[256];
    zm_ctx *ctx = NULL;
    if (zm_create(&ctx, NULL, 1, err, sizeof err)) { printf("create: %s\n", err); return 1; }
    float x[4] = {0.25f, 0.75f, 0.5f, 0.5f};
    onnxc_tensor in[1] = {{0}}, out[1];
    in[0].data = x; in[0].rank = 2; in[0].dtype = 1; in[0].dims[0] = 2; in[0].dims[1] = 2;
    if (zm_run(ctx, in, out)) { printf("run: %s\n", zm_last_error(ctx)); return 1; }
    const onnxc_value *s = (const onnxc_value *)out[0].data;
    printf("kind %d n %lld\n", s->kind, (long long)s->n);
    for (int64_t i = 0; i < s->n; i++) {
        const onnxc_value *m = s->items[i];
        const char *const *k = (const char *const *)m->items[0]->t.data;
        const float *v = (const float *)m->items[1]->t.data;
        printf("map %d:", m->kind);
        for (int64_t j = 0; j < m->items[0]->t.dims[0]; j++) printf(" %s=%g", k[j], v[j]);
        printf("\n");
    }
    zm_free_value(out[0].data);
    zm_destroy(ctx);
    return 0;
}
"""


def test_map_outputs_through_the_c_api_and_load(tmp_path):
    """ZipMap's sequence of maps reaches C as kind-3 values (keys, values tensors) and Python as a
    list of dicts, from the loaded artifact too; freeing it is valgrind-clean."""
    import onnx
    from onnx import TensorProto, helper

    mt = helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    g = helper.make_graph(
        [helper.make_node("ZipMap", ["x"], ["probs"], domain="ai.onnx.ml", classlabels_strings=["yes", "no"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_value_info("probs", helper.make_sequence_type_proto(mt))])
    model = tmp_path / "zm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 1)]),
              model)
    out = build_for_valgrind(model, tmp_path / "zm", "zm")
    x = np.array([[0.25, 0.75], [0.5, 0.5]], np.float32)
    assert onnxc.load(out).run({"x": x})["probs"] == [{"no": 0.75, "yes": 0.25}, {"no": 0.5, "yes": 0.5}]
    assert run_c_check(ZIPMAP_CHECK, out, "zm", tmp_path) == ["kind 2 n 2", "map 3: no=0.75 yes=0.25", "map 3: no=0.5 yes=0.5"]
