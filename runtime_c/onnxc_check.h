/* onnxc entry checks: what the run function of every model verifies before any kernel runs.
 *
 * The descriptors a caller hands to <prefix>_run / _run_into (the JIT library through Python, an AOT
 * artifact's C API) are untrusted: every field is checked here, and every byte size the run function
 * computes from run-time dims goes through onnxc_check_size, so nothing is read through a NULL
 * pointer and no size wraps. Failures write a message naming the tensor (input 'x', output 'y', the
 * intermediate of a node), the axis and expected vs got, and return ONNXC_ERR_INPUT (the caller's
 * descriptors), ONNXC_ERR_MEMORY (a size above ONNXC_MAX_BYTES) or ONNXC_ERR_RUNTIME (a negative
 * computed dim). Each check is inline, a few integer compares per dim; the full check and its message
 * run only on failure.
 */
#ifndef ONNXC_CHECK_H
#define ONNXC_CHECK_H

#include "onnxc.h"
#include "onnxc_shape.h"

/* The ONNX name of an element type ("float", "int64", ...; "unknown" outside the enum). */
ONNXC_RT_API const char *onnxc_dtype_name(int32_t dtype);

/* The full checks, with the message of the first problem: ONNXC_ERR_* or 0 when there is none. The
 * inline functions below run the fast test of the common case and call these only when it fails. */
ONNXC_RT_API int onnxc_input_error(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                   size_t itemsize);
ONNXC_RT_API int onnxc_into_error(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                  const int64_t *dims);
ONNXC_RT_API int onnxc_size_error(onnxc_rt *rt, const char *what, int ovf, size_t itemsize, int rank,
                                  const int64_t *d, size_t *bytes);

/* n * d into *n; nonzero when it wraps (the full check then decides: a zero dim elsewhere makes it fine). */
static inline int onnxc_umul_wraps(uint64_t *n, uint64_t d) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(*n, d, n);
#else
    if (d && *n > UINT64_MAX / d) return 1;
    *n *= d;
    return 0;
#endif
}

/* A tensor input: dtype, rank, each dim in [0, ONNXC_MAX_DIM], elements and bytes countable, data
 * not NULL when there are elements. ``itemsize``: bytes per element of the declared type. */
static inline int onnxc_check_input(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                    size_t itemsize) {
    int bad = t->dtype != dtype || t->rank != rank || dtype == 8; /* strings: each pointer is checked */
    uint64_t n = 1;
    for (int k = 0; k < rank && !bad; k++)
        bad = (uint64_t)t->dims[k] > (uint64_t)ONNXC_MAX_DIM || onnxc_umul_wraps(&n, (uint64_t)t->dims[k]);
    if (bad || n > ONNXC_MAX_BYTES / itemsize || (n && !t->data))
        return onnxc_input_error(rt, name, t, dtype, rank, itemsize);
    return 0;
}

/* A caller-provided output buffer of run_into: data, dtype, rank and exactly the dims ``dims``. */
static inline int onnxc_check_into(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                   const int64_t *dims) {
    int bad = !t->data || t->dtype != dtype || t->rank != rank;
    for (int k = 0; k < rank && !bad; k++) bad = t->dims[k] != dims[k];
    return bad ? onnxc_into_error(rt, name, t, dtype, rank, dims) : 0;
}

/* The byte size of a buffer of run-time dims ``d`` (computed with onnxc_ck_*, ``ovf`` set when one
 * overflowed) into *bytes; an error naming ``what`` when a dim is negative or the size exceeds
 * ONNXC_MAX_BYTES. */
static inline int onnxc_check_size(onnxc_rt *rt, const char *what, int ovf, size_t itemsize, int rank,
                                   const int64_t *d, size_t *bytes) {
    uint64_t n = 1;
    int bad = ovf;
    for (int k = 0; k < rank && !bad; k++) bad = d[k] < 0 || onnxc_umul_wraps(&n, (uint64_t)d[k]);
    if (bad || n > ONNXC_MAX_BYTES / itemsize) return onnxc_size_error(rt, what, ovf, itemsize, rank, d, bytes);
    *bytes = (size_t)n * itemsize;
    return 0;
}

/* Value type codes (codegen/entry_checks.py writes a type as a prefix code, e.g. an optional
 * sequence of float tensors is {ONNXC_VT_OPTIONAL, ONNXC_VT_SEQUENCE, ONNXC_VT_TENSOR, 1}). */
enum onnxc_vtype {
    ONNXC_VT_TENSOR = 1,   /* then its element type */
    ONNXC_VT_SEQUENCE = 2, /* then the element's type */
    ONNXC_VT_MAP = 3,      /* then the key and the value element types */
    ONNXC_VT_OPTIONAL = 4, /* then the element's type */
};

/* A sequence, map or optional input (descriptor dtype ONNXC_VALUE_DTYPE): the whole tree is walked
 * against ``type``: kinds, counts, item pointers, and each tensor as in onnxc_check_input (any rank).
 * The walk follows the type, so a cyclic or deeper tree is refused, never followed forever. */
ONNXC_RT_API int onnxc_check_value(onnxc_rt *rt, const char *name, const onnxc_tensor *t, const int32_t *type);

#endif /* ONNXC_CHECK_H */
