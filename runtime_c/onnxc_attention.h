/* onnxc_attention.h: softmax rows without subnormal numbers, and the fused attention of one row block.
 *
 *   void onnxc_att_softmax_row(const float *x, float *y, int64_t n)
 *       y = softmax(x) over n elements (y may be x).
 *   float onnxc_att_logsumexp_shift(const float *x, int64_t n, float *m)
 *       *m = max(x), returns log(sum exp(x - *m)) (LogSoftmax).
 *   void onnxc_att_scores_row(float *s, int64_t n, int mode, float c, const float *mask, int64_t ms)
 *       s = softmax(s * c | s / c | s, + mask[j * ms]) in place (mode ONNXC_ATT_{NONE,MUL,DIV}; mask NULL: none).
 *
 * Why not the plain exp rows: an additive attention mask (-10000 or -inf on padded keys) drives exp
 * into the subnormal range, and on x86 every subnormal result or operand costs a microcode assist
 * (~100 cycles) in the exp, in the normalization and again in the next MatMul reading the
 * probabilities: a masked 12x128x128 softmax ran 7x slower than an unmasked one. Here an exponential
 * whose normalized result could be subnormal is flushed to zero: with d = x - max, e = exp(d) is kept
 * when d >= log(FLT_MIN) + log(n), so e >= FLT_MIN * n and, as the sum s <= n, e / s >= FLT_MIN. The
 * flushed probabilities are below FLT_MIN * n / s (1e-35 for n = 128): far under any tolerance.
 * The max, the sum and the scaling by 1 / sum are computed as in softmax.py's rows (onnxc_vmath.h), so
 * unmasked rows give the same bits.
 *
 * The row functions are compiled once into the runtime library (onnxc_attention.c); they are called
 * once per row.
 */
#ifndef ONNXC_ATTENTION_H
#define ONNXC_ATTENTION_H

#include <stdint.h>

#include "onnxc.h"

enum { ONNXC_ATT_NONE = 0, ONNXC_ATT_MUL = 1, ONNXC_ATT_DIV = 2 };

/* y = softmax(x) over n elements (y may be x). */
ONNXC_RT_API void onnxc_att_softmax_row(const float *x, float *y, int64_t n);

/* *m = max(x), returns log(sum exp(x - *m)) (LogSoftmax). */
ONNXC_RT_API float onnxc_att_logsumexp_shift(const float *x, int64_t n, float *m);

/* s = softmax(s * c | s / c | s, + mask[j * ms]) in place (mode ONNXC_ATT_{NONE,MUL,DIV}; mask NULL: none). */
ONNXC_RT_API void onnxc_att_scores_row(float *s, int64_t n, int mode, float c, const float *mask, int64_t ms);

#endif /* ONNXC_ATTENTION_H */
