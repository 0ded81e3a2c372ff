/* onnxc_recurrent.h: the matrix products of the recurrent kernels (RNN, GRU, LSTM).
 *
 *   void onnxc_rnn_mul_s(int threads, int64_t M, int64_t np, int64_t K, const float *a, int64_t lda,
 *                        const float *bp, float *c, int64_t ldc);
 *       c[M x np*P] = a[M x K] B[K x np*P], where B comes in np panels of P = ONNXC_RNN_P_S
 *       columns, each panel K x P row-major and contiguous: B[k][p*P + j] = bp[(p*K + k)*P + j].
 *   onnxc_rnn_mul_d: the same for double (P = ONNXC_RNN_P_D).
 *
 * It serves both the input projection X W^T of all time steps and the per-step product of the
 * states with R^T. Why not the GEMM of onnxc_gemm.h: the weights are the same at every call and
 * every step while a step's states are only batch rows tall, so repacking the weights per product
 * would cost as much as the product itself. The weights come packed in panels instead
 * (passes/expansions/recurrent.py lays them out; at compile time when they are constant), 128
 * bytes wide so that a tile walks contiguous memory: no 4 KiB aliasing between rows and
 * prefetch-friendly streams. Register tiles keep eight or more vector accumulators (enough
 * independent FMA chains): with 512-bit vectors 8 rows x 1 panel (sixteen), 4 x 1, 2 x 2 and 1 x 4;
 * with narrower ones 2 x 1 and 1 x 2. Rows go in blocks of ONNXC_RNN_MBLK that stay cached while
 * the panels stream past. Threads split the panels, or the rows when there are few panels. The
 * block function is not inlined so that it keeps this header's code generation options (512-bit
 * vectors) instead of the caller's.
 */
#ifndef ONNXC_RECURRENT_H
#define ONNXC_RECURRENT_H

#include "onnxc.h"

#define ONNXC_RNN_P_S 32 /* panel width in elements: 128 bytes */
#define ONNXC_RNN_P_D 16
/* Rows per block: a block's rows of A stay in L2 while all panels stream past them. */
#ifndef ONNXC_RNN_MBLK
#define ONNXC_RNN_MBLK 128
#endif
/* Below this many multiply-adds a product runs on one thread (a fork/join costs a few microseconds). */
#ifndef ONNXC_RNN_PAR_MIN
#define ONNXC_RNN_PAR_MIN 262144
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#define ONNXC_RNN_POP_OPTIONS
#endif

/* c[MB x NPN*P] = a[MB x K] times NPN consecutive panels. */
#define ONNXC_RNN_TILE(T, S, P, MB, NPN)                                                             \
    static inline void onnxc_rnn_tile_##S##_##MB##x##NPN(int64_t K, const T *restrict a, int64_t lda, \
                                                         const T *restrict bp, T *restrict c,        \
                                                         int64_t ldc) {                              \
        T acc[MB][NPN][P];                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++)                                         \
            _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++)                                    \
                _Pragma("omp simd") for (int j = 0; j < P; j++) acc[i][q][j] = 0;                    \
        for (int64_t k = 0; k < K; k++) {                                                            \
            _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++) {                                   \
                const T av = a[i * lda + k];                                                         \
                _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++) {                              \
                    const T *restrict r = bp + (q * K + k) * P;                                      \
                    _Pragma("omp simd") for (int j = 0; j < P; j++) acc[i][q][j] += av * r[j];       \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++)                                         \
            _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++)                                    \
                _Pragma("omp simd") for (int j = 0; j < P; j++) c[i * ldc + q * P + j] = acc[i][q][j]; \
    }

#define ONNXC_RNN_CALL(S, P, MB, NPN) \
    onnxc_rnn_tile_##S##_##MB##x##NPN(K, a + i * lda, lda, bp + p * K * P, c + i * ldc + p * P, ldc)
#if defined(__AVX512F__)
/* 8- and 4-row tiles, then 2 x 2 and 1 x 4 tiles for the last rows */
#define ONNXC_RNN_BLOCK(S, P)                                                                        \
    int64_t i = 0;                                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                              \
        for (i = 0; i + 8 <= M; i += 8) ONNXC_RNN_CALL(S, P, 8, 1);                                  \
        if (M - i >= 4) ONNXC_RNN_CALL(S, P, 4, 1);                                                  \
    }                                                                                                \
    i = M / 4 * 4;                                                                                   \
    if (M - i >= 2) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 2 <= p1; p += 2) ONNXC_RNN_CALL(S, P, 2, 2);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 2, 1);                                              \
        i += 2;                                                                                      \
    }                                                                                                \
    if (M - i == 1) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 4 <= p1; p += 4) ONNXC_RNN_CALL(S, P, 1, 4);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 1, 1);                                              \
    }
