/* onnxc shape-function helpers: output dims that depend on input data, computed at run time.
 *
 * A node with a data-dependent output shape (Reshape to a shape read from a tensor, NonZero, ...)
 * gets a shape function in the generated model that validates the data and binds its run-time
 * dimension variables before the kernel runs. The helpers here hold the shared rules; every
 * failure writes a message naming the node (`who`) and returns ONNXC_ERR_RUNTIME. They run once per
 * call, so they live in onnxc_shape.c (compiled once into the runtime library); only onnxc_numel and
 * onnxc_axis stay inline.
 */
#ifndef ONNXC_SHAPE_H
#define ONNXC_SHAPE_H

#include "onnxc.h"

/* "[d0, d1, ...]" into buf (truncated to n bytes); returns buf. */
ONNXC_RT_API const char *onnxc_fmt_dims(char *buf, size_t n, int rank, const int64_t *d);

/* Product of dims with overflow detection: -1 when a dim is negative or the product overflows. */
static inline int64_t onnxc_numel(int rank, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (d[i] < 0) return -1;
        if (d[i] && n > INT64_MAX / d[i]) return -1;
        n *= d[i];
    }
    return n;
}

/* Allocation of an array whose dims are known only at run time: NULL when a dim is negative, the
 * byte size overflows, or memory is exhausted. */
ONNXC_RT_API void *onnxc_alloc_dims(size_t itemsize, int rank, const int64_t *d);

/* The error of a failed onnxc_alloc_dims. */
ONNXC_RT_API int onnxc_alloc_fail(onnxc_rt *rt, const char *who, int rank, const int64_t *d);

/* Dims must be >= 0 and their product must fit. */
ONNXC_RT_API int onnxc_check_dims(onnxc_rt *rt, const char *who, const char *what, int rank, const int64_t *d);

/* Reshape: target entries 0 copy the input dim (unless allowzero), one -1 takes the remaining size. */
ONNXC_RT_API int onnxc_reshape_dims(onnxc_rt *rt, const char *who, int rin, const int64_t *din, int rout,
                                    const int64_t *target, int allowzero, int64_t *dout);

/* Expand: numpy broadcast of the input dims with a target shape (right-aligned); rout = max(rin, k). */
ONNXC_RT_API int onnxc_expand_dims(onnxc_rt *rt, const char *who, int rin, const int64_t *din, int k,
                                   const int64_t *shape, int64_t *dout);

/* numpy clamping of one slice (start, end, step) on an axis of size d: first index and element count. */
ONNXC_RT_API void onnxc_slice_axis(int64_t d, int64_t s, int64_t e, int64_t k, int64_t *first, int64_t *count);

/* An axis entry in [-rank, rank), made non-negative; -1 when out of range. */
static inline int onnxc_axis(int64_t a, int rank) {
    if (a < -(int64_t)rank || a >= (int64_t)rank) return -1;
    return (int)(a < 0 ? a + rank : a);
}

#endif /* ONNXC_SHAPE_H */
