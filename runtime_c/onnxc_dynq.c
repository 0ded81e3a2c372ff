/* onnxc_dynq.c: DynamicQuantizeLinear of onnxc_dynq.h. */
#include <math.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

/* The range of chunk ch: min / max are exact in any order, so 64 lanes (four 16-lane vectors, each its own
 * dependency chain: one chain was bound by the latency of vmaxps) run over the chunk and are combined at its
 * end. NaN compares false: ignored. */
#define ONNXC_DYNQ_LANES 64

static void onnxc_dynq_range(void *ctx, int64_t ch, int slot) {
    (void)slot;
    onnxc_dynq_job *J = (onnxc_dynq_job *)ctx;
    const int64_t i0 = J->n * ch / J->nch, i1 = J->n * (ch + 1) / J->nch;
    float lo[ONNXC_DYNQ_LANES], hi[ONNXC_DYNQ_LANES]; /* the range always holds 0 */
    for (int j = 0; j < ONNXC_DYNQ_LANES; j++) lo[j] = hi[j] = 0.0f;
    const float *restrict x = J->x;
    int64_t i = i0;
#if defined(__AVX512F__)
    /* _mm512_min_ps(v, m) returns m where v is NaN */
    __m512 vl[4], vh[4];
    for (int q = 0; q < 4; q++) vl[q] = vh[q] = _mm512_setzero_ps();
    for (; i + ONNXC_DYNQ_LANES <= i1; i += ONNXC_DYNQ_LANES)
        for (int q = 0; q < 4; q++) {
            const __m512 v = _mm512_loadu_ps(x + i + 16 * q);
            vl[q] = _mm512_min_ps(v, vl[q]);
            vh[q] = _mm512_max_ps(v, vh[q]);
        }
    for (int q = 0; q < 4; q++) {
        _mm512_storeu_ps(lo + 16 * q, vl[q]);
        _mm512_storeu_ps(hi + 16 * q, vh[q]);
    }
#endif
    for (; i + ONNXC_DYNQ_LANES <= i1; i += ONNXC_DYNQ_LANES)
        for (int j = 0; j < ONNXC_DYNQ_LANES; j++) {
            const float v = x[i + j];
            lo[j] = v < lo[j] ? v : lo[j];
            hi[j] = v > hi[j] ? v : hi[j];
        }
    for (; i < i1; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
    }
    float l = 0.0f, h = 0.0f;
    for (int j = 0; j < ONNXC_DYNQ_LANES; j++) {
        l = lo[j] < l ? lo[j] : l;
        h = hi[j] > h ? hi[j] : h;
    }
    J->lo[ch] = l;
    J->hi[ch] = h;
}

/* clamp(r, 0, 255) as an 8-bit value; NaN gives 0 (the comparisons are false). Written as max then min so it
 * compiles to two vector instructions. */
static inline uint8_t onnxc_dynq_u8(float r) {
    const float a = r > 0.0f ? r : 0.0f;
    return (uint8_t)(int32_t)(a < 255.0f ? a : 255.0f);
}

/* y = clamp(rint(x / s) + z, 0, 255) without a division per element: a block is quantized with t = x * (1 / s),
 * which differs from the rounded quotient q = x / s by at most 3 roundings (|t - q| < |t| 2^-21). rint(t)
 * equals rint(q) unless a half-integer lies within that distance of t; a block where any element comes that
 * close (the test puts elements 0-3 ulp around half steps: 79 of 1680 round apart) is done again with the
 * division, so the result is always the division's. With the clamp as max / min and the range in four
 * chains, 1.2M elements take 0.50 ms instead of 0.55 (the pass reads from beyond the caches). */
#define ONNXC_DYNQ_BLOCK 64

static inline int onnxc_dynq_block_mul(const float *restrict x, uint8_t *restrict y, int64_t n, float inv, float z) {
    int near = 0;
    int64_t i = 0;
#if defined(__AVX512F__)
    /* the same steps on 16 lanes; _mm512_max_ps(r, 0) gives 0 where r is NaN */
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps(z), half = _mm512_set1_ps(0.5f);
    const __m512 one = _mm512_set1_ps(1.0f), tol = _mm512_set1_ps(0x1p-20f), zero = _mm512_setzero_ps();
    const __m512 top = _mm512_set1_ps(255.0f);
    __mmask16 close = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 t = _mm512_mul_ps(_mm512_loadu_ps(x + i), vi);
        const __m512 rt = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512 d = _mm512_abs_ps(_mm512_sub_ps(_mm512_abs_ps(_mm512_sub_ps(t, rt)), half));
        close |= _mm512_cmp_ps_mask(d, _mm512_mul_ps(_mm512_add_ps(_mm512_abs_ps(t), one), tol), _CMP_LE_OQ);
        const __m512 r = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(rt, vz), zero), top);
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(r)));
    }
    near = close != 0;
#endif
    const int64_t i0 = i;
#pragma omp simd reduction(| : near)
    for (i = i0; i < n; i++) {
        const float t = x[i] * inv, rt = rintf(t);
        const float d = fabsf(fabsf(t - rt) - 0.5f); /* distance of t to the nearest half-integer */
        near |= d <= (fabsf(t) + 1.0f) * 0x1p-20f;
        y[i] = onnxc_dynq_u8(rt + z);
    }
    return near;
}

static inline void onnxc_dynq_block_div(const float *restrict x, uint8_t *restrict y, int64_t n, float s, float z) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = onnxc_dynq_u8(rintf(x[i] / s) + z);
    }
}

static void onnxc_dynq_quantize(void *ctx, int64_t ch, int slot) {
    (void)slot;
    const onnxc_dynq_job *J = (const onnxc_dynq_job *)ctx;
    const int64_t i0 = J->n * ch / J->nch, i1 = J->n * (ch + 1) / J->nch;
    const float s = J->s, z = J->z, inv = 1.0f / s;
    if (!(inv < 0x1p100f)) { /* a (near) zero span: 1 / s overflows, x * inv is no quotient */
        onnxc_dynq_block_div(J->x + i0, J->y + i0, i1 - i0, s, z);
        return;
    }
    for (int64_t b = i0; b < i1; b += ONNXC_DYNQ_BLOCK) {
        const int64_t n = i1 - b < ONNXC_DYNQ_BLOCK ? i1 - b : ONNXC_DYNQ_BLOCK;
        if (onnxc_dynq_block_mul(J->x + b, J->y + b, n, inv, z)) onnxc_dynq_block_div(J->x + b, J->y + b, n, s, z);
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
