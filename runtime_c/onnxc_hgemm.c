/* onnxc_hgemm.c: the float16 / bfloat16 matrix product of onnxc_hgemm.h (compiled once into the runtime
 * library). */
#include "onnxc_hgemm.h"
#include "onnxc_pool.h"

#if defined(__AVX512F__)
#define ONNXC_HG_NR 32
#define ONNXC_HG_MR 8
#elif defined(__AVX__)
#define ONNXC_HG_NR 16
#define ONNXC_HG_MR 6
#else
#define ONNXC_HG_NR 8
#define ONNXC_HG_MR 4
#endif
#define ONNXC_HG_KC 256
#define ONNXC_HG_MC (ONNXC_HG_MR * 16)
#define ONNXC_HG_NC 512

/* As in onnxc_gemm.h: 512-bit vectors where AVX-512 exists (GCC tunes many targets to 256). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#define ONNXC_HG_POP_OPTIONS
#endif

/* acc (mr x nr valid of MR x NR) = (first ? 0 : Cf) + sum_p a[p][i] b[p][j], in p order; back to Cf.
 * acc is only indexed by constant-trip loops, so the compiler keeps it in registers; partial edge tiles
 * go through a full-size copy. */
static inline void onnxc_hg_micro(int64_t kc, const float *restrict a, const float *restrict b, float *Cf,
                                  int64_t ldc, int64_t mr, int64_t nr, int first) {
    float acc[ONNXC_HG_MR][ONNXC_HG_NR], edge[ONNXC_HG_MR][ONNXC_HG_NR];
    const int full = mr == ONNXC_HG_MR && nr == ONNXC_HG_NR;
    if (!full) {
        for (int i = 0; i < ONNXC_HG_MR; i++)
            for (int j = 0; j < ONNXC_HG_NR; j++) edge[i][j] = !first && i < mr && j < nr ? Cf[i * ldc + j] : 0.0f;
    }
    const float *src = full ? Cf : &edge[0][0];
    const int64_t lds = full ? ldc : ONNXC_HG_NR;
    if (first && full) {
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_HG_MR; i++) {
#pragma omp simd
            for (int j = 0; j < ONNXC_HG_NR; j++) acc[i][j] = 0.0f;
        }
    } else {
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_HG_MR; i++) {
#pragma omp simd
            for (int j = 0; j < ONNXC_HG_NR; j++) acc[i][j] = src[i * lds + j];
        }
    }
    for (int64_t p = 0; p < kc; p++) {
        const float *bp = b + p * ONNXC_HG_NR;
        const float *ap = a + p * ONNXC_HG_MR;
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_HG_MR; i++) {
            const float ai = ap[i];
#pragma omp simd
            for (int j = 0; j < ONNXC_HG_NR; j++) acc[i][j] += ai * bp[j];
        }
    }
    if (full) {
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_HG_MR; i++) {
#pragma omp simd
            for (int j = 0; j < ONNXC_HG_NR; j++) Cf[i * ldc + j] = acc[i][j];
        }
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < ONNXC_HG_MR; i++) {
#pragma omp simd
        for (int j = 0; j < ONNXC_HG_NR; j++) edge[i][j] = acc[i][j];
    }
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) Cf[i * ldc + j] = edge[i][j];
}

