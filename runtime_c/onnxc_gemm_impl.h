/* onnxc_gemm_impl.h: the GEMM body, included by onnxc_gemm.c and onnxc_sgemm.c once per element type
 * with ONNXC_GEMM_T (element type), ONNXC_GEMM_NR (micro-kernel width) and ONNXC_GEMM_FN(name) (prefix)
 * defined, and optionally ONNXC_GEMM_LINK (linkage of the entry points gemm and gemm_ref; default
 * static inline). Not for direct inclusion. See onnxc_gemm.h for the contract.
 */
#ifndef ONNXC_GEMM_LINK
#define ONNXC_GEMM_LINK static inline
#endif
#define T_ ONNXC_GEMM_T
#define NR_ ONNXC_GEMM_NR
#define MR_ ONNXC_GEMM_MR

#include <stdatomic.h>

#include "onnxc_pool.h"

/* Naive reference: C = alpha * op(A) op(B) + beta * C, accumulating in the element type. */
ONNXC_GEMM_LINK int ONNXC_GEMM_FN(gemm_ref)(int transA, int transB, int64_t M, int64_t N, int64_t K, T_ alpha,
                                          const T_ *A, int64_t lda, const T_ *B, int64_t ldb, T_ beta,
                                          T_ *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            T_ s = 0;
            for (int64_t p = 0; p < K; p++)
                s += (transA ? A[p * lda + i] : A[i * lda + p]) * (transB ? B[j * ldb + p] : B[p * ldb + j]);
            C[i * ldc + j] = beta == 0 ? alpha * s : alpha * s + beta * C[i * ldc + j];
        }
    }
    return 0;
}

/* C = beta * C on an M x N block (beta == 0 writes zeros without reading). */
static inline void ONNXC_GEMM_FN(gemm_scale)(int64_t M, int64_t N, T_ beta, T_ *C, int64_t ldc) {
    if (beta == 1) return;
    for (int64_t i = 0; i < M; i++) {
        T_ *c = C + i * ldc;
        if (beta == 0) {
            memset(c, 0, (size_t)N * sizeof(T_));
        } else {
#pragma omp simd
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
        }
    }
}

/* Pack rows [0, mc) x cols [0, kc) of op(A) (already offset) into MR-row panels: Ap[panel][p][i]. */
static inline void ONNXC_GEMM_FN(gemm_pack_a)(int transA, const T_ *A, int64_t lda, int64_t mc, int64_t kc,
                                              T_ *restrict Ap) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR_) {
        int64_t mr = mc - i0 < MR_ ? mc - i0 : MR_;
        T_ *dst = Ap + i0 * kc;
        if (transA) {
            for (int64_t p = 0; p < kc; p++) {
                const T_ *src = A + p * lda + i0;
                int64_t i = 0;
                for (; i < mr; i++) dst[p * MR_ + i] = src[i];
                for (; i < MR_; i++) dst[p * MR_ + i] = 0;
            }
        } else if (mr == MR_) {
            const T_ *src = A + i0 * lda;
            for (int64_t p = 0; p < kc; p++) {
#pragma GCC unroll 16
                for (int i = 0; i < MR_; i++) dst[p * MR_ + i] = src[i * lda + p];
            }
        } else {
            int64_t i = 0;
            for (; i < mr; i++) {
                const T_ *src = A + (i0 + i) * lda;
                for (int64_t p = 0; p < kc; p++) dst[p * MR_ + i] = src[p];
            }
            for (; i < MR_; i++)
                for (int64_t p = 0; p < kc; p++) dst[p * MR_ + i] = 0;
        }
    }
}

/* Pack rows [0, kc) x cols [0, nc) of op(B) (already offset) into NR-column panels: Bp[panel][p][j]. */
static inline void ONNXC_GEMM_FN(gemm_pack_b)(int transB, const T_ *B, int64_t ldb, int64_t kc, int64_t nc,
                                              T_ *restrict Bp) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR_) {
        int64_t nr = nc - j0 < NR_ ? nc - j0 : NR_;
        T_ *dst = Bp + j0 * kc;
        if (!transB) {
            for (int64_t p = 0; p < kc; p++) {
                const T_ *src = B + p * ldb + j0;
                if (nr == NR_) {
#pragma omp simd
                    for (int64_t j = 0; j < NR_; j++) dst[p * NR_ + j] = src[j];
                } else {
                    int64_t j = 0;
                    for (; j < nr; j++) dst[p * NR_ + j] = src[j];
                    for (; j < NR_; j++) dst[p * NR_ + j] = 0;
                }
            }
        } else {
            int64_t j = 0;
            for (; j < nr; j++) {
                const T_ *src = B + (j0 + j) * ldb;
                for (int64_t p = 0; p < kc; p++) dst[p * NR_ + j] = src[p];
            }
            for (; j < NR_; j++)
                for (int64_t p = 0; p < kc; p++) dst[p * NR_ + j] = 0;
        }
    }
}

