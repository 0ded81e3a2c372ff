/* onnxc_gemv.c: the implementation of onnxc_gemv.h (compiled once into the runtime library): the
 * instruction-set vector macros, the register tiles for every row count and panel width, the panel walk
 * and the threaded driver. */
#include "onnxc_gemv.h"
#include "onnxc_pool.h"

#ifndef ONNXC_GV_KC
#define ONNXC_GV_KC 256  /* K slice when the rows take several groups */
#endif
/* Rows of a panel read ahead by software prefetch: on top of the hardware prefetchers it took the
 * batch-1 MLP (7.4 MB of weights in L3) from 261 to 252 us on one core of a 2.6 GHz Xeon, the speed of
 * a plain vector loop reading the same bytes (29 GB/s); 4 did as well, 16 no better than none. */
#ifndef ONNXC_GV_PFD
#define ONNXC_GV_PFD 8
#endif
/* Below this many multiply-adds one thread does it all (a fork/join costs a few microseconds). */
#ifndef ONNXC_GV_PAR_MIN
#define ONNXC_GV_PAR_MIN 262144
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#define ONNXC_GV_L 16   /* floats per vector */
#define ONNXC_GV_MR 4   /* rows per group: MR x 4 accumulators of the 32 registers */
typedef __m512 onnxc_gv_v;
#define ONNXC_GV_ZERO() _mm512_setzero_ps()
#define ONNXC_GV_SET1(x) _mm512_set1_ps(x)
#define ONNXC_GV_LOAD(p) _mm512_loadu_ps(p)
#define ONNXC_GV_STORE(p, v) _mm512_storeu_ps((p), (v))
#define ONNXC_GV_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ONNXC_GV_L 8
#define ONNXC_GV_MR 1   /* 8 accumulators of the 16 registers */
typedef __m256 onnxc_gv_v;
#define ONNXC_GV_ZERO() _mm256_setzero_ps()
#define ONNXC_GV_SET1(x) _mm256_set1_ps(x)
#define ONNXC_GV_LOAD(p) _mm256_loadu_ps(p)
#define ONNXC_GV_STORE(p, v) _mm256_storeu_ps((p), (v))
#define ONNXC_GV_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define ONNXC_GV_L 4
#define ONNXC_GV_MR 1   /* 16 accumulators of the 32 registers */
typedef float32x4_t onnxc_gv_v;
#define ONNXC_GV_ZERO() vdupq_n_f32(0.0f)
#define ONNXC_GV_SET1(x) vdupq_n_f32(x)
#define ONNXC_GV_LOAD(p) vld1q_f32(p)
#define ONNXC_GV_STORE(p, v) vst1q_f32((p), (v))
#define ONNXC_GV_FMA(a, b, c) vfmaq_f32((c), (a), (b))
#else
/* portable: one float per "vector"; the compiler vectorizes what it can */
#define ONNXC_GV_L 1
#define ONNXC_GV_MR 1
typedef float onnxc_gv_v;
#define ONNXC_GV_ZERO() 0.0f
#define ONNXC_GV_SET1(x) (x)
#define ONNXC_GV_LOAD(p) (*(p))
#define ONNXC_GV_STORE(p, v) (*(p) = (v))
#define ONNXC_GV_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* part[r][0..NV*L) (+)= sum_{k < kc} x[r * lda + k] b[k * w + ...] for MR_ rows; b: NV vectors per row of
 * the panel, w floats apart. add: accumulate onto part instead of overwriting. */
#define ONNXC_GV_TILE(MR_, NV)                                                                          \
    static inline void onnxc_gv_tile_##MR_##x##NV(int64_t kc, const float *restrict x, int64_t lda,     \
                                                  const float *restrict b, int64_t w,                  \
                                                  float (*restrict part)[ONNXC_GV_NB], int add) {      \
        onnxc_gv_v acc[MR_][NV];                                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR_; r++)                                        \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                                    \
                acc[r][v] = add ? ONNXC_GV_LOAD(part[r] + v * ONNXC_GV_L) : ONNXC_GV_ZERO();          \
        for (int64_t k = 0; k < kc; k++) {                                                           \
            onnxc_gv_v xv[MR_];                                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < MR_; r++) xv[r] = ONNXC_GV_SET1(x[r * lda + k]); \
            const float *restrict bk = b + k * w;                                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV * ONNXC_GV_L; v += 16)                   \
                __builtin_prefetch(bk + ONNXC_GV_PFD * w + v, 0, 3);                                 \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) {                                  \
                const onnxc_gv_v bv = ONNXC_GV_LOAD(bk + v * ONNXC_GV_L);                           \
                _Pragma("GCC unroll 4") for (int r = 0; r < MR_; r++)                                \
                    acc[r][v] = ONNXC_GV_FMA(xv[r], bv, acc[r][v]);                                  \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR_; r++)                                        \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                                    \
                ONNXC_GV_STORE(part[r] + v * ONNXC_GV_L, acc[r][v]);                                  \
    }

