/* onnxc_dynq.c: DynamicQuantizeLinear of onnxc_dynq.h. */
#include <math.h>

#include "onnxc_dynq.h"
#include "onnxc_pool.h"

#define ONNXC_DYNQ_GRAIN (1 << 16) /* elements of a chunk */
#define ONNXC_DYNQ_MAXCH (4 * ONNXC_POOL_MAX)

typedef struct {
    const float *x;
    uint8_t *y;
    int64_t n, nch;
    float s, z;
    float lo[ONNXC_DYNQ_MAXCH], hi[ONNXC_DYNQ_MAXCH];
} onnxc_dynq_job;

/* The range of chunk ch; lanes kept apart so the loop vectorizes (min / max are exact in any order). */
static void onnxc_dynq_range(void *ctx, int64_t ch, int slot) {
    (void)slot;
    onnxc_dynq_job *J = (onnxc_dynq_job *)ctx;
    const int64_t i0 = J->n * ch / J->nch, i1 = J->n * (ch + 1) / J->nch;
    float lo = 0.0f, hi = 0.0f; /* the range always holds 0 */
    const float *restrict x = J->x;
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int64_t i = i0; i < i1; i++) {
        const float v = x[i];
        lo = v < lo ? v : lo; /* NaN compares false: ignored */
        hi = v > hi ? v : hi;
    }
    J->lo[ch] = lo;
    J->hi[ch] = hi;
}

static void onnxc_dynq_quantize(void *ctx, int64_t ch, int slot) {
    (void)slot;
    const onnxc_dynq_job *J = (const onnxc_dynq_job *)ctx;
    const int64_t i0 = J->n * ch / J->nch, i1 = J->n * (ch + 1) / J->nch;
    const float s = J->s, z = J->z;
    const float *restrict x = J->x;
    uint8_t *restrict y = J->y;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) {
        const float r = rintf(x[i] / s) + z;
        y[i] = (uint8_t)(r >= 0.0f ? (r <= 255.0f ? r : 255.0f) : 0.0f);
    }
}

void onnxc_dynq(int threads, const float *x, int64_t n, uint8_t *y, float *scale, uint8_t *zp) {
    onnxc_dynq_job J;
    J.x = x, J.y = y, J.n = n;
    J.nch = onnxc_chunks(threads, (double)n, ONNXC_DYNQ_GRAIN);
    J.nch = J.nch < ONNXC_DYNQ_MAXCH ? J.nch : ONNXC_DYNQ_MAXCH;
    if (J.nch <= 1)
        onnxc_dynq_range(&J, 0, 0);
    else
        onnxc_parallel(threads, J.nch, onnxc_dynq_range, &J);
    float lo = 0.0f, hi = 0.0f;
    for (int64_t c = 0; c < J.nch; c++) {
        lo = J.lo[c] < lo ? J.lo[c] : lo;
        hi = J.hi[c] > hi ? J.hi[c] : hi;
    }
    float span = hi - lo;
    if (span == 0.0f) span = 1.0f;
    const float s = span / 255.0f, q = -lo / s;
    const float z = rintf(q >= 0.0f ? (q <= 255.0f ? q : 255.0f) : 0.0f);
    *scale = s;
    *zp = (uint8_t)z;
    J.s = s, J.z = z;
    if (J.nch <= 1)
        onnxc_dynq_quantize(&J, 0, 0);
    else
        onnxc_parallel(threads, J.nch, onnxc_dynq_quantize, &J);
}