/* The blocked product of rows [0, M) for one half type; LOAD converts one element to float. */
#define ONNXC_HG_DEFINE(NAME, LOAD, STORE)                                                                   \
static void NAME##_stripe(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t sam, int64_t sak,      \
                          const uint16_t *B, int64_t sbk, int64_t sbn, float *Cf, float *Ap, float *Bp) {     \
    for (int64_t jc = 0; jc < N; jc += ONNXC_HG_NC) {                                                         \
        const int64_t nc = N - jc < ONNXC_HG_NC ? N - jc : ONNXC_HG_NC;                                       \
        for (int64_t pc = 0; pc < K; pc += ONNXC_HG_KC) {                                                     \
            const int64_t kc = K - pc < ONNXC_HG_KC ? K - pc : ONNXC_HG_KC;                                   \
            for (int64_t j0 = 0; j0 < nc; j0 += ONNXC_HG_NR) { /* B slice in NR-wide panels */               \
                float *dst = Bp + j0 * kc;                                                                    \
                for (int64_t p = 0; p < kc; p++)                                                              \
                    for (int64_t j = 0; j < ONNXC_HG_NR; j++)                                                 \
                        dst[p * ONNXC_HG_NR + j] = j0 + j < nc                                                \
                            ? LOAD(B[(pc + p) * sbk + (jc + j0 + j) * sbn]) : 0.0f;                          \
            }                                                                                                 \
            for (int64_t ic = 0; ic < M; ic += ONNXC_HG_MC) {                                                 \
                const int64_t mc = M - ic < ONNXC_HG_MC ? M - ic : ONNXC_HG_MC;                               \
                for (int64_t i0 = 0; i0 < mc; i0 += ONNXC_HG_MR) { /* A block in MR-tall panels */           \
                    float *dst = Ap + i0 * kc;                                                                \
                    for (int64_t p = 0; p < kc; p++)                                                          \
                        for (int64_t i = 0; i < ONNXC_HG_MR; i++)                                             \
                            dst[p * ONNXC_HG_MR + i] = i0 + i < mc                                            \
                                ? LOAD(A[(ic + i0 + i) * sam + (pc + p) * sak]) : 0.0f;                      \
                }                                                                                             \
                for (int64_t jr = 0; jr < nc; jr += ONNXC_HG_NR)                                              \
                    for (int64_t ir = 0; ir < mc; ir += ONNXC_HG_MR)                                          \
                        onnxc_hg_micro(kc, Ap + ir * kc, Bp + jr * kc, Cf + (ic + ir) * N + jc + jr, N,       \
                                       mc - ir < ONNXC_HG_MR ? mc - ir : ONNXC_HG_MR,                         \
                                       nc - jr < ONNXC_HG_NR ? nc - jr : ONNXC_HG_NR, pc == 0);               \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
}                                                                                                             \
/* stripe s of the rows on the pool, with the scratch of the thread's slot */                                 \
typedef struct {                                                                                              \
    int64_t M, N, K, sam, sak, sbk, sbn, per, ap, bp, cf;                                                     \
    const uint16_t *A, *B;                                                                                    \
    uint16_t *Y;                                                                                              \
    float *scratch;                                                                                           \
} NAME##_args;                                                                                                \
static void NAME##_task(void *p, int64_t s, int slot) {                                                       \
    const NAME##_args *g = (const NAME##_args *)p;                                                            \
    const int64_t lo = s * g->per, hi = lo + g->per < g->M ? lo + g->per : g->M, N = g->N;                    \
    if (lo >= hi) return;                                                                                     \
    const int64_t ss_ = onnxc_slot_len(g->ap + g->bp + g->cf, sizeof(float)); /* one slot's part */         \
    float *Ap = g->scratch + (int64_t)slot * ss_, *Bp = Ap + g->ap, *Cf = Bp + g->bp;                           \
    NAME##_stripe(hi - lo, N, g->K, g->A + lo * g->sam, g->sam, g->sak, g->B, g->sbk, g->sbn, Cf, Ap, Bp);    \
    for (int64_t i = 0; i < (hi - lo) * N; i++) g->Y[lo * N + i] = STORE(Cf[i]);                              \
}                                                                                                             \
int NAME(int threads, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t sam, int64_t sak,           \
         const uint16_t *B, int64_t sbk, int64_t sbn, uint16_t *Y) {                                          \
    if (M <= 0 || N <= 0) return 0;                                                                           \
    if (K <= 0) {                                                                                             \
        for (int64_t i = 0; i < M * N; i++) Y[i] = STORE(0.0f);                                              \
        return 0;                                                                                             \
    }                                                                                                         \
    int nt = threads > 1 && M * N * K >= 65536 ? threads : 1;                                                 \
    const int64_t mblk = (M + ONNXC_HG_MR - 1) / ONNXC_HG_MR;                                                 \
    if (nt > mblk) nt = (int)mblk;                                                                            \
    const int64_t per = (mblk + nt - 1) / nt * ONNXC_HG_MR; /* rows per stripe */                            \
    const int64_t kc = K < ONNXC_HG_KC ? K : ONNXC_HG_KC;                                                     \
    int64_t ncap = N < ONNXC_HG_NC ? N : ONNXC_HG_NC;                                                         \
    ncap = (ncap + ONNXC_HG_NR - 1) / ONNXC_HG_NR * ONNXC_HG_NR;                                              \
    /* one stripe per thread, each thread's packed panels and stripe result in its slot of the scratch */     \
    NAME##_args g = {M, N, K, sam, sak, sbk, sbn, per, ONNXC_HG_MC * kc, ncap * kc, per * N, A, B, Y, NULL}; \
    const int64_t ss_ = onnxc_slot_len(g.ap + g.bp + g.cf, sizeof(float));                                    \
    g.scratch = (float *)onnxc_alloc_apart((size_t)(nt * ss_) * sizeof(float));                                    \
    if (!g.scratch) return ONNXC_ERR_MEMORY;                                                                  \
    if (nt > 1)                                                                                               \
        onnxc_parallel(nt, nt, NAME##_task, &g);                                                              \
    else                                                                                                      \
        NAME##_task(&g, 0, 0);                                                                                \
    free(g.scratch);                                                                                          \
    return 0;                                                                                                 \
}

ONNXC_HG_DEFINE(onnxc_hgemm_f16, onnxc_h2f, onnxc_f2h)
ONNXC_HG_DEFINE(onnxc_hgemm_bf16, onnxc_bf2f, onnxc_f2bf)

#undef ONNXC_HG_DEFINE

#ifdef ONNXC_HG_POP_OPTIONS
#pragma GCC pop_options
#undef ONNXC_HG_POP_OPTIONS
#endif