/* Tiles for every row count up to MR and every panel width (16-column steps) */
#if ONNXC_GV_L == 16
#define ONNXC_GV_TILES_W(MR_) ONNXC_GV_TILE(MR_, 1) ONNXC_GV_TILE(MR_, 2) ONNXC_GV_TILE(MR_, 3) ONNXC_GV_TILE(MR_, 4)
#define ONNXC_GV_CASE_W(MR_, nv)                                                  \
    switch (nv) {                                                                   \
    case 1: onnxc_gv_tile_##MR_##x1(kc, x, lda, b, w, part, add); break;            \
    case 2: onnxc_gv_tile_##MR_##x2(kc, x, lda, b, w, part, add); break;            \
    case 3: onnxc_gv_tile_##MR_##x3(kc, x, lda, b, w, part, add); break;            \
    default: onnxc_gv_tile_##MR_##x4(kc, x, lda, b, w, part, add); break;           \
    }
#elif ONNXC_GV_L == 8
#define ONNXC_GV_TILES_W(MR_) ONNXC_GV_TILE(MR_, 2) ONNXC_GV_TILE(MR_, 4) ONNXC_GV_TILE(MR_, 6) ONNXC_GV_TILE(MR_, 8)
#define ONNXC_GV_CASE_W(MR_, nv)                                                  \
    switch (nv) {                                                                   \
    case 2: onnxc_gv_tile_##MR_##x2(kc, x, lda, b, w, part, add); break;            \
    case 4: onnxc_gv_tile_##MR_##x4(kc, x, lda, b, w, part, add); break;            \
    case 6: onnxc_gv_tile_##MR_##x6(kc, x, lda, b, w, part, add); break;            \
    default: onnxc_gv_tile_##MR_##x8(kc, x, lda, b, w, part, add); break;           \
    }
#elif ONNXC_GV_L == 4
#define ONNXC_GV_TILES_W(MR_) ONNXC_GV_TILE(MR_, 4) ONNXC_GV_TILE(MR_, 8) ONNXC_GV_TILE(MR_, 12) ONNXC_GV_TILE(MR_, 16)
#define ONNXC_GV_CASE_W(MR_, nv)                                                  \
    switch (nv) {                                                                   \
    case 4: onnxc_gv_tile_##MR_##x4(kc, x, lda, b, w, part, add); break;            \
    case 8: onnxc_gv_tile_##MR_##x8(kc, x, lda, b, w, part, add); break;            \
    case 12: onnxc_gv_tile_##MR_##x12(kc, x, lda, b, w, part, add); break;          \
    default: onnxc_gv_tile_##MR_##x16(kc, x, lda, b, w, part, add); break;          \
    }
#else
#define ONNXC_GV_TILES_W(MR_) ONNXC_GV_TILE(MR_, 16) ONNXC_GV_TILE(MR_, 32) ONNXC_GV_TILE(MR_, 48) ONNXC_GV_TILE(MR_, 64)
#define ONNXC_GV_CASE_W(MR_, nv)                                                  \
    switch (nv) {                                                                   \
    case 16: onnxc_gv_tile_##MR_##x16(kc, x, lda, b, w, part, add); break;          \
    case 32: onnxc_gv_tile_##MR_##x32(kc, x, lda, b, w, part, add); break;          \
    case 48: onnxc_gv_tile_##MR_##x48(kc, x, lda, b, w, part, add); break;          \
    default: onnxc_gv_tile_##MR_##x64(kc, x, lda, b, w, part, add); break;          \
    }
#endif

ONNXC_GV_TILES_W(1)
#if ONNXC_GV_MR >= 4
ONNXC_GV_TILES_W(2)
ONNXC_GV_TILES_W(3)
ONNXC_GV_TILES_W(4)
#endif

/* part[0..mr) = (add ? part : 0) + x[mr rows] times kc rows of a panel of width w (mr <= MR). */
static inline void onnxc_gv_tile(int mr, int64_t kc, const float *x, int64_t lda, const float *b, int64_t w,
                                 float (*part)[ONNXC_GV_NB], int add) {
    const int nv = (int)(w / ONNXC_GV_L);
#if ONNXC_GV_MR >= 4
    switch (mr) {
    case 4: ONNXC_GV_CASE_W(4, nv) return;
    case 3: ONNXC_GV_CASE_W(3, nv) return;
    case 2: ONNXC_GV_CASE_W(2, nv) return;
    default: break;
    }
#endif
    (void)mr;
    ONNXC_GV_CASE_W(1, nv)
}

