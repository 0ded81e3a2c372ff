/* onnxc_dynq.h: DynamicQuantizeLinear (opset 11) as two passes over the data, compiled once into the
 * runtime library (onnxc_dynq.c).
 *
 *   void onnxc_dynq(int threads, const float *x, int64_t n, uint8_t *y, float *scale, uint8_t *zp);
 *
 * The rule, in float32, step by step as the ONNX function body (and its expansion in
 * passes/expansions/quantize.py) computes it:
 *   hi = max(max(x), 0), lo = min(min(x), 0), span = hi - lo (1 when 0), scale = span / 255,
 *   zp = rint(clamp(-lo / scale, 0, 255)), y = clamp(rint(x / scale) + zp, 0, 255)
 * with rint rounding half to even and NaN elements ignored by the range (a NaN element quantizes to 0).
 * n == 0 gives scale 1/255 and zp 0. Pass 1 takes the range (per-chunk minima and maxima, combined in
 * chunk order), pass 2 quantizes; both split among threads (onnxc_pool.h) above a grain. Pass 2 multiplies
 * by 1 / scale and redoes with the division any block where an element lands near a half step, so the
 * bytes are always those of x / scale (onnxc_dynq.c says why that is exact).
 */
#ifndef ONNXC_DYNQ_H
#define ONNXC_DYNQ_H

#include "onnxc.h"

ONNXC_RT_API void onnxc_dynq(int threads, const float *x, int64_t n, uint8_t *y, float *scale, uint8_t *zp);

#endif /* ONNXC_DYNQ_H */
