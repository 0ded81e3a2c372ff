/* onnxc_nbits.c: the implementation of onnxc_nbits.h (compiled once into the runtime library): the
 * instruction-set vector macros, the GEMV register tile and its threaded driver, the dequantization of
 * B slices into the float GEMM's packed-B panels for the prefill path, and the naive reference. */
#include "onnxc_nbits.h"
#include "onnxc_pool.h"
#include "onnxc_sgemm.h"

#include <stdatomic.h>

/* Runs of q (128 bytes each) the GEMV prefetches ahead; 0: none. */
#ifndef ONNXC_NB_PFD
#define ONNXC_NB_PFD 16
#endif
/* Weights per chunk of the GEMV's threaded split, at least (a chunk then takes ~10 us or more). */
#ifndef ONNXC_NB_GRAIN
#define ONNXC_NB_GRAIN 131072
#endif

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

#include "onnxc_isa.h"
#if ONNXC_ISA_X86
#include <immintrin.h>
#define ONNXC_NB_VARIANT 2
#include "onnxc_nbits_kern.h"
#undef ONNXC_NB_VARIANT
#define ONNXC_NB_VARIANT 1
#include "onnxc_nbits_kern.h"
#undef ONNXC_NB_VARIANT
#endif
#define ONNXC_NB_VARIANT 0
#include "onnxc_nbits_kern.h"
#undef ONNXC_NB_VARIANT

/* The group loop of this CPU (onnxc_isa.h), chosen on first use. */
typedef void (*onnxc_nb_groups_fn)(const onnxc_nb_job *J, int64_t g0, int64_t g1);
static _Atomic int onnxc_nb_level = -1;

static int onnxc_nb_isa_level(void) {
    int l = atomic_load_explicit(&onnxc_nb_level, memory_order_relaxed);
    if (l < 0) {
        l = onnxc_isa_best();
        l = l > ONNXC_ISA_AVX512 ? ONNXC_ISA_AVX512 : l;
        atomic_store_explicit(&onnxc_nb_level, l, memory_order_relaxed);
    }
    return l;
}

static void onnxc_nb_groups(const onnxc_nb_job *J, int64_t g0, int64_t g1) {
    switch (onnxc_nb_isa_level()) {
#if ONNXC_ISA_X86
    case ONNXC_ISA_AVX512: onnxc_nb_groups_avx512(J, g0, g1); break;
    case ONNXC_ISA_AVX2: onnxc_nb_groups_avx2(J, g0, g1); break;
#endif
    default: onnxc_nb_groups_portable(J, g0, g1);
    }
}

int onnxc_nbits_use_isa(const char *name) {
    int l = onnxc_isa_level(name);
    if (l < 0 || l > onnxc_isa_cpu()) return -1;
    atomic_store_explicit(&onnxc_nb_level, l > ONNXC_ISA_AVX512 ? ONNXC_ISA_AVX512 : l, memory_order_relaxed);
    return 0;
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

/* Rows [k0, k1) of group g dequantized into dst with this CPU's kernel (onnxc_nbits_kern.h). */
static void onnxc_nb_dequant(const onnxc_nb_job *J, int64_t g, int64_t k0, int64_t k1, float *restrict dst) {
    switch (onnxc_nb_isa_level()) {
#if ONNXC_ISA_X86
    case ONNXC_ISA_AVX512: onnxc_nb_dequant_avx512(J, g, k0, k1, dst); break;
    case ONNXC_ISA_AVX2: onnxc_nb_dequant_avx2(J, g, k0, k1, dst); break;
#endif
    default: onnxc_nb_dequant_portable(J, g, k0, k1, dst);
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

const char *onnxc_nbits_isa(void) { return onnxc_isa_name(onnxc_nb_isa_level()); }