#define ONNXC_RNN_TILES(T, S, P)                                                                     \
    ONNXC_RNN_TILE(T, S, P, 8, 1) ONNXC_RNN_TILE(T, S, P, 4, 1) ONNXC_RNN_TILE(T, S, P, 2, 2)        \
    ONNXC_RNN_TILE(T, S, P, 2, 1) ONNXC_RNN_TILE(T, S, P, 1, 4) ONNXC_RNN_TILE(T, S, P, 1, 1)
#else
/* 2-row tiles, then 1 x 2 tiles for the last row */
#define ONNXC_RNN_BLOCK(S, P)                                                                        \
    int64_t i = 0;                                                                                   \
    for (int64_t p = p0; p < p1; p++)                                                                \
        for (i = 0; i + 2 <= M; i += 2) ONNXC_RNN_CALL(S, P, 2, 1);                                  \
    i = M / 2 * 2;                                                                                   \
    if (M - i == 1) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 2 <= p1; p += 2) ONNXC_RNN_CALL(S, P, 1, 2);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 1, 1);                                              \
    }
#define ONNXC_RNN_TILES(T, S, P) \
    ONNXC_RNN_TILE(T, S, P, 2, 1) ONNXC_RNN_TILE(T, S, P, 1, 2) ONNXC_RNN_TILE(T, S, P, 1, 1)
#endif

#define ONNXC_RNN_DEFINE(T, S, P)                                                                    \
    ONNXC_RNN_TILES(T, S, P)                                                                         \
    /* rows [0, M) times panels [p0, p1) */                                                          \
    static __attribute__((noinline)) void onnxc_rnn_block_##S(int64_t M, int64_t K, const T *a,      \
                                                              int64_t lda, const T *bp, T *c,        \
                                                              int64_t ldc, int64_t p0, int64_t p1) { \
        ONNXC_RNN_BLOCK(S, P)                                                                        \
    }                                                                                                \
    static inline void onnxc_rnn_mul_##S(int threads, int64_t M, int64_t np, int64_t K, const T *a,  \
                                         int64_t lda, const T *bp, T *c, int64_t ldc) {              \
        int nt = threads > 1 && (double)M * (double)(np * P) * (double)K >= ONNXC_RNN_PAR_MIN ? threads : 1; \
        if (nt <= 1) { /* no OpenMP region at all: a step of a small model takes well under a microsecond */ \
            for (int64_t i0 = 0; i0 < M; i0 += ONNXC_RNN_MBLK)                                       \
                onnxc_rnn_block_##S(M - i0 < ONNXC_RNN_MBLK ? M - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, lda, \
                                    bp, c + i0 * ldc, ldc, 0, np);                                   \
            return;                                                                                  \
        }                                                                                            \
        /* threads split the panels when there are enough of them, else the rows (in 8s) */          \
        const int by_rows = np < 4 * (int64_t)nt;                                                    \
        if (by_rows && nt > (M + 7) / 8) nt = (int)((M + 7) / 8);                                    \
        _Pragma("omp parallel for num_threads(nt) schedule(static)")                                 \
        for (int t = 0; t < nt; t++) {                                                               \
            int64_t r0 = 0, r1 = M, q0 = 0, q1 = np;                                                 \
            if (by_rows) {                                                                           \
                r0 = M * t / nt / 8 * 8;                                                             \
                r1 = t == nt - 1 ? M : M * (t + 1) / nt / 8 * 8;                                     \
            } else {                                                                                 \
                q0 = np * t / nt;                                                                    \
                q1 = np * (t + 1) / nt;                                                              \
            }                                                                                        \
            for (int64_t i0 = r0; i0 < r1; i0 += ONNXC_RNN_MBLK)                                     \
                onnxc_rnn_block_##S(r1 - i0 < ONNXC_RNN_MBLK ? r1 - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, \
                                    lda, bp, c + i0 * ldc, ldc, q0, q1);                             \
        }                                                                                            \
    }

ONNXC_RNN_DEFINE(float, s, ONNXC_RNN_P_S)
ONNXC_RNN_DEFINE(double, d, ONNXC_RNN_P_D)
#undef ONNXC_RNN_DEFINE
#undef ONNXC_RNN_TILES
#undef ONNXC_RNN_BLOCK
#undef ONNXC_RNN_CALL
#undef ONNXC_RNN_TILE

#ifdef ONNXC_RNN_POP_OPTIONS
#pragma GCC pop_options
#undef ONNXC_RNN_POP_OPTIONS
#endif

#endif /* ONNXC_RECURRENT_H */
