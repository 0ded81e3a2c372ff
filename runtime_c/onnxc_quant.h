/* Scalar helpers of the quantization kernels (codegen/kernels/quant.py, codegen/kernels/qlinear.py).
 *
 * Rounding is the FPU's default mode, round half to even (rint/rintf). Saturation clamps to the
 * quantized type's range; NaN maps to the low end of the range (what a saturating conversion of the
 * ONNX reference implementation gives on x86). float16 / bfloat16 arithmetic is emulated in float32
 * by rounding each result back to the half type (exact: float32 has more than twice the precision).
 * The scalar helpers are static inline (per-element loops inline them); the integer GEMM
 * onnxc_qgemm_s16 is compiled once into the runtime library (onnxc_quant.c).
 */
#ifndef ONNXC_QUANT_H
#define ONNXC_QUANT_H

#include <math.h>
#include <stdint.h>

#include "onnxc.h"
#include "onnxc_half.h"

/* r clamped to [lo, hi]; NaN -> lo */
static inline float onnxc_qclampf(float r, float lo, float hi) { return r >= lo ? (r <= hi ? r : hi) : lo; }
static inline double onnxc_qclamp(double r, double lo, double hi) { return r >= lo ? (r <= hi ? r : hi) : lo; }

/* float32 values rounded to float16 / bfloat16 precision */
static inline float onnxc_round_h(float x) { return onnxc_h2f(onnxc_f2h(x)); }
static inline float onnxc_round_bf(float x) { return onnxc_bf2f(onnxc_f2bf(x)); }

/* Requantize an int32 accumulator: rint(acc * mult + zp) saturated to [lo, hi], computed in double
 * like the ONNX reference (int32 array times float scale promotes to float64). */
static inline double onnxc_requant(int32_t acc, float mult, double zp, double lo, double hi) {
    return onnxc_qclamp(rint((double)acc * (double)mult + zp), lo, hi);
}

/* Exact integer GEMM on zero-point-shifted operands:
 *     C[m * ldc + n] = sum_k A[m * lda + k] * BT[n * ldb + k]
 * A is M x K, BT is B transposed (N x K), both int16 with |values| <= 255 so every product fits; sums
 * wrap in 32 bits (unsigned, so overflow is defined). 4 x 2 blocks of dot products over contiguous K,
 * which compilers turn into multiply-add instructions on int16 pairs (pmaddwd / vpdpwssd); columns
 * go in chunks of about 96 KiB of BT so a chunk stays in cache while every row block passes over it.
 * Compiled once into the runtime library (onnxc_quant.c). */
ONNXC_RT_API void onnxc_qgemm_s16(int64_t M, int64_t N, int64_t K, const int16_t *A, int64_t lda,
                                  const int16_t *BT, int64_t ldb, uint32_t *C, int64_t ldc, int threads);

#endif
