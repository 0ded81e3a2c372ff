/* onnxc_nbits.c: the implementation of onnxc_nbits.h (compiled once into the runtime library): the
 * instruction-set vector macros, the GEMV register tile and its threaded driver, the dequantization of
 * B slices into the float GEMM's packed-B panels for the prefill path, and the naive reference. */
#include "onnxc_nbits.h"
#include "onnxc_pool.h"
#include "onnxc_sgemm.h"

/* Runs of q (128 bytes each) the GEMV prefetches ahead; 0: none. */
#ifndef ONNXC_NB_PFD
#define ONNXC_NB_PFD 16
#endif
/* Weights per chunk of the GEMV's threaded split, at least (a chunk then takes ~10 us or more). */
#ifndef ONNXC_NB_GRAIN
#define ONNXC_NB_GRAIN 131072
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#define ONNXC_NB_ISA "avx512"
#define ONNXC_NB_L 16   /* floats per vector */
#define ONNXC_NB_V 2    /* vectors per pass over a group: 32 columns */
#define ONNXC_NB_RMAX 4 /* rows per pass: 4 x 2 block sums + 4 x 2 accumulators of the 32 registers */
typedef __m512 onnxc_nb_v;
typedef __m512i onnxc_nb_vi;
#define NB_CONSTS const __m512 nb_tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
#define NB_ZERO() _mm512_setzero_ps()
#define NB_SET1(x) _mm512_set1_ps(x)
#define NB_LOAD(p) _mm512_loadu_ps(p)
#define NB_STORE(p, v) _mm512_storeu_ps((p), (v))
#define NB_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define NB_ADD(a, b) _mm512_add_ps((a), (b))
#define NB_SUB(a, b) _mm512_sub_ps((a), (b))
#define NB_MUL(a, b) _mm512_mul_ps((a), (b))
#define NB_LOADW(p) _mm512_loadu_si512((const void *)(p))
/* nibble t of every lane as q - 8: VPERMPS reads only the low 4 bits of each index (2 operations per 16
 * weights; a mask, an OR with 2^23's bits and a subtraction instead measured 20% slower on Zen 4) */
#define NB_DECODE(w, t) _mm512_permutexvar_ps(_mm512_srli_epi32((w), 4 * (t)), nb_tbl)
#define NB_Z8(p) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define NB_UNROLL _Pragma("GCC unroll 8")
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ONNXC_NB_ISA "avx2"
#define ONNXC_NB_L 8
#define ONNXC_NB_V 2    /* 16 columns per pass */
#define ONNXC_NB_RMAX 2 /* 2 x 2 block sums + 2 x 2 accumulators of the 16 registers */
typedef __m256 onnxc_nb_v;
typedef __m256i onnxc_nb_vi;
#define NB_CONSTS const __m256i nb_m15 = _mm256_set1_epi32(15); const __m256 nb_eight = _mm256_set1_ps(8.0f)
#define NB_ZERO() _mm256_setzero_ps()
#define NB_SET1(x) _mm256_set1_ps(x)
#define NB_LOAD(p) _mm256_loadu_ps(p)
#define NB_STORE(p, v) _mm256_storeu_ps((p), (v))
#define NB_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define NB_ADD(a, b) _mm256_add_ps((a), (b))
#define NB_SUB(a, b) _mm256_sub_ps((a), (b))
#define NB_MUL(a, b) _mm256_mul_ps((a), (b))
#define NB_LOADW(p) _mm256_loadu_si256((const __m256i *)(p))
#define NB_DECODE(w, t) \
    _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32((w), 4 * (t)), nb_m15)), nb_eight)
#define NB_Z8(p) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define NB_UNROLL _Pragma("GCC unroll 8")
#else
/* portable: one float per "vector", a pass is the whole group; the compiler vectorizes the column loops */
#define ONNXC_NB_ISA "portable"
#define ONNXC_NB_L 1
#define ONNXC_NB_V 32
#define ONNXC_NB_RMAX 4
typedef float onnxc_nb_v;
typedef uint32_t onnxc_nb_vi;
#define NB_CONSTS (void)0
#define NB_ZERO() 0.0f
#define NB_SET1(x) (x)
#define NB_LOAD(p) (*(p))
#define NB_STORE(p, v) (*(p) = (v))
#define NB_FMA(a, b, c) ((a) * (b) + (c))
#define NB_ADD(a, b) ((a) + (b))
#define NB_SUB(a, b) ((a) - (b))
#define NB_MUL(a, b) ((a) * (b))
#define NB_LOADW(p) (*(p))
#define NB_DECODE(w, t) ((float)(int)(((w) >> (4 * (t))) & 15u) - 8.0f)
#define NB_Z8(p) ((float)*(p))
#define NB_UNROLL
#endif

