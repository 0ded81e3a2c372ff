/* onnxc_gemv.h: matrix-vector products (M == 1 and small M) with a constant B packed at compile time;
 * implemented in onnxc_gemv.c (compiled once into the runtime library), with its tuning knobs
 * (ONNXC_GV_KC, ONNXC_GV_PFD, ONNXC_GV_PAR_MIN) and the per-ISA register tiles.
 *
 *   void onnxc_gemv(int threads, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
 *                   const float *Bp, float beta, const float *C, int64_t csi, int64_t csj,
 *                   const float *R, int act, float act_a, float act_b, float *Y, int64_t ldy);
 *
 *   Y[i][j] = act(alpha * sum_k A[i * lda + k] B[k][j] + beta * C[i * csi + j * csj] + R[i * ldy + j])
 *
 * for i < M (M <= ONNXC_GV_MMAX), j < N; C and R may be NULL (no term), act is an ONNXC_ACT_* code
 * (onnxc_act.h) with its parameters. Y must not overlap A.
 *
 * Why a separate kernel: at batch 1 a fully connected layer reads every weight exactly once, so its
 * time is the time to stream B from wherever it lives (L3 or DRAM for multi-megabyte layers); the
 * blocked GEMM's panels, A packing and 12-row micro-tiles do not help. Here B streams once, front to
 * back, in full-width vector loads, all rows of A consume each loaded vector, the accumulators stay in
 * registers for the whole K loop, and bias, residual and activation are applied to the finished
 * columns of each panel while they are in registers or L1. Threads (for products large enough to
 * repay a fork) take pairs of panels, each a contiguous stretch of B, dynamically.
 *
 * Packed layout of B (K x N), the same pure function as codegen/kernels/gemv.py (tested to agree):
 * ceil(N / 64) panels of ONNXC_GV_NB = 64 columns; panel p holds columns [64 p, 64 p + w) with
 * w = 64, except the last panel whose width is N - 64 p rounded up to a multiple of 16 (zero padding);
 * B[k][64 p + j] is at 64 p K + k w + j. A panel is one contiguous run, read row by row.
 * With M > ONNXC_GV_MR the rows go in groups, and K in slices of ONNXC_GV_KC so that a slice of a
 * panel stays in cache while every row group passes over it.
 */
#ifndef ONNXC_GEMV_H
#define ONNXC_GEMV_H

#include "onnxc.h"
#include "onnxc_act.h"

#define ONNXC_GV_NB 64   /* columns per panel */
#define ONNXC_GV_MMAX 8  /* largest M */

/* Elements of the packed form of a K x N B operand. */
static inline int64_t onnxc_gv_packed_size(int64_t K, int64_t N) {
    const int64_t full = N / ONNXC_GV_NB, rest = N - full * ONNXC_GV_NB;
    return (full * ONNXC_GV_NB + (rest + 15) / 16 * 16) * K;
}

/* See the top of this file. */
ONNXC_RT_API void onnxc_gemv(int threads, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                             int64_t lda, const float *Bp, float beta, const float *C, int64_t csi, int64_t csj,
                             const float *R, int act, float act_a, float act_b, float *Y, int64_t ldy);

/* The naive reference (B unpacked, K x N row-major), for tests. */
ONNXC_RT_API void onnxc_gemv_ref(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                 const float *B, float beta, const float *C, int64_t csi, int64_t csj,
                                 const float *R, int act, float act_a, float act_b, float *Y, int64_t ldy);

#endif /* ONNXC_GEMV_H */
