/* onnxc_sgemm.h: the float GEMM: packed operands, cache blocking, ISA micro-kernels, fused epilogue.
 * Included by onnxc_gemm.h (see there for onnxc_sgemm); implemented in onnxc_sgemm.c. The extended
 * entry point is
 *
 *   int onnxc_sgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha,
 *                      const float *A, int64_t lda, int fa, const float *B, int64_t ldb, int fb,
 *                      float beta, float *C, int64_t ldc, const onnxc_sg_epi *epi);
 *
 * C[M x N] (row-major, leading dimension ldc) = act(alpha * op(A) op(B) + beta * C + bias + R).
 * fa / fb say how an operand is stored: ONNXC_SG_PLAIN (row-major, leading dimension lda / ldb),
 * ONNXC_SG_TRANS (its transpose is stored) or ONNXC_SG_PACKED (already in the packed layout below,
 * e.g. weights packed at compile time; the leading dimension is ignored); B may also be
 * ONNXC_SG_PACKED_B_HOT (packed layout, just written by the caller). beta == 0 makes C write-only.
 * epi (NULL: none) adds a bias (per row or per column), a residual R and applies an activation
 * (onnxc_act.h) to each output tile right after its last K slice, while it is in cache.
 * Returns 0, or ONNXC_ERR_MEMORY when a packing buffer cannot be allocated.
 *
 * Packed layout (the same pure function in codegen/kernels/gemm_layout.py, tested to agree):
 *   packed A (M x K):  ceil(M / 12) panels of K x 12:  A[i][p] at (i / 12) * K * 12 + p * 12 + i % 12
 *   packed B (K x N):  ceil(N / 32) panels of K x 32:  B[p][j] at (j / 32) * K * 32 + p * 32 + j % 32
 * with zeros in the padding rows / columns of the last panel. A K-slice [pc, pc + kc) of a panel is the
 * contiguous run starting at pc * 12 (pc * 32), which is what the micro-kernel reads.
 *
 * Algorithm (Goto/BLIS): C in NC-column blocks, K in KC slices, rows in MC blocks; B slices are packed
 * into 32-wide panels, A blocks into 12-tall panels (skipped for pre-packed operands; with AVX-512 a plain
 * row-major A is read in place by whole 12-row panels, only a last partial panel packed), and the 12 x 32
 * micro-kernel of onnxc_sgemm_kern.h accumulates. Threads (when the product is large enough) take
 * stripes of whole panels along N or M, each with its own buffers. Vector shapes (M or N of 1) and tiny
 * products take unpacked paths.
 *
 * For convolutions, onnxc_sg_im2col_packed writes the im2col columns of a chunk of output positions
 * straight into packed B panels (no separate copy), and the filter is packed A from compile time.
 */
#ifndef ONNXC_SGEMM_H
#define ONNXC_SGEMM_H

#include "onnxc.h"
#include "onnxc_act.h"

#ifndef ONNXC_SG_KC
#define ONNXC_SG_KC 384
#endif
#ifndef ONNXC_SG_MC
#define ONNXC_SG_MC (ONNXC_SG_MR * 12)
#endif
#ifndef ONNXC_SG_NC
#define ONNXC_SG_NC (ONNXC_SG_NR * 32)
#endif

#ifndef ONNXC_SG_SHARED_MAX
#define ONNXC_SG_SHARED_MAX (8 << 20) /* floats of an operand packed once for all threads (32 MiB) */
#endif

/* ONNXC_SG_PACKED_B_HOT: B in the packed layout, written by the caller just before (im2col columns, a
 * Winograd transform: in cache), as opposed to ONNXC_SG_PACKED, pre-packed weights read from memory;
 * the two only differ in the order blocks are walked (onnxc_sg_stripe). */
enum { ONNXC_SG_PLAIN = 0, ONNXC_SG_TRANS = 1, ONNXC_SG_PACKED = 2, ONNXC_SG_PACKED_B_HOT = 3 };
#define ONNXC_SG_XSLACK (2 * ONNXC_SG_NR) /* floats readable past a padded convolution input */

/* Epilogue: C = act(C + bias + R) on the finished output. */
typedef struct onnxc_sg_epi {
    const float *bias; /* NULL, or bias[i] (bias_cols == 0) / bias[j] (bias_cols != 0) */
    int bias_cols;
    const float *res;  /* NULL, or the residual R[i * ldr + j] */
    int64_t ldr;
    int act;           /* ONNXC_ACT_* */
    float a, b;        /* activation parameters */
} onnxc_sg_epi;

/* Panel sizes of the packed layout: one layout for every target (onnxc_sgemm_kern.h). */
#define ONNXC_SG_MR 12
#define ONNXC_SG_NR 32

/* Elements of the packed form of an M x K (A) or K x N (B) operand. */
static inline int64_t onnxc_sg_packed_a_size(int64_t M, int64_t K) {
    return (M + ONNXC_SG_MR - 1) / ONNXC_SG_MR * ONNXC_SG_MR * K;
}
static inline int64_t onnxc_sg_packed_b_size(int64_t K, int64_t N) {
    return (N + ONNXC_SG_NR - 1) / ONNXC_SG_NR * ONNXC_SG_NR * K;
}

/* Pack rows [0, mc) x cols [0, kc) of op(A) into 12-row panels of kc x 12 (the layout above, K = kc). */
ONNXC_RT_API void onnxc_sg_pack_a(int trans, const float *A, int64_t lda, int64_t mc, int64_t kc,
                                   float *restrict dst);

/* Pack rows [0, kc) x cols [0, nc) of op(B) into 32-column panels of kc x 32. */
ONNXC_RT_API void onnxc_sg_pack_b(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                   float *restrict dst);

/* im2col of a chunk of output positions [j0, j0 + ncol) straight into packed B panels (KG rows of 32):
 * row k = (c, kd, kh, kw) of the column matrix of a 3-D convolution (2-D and 1-D with size-1 axes) on
 * the input planes x (Cg planes of ID x IH x IW) with kernel, strides, dilations and leading pads given
 * per axis; zeros where the window reads padding, and in the padding columns of the last panel. */
ONNXC_RT_API void onnxc_sg_im2col_packed(int threads, const float *x, int64_t ID, int64_t IH, int64_t IW,
                                          int64_t OH, int64_t OW, const int64_t *kdim, const int64_t *stride,
                                          const int64_t *dil, const int64_t *pad, int64_t KG, int64_t j0,
                                          int64_t ncol, float *restrict colp);

/* Apply the epilogue to the mr x nr block of C at global position (i0, j0). */
ONNXC_RT_API void onnxc_sg_epilogue(const onnxc_sg_epi *e, float *c, int64_t ldc, int64_t i0, int64_t j0,
                                     int64_t mr, int64_t nr);

/* See the top of this file. */
ONNXC_RT_API int onnxc_sgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          int fa, const float *B, int64_t ldb, int fb, float beta, float *C, int64_t ldc,
                          const onnxc_sg_epi *epi);

/* C = alpha * op(A) op(B) + beta * C (BLAS sgemm semantics, row-major). */
ONNXC_RT_API int onnxc_sgemm(int threads, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                              int64_t ldc);

/* The naive reference kernel, for tests. */
ONNXC_RT_API int onnxc_sgemm_ref(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                  int64_t ldc);

/* The micro-kernel the library was built with: "avx512", "avx2", "neon" or "portable". */
ONNXC_RT_API const char *onnxc_sgemm_isa(void);

/* The convolution rows path and its padded input copies (onnxc_conv_rows.c) */
#include "onnxc_conv_rows.h"

#endif /* ONNXC_SGEMM_H */