/* The MR x NR micro-kernel: C[mr x nr] = alpha * Ap Bp + beta * C over one KC slice. */
static inline void ONNXC_GEMM_FN(gemm_micro)(int64_t kc, const T_ *restrict a, const T_ *restrict b, T_ *C,
                                             int64_t ldc, int64_t mr, int64_t nr, T_ alpha, T_ beta) {
    T_ acc[MR_][NR_];
#pragma GCC unroll 16
    for (int i = 0; i < MR_; i++) {
#pragma omp simd
        for (int j = 0; j < NR_; j++) acc[i][j] = 0;
    }
    for (int64_t p = 0; p < kc; p++) {
        const T_ *bp = b + p * NR_;
        const T_ *ap = a + p * MR_;
#pragma GCC unroll 16
        for (int i = 0; i < MR_; i++) {
            const T_ ai = ap[i];
#pragma omp simd
            for (int j = 0; j < NR_; j++) acc[i][j] += ai * bp[j];
        }
    }
    if (mr == MR_ && nr == NR_) {
        if (beta == 0) {
#pragma GCC unroll 16
            for (int i = 0; i < MR_; i++) {
#pragma omp simd
                for (int j = 0; j < NR_; j++) C[i * ldc + j] = alpha * acc[i][j];
            }
        } else {
#pragma GCC unroll 16
            for (int i = 0; i < MR_; i++) {
#pragma omp simd
                for (int j = 0; j < NR_; j++) C[i * ldc + j] = alpha * acc[i][j] + beta * C[i * ldc + j];
            }
        }
        return;
    }
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++)
            C[i * ldc + j] = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * C[i * ldc + j];
}

/* Serial blocked GEMM on one stripe; Ap holds MC*KC and Bp KC*round_up(NC, NR) elements. */
static inline void ONNXC_GEMM_FN(gemm_blocked)(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                               T_ alpha, const T_ *A, int64_t lda, const T_ *B, int64_t ldb,
                                               T_ beta, T_ *C, int64_t ldc, T_ *Ap, T_ *Bp) {
    for (int64_t jc = 0; jc < N; jc += ONNXC_GEMM_NC) {
        int64_t nc = N - jc < ONNXC_GEMM_NC ? N - jc : ONNXC_GEMM_NC;
        for (int64_t pc = 0; pc < K; pc += ONNXC_GEMM_KC) {
            int64_t kc = K - pc < ONNXC_GEMM_KC ? K - pc : ONNXC_GEMM_KC;
            T_ bk = pc == 0 ? beta : (T_)1;
            ONNXC_GEMM_FN(gemm_pack_b)(transB, transB ? B + jc * ldb + pc : B + pc * ldb + jc, ldb, kc, nc, Bp);
            for (int64_t ic = 0; ic < M; ic += ONNXC_GEMM_MC) {
                int64_t mc = M - ic < ONNXC_GEMM_MC ? M - ic : ONNXC_GEMM_MC;
                ONNXC_GEMM_FN(gemm_pack_a)(transA, transA ? A + pc * lda + ic : A + ic * lda + pc, lda, mc, kc,
                                           Ap);
                for (int64_t jr = 0; jr < nc; jr += NR_) {
                    int64_t nr = nc - jr < NR_ ? nc - jr : NR_;
                    for (int64_t ir = 0; ir < mc; ir += MR_) {
                        int64_t mr = mc - ir < MR_ ? mc - ir : MR_;
                        ONNXC_GEMM_FN(gemm_micro)(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr,
                                                  ldc, mr, nr, alpha, bk);
                    }
                }
            }
        }
    }
}

/* Arguments of gemm_row's chunks (onnxc_pool.h). */
typedef struct {
    int transB;
    int64_t N, K, incx, ldb, incy;
    T_ alpha, beta;
    const T_ *x, *B;
    T_ *y;
} ONNXC_GEMM_FN(row_par);

