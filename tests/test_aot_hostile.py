"""The AOT artifact's C API called with hostile values from a C program (codegen/templates/aot/api.c.j2,
the model's entry checks in runtime_c/onnxc_check.c): every entry returns a status and a message, never
a crash, a hang or a success with a nonsense shape. The program runs under AddressSanitizer and
UndefinedBehaviorSanitizer (library and program built with them, when libasan links) and under
valgrind (when installed); the example program refuses bad DIM=VALUE arguments."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxc
from onnxc.codegen.compiler import default_cc

SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer")
W = np.arange(40, dtype=np.float32).reshape(4, 10) / 8


def _model():
    """y[N, 10] = x[N, 4] @ W, z[K] = k[K] + 1 (int64)."""
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Add", ["k", "one"], ["z"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("k", T.INT64, ["K"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 10]), h.make_tensor_value_info("z", T.INT64, ["K"])],
                     [h.make_tensor("W", T.FLOAT, [4, 10], W.ravel()), h.make_tensor("one", T.INT64, [], [1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


HOSTILE = r"""
#include <stdio.h>
#include <string.h>
#include "hx.h"

static int failures = 0;
#define EXPECT(cond, label) do { if (cond) printf("ok %s\n", label); \
    else { printf("FAILED %s (line %d): %s\n", label, __LINE__, ctx ? hx_last_error(ctx) : ""); failures++; } } while (0)
/* a run expected to fail with status st and a message containing text */
#define REJECT(st_, text, label) do { int s_ = hx_run(ctx, in, out); \
    EXPECT(s_ == (st_) && strstr(hx_last_error(ctx), text), label); } while (0)

