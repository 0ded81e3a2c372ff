/* onnxc_hgemm.h: float16 / bfloat16 matrix product with numpy's rounding, cache- and register-blocked.
 *
 *   int onnxc_hgemm_f16(int threads, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t sam,
 *                       int64_t sak, const uint16_t *B, int64_t sbk, int64_t sbn, uint16_t *Y);
 *   int onnxc_hgemm_bf16(...)       the same for bfloat16
 *
 * Y[i][j] (row-major, leading dimension N) = round(sum_k A[i*sam + k*sak] * B[k*sbk + j*sbn]), where the
 * sum is a float32 accumulator starting at 0 and adding the products in k order, rounded to the half
 * type once: numpy's float16 matmul/dot (and ml_dtypes' bfloat16 dot). Products of two half values are
 * exact in float32, so a fused multiply-add gives the same bits. Any strides work (transposes, views).
 * Returns 0, or ONNXC_ERR_MEMORY.
 *
 * Blocking as in onnxc_gemm.h (Goto/BLIS: NC-column blocks, KC slices, MC-row blocks, MR x NR register
 * tiles), with one difference that keeps the summation order: a tile's accumulators carry over from one
 * KC slice to the next through a float32 copy of Y (exact), instead of each slice summing from zero.
 * Operands are converted to float32 while packed. Threads (the runtime's pool, onnxc_pool.h) split the rows
 * into stripes. Compiled once into the runtime library (onnxc_hgemm.c).
 */
#ifndef ONNXC_HGEMM_H
#define ONNXC_HGEMM_H

#include "onnxc.h"
#include "onnxc_half.h" /* the conversions, for the callers' epilogues */

ONNXC_RT_API int onnxc_hgemm_f16(int threads, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t sam,
                                 int64_t sak, const uint16_t *B, int64_t sbk, int64_t sbn, uint16_t *Y);
ONNXC_RT_API int onnxc_hgemm_bf16(int threads, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t sam,
                                  int64_t sak, const uint16_t *B, int64_t sbk, int64_t sbn, uint16_t *Y);

#endif /* ONNXC_HGEMM_H */