#define NB_PASS (ONNXC_NB_V * ONNXC_NB_L) /* columns per pass */

/* One product: the weights, their derived sizes, and the rows of A (padded to K8 * 8 when K % 8 != 0). */
typedef struct {
    const onnxc_nb_weights *W;
    int64_t M, K8, NB, G;
    const float *A;
    int64_t lda;
    const float *asum; /* NULL, or A's block sums: asum[r * NB + b] */
    float *Y;
    int64_t ldy, per; /* groups per chunk */
    int64_t nc;       /* prefill: columns per chunk */
    float *buf[ONNXC_POOL_MAX];
    int status;
} onnxc_nb_job;

/* Rows [0, R) of A against columns [0, NB_PASS) of one group (q, s, z, zf point at the pass's first
 * column): out[r][j] = sum over every block of s (sum_k a (q - 8)) + (8 - z) s sum_k a. */
static inline __attribute__((always_inline)) void onnxc_nb_tile(const int R, const onnxc_nb_job *J, const float *A,
                                                                const uint32_t *q, const float *s, const uint8_t *z,
                                                                const float *zf, const float *asum, float *out) {
    NB_CONSTS;
    /* P sets of block sums, alternating over k: P * R * V independent FMA chains hide the FMA latency */
    const int P = ONNXC_NB_RMAX / R > 1 ? ONNXC_NB_RMAX / R : 1;
    const int64_t lda = J->lda, bs8 = J->W->bs / 8, K8 = J->K8, NB = J->NB;
    onnxc_nb_v acc[ONNXC_NB_RMAX][ONNXC_NB_V], bsum[ONNXC_NB_RMAX][ONNXC_NB_RMAX][ONNXC_NB_V];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < ONNXC_NB_V; v++) acc[r][v] = NB_ZERO();
    for (int64_t b = 0; b < NB; b++) {
        for (int p = 0; p < P; p++)
            for (int r = 0; r < R; r++)
                for (int v = 0; v < ONNXC_NB_V; v++) bsum[p][r][v] = NB_ZERO();
        const int64_t c1 = (b + 1) * bs8 < K8 ? (b + 1) * bs8 : K8;
        for (int64_t c = b * bs8; c < c1; c++) {
            onnxc_nb_vi w[ONNXC_NB_V];
            for (int v = 0; v < ONNXC_NB_V; v++) w[v] = NB_LOADW(q + c * ONNXC_NB_NR + v * ONNXC_NB_L);
            if (ONNXC_NB_PFD) { /* the stream runs on into the next group: no bounds */
                __builtin_prefetch(q + (c + ONNXC_NB_PFD) * ONNXC_NB_NR, 0, 3);
                __builtin_prefetch(q + (c + ONNXC_NB_PFD) * ONNXC_NB_NR + 16, 0, 3);
            }
            const float *a = A + c * 8;
            NB_UNROLL for (int t = 0; t < 8; t++) {
                onnxc_nb_v x[ONNXC_NB_V];
                for (int v = 0; v < ONNXC_NB_V; v++) x[v] = NB_DECODE(w[v], t);
                for (int r = 0; r < R; r++) {
                    const onnxc_nb_v av = NB_SET1(a[r * lda + t]);
                    for (int v = 0; v < ONNXC_NB_V; v++) bsum[t % P][r][v] = NB_FMA(av, x[v], bsum[t % P][r][v]);
                }
            }
        }
        for (int p = 1; p < P; p++)
            for (int r = 0; r < R; r++)
                for (int v = 0; v < ONNXC_NB_V; v++) bsum[0][r][v] = NB_ADD(bsum[0][r][v], bsum[p][r][v]);
        const int64_t o = b * ONNXC_NB_NR;
        for (int v = 0; v < ONNXC_NB_V; v++) {
            const onnxc_nb_v sv = NB_LOAD(s + o + v * ONNXC_NB_L);
            for (int r = 0; r < R; r++) acc[r][v] = NB_FMA(bsum[0][r][v], sv, acc[r][v]);
            if (asum) { /* zero points: + (8 - z) s times the block sum of each row */
                const onnxc_nb_v zv = z ? NB_Z8(z + o + v * ONNXC_NB_L) : NB_LOAD(zf + o + v * ONNXC_NB_L);
                const onnxc_nb_v cv = NB_MUL(NB_SUB(NB_SET1(8.0f), zv), sv);
                for (int r = 0; r < R; r++) acc[r][v] = NB_FMA(cv, NB_SET1(asum[r * NB + b]), acc[r][v]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < ONNXC_NB_V; v++) NB_STORE(out + r * ONNXC_NB_NR + v * ONNXC_NB_L, acc[r][v]);
}

/* GEMV over groups [g0, g1): every row of A, in passes of NB_PASS columns and ONNXC_NB_RMAX rows. */
static void onnxc_nb_groups(const onnxc_nb_job *J, int64_t g0, int64_t g1) {
    const onnxc_nb_weights *W = J->W;
    const int64_t K8 = J->K8, NB = J->NB, M = J->M;
    float out[ONNXC_NB_MMAX * ONNXC_NB_NR];
    for (int64_t g = g0; g < g1; g++) {
        const uint32_t *q = (const uint32_t *)(const void *)W->q + g * K8 * ONNXC_NB_NR;
        const int64_t t0 = g * NB * ONNXC_NB_NR;
        for (int64_t col = 0; col < ONNXC_NB_NR; col += NB_PASS) {
            const float *s = W->scale + t0 + col, *zf = W->zpf ? W->zpf + t0 + col : NULL;
            const uint8_t *z = W->zp ? W->zp + t0 + col : NULL;
            for (int64_t r0 = 0; r0 < M; r0 += ONNXC_NB_RMAX) {
                const int R = M - r0 < ONNXC_NB_RMAX ? (int)(M - r0) : ONNXC_NB_RMAX;
                const float *A = J->A + r0 * J->lda, *as = J->asum ? J->asum + r0 * NB : NULL;
                float *o = out + r0 * ONNXC_NB_NR + col;
                if (R == 1) onnxc_nb_tile(1, J, A, q + col, s, z, zf, as, o);
                else if (R == 2) onnxc_nb_tile(2, J, A, q + col, s, z, zf, as, o);
#if ONNXC_NB_RMAX > 2
                else if (R == 3) onnxc_nb_tile(3, J, A, q + col, s, z, zf, as, o);
                else onnxc_nb_tile(4, J, A, q + col, s, z, zf, as, o);
#endif
            }
        }
        const int64_t n0 = g * ONNXC_NB_NR, nn = W->N - n0 < ONNXC_NB_NR ? W->N - n0 : ONNXC_NB_NR;
        for (int64_t r = 0; r < M; r++) {
            float *restrict y = J->Y + r * J->ldy + n0;
            const float *restrict acc = out + r * ONNXC_NB_NR;
            if (W->bias) {
                for (int64_t j = 0; j < nn; j++) y[j] = acc[j] + W->bias[n0 + j];
            } else {
                for (int64_t j = 0; j < nn; j++) y[j] = acc[j];
            }
        }
    }
}

static void onnxc_nb_gemv_task(void *ctx, int64_t ch, int slot) {
    (void)slot;
    const onnxc_nb_job *J = (const onnxc_nb_job *)ctx;
    const int64_t g0 = ch * J->per, g1 = g0 + J->per < J->G ? g0 + J->per : J->G;
    onnxc_nb_groups(J, g0, g1);
}

/* The GEMV path (M <= ONNXC_NB_MMAX): A's rows padded with zeros to K8 * 8 when needed, their block sums
 * when there are zero points, then chunks of groups on the pool. */
static int onnxc_nb_gemv(int threads, onnxc_nb_job *J) {
    const onnxc_nb_weights *W = J->W;
    const int64_t M = J->M, K = W->K, K8 = J->K8, NB = J->NB, bs = W->bs;
    const int pad = K % 8 != 0, sums = W->zp != NULL || W->zpf != NULL;
    float *buf = NULL;
    if (pad || sums) {
        buf = (float *)onnxc_alloc((size_t)(M * (pad ? K8 * 8 : 0) + (sums ? M * NB : 0)) * sizeof(float));
        if (!buf) return ONNXC_ERR_MEMORY;
    }
    if (pad) {
        for (int64_t r = 0; r < M; r++) {
            memcpy(buf + r * K8 * 8, J->A + r * J->lda, (size_t)K * sizeof(float));
            memset(buf + r * K8 * 8 + K, 0, (size_t)(K8 * 8 - K) * sizeof(float));
        }
        J->A = buf;
        J->lda = K8 * 8;
    }
    if (sums) {
        float *as = buf + (pad ? M * K8 * 8 : 0);
        for (int64_t r = 0; r < M; r++)
            for (int64_t b = 0; b < NB; b++) {
                const int64_t k1 = (b + 1) * bs < K ? (b + 1) * bs : K;
                float t = 0;
                for (int64_t k = b * bs; k < k1; k++) t += J->A[r * J->lda + k];
                as[r * NB + b] = t;
            }
        J->asum = as;
    }
    const int64_t nch = onnxc_chunks(threads, (double)W->N * (double)K, ONNXC_NB_GRAIN);
    J->per = (J->G + nch - 1) / nch;
    onnxc_parallel(threads, (J->G + J->per - 1) / J->per, onnxc_nb_gemv_task, J);
    free(buf);
    return 0;
}

/* Rows [k0, k1) (k0 a multiple of 8) of group g dequantized exactly, (q - z) * s, into dst: (k1 - k0) rows of
 * 32 floats, one packed-B panel slice of the float GEMM. */
static void onnxc_nb_dequant(const onnxc_nb_job *J, int64_t g, int64_t k0, int64_t k1, float *restrict dst) {
    NB_CONSTS;
    const onnxc_nb_weights *W = J->W;
    const int64_t t0 = g * J->NB * ONNXC_NB_NR;
    const uint32_t *q = (const uint32_t *)(const void *)W->q + g * J->K8 * ONNXC_NB_NR;
    for (int64_t c = k0 / 8; c * 8 < k1; c++) {
        const int64_t o = t0 + (c * 8 / W->bs) * ONNXC_NB_NR, rows = k1 - c * 8 < 8 ? k1 - c * 8 : 8;
        float *d = dst + (c * 8 - k0) * ONNXC_NB_NR;
        for (int64_t col = 0; col < ONNXC_NB_NR; col += NB_PASS) {
            onnxc_nb_v sv[ONNXC_NB_V], zc[ONNXC_NB_V];
            onnxc_nb_vi w[ONNXC_NB_V];
            for (int v = 0; v < ONNXC_NB_V; v++) {
                const int64_t j = col + v * ONNXC_NB_L;
                sv[v] = NB_LOAD(W->scale + o + j);
                zc[v] = W->zp ? NB_Z8(W->zp + o + j) : W->zpf ? NB_LOAD(W->zpf + o + j) : NB_SET1(8.0f);
                zc[v] = NB_SUB(NB_SET1(8.0f), zc[v]); /* 8 - z: exact for integer z */
                w[v] = NB_LOADW(q + c * ONNXC_NB_NR + j);
            }
            if (rows == 8) {
                NB_UNROLL for (int t = 0; t < 8; t++)
                    for (int v = 0; v < ONNXC_NB_V; v++)
                        NB_STORE(d + t * ONNXC_NB_NR + col + v * ONNXC_NB_L,
                                 NB_MUL(NB_ADD(NB_DECODE(w[v], t), zc[v]), sv[v]));
            } else {
                for (int t = 0; t < rows; t++)
                    for (int v = 0; v < ONNXC_NB_V; v++)
                        NB_STORE(d + t * ONNXC_NB_NR + col + v * ONNXC_NB_L,
                                 NB_MUL(NB_ADD(NB_DECODE(w[v], t), zc[v]), sv[v]));
            }
        }
    }
}

/* Prefill chunk ch: columns [ch * nc, ...) dequantized slice by slice and multiplied by the float GEMM. */
static void onnxc_nb_prefill_task(void *ctx, int64_t ch, int slot) {
    onnxc_nb_job *J = (onnxc_nb_job *)ctx;
    const onnxc_nb_weights *W = J->W;
    const int64_t K = W->K, n0 = ch * J->nc, nc = W->N - n0 < J->nc ? W->N - n0 : J->nc;
    const int64_t g0 = n0 / ONNXC_NB_NR, ng = (nc + ONNXC_NB_NR - 1) / ONNXC_NB_NR;
    const int64_t ks = K < ONNXC_NB_KS ? K : ONNXC_NB_KS;
    if (!J->buf[slot]) J->buf[slot] = (float *)onnxc_alloc((size_t)(ks * J->nc) * sizeof(float));
    float *buf = J->buf[slot];
    if (!buf) {
        __atomic_store_n(&J->status, ONNXC_ERR_MEMORY, __ATOMIC_RELAXED);
        return;
    }
    const onnxc_sg_epi epi = {W->bias ? W->bias + n0 : NULL, 1, NULL, 0, ONNXC_ACT_NONE, 0, 0};
    for (int64_t k0 = 0; k0 < K; k0 += ks) {
        const int64_t kc = K - k0 < ks ? K - k0 : ks;
        for (int64_t i = 0; i < ng; i++) onnxc_nb_dequant(J, g0 + i, k0, k0 + kc, buf + i * kc * ONNXC_NB_NR);
        const int last = k0 + kc >= K;
        const int st = onnxc_sgemm_ex(1, J->M, nc, kc, 1.0f, J->A + k0, J->lda, ONNXC_SG_PLAIN, buf, 0,
                                      ONNXC_SG_PACKED_B_HOT, k0 ? 1.0f : 0.0f, J->Y + n0, J->ldy,
                                      last && W->bias ? &epi : NULL);
        if (st) __atomic_store_n(&J->status, st, __ATOMIC_RELAXED);
    }
}

/* The prefill path: chunks of columns on the pool, each thread with its own slice buffer. */
static int onnxc_nb_prefill(int threads, onnxc_nb_job *J) {
    const int64_t N = J->W->N;
    const double work = (double)J->M * (double)N * (double)J->W->K;
    const int nt = work >= 4.0 * ONNXC_NB_GRAIN * 32 ? threads : 1;
    /* about 4 chunks per thread, of whole groups, at most ONNXC_NB_NC columns */
    int64_t per = (J->G + 4 * nt - 1) / (4 * nt);
    if (per * ONNXC_NB_NR > ONNXC_NB_NC) per = ONNXC_NB_NC / ONNXC_NB_NR;
    J->nc = per * ONNXC_NB_NR;
    onnxc_parallel(nt, (N + J->nc - 1) / J->nc, onnxc_nb_prefill_task, J);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) free(J->buf[i]);
    return J->status;
}

/* See onnxc_nbits.h. */
int onnxc_nbits_matmul(int threads, int64_t M, const float *A, int64_t lda, const onnxc_nb_weights *W, float *Y,
                       int64_t ldy) {
    if (M <= 0 || W->N <= 0) return 0;
    onnxc_nb_job J;
    memset(&J, 0, sizeof J);
    J.W = W;
    J.M = M;
    J.K8 = (W->K + 7) / 8;
    J.NB = (W->K + W->bs - 1) / W->bs;
    J.G = (W->N + ONNXC_NB_NR - 1) / ONNXC_NB_NR;
    J.A = A;
    J.lda = lda;
    J.Y = Y;
    J.ldy = ldy;
    if (W->K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < W->N; j++) Y[i * ldy + j] = W->bias ? W->bias[j] : 0.0f;
        return 0;
    }
    return M <= ONNXC_NB_MMAX ? onnxc_nb_gemv(threads, &J) : onnxc_nb_prefill(threads, &J);
}

