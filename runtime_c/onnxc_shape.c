/* onnxc_shape.c: the implementation of onnxc_shape.h (compiled once into the runtime library). */
#include "onnxc_shape.h"

/* "[d0, d1, ...]" into buf (truncated to n bytes); returns buf. */
const char *onnxc_fmt_dims(char *buf, size_t n, int rank, const int64_t *d) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Allocation of an array whose dims are known only at run time: NULL when a dim is negative, the
 * byte size overflows, or memory is exhausted. */
void *onnxc_alloc_dims(size_t itemsize, int rank, const int64_t *d) {
    int64_t n = onnxc_numel(rank, d);
    if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / 2) / (itemsize ? itemsize : 1)) return NULL;
    return onnxc_alloc((size_t)n * itemsize);
}

/* The error of a failed onnxc_alloc_dims. */
int onnxc_alloc_fail(onnxc_rt *rt, const char *who, int rank, const int64_t *d) {
    char b[256];
    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: cannot allocate an output of shape %s", who,
                      onnxc_fmt_dims(b, sizeof b, rank, d));
}

/* Dims must be >= 0 and their product must fit. */
int onnxc_check_dims(onnxc_rt *rt, const char *who, const char *what, int rank, const int64_t *d) {
    char b[256];
    for (int i = 0; i < rank; i++)
        if (d[i] < 0)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: %s %s has a negative dimension", who, what,
                              onnxc_fmt_dims(b, sizeof b, rank, d));
    if (onnxc_numel(rank, d) < 0)
        return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: %s %s has too many elements", who, what,
                          onnxc_fmt_dims(b, sizeof b, rank, d));
    return 0;
}

/* Reshape: target entries 0 copy the input dim (unless allowzero), one -1 takes the remaining size. */
int onnxc_reshape_dims(onnxc_rt *rt, const char *who, int rin, const int64_t *din, int rout,
                       const int64_t *target, int allowzero, int64_t *dout) {
    char b1[256], b2[256];
    int64_t total = onnxc_numel(rin, din), known = 1;
    int infer = -1, zero = 0;
    for (int j = 0; j < rout; j++) {
        int64_t s = target[j];
        if (s == -1) {
            if (infer >= 0)
                return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has more than one -1", who,
                                  onnxc_fmt_dims(b1, sizeof b1, rout, target));
            infer = j;
            dout[j] = 1;
            continue;
        }
        if (s == 0 && !allowzero) {
            if (j >= rin)
                return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s copies dim %d (0) but the input has rank %d",
                                  who, onnxc_fmt_dims(b1, sizeof b1, rout, target), j, rin);
            s = din[j];
        } else if (s < 0) {
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has the invalid dim %lld", who,
                              onnxc_fmt_dims(b1, sizeof b1, rout, target), (long long)s);
        }
        zero |= s == 0;
        dout[j] = s;
        if (s && known > INT64_MAX / s)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has too many elements", who,
                              onnxc_fmt_dims(b1, sizeof b1, rout, target));
        known *= s;
    }
    if (infer >= 0) {
        if (allowzero && zero)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has both 0 and -1 with allowzero=1", who,
                              onnxc_fmt_dims(b1, sizeof b1, rout, target));
        if (known == 0 || total % known)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: cannot reshape %s (%lld elements) to %s", who,
                              onnxc_fmt_dims(b1, sizeof b1, rin, din), (long long)total,
                              onnxc_fmt_dims(b2, sizeof b2, rout, target));
        dout[infer] = total / known;
    } else if (known != total) {
        return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: cannot reshape %s (%lld elements) to %s (%lld elements)",
                          who, onnxc_fmt_dims(b1, sizeof b1, rin, din), (long long)total,
                          onnxc_fmt_dims(b2, sizeof b2, rout, dout), (long long)known);
    }
    return 0;
}

/* Expand: numpy broadcast of the input dims with a target shape (right-aligned); rout = max(rin, k). */
int onnxc_expand_dims(onnxc_rt *rt, const char *who, int rin, const int64_t *din, int k,
                      const int64_t *shape, int64_t *dout) {
    char b1[256], b2[256];
    const int rout = rin > k ? rin : k;
    for (int a = 0; a < rout; a++) {
        const int i = a - (rout - rin), j = a - (rout - k);
        const int64_t d = i >= 0 ? din[i] : 1, s = j >= 0 ? shape[j] : 1;
        if (s < 0)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has a negative dimension", who,
                              onnxc_fmt_dims(b1, sizeof b1, k, shape));
        if (d != 1 && s != 1 && d != s)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: cannot broadcast input shape %s to %s (axis %d)", who,
                              onnxc_fmt_dims(b1, sizeof b1, rin, din), onnxc_fmt_dims(b2, sizeof b2, k, shape), a);
        dout[a] = d == 1 ? s : d;
    }
    return onnxc_check_dims(rt, who, "output shape", rout, dout);
}

/* numpy clamping of one slice (start, end, step) on an axis of size d: first index and element count. */
void onnxc_slice_axis(int64_t d, int64_t s, int64_t e, int64_t k, int64_t *first, int64_t *count) {
    if (k > 0) {
        if (s < 0) s += d;
        if (s < 0) s = 0;
        if (s > d) s = d;
        if (e < 0) e += d;
        if (e < 0) e = 0;
        if (e > d) e = d;
        *first = s;
        *count = e > s ? 1 + (e - s - 1) / k : 0;
    } else {
        if (s < 0) s += d;
        if (s < 0) s = -1;
        if (s > d - 1) s = d - 1;
        if (e < 0) e += d;
        if (e < 0) e = -1;
        if (e > d - 1) e = d - 1;
        *first = s;
        *count = s > e ? 1 - (s - e - 1) / k : 0; /* k < 0: (s-e-1)/k truncates toward zero */
    }
}
