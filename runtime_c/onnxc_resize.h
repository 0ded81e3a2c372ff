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