/* Panels [p0, p1) of one product (see the top of onnxc_gemv.h). */
static inline void onnxc_gv_panels(int64_t p0, int64_t p1, int64_t M, int64_t N, int64_t K, float alpha,
                                   const float *A, int64_t lda, const float *Bp, float beta, const float *C,
                                   int64_t csi, int64_t csj, const float *R, int act, float act_a, float act_b,
                                   float *Y, int64_t ldy) {
    float part[ONNXC_GV_MMAX][ONNXC_GV_NB];
    const int64_t kcap = M <= ONNXC_GV_MR ? K : ONNXC_GV_KC;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t j0 = p * ONNXC_GV_NB, left = N - j0;
        const int64_t w = left >= ONNXC_GV_NB ? ONNXC_GV_NB : (left + 15) / 16 * 16;
        const int64_t nj = left < ONNXC_GV_NB ? left : ONNXC_GV_NB;
        const float *b = Bp + j0 * K;
        if (K == 0)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < w; j++) part[i][j] = 0;
        for (int64_t k0 = 0; k0 < K; k0 += kcap) {
            const int64_t kc = K - k0 < kcap ? K - k0 : kcap;
            for (int64_t i = 0; i < M; i += ONNXC_GV_MR) {
                const int mr = M - i < ONNXC_GV_MR ? (int)(M - i) : ONNXC_GV_MR;
                onnxc_gv_tile(mr, kc, A + i * lda + k0, lda, b + k0 * w, w, part + i, k0 > 0);
            }
        }
        for (int64_t i = 0; i < M; i++) {
            float *restrict y = Y + i * ldy + j0;
            const float *restrict acc = part[i];
            if (C) {
                const float *restrict c = C + i * csi + j0 * csj;
                if (csj) {
#pragma omp simd
                    for (int64_t j = 0; j < nj; j++) y[j] = alpha * acc[j] + beta * c[j];
                } else {
                    const float cv = beta * c[0];
#pragma omp simd
                    for (int64_t j = 0; j < nj; j++) y[j] = alpha * acc[j] + cv;
                }
            } else {
#pragma omp simd
                for (int64_t j = 0; j < nj; j++) y[j] = alpha * acc[j];
            }
            if (R) {
                const float *restrict r = R + i * ldy + j0;
#pragma omp simd
                for (int64_t j = 0; j < nj; j++) y[j] += r[j];
            }
            if (act) onnxc_act_row_f(act, act_a, act_b, y, nj);
        }
    }
}

/* Arguments of onnxc_gemv's chunks (pairs of panels). */
typedef struct {
    int64_t M, N, K, np;
    float alpha, beta;
    const float *A;
    int64_t lda;
    const float *Bp, *C;
    int64_t csi, csj;
    const float *R;
    int act;
    float act_a, act_b;
    float *Y;
    int64_t ldy;
} onnxc_gv_par;

static void onnxc_gv_task(void *ctx, int64_t ch, int slot) {
    (void)slot;
    const onnxc_gv_par *P = (const onnxc_gv_par *)ctx;
    onnxc_gv_panels(2 * ch, 2 * ch + 2 < P->np ? 2 * ch + 2 : P->np, P->M, P->N, P->K, P->alpha, P->A, P->lda, P->Bp,
                    P->beta, P->C, P->csi, P->csj, P->R, P->act, P->act_a, P->act_b, P->Y, P->ldy);
}

/* See onnxc_gemv.h. */
void onnxc_gemv(int threads, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *Bp, float beta, const float *C, int64_t csi, int64_t csj, const float *R, int act,
                float act_a, float act_b, float *Y, int64_t ldy) {
    if (M <= 0 || N <= 0) return;
    const int64_t np = (N + ONNXC_GV_NB - 1) / ONNXC_GV_NB;
    int nt = threads > 1 && (double)M * (double)N * (double)K >= ONNXC_GV_PAR_MIN ? threads : 1;
    if (nt > np) nt = (int)np;
    if (nt <= 1) {
        onnxc_gv_panels(0, np, M, N, K, alpha, A, lda, Bp, beta, C, csi, csj, R, act, act_a, act_b, Y, ldy);
        return;
    }
    /* pairs of panels taken dynamically (onnxc_pool.h): a thread that starts late (a busy machine) takes fewer */
    const onnxc_gv_par P = {M, N, K, np, alpha, beta, A, lda, Bp, C, csi, csj, R, act, act_a, act_b, Y, ldy};
    onnxc_parallel(nt, (np + 1) / 2, onnxc_gv_task, (void *)&P);
}

/* The naive reference (B unpacked, K x N row-major), for tests. */
void onnxc_gemv_ref(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                    float beta, const float *C, int64_t csi, int64_t csj, const float *R, int act, float act_a,
                    float act_b, float *Y, int64_t ldy) {
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)A[i * lda + k] * (double)B[k * N + j];
            float y = alpha * (float)s;
            if (C) y += beta * C[i * csi + j * csj];
            if (R) y += R[i * ldy + j];
            Y[i * ldy + j] = y;
        }
        if (act) onnxc_act_row_f(act, act_a, act_b, Y + i * ldy, N);
    }
}
