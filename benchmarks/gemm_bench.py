"""GFLOP/s of onnxc's float GEMM against numpy's sgemm, single thread, and ResNet-50 against onnxruntime.

    python benchmarks/gemm_bench.py [--reps 20] [--resnet] [--threads 1]

The GEMM (runtime_c/onnxc_sgemm.h) is built into a tiny shared library by onnxc's own compiler driver
and called through cffi, with both operands plain (packed on every call) and with the constant operand
pre-packed as compiled models store weights (A for convolutions, B for MatMul/Gemm). numpy runs with
OMP/OPENBLAS/MKL_NUM_THREADS=1. Each number is the best of ``--reps`` interleaved runs (the machine may
be shared). ``--resnet``: light_resnet50 from the onnx package with random weights
(benchmarks/models.py), onnxc vs onnxruntime with the same thread count, median CPU time per run.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cffi  # noqa: E402
import numpy as np  # noqa: E402

from onnxc.codegen.compiler import CompilerConfig  # noqa: E402
from onnxc.codegen.runtime_lib import compile_with_runtime  # noqa: E402

SHAPES = [  # M, N, K: square, then convolution GEMMs of ResNet-50 (M = out channels, N = positions, K = C*k*k)
    (1024, 1024, 1024), (64, 3136, 576), (128, 784, 1152), (256, 196, 2304), (512, 49, 4608), (64, 12544, 147),
    (256, 3136, 64), (2048, 49, 512), (1, 1000, 2048),
]

WRAPPER = r"""
#include "onnxc_gemm.h"
const char *bench_isa(void) { return onnxc_sgemm_isa(); }
int64_t bench_packed_a_size(int64_t M, int64_t K) { return onnxc_sg_packed_a_size(M, K); }
int64_t bench_packed_b_size(int64_t K, int64_t N) { return onnxc_sg_packed_b_size(K, N); }
void bench_pack(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *Ap, float *Bp) {
    onnxc_sg_pack_a(0, A, K, M, K, Ap);
    onnxc_sg_pack_b(0, B, N, K, N, Bp);
}
int bench_gemm(int threads, int64_t M, int64_t N, int64_t K, const float *A, int fa, const float *B, int fb, float *C) {
    return onnxc_sgemm_ex(threads, M, N, K, 1.0f, A, K, fa, B, N, fb, 0.0f, C, N, NULL);
}
"""
CDEF = """
const char *bench_isa(void);
int64_t bench_packed_a_size(int64_t M, int64_t K);
int64_t bench_packed_b_size(int64_t K, int64_t N);
void bench_pack(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *Ap, float *Bp);
int bench_gemm(int threads, int64_t M, int64_t N, int64_t K, const float *A, int fa, const float *B, int fb, float *C);
"""


def load_gemm(folder: Path):
    """Build and load the wrapper library; returns (ffi, lib)."""
    src, out = folder / "gemm_bench.c", folder / "gemm_bench.so"
    src.write_text(WRAPPER)
    compile_with_runtime(src, out, CompilerConfig())
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi, ffi.dlopen(str(out))


def best_of(fns: list, reps: int) -> list[float]:
    """Best wall time of each function over ``reps`` rounds, the functions interleaved in each round."""
    best = [float("inf")] * len(fns)
    for r in range(reps + 1):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            if r:  # round 0 warms up
                best[i] = min(best[i], time.perf_counter() - t)
    return best


def bench_gemm(reps: int, threads: int) -> None:
    with tempfile.TemporaryDirectory(prefix="onnxc-gemm-bench-") as d:
        ffi, lib = load_gemm(Path(d))
        print(f"micro-kernel: {ffi.string(lib.bench_isa()).decode()}, threads {threads}; numpy single thread")
        print(f"{'M x N x K':>20} {'numpy':>8} {'onnxc':>8} {'A packed':>9} {'B packed':>9} {'ratio':>6}  GFLOP/s")
        rng = np.random.default_rng(0)
        for m, n, k in SHAPES:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            c = np.empty((m, n), dtype=np.float32)
            ap = np.empty(lib.bench_packed_a_size(m, k), dtype=np.float32)
            bp = np.empty(lib.bench_packed_b_size(k, n), dtype=np.float32)
            pa, pb, pc = (ffi.from_buffer("float[]", x) for x in (a, b, c))
            pap, pbp = ffi.from_buffer("float[]", ap), ffi.from_buffer("float[]", bp)
            lib.bench_pack(pa, pb, m, n, k, pap, pbp)
            flops = 2.0 * m * n * k
            runs = max(3, min(reps, int(reps * 2e9 / flops) + 1))
            times = best_of([partial(np.dot, a, b, out=c), partial(lib.bench_gemm, threads, m, n, k, pa, 0, pb, 0, pc),
                             partial(lib.bench_gemm, threads, m, n, k, pap, 2, pb, 0, pc),
                             partial(lib.bench_gemm, threads, m, n, k, pa, 0, pbp, 2, pc)], runs)
            np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(k))
            g = [flops / t / 1e9 for t in times]
            print(f"{f'{m} x {n} x {k}':>20} {g[0]:8.1f} {g[1]:8.1f} {g[2]:9.1f} {g[3]:9.1f} {g[1] / g[0]:6.2f}")


def bench_resnet(threads: int, runs: int = 20) -> None:
    import onnxruntime as ort

    import onnxc
    from benchmarks.models import make_feeds, model_path

    path = str(model_path("resnet50"))
    feeds = make_feeds("resnet50")
    model = onnxc.compile(path, threads=threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    got, want = model.run(feeds), sess.run(None, feeds)
    err = max(float(np.abs(g - w).max()) for g, w in zip(got.values(), want))
    ta, tb = [], []
    for _ in range(3):
        model.run(feeds)
        sess.run(None, feeds)
    for _ in range(runs):  # interleaved; CPU time of this process (robust to other load on the machine)
        t = time.process_time()
        model.run(feeds)
        ta.append(time.process_time() - t)
        t = time.process_time()
        sess.run(None, feeds)
        tb.append(time.process_time() - t)
    a, b = np.median(ta) * 1e3, np.median(tb) * 1e3
    print(f"resnet50 ({threads} thread(s), CPU ms per run): onnxc {a:.1f}  onnxruntime {b:.1f}  ratio {a / b:.2f}"
          f"  max abs diff {err:.2e}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--resnet", action="store_true", help="also time ResNet-50 against onnxruntime")
    args = ap.parse_args(argv)
    bench_gemm(args.reps, args.threads)
    if args.resnet:
        bench_resnet(args.threads)


if __name__ == "__main__":
    main()
