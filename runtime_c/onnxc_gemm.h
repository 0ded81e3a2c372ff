/* onnxc_gemm.h: the GEMM of onnxc kernels (float and double).
 *
 *   int onnxc_sgemm(int threads, int transA, int transB, int64_t M, int64_t N, int64_t K,
 *                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
 *                   float beta, float *C, int64_t ldc);
 *   int onnxc_dgemm(...)            the same for double
 *   int onnxc_sgemm_ref(...), onnxc_dgemm_ref(...)   naive reference (same arguments), for tests
 *   int onnxc_sgemm_ex(...)         float with pre-packed operands and a fused epilogue (onnxc_sgemm.h)
 *
 * Row-major: C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C, where op(X) is X, or X^T when
 * the trans flag is set (then A is stored K x M with leading dimension lda, B as N x K). As in BLAS,
 * beta == 0 makes C write-only: its old contents (possibly NaN) are never read. Returns 0, or
 * ONNXC_ERR_MEMORY when a packing buffer cannot be allocated.
 *
 * float: onnxc_sgemm.h / .c (packed 12 x 32 panels, AVX-512 / AVX2+FMA / NEON / portable micro-kernels
 * of onnxc_sgemm_kern.h, chosen by the compile target). double (onnxc_gemm.c), and the float paths for
 * vectors and tiny products: onnxc_gemm_impl.h, a portable Goto/BLIS GEMM whose micro-kernel is plain C
 * with `omp simd` (instantiated once per element type; the float instance, in onnxc_sgemm.c, is named
 * onnxc_sx*). The runtime library compiles both once (codegen/runtime_lib.py).
 */
#ifndef ONNXC_GEMM_H
#define ONNXC_GEMM_H

#include "onnxc.h"

/* Blocking; each may be overridden with -D for tuning experiments. */
#ifndef ONNXC_SGEMM_NR
#if defined(__AVX512F__)
#define ONNXC_SGEMM_NR 32
#define ONNXC_DGEMM_NR 16
#elif defined(__AVX__)
#define ONNXC_SGEMM_NR 16
#define ONNXC_DGEMM_NR 8
#else
#define ONNXC_SGEMM_NR 8
#define ONNXC_DGEMM_NR 4
#endif
#endif
#ifndef ONNXC_GEMM_MR
#if defined(__AVX512F__)
#define ONNXC_GEMM_MR 8 /* 16 zmm accumulators of 32 registers */
#else
#define ONNXC_GEMM_MR 6 /* 12 accumulators of 16 registers */
#endif
#endif
#ifndef ONNXC_GEMM_KC
#define ONNXC_GEMM_KC 256
#endif
#ifndef ONNXC_GEMM_MC
#define ONNXC_GEMM_MC (ONNXC_GEMM_MR * 16)
#endif
#ifndef ONNXC_GEMM_NC
#define ONNXC_GEMM_NC 512
#endif
/* Up to this many multiply-adds a call skips packing. */
#ifndef ONNXC_GEMM_SMALL
#define ONNXC_GEMM_SMALL 1024
#endif
/* Below this many multiply-adds a call runs on one thread. */
#ifndef ONNXC_GEMM_PAR_MIN
#define ONNXC_GEMM_PAR_MIN 65536
#endif

/* double GEMM (the float one, onnxc_sgemm, is declared in onnxc_sgemm.h); onnxc_gemm.c. */
ONNXC_RT_API int onnxc_dgemm(int threads, int transA, int transB, int64_t M, int64_t N, int64_t K, double alpha,
                             const double *A, int64_t lda, const double *B, int64_t ldb, double beta, double *C,
                             int64_t ldc);
ONNXC_RT_API int onnxc_dgemm_ref(int transA, int transB, int64_t M, int64_t N, int64_t K, double alpha,
                                 const double *A, int64_t lda, const double *B, int64_t ldb, double beta, double *C,
                                 int64_t ldc);

#include "onnxc_sgemm.h"

#endif /* ONNXC_GEMM_H */
