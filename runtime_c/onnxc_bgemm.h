/* onnxc_bgemm.h: the bfloat16 GEMM of precision="bf16": float32 operands rounded to bfloat16 (round to
 * nearest even), products accumulated in float32, the epilogue in float32. Implemented in onnxc_bgemm.c.
 *
 *   int onnxc_bgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha,
 *                      const void *A, int64_t lda, int fa, const void *B, int64_t ldb, int fb,
 *                      float beta, float *C, int64_t ldc, const onnxc_sg_epi *epi);
 *
 * C[M x N] = act(alpha * bf16(op(A)) bf16(op(B)) + beta * C + bias + R), as onnxc_sgemm_ex (onnxc_sgemm.h).
 * fa / fb say how an operand is stored:
 *   ONNXC_SG_PLAIN / ONNXC_SG_TRANS   float32, row-major (or its transpose), rounded while it is packed;
 *   ONNXC_BG_PACKED                   bf16 pairs in the packed layout below (weights packed at compile time,
 *                                     codegen/kernels/bgemm_layout.py pack_a_bf16 / pack_b_bf16).
 *
 * Packed layout: a "pair" is one uint32 holding the bf16 of elements k (low half) and k + 1 (high half) of
 * the K axis, which is what VDPBF16PS multiplies and adds; K2 = ceil(K / 2) pairs, the missing k of an odd K
 * is zero:
 *   packed A (M x K):  ceil(M / 12) panels of K2 x 12 pairs:  pair (i, q) at (i / 12) * K2 * 12 + q * 12 + i % 12
 *   packed B (K x N):  ceil(N / 32) panels of K2 x 32 pairs:  pair (q, j) at (j / 32) * K2 * 32 + q * 32 + j % 32
 * zeros in the padding rows / columns of the last panel: the float GEMM's layout with pairs for floats.
 *
 * Micro-kernels (12 x 32 tile of float accumulators), chosen at run time (onnxc_isa.h):
 *   avx512bf16   VDPBF16PS: 32 multiply-adds per instruction (VFMADD231PS: 16), 24 zmm accumulators
 *   portable     the same arithmetic in C (bf16 widened to float): correct anywhere, not fast
 * Algorithm: Goto/BLIS as onnxc_sgemm.h; threads take stripes of panels along the operand that is packed at
 * run time (so it is packed once), each stripe with its own buffers.
 */
#ifndef ONNXC_BGEMM_H
#define ONNXC_BGEMM_H

#include "onnxc_gemm.h"

#define ONNXC_BG_MR 12
#define ONNXC_BG_NR 32
#ifndef ONNXC_BG_KC
#define ONNXC_BG_KC 512 /* K per slice (even: slices start on a pair) */
#endif
#define ONNXC_BG_MC (ONNXC_BG_MR * 12)
#define ONNXC_BG_NC (ONNXC_BG_NR * 16)

enum { ONNXC_BG_PACKED = 4 };

/* Pairs of the packed form of an M x K (A) or K x N (B) operand. */
static inline int64_t onnxc_bg_packed_a_size(int64_t M, int64_t K) {
    return (M + ONNXC_BG_MR - 1) / ONNXC_BG_MR * ONNXC_BG_MR * ((K + 1) / 2);
}
static inline int64_t onnxc_bg_packed_b_size(int64_t K, int64_t N) {
    return (N + ONNXC_BG_NR - 1) / ONNXC_BG_NR * ONNXC_BG_NR * ((K + 1) / 2);
}

/* Pack rows [0, mc) x cols [0, kc) of op(A) (float32) into 12-row panels of ceil(kc / 2) x 12 pairs. */
ONNXC_RT_API void onnxc_bg_pack_a(int trans, const float *A, int64_t lda, int64_t mc, int64_t kc,
                                   uint32_t *restrict dst);

/* Pack rows [0, kc) x cols [0, nc) of op(B) (float32) into 32-column panels of ceil(kc / 2) x 32 pairs. */
ONNXC_RT_API void onnxc_bg_pack_b(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                   uint32_t *restrict dst);

/* See the top of this file. Returns 0, or ONNXC_ERR_MEMORY when a packing buffer cannot be allocated. */
ONNXC_RT_API int onnxc_bgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                                 int64_t lda, int fa, const void *B, int64_t ldb, int fb, float beta, float *C,
                                 int64_t ldc, const onnxc_sg_epi *epi);

/* Convolution (Y = act(A cols + bias + R), Y of M x OP, OP = OD * OH * OW) with A the filter packed as
 * bf16 (M x K) and column (od, oh, ow) of row k of cols being xp[koff[k] + (od * SD * XH + oh * SH) * XW + ow]:
 * onnxc_sg_conv_rows (onnxc_sgemm.h) with unit stride along W (a strided convolution reads the input split
 * by phase, onnxc_sg_pad_input_phased) and B panels of bf16 pairs built straight from xp, two taps a row. */
ONNXC_RT_API int onnxc_bg_conv_rows(int threads, int64_t M, int64_t K, const void *Ap, const float *xp,
                                     const int64_t *koff, int64_t XH, int64_t XW, int64_t OD, int64_t OH, int64_t OW,
                                     int64_t SD, int64_t SH, float *Y, const onnxc_sg_epi *epi);

/* The micro-kernel in use: "avx512bf16" or "portable" (the CPU's best, capped by ONNXC_ISA). */
ONNXC_RT_API const char *onnxc_bgemm_isa(void);

/* Use the kernel of ISA level ``name`` (onnxc_isa.h) from now on; -1 when this CPU cannot run it. */
ONNXC_RT_API int onnxc_bgemm_use_isa(const char *name);

#endif /* ONNXC_BGEMM_H */