int main(void) {
    char err[256] = "";
    hx_ctx *ctx = NULL;
    EXPECT(hx_create(NULL, NULL, 1, err, sizeof err) == 4 && strstr(err, "ctx is NULL"), "create NULL ctx");
    EXPECT(hx_create(NULL, NULL, 1, NULL, 0) == 4, "create NULL ctx, NULL err");
    EXPECT(hx_create(&ctx, NULL, 1, NULL, 0) == 0 && ctx, "create");
    float x[8] = {1, 2, 3, 4, -1, -2, -3, -4};
    int64_t k[3] = {5, -7, 0};
    onnxc_tensor in[2], out[2];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    in[0].data = x; in[0].rank = 2; in[0].dtype = 1; in[0].dims[0] = 2; in[0].dims[1] = 4;
    in[1].data = k; in[1].rank = 1; in[1].dtype = 7; in[1].dims[0] = 3;
    EXPECT(hx_run(ctx, in, out) == 0 && out[0].rank == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 10 &&
           out[1].dims[0] == 3 && ((int64_t *)out[1].data)[1] == -6, "valid run");
    printf("y");
    for (int i = 0; i < 20; i++) printf(" %.9g", (double)((float *)out[0].data)[i]);
    printf("\n");
    hx_free(out[0].data); hx_free(out[1].data);

    EXPECT(hx_run(NULL, in, out) == 4, "run NULL ctx");
    EXPECT(hx_run(ctx, NULL, out) == 4 && strstr(hx_last_error(ctx), "inputs is NULL"), "run NULL inputs");
    EXPECT(hx_run(ctx, in, NULL) == 4 && strstr(hx_last_error(ctx), "outputs is NULL"), "run NULL outputs");

    int64_t hostile[3] = {(int64_t)1 << 61, -((int64_t)1 << 62), (int64_t)1 << 62};
    const char *why[3] = {"2305843009213693952 exceeds the limit", "-4611686018427387904 is negative",
                          "4611686018427387904 exceeds the limit"};
    for (int i = 0; i < 3; i++) {
        in[0].dims[0] = hostile[i];
        REJECT(1, why[i], "hostile N");
        EXPECT(strstr(hx_last_error(ctx), "input 'x' axis 0: dimension"), "hostile N names input and axis");
    }
    in[0].dims[0] = 2;
    in[1].dims[0] = -1;
    REJECT(1, "input 'k' axis 0: dimension -1 is negative", "negative K");
    in[1].dims[0] = 3;

    in[0].dims[0] = (int64_t)1 << 40; /* the dims pass; the 44 TB output cannot be allocated */
    REJECT(3, "out of memory for output 'y'", "output too large to allocate");
    in[0].dims[0] = 2;

    in[0].data = NULL;
    REJECT(1, "input 'x': data is NULL but the shape [2, 4] has 8 elements", "NULL data");
    in[0].dims[0] = 0;
    EXPECT(hx_run(ctx, in, out) == 0 && out[0].dims[0] == 0 && out[0].dims[1] == 10, "NULL data, no elements");
    hx_free(out[0].data); hx_free(out[1].data);
    in[0].data = x; in[0].dims[0] = 2;

    in[0].dtype = 11;
    REJECT(1, "input 'x': expected element type 1 (float), got 11 (double)", "wrong dtype");
    in[0].dtype = 1;
    in[1].dtype = 1000;
    REJECT(1, "input 'k': expected element type 7 (int64), got 1000", "value where a tensor is expected");
    in[1].dtype = 7;
    in[0].rank = 3;
    REJECT(1, "input 'x': expected rank 2, got 3", "wrong rank");
    in[0].rank = -1;
    REJECT(1, "input 'x': expected rank 2, got -1", "negative rank");
    in[0].rank = 1 << 30;
    REJECT(1, "expected rank 2, got 1073741824", "huge rank");
    in[0].rank = 2;
    in[0].dims[1] = 5;
    REJECT(1, "input 'x' axis 1: expected 4, got 5", "wrong static dim");
    in[0].dims[1] = 4;

    EXPECT(hx_bind_dim(NULL, "N", 3) == 4, "bind NULL ctx");
    EXPECT(hx_bind_dim(ctx, NULL, 3) == 4 && strstr(hx_last_error(ctx), "name is NULL"), "bind NULL name");
    EXPECT(hx_bind_dim(ctx, "N", -((int64_t)1 << 62)) == 4 && strstr(hx_last_error(ctx), "is negative"), "bind negative");
    EXPECT(hx_bind_dim(ctx, "N", (int64_t)1 << 61) == 4 && strstr(hx_last_error(ctx), "above the limit"), "bind huge");
    EXPECT(hx_bind_dim(ctx, "Q", 3) == 4 && strstr(hx_last_error(ctx), "no dimension variable named Q"), "bind unknown");
    int64_t dims[16];
    EXPECT(hx_output_shape(ctx, 0, dims) == 4 && strstr(hx_last_error(ctx), "not bound"), "shape unbound");
    EXPECT(hx_bind_dim(ctx, "N", 7) == 0, "bind N");
    EXPECT(hx_output_shape(ctx, 0, dims) == 0 && dims[0] == 7 && dims[1] == 10, "output shape");
    EXPECT(hx_output_shape(ctx, 0, NULL) == 4 && strstr(hx_last_error(ctx), "dims is NULL"), "shape NULL dims");
    EXPECT(hx_output_shape(ctx, 2, dims) == 4 && strstr(hx_last_error(ctx), "no such output: 2"), "shape output 2");
    EXPECT(hx_output_shape(ctx, -1, dims) == 4 && strstr(hx_last_error(ctx), "no such output: -1"), "shape output -1");
    EXPECT(hx_output_shape(NULL, 0, dims) == 4, "shape NULL ctx");
    EXPECT(strcmp(hx_last_error(NULL), "no context") == 0, "last_error NULL");
    EXPECT(hx_input_name(-1) == NULL && hx_input_name(2) == NULL && hx_input_dim(0, 2) == NULL &&
           hx_input_dim(0, -1) == NULL && hx_output_dim(5, 0) == NULL && hx_dim_name(9) == NULL &&
           hx_input_rank(7) == -1 && hx_output_dtype(-3) == 0, "introspection out of range");
    hx_free(NULL);
    hx_free_value(NULL);
    hx_destroy(ctx);
    hx_destroy(NULL);
    printf("%d failures\n", failures);
    return failures != 0;
}
"""

EXPECTED = ["create NULL ctx", "create NULL ctx, NULL err", "create", "valid run", "run NULL ctx", "run NULL inputs",
            "run NULL outputs", *["hostile N", "hostile N names input and axis"] * 3, "negative K",
            "output too large to allocate", "NULL data", "NULL data, no elements", "wrong dtype",
            "value where a tensor is expected", "wrong rank", "negative rank", "huge rank", "wrong static dim",
            "bind NULL ctx", "bind NULL name", "bind negative", "bind huge", "bind unknown", "shape unbound", "bind N",
            "output shape", "shape NULL dims", "shape output 2", "shape output -1", "shape NULL ctx",
            "last_error NULL", "introspection out of range"]


def _check_output(stdout: str) -> None:
    lines = stdout.splitlines()
    assert [ln[3:] for ln in lines if ln.startswith(("ok ", "FAILED"))] == EXPECTED, stdout
    assert "0 failures" in lines, stdout
    y = np.array([float(v) for v in next(ln for ln in lines if ln.startswith("y ")).split()[1:]], np.float32)
    x = np.float32([[1, 2, 3, 4], [-1, -2, -3, -4]])
    np.testing.assert_allclose(y.reshape(2, 10), x @ W, rtol=1e-6)


def _asan_works(tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    r = subprocess.run([default_cc(), *SANITIZE, str(src), "-o", str(tmp / "probe")], capture_output=True)
    return r.returncode == 0 and subprocess.run([str(tmp / "probe")], capture_output=True).returncode == 0


def _compile_program(out: Path, tmp: Path, extra: tuple[str, ...] = ()) -> Path:
    src, exe = tmp / "hostile.c", tmp / "hostile"
    src.write_text(HOSTILE)
    cc = subprocess.run([default_cc(), "-O1", "-g", *extra, f"-I{out}", "-o", str(exe), str(src), f"-L{out}", "-lhx",
                         f"-Wl,-rpath,{out}"], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return exe


def test_c_api_hostile_values_under_asan_and_ubsan(tmp_path):
    if not _asan_works(tmp_path):
        pytest.skip("the C compiler cannot build and run with -fsanitize=address,undefined (no libasan?)")
    out = onnxc.build(_model(), tmp_path / "hx", name="hx", target="portable", flags=("-O1", "-g", *SANITIZE))
    exe = _compile_program(out, tmp_path, SANITIZE)
    # allocator_may_return_null: a 44 TB request fails as malloc does, instead of aborting the program
    env = {**os.environ, "ASAN_OPTIONS": "allocator_may_return_null=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ERROR: AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
    _check_output(run.stdout)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_c_api_hostile_values_under_valgrind(tmp_path):
    target = "x86-64-v2" if platform.machine() == "x86_64" else "portable"  # valgrind does not decode AVX-512
    out = onnxc.build(_model(), tmp_path / "hx", name="hx", target=target)
    exe = _compile_program(out, tmp_path)
    cmd = ["valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=9", str(exe)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    _check_output(run.stdout)


def test_example_refuses_bad_arguments(tmp_path):
    out = onnxc.build(_model(), tmp_path / "hx", name="hx", target="portable")
    mk = subprocess.run(["make", "-s", "example"], cwd=out, capture_output=True, text=True)
    assert mk.returncode == 0, mk.stderr

    def example(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["./example", *args], cwd=out, capture_output=True, text=True, timeout=120)

    ok = example("N=2", "K=3")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "output y shape [2,10]"
    for args, code, msg in [
        (["N=abc"], 2, "argument 'N=abc': the value of N must be a non-negative integer"),
        (["N="], 2, "the value of N must be a non-negative integer"),
        (["N=-3"], 2, "the value of N must be a non-negative integer"),
        (["N=99999999999999999999"], 2, "the value of N must be a non-negative integer"),
        (["Q=3"], 2, "argument 'Q=3': unknown dimension 'Q'; the model's dimensions are: N K"),
        (["N"], 2, "argument 'N': expected DIM=VALUE"),
        (["N=2305843009213693952"], 2, "input x: the dims given make more elements than memory can hold"),
        (["N=4611686018427387904"], 2, "input x: the dims given make more elements than memory can hold"),
        (["N=1099511627776"], 1, "out of memory for input x"),
        (["N=281474976710657"], 1, None),
    ]:
        r = example(*args)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        if msg is not None:
            assert msg in r.stderr, (args, r.stderr)
        else:  # fails in the library or the example: a message either way, never a crash
            assert r.stderr.strip() and r.returncode > 0, (args, r.stderr)
