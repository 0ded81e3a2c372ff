/* onnxc Resize/Upsample helpers: output sizes from scales or sizes, and per-axis sampling tables.
 *
 * Resize is separable: every output coordinate along an axis reads `taps` source indices of that
 * axis with fixed weights. The tables are built once per call (per output coordinate of each axis),
 * following onnx.reference: coordinates in double, ratio in (0, 1] (an exact source coordinate picks
 * the window ending on it), linear / Keys cubic weights, the antialias filter stretched by 1/scale
 * when downscaling (normalized), exclude_outside renormalizing the weights inside the input, and
 * taps clamped into the input (edge padding). Kernels then run one pass per resized axis (linear,
 * cubic) or one gather (nearest).
 *
 * The types and codes are here; the planning and table building (once per call) are in onnxc_resize.c,
 * compiled once into the runtime library. The resampling passes are generated per model
 * (codegen/kernels/resize.py).
 */
#ifndef ONNXC_RESIZE_H
#define ONNXC_RESIZE_H

#include "onnxc.h"

enum { ONNXC_RZ_NEAREST = 0, ONNXC_RZ_LINEAR = 1, ONNXC_RZ_CUBIC = 2 };
enum {
    ONNXC_RZ_HALF_PIXEL = 0, ONNXC_RZ_HALF_PIXEL_SYMMETRIC, ONNXC_RZ_PYTORCH_HALF_PIXEL, ONNXC_RZ_ALIGN_CORNERS,
    ONNXC_RZ_ASYMMETRIC, ONNXC_RZ_TF_HALF_PIXEL_FOR_NN, ONNXC_RZ_TF_CROP_AND_RESIZE
};
/* nearest_mode; LEGACY is Upsample / Resize-10 (as onnxruntime): floor when upscaling, ceil when downscaling */
enum { ONNXC_RZ_ROUND_PREFER_FLOOR = 0, ONNXC_RZ_ROUND_PREFER_CEIL, ONNXC_RZ_FLOOR, ONNXC_RZ_CEIL, ONNXC_RZ_LEGACY };

typedef struct {
    int mode, ctm, nearest, antialias, exclude_outside;
    double cubic_a;
    int roi_f32; /* the roi is float32 (or narrower): its differences are computed in float, as onnx.reference */
} onnxc_resize_opts;

/* Sampling table of one axis. */
typedef struct {
    int64_t in, out;
    int taps;           /* source taps per output coordinate (1 for nearest) */
    int identity;       /* the axis is unchanged (no pass needed) */
    int64_t *idx;       /* out * taps source indices in [0, in); nearest: -1 where extrapolated */
    double *w;          /* out * taps weights (linear / cubic) */
    unsigned char *ext; /* out flags: the coordinate is outside the input (tf_crop_and_resize) */
    int any_ext;        /* some ext flag is set */
} onnxc_resize_axis;

/* d[j] = s[j / rep] for j < L (n = ceil(L / rep) source elements): a row of a nearest upscale by an integer
 * factor along its last axis, without the table (an element size each: the gather is type-agnostic). */
#define ONNXC_RESIZE_REPEAT(N, T)                                                                          \
    static inline void onnxc_resize_repeat_##N(const void *src, int64_t n, int64_t rep, int64_t L, void *dst) { \
        const T *restrict s = (const T *)src;                                                              \
        T *restrict d = (T *)dst;                                                                          \
        if (rep == 2 && L == 2 * n) {                                                                      \
            for (int64_t k = 0; k < n; k++) d[2 * k] = d[2 * k + 1] = s[k];                                \
            return;                                                                                        \
        }                                                                                                  \
        for (int64_t k = 0, j = 0; k < n; k++)                                                             \
            for (int64_t r = 0; r < rep && j < L; r++, j++) d[j] = s[k];                                   \
    }
ONNXC_RESIZE_REPEAT(1, uint8_t)
ONNXC_RESIZE_REPEAT(2, uint16_t)
ONNXC_RESIZE_REPEAT(8, uint64_t)
#if defined(__AVX512F__)
#include <immintrin.h>
/* (4-byte elements doubled: 16 sources into 32 outputs by two permutes; the rest as above) */
static inline void onnxc_resize_repeat_4(const void *src, int64_t n, int64_t rep, int64_t L, void *dst) {
    const uint32_t *restrict s = (const uint32_t *)src;
    uint32_t *restrict d = (uint32_t *)dst;
    int64_t k = 0;
    if (rep == 2 && L == 2 * n) {
        const __m512i lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        const __m512i hi = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
        for (; k + 16 <= n; k += 16) {
            const __m512i v = _mm512_loadu_si512((const void *)(s + k));
            _mm512_storeu_si512((void *)(d + 2 * k), _mm512_permutexvar_epi32(lo, v));
            _mm512_storeu_si512((void *)(d + 2 * k + 16), _mm512_permutexvar_epi32(hi, v));
        }
        if (k < n) { /* the last m < 16 sources (a 10-wide row: all of it) through masks */
            const int m = (int)(n - k);
            const __m512i v = _mm512_maskz_loadu_epi32((__mmask16)((1u << m) - 1u), s + k);
            const unsigned w0 = 2 * m < 16 ? (1u << (2 * m)) - 1u : 0xFFFFu;
            const unsigned w1 = 2 * m > 16 ? (1u << (2 * m - 16)) - 1u : 0u;
            _mm512_mask_storeu_epi32(d + 2 * k, (__mmask16)w0, _mm512_permutexvar_epi32(lo, v));
            if (w1) _mm512_mask_storeu_epi32(d + 2 * k + 16, (__mmask16)w1, _mm512_permutexvar_epi32(hi, v));
            return;
        }
    }
    for (int64_t j = k * rep; k < n; k++)
        for (int64_t r = 0; r < rep && j < L; r++, j++) d[j] = s[k];
}
#else
ONNXC_RESIZE_REPEAT(4, uint32_t)
#endif

/* Scale and output size of every axis. `scales` (float32) or `sizes` gives nax entries for axes[];
 * policy: 0 stretch, 1 not_larger, 2 not_smaller (sizes only). */
ONNXC_RT_API int onnxc_resize_plan(onnxc_rt *rt, const char *who, int rank, const int64_t *din, int nax,
                                   const int *axes, const float *scales, const int64_t *sizes, int policy,
                                   double *scale, int64_t *dout);

/* Free the table of one axis (a zeroed or already freed one too). */
ONNXC_RT_API void onnxc_resize_axis_free(onnxc_resize_axis *ax);

/* Build the table of one axis (lo/hi: its roi, used by tf_crop_and_resize). Returns 0, or an error status
 * with the message in rt. */
ONNXC_RT_API int onnxc_resize_axis_init(onnxc_rt *rt, const char *who, onnxc_resize_axis *ax,
                                        const onnxc_resize_opts *o, int64_t in, int64_t out, double scale, double lo,
                                        double hi);

#endif /* ONNXC_RESIZE_H */
