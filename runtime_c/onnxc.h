/* onnxc runtime ABI: the tensor struct, status codes and small helpers shared by every generated model.
 *
 * A generated model is one C translation unit that includes this header. Every kernel returns an
 * onnxc status and, on failure, writes a readable message into the run context. Nothing here holds
 * global mutable state: a model is re-entrant across contexts and threads.
 */
#ifndef ONNXC_H
#define ONNXC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ONNXC_MAX_RANK 16

/* A kernel of a model unit: a step of the run function, called once per run. Not inlined into the run
 * function: that gains nothing and makes the compiler optimize one huge function (slower to compile). */
#if defined(__GNUC__) || defined(__clang__)
#define ONNXC_KERNEL static __attribute__((noinline))
#define ONNXC_KERNEL_EXTERN __attribute__((noinline, visibility("hidden"))) /* defined in another unit */
#else
#define ONNXC_KERNEL static
#define ONNXC_KERNEL_EXTERN
#endif

/* Runtime library functions (the runtime_c sources, compiled once into libonnxc_rt.a and linked statically
 * into each model library, codegen/runtime_lib.py) are declared with ONNXC_RT_API: hidden, so they
 * stay local to the library that links them (several models or artifacts can share a process). */
#if defined(__GNUC__) || defined(__clang__)
#define ONNXC_RT_API __attribute__((visibility("hidden")))
#else
#define ONNXC_RT_API
#endif

enum onnxc_status {
    ONNXC_OK = 0,
    ONNXC_ERR_INPUT = 1,   /* wrong input: dtype, rank or dimension */
    ONNXC_ERR_RUNTIME = 2, /* a kernel met invalid data (index out of range, ...) */
    ONNXC_ERR_MEMORY = 3,  /* allocation failed */
    ONNXC_ERR_UNSUPPORTED = 5, /* valid data using a feature onnxc does not implement (e.g. an image format) */
    ONNXC_ERR_CANCELLED = 6,   /* the run was cancelled (runtime_c/onnxc_process.h) */
};

/* A dense, row-major tensor. dtype uses the ONNX TensorProto.DataType numbers. (AOT headers declare
 * the same struct under the same guard, so both can be included together.) */
#ifndef ONNXC_TENSOR_DEFINED
#define ONNXC_TENSOR_DEFINED
typedef struct onnxc_tensor {
    void *data;
    int64_t dims[ONNXC_MAX_RANK];
    int32_t rank;
    int32_t dtype;
} onnxc_tensor;
#endif

/* A string tensor element: NUL-terminated UTF-8 that the tensor does not own (runtime_c/onnxc_strings.h). */
typedef const char *onnxc_str;

/* Per-call storage of strings made at run time: a list of chunks, freed when the run returns. */
typedef struct onnxc_pool { struct onnxc_pool *next; size_t used, cap; } onnxc_pool;
static inline void onnxc_pool_free(onnxc_pool *p) {
    while (p) { onnxc_pool *n = p->next; free(p); p = n; }
}

/* Per-call state passed to every kernel. */
typedef struct onnxc_rt {
    char *err;     /* message buffer of errlen bytes */
    size_t errlen;
    int threads;   /* threads kernels may use (the runtime's pool, onnxc_pool.h) */
    const unsigned char *W; /* the weights blob (subprograms find theirs at an offset) */
    onnxc_pool *pool;       /* strings made during this call (NULL until the first one) */
    const unsigned *cancel; /* the run stops when this counter moves away from cancel0 (onnxc_process.h) */
    unsigned cancel0;
} onnxc_rt;

/* Record an error message; returns the status so kernels can `return onnxc_fail(...)`. */
static inline int onnxc_fail(onnxc_rt *rt, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static inline int onnxc_fail(onnxc_rt *rt, int status, const char *fmt, ...) {
    if (rt && rt->err && rt->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rt->err, rt->errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Integer division and modulo rounding toward negative infinity (ONNX / Python semantics for dims). */
static inline int64_t onnxc_floordiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
static inline int64_t onnxc_mod(int64_t a, int64_t b) {
    if (b == 0) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline int64_t onnxc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t onnxc_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* numpy broadcast of n extents (run-time shape contracts, ir/contracts.py): every extent is 1 or the one
 * common value. Writes the result to *r (1 when all are 1); returns 0, or -1 when they do not broadcast. */
static inline int onnxc_broadcast_extent(int n, const int64_t *d, int64_t *r) {
    int64_t v = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] == 1) continue;
        if (v == 1) v = d[i];
        else if (d[i] != v) return -1;
    }
    *r = v;
    return 0;
}

/* Limits of run-time sizes. A dim of a caller's tensor is at most ONNXC_MAX_DIM (2^48: no machine has
 * that many bytes, and products of a few such dims stay far from wrapping); a buffer, and the arena
 * holding the intermediates, at most ONNXC_MAX_BYTES (a quarter of the address space, so sums of a
 * few sizes and their 64-byte rounding cannot wrap). runtime_c/onnxc_check.h checks them. */
#define ONNXC_MAX_DIM ((int64_t)1 << 48)
#define ONNXC_MAX_BYTES ((size_t)(SIZE_MAX >> 2))

/* Checked int64 arithmetic for dims computed at run time (codegen renders size expressions with
 * them, ir/dims.py to_c_checked): on overflow *ovf is set and 0 returned, so nothing downstream wraps. */
static inline int64_t onnxc_ck_mul(int *ovf, int64_t a, int64_t b) {
#if defined(__GNUC__) || defined(__clang__)
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { *ovf = 1; return 0; }
    return r;
#else
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : (a != 0 && b < INT64_MAX / a))) { *ovf = 1; return 0; }
    return a * b;
