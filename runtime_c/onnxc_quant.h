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

/* A row of requantized 8-bit outputs, bit-identical to onnxc_requant per element:
 *     y[j] = saturate(rint((double)(int32_t)(acc[j] + bias) * (double)mult[j or 0] + zy))
 * with y uint8 (s8 == 0) or int8, bias added with wrap-around, mult one value (mult_per == 0) or one per
 * element. Computed in float32 where that gives the same integer: (float)v * mult + zy is a monotone
 * rounding of the exact value that leaves the ties k + 1/2 (representable below 2^22) in place, so its
 * rint differs from the exact one only when it lands on a tie; such lanes, and |v| >= 2^24 (not exact in
 * float), are recomputed in double. Beyond |f| >= 2^22 both saturate. AVX-512: 16 lanes per step with
 * intrinsics; elsewhere the double formula. Compiled once into the runtime library (onnxc_quant.c). */
ONNXC_RT_API void onnxc_requant_row(const int32_t *acc, int64_t n, int32_t bias, const float *mult, int mult_per,
                                    int32_t zy, int s8, void *y);

/* onnxc_requant_row for each of `rows` rows (one multiplier and one bias per row): row r of the tile
 * reads acc + r * lda, adds bias[r] (bias NULL: 0), uses mult[r] and writes n bytes at y + r * ldy.
 * One call for a GEMM tile, so the rows' vector work overlaps instead of each row's dependency chain
 * (load, convert, multiply-add, round, tie test) being waited for at a call's end. `narrow` (nonzero)
 * promises |acc + bias| < 2^24 for every element: the test for wide accumulators is skipped. */
ONNXC_RT_API void onnxc_requant_tile(const int32_t *acc, int64_t lda, int64_t rows, int64_t n, const int32_t *bias,
                                     const float *mult, int32_t zy, int s8, void *y, int64_t ldy, int narrow);

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
