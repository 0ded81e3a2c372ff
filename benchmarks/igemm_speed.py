"""GOPS of onnxc's 8-bit integer GEMM (runtime_c/onnxc_igemm.h) beside the float GEMM's GFLOP/s, one thread.

    python benchmarks/igemm_speed.py [--reps 15] [--march native] [--threads 1]

Builds tests/ops/igemm_check.c for the target (the test's cffi binding) and times, on the same shapes
(M = N = K = 1024, and convolution GEMMs: M output channels, N = 3136 positions, K = 576 = 64 x 3 x 3):
- int8: A packed (s8 filter), B packed (u8 columns, as im2col leaves them) with an input zero point, int32
  out; the same with the QLinearConv requantization to uint8; A plain (MatMul: activations read by rows);
- im2col of the convolution's input into packed panels (K x N bytes), for scale;
- float: onnxc_sgemm_ex on packed A and packed B.
GOPS = 2 M N K / time. Each number is the best of ``--reps`` runs timed in the calling thread's CPU time
(time.thread_time), so a busy machine lengthens nothing but the wall clock; with --threads > 1 the wall
clock is used instead.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from tests.ops.test_igemm import GIVEN, GIVEN_HOT, OUT_U8, PLAIN, QLINEAR, IGemm  # noqa: E402

SHAPES = [(1024, 1024, 1024), (64, 3136, 576), (128, 3136, 576), (256, 3136, 576)]


def best(fn, reps: int, clock) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


def measure(ig: IGemm, m: int, n: int, k: int, reps: int, threads: int) -> dict[str, float]:
    """Seconds per call of each variant on one shape."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    A = rng.integers(-128, 128, (m, k)).astype(np.int8)
    B = rng.integers(0, 256, (k, n)).astype(np.uint8)
    Ap, Bp = ig.pack(A, False, False), ig.pack(B, True, True)
    mult = np.full(m, 1e-4, np.float32)
    common = dict(pa_u8=False, pb_u8=True, zb=[128], shape=(m, n, k), types=(False, True), threads=threads)
    out = {
        "int8": best(lambda: ig.gemm(Ap, Bp, GIVEN, GIVEN_HOT, **common), reps, clock),
        "int8 qlinear": best(lambda: ig.gemm(Ap, Bp, GIVEN, GIVEN_HOT, **common, mode=QLINEAR, mult=mult, zy=3,
                                             out_type=OUT_U8), reps, clock),
        "int8 plain A": best(lambda: ig.gemm(A, Bp, PLAIN, GIVEN, **common), reps, clock),
    }
    if n == 3136 and k == 576:  # the convolution's columns: 64 channels of 56 x 56, 3 x 3, pad 1
        x = rng.integers(0, 256, (64, 1, 56, 56)).astype(np.uint8)
        out["im2col"] = best(lambda: ig.im2col(x, 128, True, (1, 56, 56), (1, 3, 3), (1, 1, 1), (1, 1, 1),
                                               (0, 1, 1), threads=threads), reps, clock)
    ffi, lib = ig.ffi, ig.lib
    Af, Bf = A.astype(np.float32), B.astype(np.float32)
    Afp = np.zeros(-(-m // 12) * 12 * k, np.float32)
    Bfp = np.zeros(-(-n // 32) * 32 * k, np.float32)
    Cf = np.zeros((m, n), np.float32)
    f = ffi.cast
    lib.check_sg_pack(f("float *", Af.ctypes.data), f("float *", Bf.ctypes.data), m, n, k,
                      f("float *", Afp.ctypes.data), f("float *", Bfp.ctypes.data))
    out["float"] = best(lambda: lib.check_sgemm(threads, m, n, k, f("float *", Afp.ctypes.data),
                                                f("float *", Bfp.ctypes.data), f("float *", Cf.ctypes.data)),
                        reps, clock)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--march", default="native", help="-march of the build (native, haswell, x86-64, ...)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--isa", default=None, help="micro-kernel: avx512vnni, avx2, portable (default: the best this "
                    "CPU runs, chosen at run time)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ig = IGemm(Path(d), [f"-march={args.march}"], args.isa)
        print(f"integer GEMM micro-kernel: {ig.isa} (-march={args.march}), threads {args.threads}")
        print(f"{'M':>5} {'N':>5} {'K':>5}  {'int8':>6} {'qlinear':>7} {'plainA':>6}  {'float':>6}  {'int8/float':>10}"
              f"  {'im2col':>10}")
        for m, n, k in SHAPES:
            t = measure(ig, m, n, k, args.reps, args.threads)
            ops = 2.0 * m * n * k
            g = {name: ops / s / 1e9 for name, s in t.items()}
            im2col = f"{t['im2col'] * 1e3:7.3f} ms" if "im2col" in t else ""
            print(f"{m:5d} {n:5d} {k:5d}  {g['int8']:6.0f} {g['int8 qlinear']:7.0f} {g['int8 plain A']:6.0f}  "
                  f"{g['float']:6.0f}  {t['float'] / t['int8']:9.2f}x  {im2col:>10}")
        print("GOPS (int8) and GFLOP/s (float), best of", args.reps)


if __name__ == "__main__":
    main()