#endif
}
static inline int64_t onnxc_ck_add(int *ovf, int64_t a, int64_t b) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) { *ovf = 1; return 0; }
    return a + b;
}

/* 64-byte aligned allocation; size 0 returns a valid unique pointer; NULL above ONNXC_MAX_BYTES. */
static inline void *onnxc_alloc(size_t n) {
    void *p = NULL;
    if (n > ONNXC_MAX_BYTES) return NULL;
    if (posix_memalign(&p, 64, n ? (n + 63) & ~(size_t)63 : 64) != 0) return NULL;
    return p;
}

/* Two threads' data must not share a 128-byte pair of cache lines: a core's adjacent-line prefetcher fetches
 * the pair of every line it misses, so it keeps pulling the line the other core is writing (the per-thread
 * scratch of a depthwise 7x7 layer, 2 threads: 0.146 -> 0.10-0.125 ms when the slots were moved apart).
 * onnxc_alloc_apart is onnxc_alloc on a pair boundary with the size rounded up to whole pairs, for buffers
 * whose parts different threads write at once: per-thread parts carved from it start on a pair when their
 * stride is onnxc_slot_len. (Only there: a model's output allocated this way cost a small sklearn model
 * 2 us a call.) */
#define ONNXC_LINE_PAIR 128

static inline void *onnxc_alloc_apart(size_t n) {
    void *p = NULL;
    if (n > ONNXC_MAX_BYTES) return NULL;
    const size_t r = n ? (n + ONNXC_LINE_PAIR - 1) & ~(size_t)(ONNXC_LINE_PAIR - 1) : ONNXC_LINE_PAIR;
    if (posix_memalign(&p, ONNXC_LINE_PAIR, r) != 0) return NULL;
    return p;
}

/* The stride, in elements of `size` bytes (a divisor of ONNXC_LINE_PAIR), between the per-thread parts of one
 * onnxc_alloc_apart: n rounded up to whole line pairs, so slot k's part (at k times the stride) shares no pair
 * with another slot's. */
static inline int64_t onnxc_slot_len(int64_t n, int64_t size) {
    const int64_t per = ONNXC_LINE_PAIR / size;
    return (n + per - 1) / per * per;
}

/* Greedy first-fit placement of buffers with known lifetimes into one arena.
 * size[i] bytes live from step first[i] to step last[i] inclusive; writes offset[i] (64-byte aligned)
 * and returns the arena size. Buffers are placed in the order given (callers pass largest first).
 * Returns SIZE_MAX when a size or the total exceeds ONNXC_MAX_BYTES (nothing wraps). */
static inline size_t onnxc_plan_arena(int n, const size_t *size, const int *first, const int *last,
                                      size_t *offset) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (size[i] > ONNXC_MAX_BYTES) return SIZE_MAX;
        size_t need = (size[i] + 63) & ~(size_t)63;
        size_t off = 0;
        int moved = 1;
        while (moved) {
            moved = 0;
            for (int j = 0; j < i; j++) {
                if (first[j] > last[i] || first[i] > last[j]) continue; /* lifetimes disjoint */
                size_t oj = offset[j], nj = (size[j] + 63) & ~(size_t)63;
                if (off < oj + nj && oj < off + need) { off = oj + nj; moved = 1; }
            }
        }
        if (need > ONNXC_MAX_BYTES || off > ONNXC_MAX_BYTES - need) return SIZE_MAX; /* (every offset and total stays below the limit) */
        offset[i] = off;
        if (off + need > total) total = off + need;
    }
    return total;
}

#ifdef __cplusplus
}
#endif
#endif /* ONNXC_H */