/* See onnxc_nbits.h. */
void onnxc_nbits_ref(int64_t M, const float *A, int64_t lda, const onnxc_nb_weights *W, float *Y, int64_t ldy) {
    const int64_t K8 = (W->K + 7) / 8, NB = (W->K + W->bs - 1) / W->bs;
    const uint32_t *q = (const uint32_t *)(const void *)W->q;
    for (int64_t i = 0; i < M; i++)
        for (int64_t n = 0; n < W->N; n++) {
            const int64_t g = n / ONNXC_NB_NR, j = n % ONNXC_NB_NR;
            double acc = W->bias ? W->bias[n] : 0.0;
            for (int64_t k = 0; k < W->K; k++) {
                const int64_t t = (g * NB + k / W->bs) * ONNXC_NB_NR + j;
                const double z = W->zp ? W->zp[t] : W->zpf ? W->zpf[t] : 8.0;
                const uint32_t word = q[(g * K8 + k / 8) * ONNXC_NB_NR + j];
                acc += (double)A[i * lda + k] * (((double)((word >> (4 * (k % 8))) & 15u) - z) * W->scale[t]);
            }
            Y[i * ldy + n] = (float)acc;
        }
}

const char *onnxc_nbits_isa(void) { return ONNXC_NB_ISA; }
