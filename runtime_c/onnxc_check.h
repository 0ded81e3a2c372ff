/* onnxc entry checks: what the run function of every model verifies before any kernel runs.
 *
 * The descriptors a caller hands to <prefix>_run / _run_into (the JIT library through Python, an AOT
 * artifact's C API) are untrusted: every field is checked here, and every byte size the run function
 * computes from run-time dims goes through onnxc_check_size, so nothing is read through a NULL
 * pointer and no size wraps. Failures write a message naming the tensor (input 'x', output 'y', the
 * intermediate of a node), the axis and expected vs got, and return ONNXC_ERR_INPUT (the caller's
 * descriptors), ONNXC_ERR_MEMORY (a size above ONNXC_MAX_BYTES) or ONNXC_ERR_RUNTIME (a negative
 * computed dim). Each check is a few integer compares per dim; messages are formatted only on failure.
 */
#ifndef ONNXC_CHECK_H
#define ONNXC_CHECK_H

#include "onnxc.h"
#include "onnxc_shape.h"

/* The ONNX name of an element type ("float", "int64", ...; "unknown" outside the enum). */
ONNXC_RT_API const char *onnxc_dtype_name(int32_t dtype);

/* A tensor input: dtype, rank, each dim in [0, ONNXC_MAX_DIM], elements and bytes countable, data
 * not NULL when there are elements. ``itemsize``: bytes per element of the declared type. */
ONNXC_RT_API int onnxc_check_input(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                   size_t itemsize);

/* A caller-provided output buffer of run_into: data, dtype, rank and exactly the dims ``dims``. */
ONNXC_RT_API int onnxc_check_into(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                                  const int64_t *dims);

/* The byte size of a buffer of run-time dims ``d`` (computed with onnxc_ck_*, ``ovf`` set when one
 * overflowed) into *bytes; an error naming ``what`` when a dim is negative or the size exceeds
 * ONNXC_MAX_BYTES. */
ONNXC_RT_API int onnxc_check_size(onnxc_rt *rt, const char *what, int ovf, size_t itemsize, int rank,
                                  const int64_t *d, size_t *bytes);

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
