/* onnxc_act.h: the activations a GEMM / convolution epilogue applies to an output row while it is hot.
 *
 *   void onnxc_act_row_f(int act, float a, float b, float *x, int64_t n);    in place, x[0..n)
 *   void onnxc_act_row_d(int act, double a, double b, double *x, int64_t n);
 *
 * act is one of the codes below (codegen/kernels/epilogue.py maps node attributes to them); a and b
 * are its parameters. Semantics follow the ONNX ops (NaN in, NaN out):
 *   RELU         max(x, 0)                          CLIP        min(max(x, a), b)
 *   LEAKYRELU    x < 0 ? a * x : x                  SIGMOID     1 / (1 + exp(-x))
 *   HARDSIGMOID  max(0, min(1, a * x + b))          HARDSWISH   x * max(0, min(1, x / 6 + 1 / 2))
 *   TANH         tanh(x)
 *
 * Header-only on purpose (static inline, not in the runtime library): generated code calls these once per
 * output row (a depthwise row can be 7 elements) with a constant act code, so inlined the switch folds
 * away and only that activation's loop is compiled. The runtime's own .c files (GEMM and GEMV epilogues,
 * Winograd) include it as well.
 */
#ifndef ONNXC_ACT_H
#define ONNXC_ACT_H

#include "onnxc.h"

enum {
    ONNXC_ACT_NONE = 0,
    ONNXC_ACT_RELU = 1,
    ONNXC_ACT_CLIP = 2,
    ONNXC_ACT_LEAKYRELU = 3,
    ONNXC_ACT_SIGMOID = 4,
    ONNXC_ACT_HARDSIGMOID = 5,
    ONNXC_ACT_HARDSWISH = 6,
    ONNXC_ACT_TANH = 7,
};

#define ONNXC_ACT_ROW(T, sfx, EXP, TANH)                                                              \
    static inline void onnxc_act_row_##sfx(int act, T a, T b, T *restrict x, int64_t n) {           \
        switch (act) {                                                                             \
        case ONNXC_ACT_RELU:                                                                       \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) x[j] = x[j] < 0 ? (T)0 : x[j];      \
            break;                                                                                 \
        case ONNXC_ACT_CLIP:                                                                       \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = x[j] < a ? a : x[j];                                                         \
                x[j] = v > b ? b : v;                                                              \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_LEAKYRELU:                                                                  \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) x[j] = x[j] < 0 ? a * x[j] : x[j];  \
            break;                                                                                 \
        case ONNXC_ACT_SIGMOID:                                                                    \
            for (int64_t j = 0; j < n; j++) x[j] = (T)1 / ((T)1 + EXP(-x[j]));                     \
            break;                                                                                 \
        case ONNXC_ACT_HARDSIGMOID:                                                                \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = a * x[j] + b;                                                                \
                v = v < 0 ? (T)0 : v;                                                              \
                x[j] = v > 1 ? (T)1 : v;                                                           \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_HARDSWISH:                                                                  \
            _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                   \
                T v = x[j] / 6 + (T)0.5;                                                           \
                v = v < 0 ? (T)0 : v;                                                              \
                x[j] = x[j] * (v > 1 ? (T)1 : v);                                                  \
            }                                                                                      \
            break;                                                                                 \
        case ONNXC_ACT_TANH:                                                                       \
            for (int64_t j = 0; j < n; j++) x[j] = TANH(x[j]);                                     \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

ONNXC_ACT_ROW(float, f, expf, tanhf)
ONNXC_ACT_ROW(double, d, exp, tanh)
#undef ONNXC_ACT_ROW

#endif /* ONNXC_ACT_H */