static void ONNXC_GEMM_FN(row_task)(void *ctx, int64_t ch, int slot) {
    (void)slot;
    const ONNXC_GEMM_FN(row_par) *P = (const ONNXC_GEMM_FN(row_par) *)ctx;
    enum { CH = 512, LN = 128 / sizeof(T_) };
    const int transB = P->transB;
    const int64_t N = P->N, K = P->K, incx = P->incx, ldb = P->ldb, incy = P->incy;
    const T_ alpha = P->alpha, beta = P->beta, *x = P->x, *B = P->B;
    T_ *y = P->y;
    int64_t j0 = ch * CH, n = N - j0 < CH ? N - j0 : CH;
    T_ acc[CH];
    if (transB) {
        for (int64_t j = 0; j < n; j++) {
            const T_ *b = B + (j0 + j) * ldb;
            T_ part[LN] = {0}; /* vertical partial sums: vectorizes without reassociation */
            int64_t p = 0;
            for (; p + LN <= K; p += LN) {
#pragma omp simd
                for (int l = 0; l < LN; l++) part[l] += x[p + l] * b[p + l];
            }
            T_ s = 0;
            for (; p < K; p++) s += x[p] * b[p];
            for (int l = 0; l < LN; l++) s += part[l];
            acc[j] = s;
        }
    } else {
        for (int64_t j = 0; j < n; j++) acc[j] = 0;
        for (int64_t p = 0; p < K; p++) {
            const T_ xp = x[p * incx];
            const T_ *b = B + p * ldb + j0;
#pragma omp simd
            for (int64_t j = 0; j < n; j++) acc[j] += xp * b[j];
        }
    }
    for (int64_t j = 0; j < n; j++)
        y[(j0 + j) * incy] = beta == 0 ? alpha * acc[j] : alpha * acc[j] + beta * y[(j0 + j) * incy];
}

/* Row vector times matrix: y[j * incy] = alpha * sum_p x[p * incx] op(B)[p][j] + beta * y[j * incy]. */
static inline int ONNXC_GEMM_FN(gemm_row)(int threads, int transB, int64_t N, int64_t K, T_ alpha,
                                          const T_ *x, int64_t incx, const T_ *B, int64_t ldb, T_ beta, T_ *y,
                                          int64_t incy) {
    enum { CH = 512, LN = 128 / sizeof(T_) };
    int64_t nchunks = (N + CH - 1) / CH;
    T_ *xc = NULL;
    if (transB && incx != 1) {
        xc = (T_ *)onnxc_alloc((size_t)K * sizeof(T_));
        if (!xc) return ONNXC_ERR_MEMORY;
        for (int64_t p = 0; p < K; p++) xc[p] = x[p * incx];
        x = xc;
        incx = 1;
    }
    const ONNXC_GEMM_FN(row_par) P = {transB, N, K, incx, ldb, incy, alpha, beta, x, B, y};
    onnxc_parallel(N * K >= 2 * ONNXC_GEMM_PAR_MIN ? threads : 1, nchunks, ONNXC_GEMM_FN(row_task), (void *)&P);
    free(xc);
    return 0;
}

/* Small products: no packing, a plain i-p-j loop (contiguous inner loop unless B is transposed). */
static inline void ONNXC_GEMM_FN(gemm_small)(int transA, int transB, int64_t M, int64_t N, int64_t K, T_ alpha,
                                             const T_ *A, int64_t lda, const T_ *B, int64_t ldb, T_ beta, T_ *C,
                                             int64_t ldc) {
    ONNXC_GEMM_FN(gemm_scale)(M, N, beta, C, ldc);
    const int64_t sbp = transB ? 1 : ldb, sbj = transB ? ldb : 1;
    for (int64_t i = 0; i < M; i++) {
        T_ *restrict c = C + i * ldc;
        for (int64_t p = 0; p < K; p++) {
            const T_ a = alpha * (transA ? A[p * lda + i] : A[i * lda + p]);
            const T_ *b = B + p * sbp;
#pragma omp simd
            for (int64_t j = 0; j < N; j++) c[j] += a * b[j * sbj];
        }
    }
}

/* Arguments of gemm's stripes (onnxc_pool.h); packing buffers per slot, made on first use. */
typedef struct {
    int transA, transB, along_n;
    int64_t M, N, K, lda, ldb, ldc, per, unit, lim, mcap, ncap, kc;
    T_ alpha, beta;
    const T_ *A, *B;
    T_ *C;
    _Atomic int status;
    T_ *Ap[ONNXC_POOL_MAX], *Bp[ONNXC_POOL_MAX];
} ONNXC_GEMM_FN(blk_par);

static void ONNXC_GEMM_FN(blk_task)(void *ctx, int64_t c, int slot) {
    ONNXC_GEMM_FN(blk_par) *P = (ONNXC_GEMM_FN(blk_par) *)ctx;
    int64_t lo = c * P->per * P->unit, hi = (c + 1) * P->per * P->unit;
    if (hi > P->lim) hi = P->lim;
    if (lo >= hi) return;
    if (!P->Ap[slot]) P->Ap[slot] = (T_ *)onnxc_alloc((size_t)(P->mcap * P->kc) * sizeof(T_));
    if (!P->Bp[slot]) P->Bp[slot] = (T_ *)onnxc_alloc((size_t)(P->ncap * P->kc) * sizeof(T_));
    T_ *Ap = P->Ap[slot], *Bp = P->Bp[slot];
    if (!Ap || !Bp) {
        atomic_store_explicit(&P->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    const int transA = P->transA, transB = P->transB;
    const int64_t lda = P->lda, ldb = P->ldb, ldc = P->ldc;
    if (P->along_n)
        ONNXC_GEMM_FN(gemm_blocked)(transA, transB, P->M, hi - lo, P->K, P->alpha, P->A, lda,
                                    transB ? P->B + lo * ldb : P->B + lo, ldb, P->beta, P->C + lo, ldc, Ap, Bp);
    else
        ONNXC_GEMM_FN(gemm_blocked)(transA, transB, hi - lo, P->N, P->K, P->alpha, transA ? P->A + lo : P->A + lo * lda,
                                    lda, P->B, ldb, P->beta, P->C + lo * ldc, ldc, Ap, Bp);
}

/* C = alpha * op(A) op(B) + beta * C; see onnxc_gemm.h. */
ONNXC_GEMM_LINK int ONNXC_GEMM_FN(gemm)(int threads, int transA, int transB, int64_t M, int64_t N, int64_t K,
                                      T_ alpha, const T_ *A, int64_t lda, const T_ *B, int64_t ldb, T_ beta,
                                      T_ *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0 || alpha == 0) {
        ONNXC_GEMM_FN(gemm_scale)(M, N, beta, C, ldc);
        return 0;
    }
    if (M == 1) /* x = row 0 of op(A) */
        return ONNXC_GEMM_FN(gemm_row)(threads, transB, N, K, alpha, A, transA ? lda : 1, B, ldb, beta, C, 1);
    if (N == 1) /* C^T = op(B)^T op(A)^T: x = column 0 of op(B), matrix op(A)^T */
        return ONNXC_GEMM_FN(gemm_row)(threads, !transA, M, K, alpha, B, transB ? 1 : ldb, A, lda, beta, C, ldc);
    if ((double)M * (double)N * (double)K <= ONNXC_GEMM_SMALL) {
        ONNXC_GEMM_FN(gemm_small)(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return 0;
    }
    int nt = threads > 1 && (double)M * (double)N * (double)K >= ONNXC_GEMM_PAR_MIN ? threads : 1;
    /* split along N (in NR units) or M (in MR units), whichever gives more pieces per thread */
    int64_t nblk = (N + NR_ - 1) / NR_, mblk = (M + MR_ - 1) / MR_;
    int along_n = nblk >= mblk;
    int64_t blocks = along_n ? nblk : mblk;
    if (nt > blocks) nt = (int)blocks;
    /* stripes of at least 4 micro-tiles, a few per thread, handed out dynamically (robust to a busy core) */
    int64_t nch = nt > 1 ? (int64_t)nt * 4 : 1;
    if (nch > blocks / 4) nch = blocks / 4;
    if (nch < nt) nch = nt;
    const int64_t per = (blocks + nch - 1) / nch, unit = along_n ? NR_ : MR_, lim = along_n ? N : M;
    const int64_t kc = K < ONNXC_GEMM_KC ? K : ONNXC_GEMM_KC;
    int64_t mcap = along_n ? M : per * MR_, ncap = along_n ? per * NR_ : N;
    mcap = mcap < ONNXC_GEMM_MC ? mcap : ONNXC_GEMM_MC;
    ncap = ncap < ONNXC_GEMM_NC ? ncap : ONNXC_GEMM_NC;
    mcap = (mcap + MR_ - 1) / MR_ * MR_;
    ncap = (ncap + NR_ - 1) / NR_ * NR_;
    ONNXC_GEMM_FN(blk_par) P = {transA, transB, along_n, M, N, K, lda, ldb, ldc, per, unit, lim, mcap, ncap, kc,
                                alpha, beta, A, B, C, 0, {NULL}, {NULL}};
    onnxc_parallel(nt, nch, ONNXC_GEMM_FN(blk_task), &P);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) {
        free(P.Ap[i]);
        free(P.Bp[i]);
    }
    const int status = P.status;
    return status ? ONNXC_ERR_MEMORY : 0;
}

#undef T_
#undef NR_
#undef MR_
#undef ONNXC_GEMM_LINK
