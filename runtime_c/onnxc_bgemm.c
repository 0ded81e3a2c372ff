/* onnxc_bgemm.c: the implementation of onnxc_bgemm.h (compiled once into the runtime library). */
#include "onnxc_gemm_tune.h"
#include "onnxc_bgemm.h"
#include "onnxc_bgemm_kern.h"
#include "onnxc_pool.h"

#include <stdatomic.h>

#define ONNXC_BG_STRIPES 4 /* stripes per thread, handed out as threads come (a busy core takes fewer) */

/* -- packing B (float32 rounded to bf16 pairs), one variant per target ------------------------------ */

/* onnxc_bg_pack_b with the row converter rows32 (inlined: each variant below is built for its target). */
static inline __attribute__((always_inline)) void onnxc_bg_pack_b_with(onnxc_bg_rows32_fn rows32, int trans,
                                                                       const float *B, int64_t ldb, int64_t kc,
                                                                       int64_t nc, uint32_t *restrict dst) {
    const int64_t kq = (kc + 1) / 2, kf = kc / 2, nf = nc / ONNXC_BG_NR * ONNXC_BG_NR;
    if (!trans) { /* B[p][j] at B[p * ldb + j]: two rows per pair read along j (in order, for the prefetcher) */
        for (int64_t q = 0; q < kq; q++) {
            const float *r0 = B + 2 * q * ldb, *r1 = r0 + ldb;
            uint32_t *d = dst + q * ONNXC_BG_NR;
            int64_t j0 = 0;
            if (q < kf)
                for (; j0 < nf; j0 += ONNXC_BG_NR) rows32(r0 + j0, r1 + j0, d + j0 * kq);
            for (; j0 < nc; j0 += ONNXC_BG_NR) {
                const int64_t nr = nc - j0 < ONNXC_BG_NR ? nc - j0 : ONNXC_BG_NR;
                uint32_t *dj = d + j0 * kq;
                int64_t j = 0;
                if (q < kf)
                    for (; j < nr; j++) dj[j] = onnxc_bg_pair(r0[j0 + j], r1[j0 + j]);
                else
                    for (; j < nr; j++) dj[j] = onnxc_bg_pair(r0[j0 + j], 0.0f);
                for (; j < ONNXC_BG_NR; j++) dj[j] = 0;
            }
        }
        return;
    }
    for (int64_t j0 = 0; j0 < nc; j0 += ONNXC_BG_NR, dst += kq * ONNXC_BG_NR) { /* B[p][j] at B[j * ldb + p] */
        const int64_t nr = nc - j0 < ONNXC_BG_NR ? nc - j0 : ONNXC_BG_NR;
        for (int64_t j = 0; j < ONNXC_BG_NR; j++) {
            const float *src = B + (j0 + j) * ldb;
            uint32_t *d = dst + j;
            if (j >= nr) {
                for (int64_t q = 0; q < kq; q++) d[q * ONNXC_BG_NR] = 0;
                continue;
            }
            for (int64_t q = 0; q < kf; q++) d[q * ONNXC_BG_NR] = onnxc_bg_pair(src[2 * q], src[2 * q + 1]);
            if (kq > kf) d[kf * ONNXC_BG_NR] = onnxc_bg_pair(src[2 * kf], 0.0f);
        }
    }
}

static void onnxc_bg_pack_b_portable(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                     uint32_t *restrict dst) {
    onnxc_bg_pack_b_with(onnxc_bg_rows32_portable, trans, B, ldb, kc, nc, dst);
}

#if ONNXC_ISA_X86
static ONNXC_BG_T512 void onnxc_bg_pack_b_avx512bf16(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                                     uint32_t *restrict dst) {
    onnxc_bg_pack_b_with(onnxc_bg_rows32_avx512bf16, trans, B, ldb, kc, nc, dst);
}
#endif

/* The K slice [pc, pc + kc) of a convolution's B panel (onnxc_bg_conv_rows): pair row q holds taps
 * pc + 2q and pc + 2q + 1, its columns the output positions of the tile, one run of 32 per row segment s
 * starting at column dof[s] and read from xp + koff[tap] + so[s] (each run overwriting the previous one's
 * overrun; the last run's spills into the next row, written after it, or into the slack row at the end). */
static inline __attribute__((always_inline)) void onnxc_bg_conv_panel_with(onnxc_bg_rows32_fn rows32, const float *xp,
                                                                           const int64_t *koff, int64_t pc, int64_t kc,
                                                                           const int64_t *so, const int *dof, int ns,
                                                                           uint32_t *restrict bp) {
    static const float zeros[ONNXC_BG_NR];
    for (int64_t q = 0; q < (kc + 1) / 2; q++) {
        const float *s0 = xp + koff[pc + 2 * q], *s1 = 2 * q + 1 < kc ? xp + koff[pc + 2 * q + 1] : NULL;
        uint32_t *d = bp + q * ONNXC_BG_NR;
        for (int s = 0; s < ns; s++) rows32(s0 + so[s], s1 ? s1 + so[s] : zeros, d + dof[s]);
    }
}

typedef void (*onnxc_bg_conv_panel_fn)(const float *xp, const int64_t *koff, int64_t pc, int64_t kc,
                                       const int64_t *so, const int *dof, int ns, uint32_t *restrict bp);

static void onnxc_bg_conv_panel_portable(const float *xp, const int64_t *koff, int64_t pc, int64_t kc,
                                         const int64_t *so, const int *dof, int ns, uint32_t *restrict bp) {
    onnxc_bg_conv_panel_with(onnxc_bg_rows32_portable, xp, koff, pc, kc, so, dof, ns, bp);
}

#if ONNXC_ISA_X86
static ONNXC_BG_T512 void onnxc_bg_conv_panel_avx512bf16(const float *xp, const int64_t *koff, int64_t pc, int64_t kc,
                                                         const int64_t *so, const int *dof, int ns,
                                                         uint32_t *restrict bp) {
    onnxc_bg_conv_panel_with(onnxc_bg_rows32_avx512bf16, xp, koff, pc, kc, so, dof, ns, bp);
}
#endif

/* -- the micro-kernel of this CPU (onnxc_isa.h) ------------------------------------------------------ */

typedef void (*onnxc_bg_pack_b_fn)(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc,
                                   uint32_t *restrict dst);

static const struct {
    int level;
    onnxc_bg_micro_fn fn;
    onnxc_bg_pack_b_fn pack_b;
    onnxc_bg_conv_panel_fn conv_panel;
} onnxc_bg_kernels[] = { /* best first */
#if ONNXC_ISA_X86
    {ONNXC_ISA_AVX512BF16, onnxc_bg_micro_avx512bf16, onnxc_bg_pack_b_avx512bf16, onnxc_bg_conv_panel_avx512bf16},
#endif
    {ONNXC_ISA_PORTABLE, onnxc_bg_micro_portable, onnxc_bg_pack_b_portable, onnxc_bg_conv_panel_portable},
};
enum { ONNXC_BG_NKERN = sizeof onnxc_bg_kernels / sizeof onnxc_bg_kernels[0] };

static _Atomic int onnxc_bg_chosen = -1; /* index into onnxc_bg_kernels, chosen on first use */

static int onnxc_bg_pick(int level) {
    for (int i = 0; i < ONNXC_BG_NKERN; i++)
        if (onnxc_bg_kernels[i].level <= level) return i;
    return ONNXC_BG_NKERN - 1;
}

static int onnxc_bg_index(void) {
    int k = atomic_load_explicit(&onnxc_bg_chosen, memory_order_relaxed);
    if (k < 0) {
        k = onnxc_bg_pick(onnxc_isa_best());
        atomic_store_explicit(&onnxc_bg_chosen, k, memory_order_relaxed);
    }
    return k;
}

int onnxc_bgemm_use_isa(const char *name) {
    const int level = onnxc_isa_level(name);
    if (level < 0 || level > onnxc_isa_cpu()) return -1;
    atomic_store_explicit(&onnxc_bg_chosen, onnxc_bg_pick(level), memory_order_relaxed);
    return 0;
}

const char *onnxc_bgemm_isa(void) { return onnxc_isa_name(onnxc_bg_kernels[onnxc_bg_index()].level); }

/* -- packing A (float32 rounded to bf16 pairs) -------------------------------------------------------- */

void onnxc_bg_pack_a(int trans, const float *A, int64_t lda, int64_t mc, int64_t kc, uint32_t *restrict dst) {
    const int64_t kq = (kc + 1) / 2, kf = kc / 2; /* pairs, full pairs */
    for (int64_t i0 = 0; i0 < mc; i0 += ONNXC_BG_MR, dst += kq * ONNXC_BG_MR) {
        const int64_t mr = mc - i0 < ONNXC_BG_MR ? mc - i0 : ONNXC_BG_MR;
        if (trans) { /* A[i][p] at A[p * lda + i]: two rows of K per pair */
            for (int64_t q = 0; q < kq; q++) {
                const float *r0 = A + 2 * q * lda + i0, *r1 = r0 + lda;
                uint32_t *d = dst + q * ONNXC_BG_MR;
                int64_t i = 0;
                if (q < kf)
                    for (; i < mr; i++) d[i] = onnxc_bg_pair(r0[i], r1[i]);
                else
                    for (; i < mr; i++) d[i] = onnxc_bg_pair(r0[i], 0.0f);
                for (; i < ONNXC_BG_MR; i++) d[i] = 0;
            }
        } else {
            for (int64_t i = 0; i < ONNXC_BG_MR; i++) {
                const float *src = A + (i0 + i) * lda;
                uint32_t *d = dst + i;
                if (i >= mr) {
                    for (int64_t q = 0; q < kq; q++) d[q * ONNXC_BG_MR] = 0;
                    continue;
                }
                for (int64_t q = 0; q < kf; q++) d[q * ONNXC_BG_MR] = onnxc_bg_pair(src[2 * q], src[2 * q + 1]);
                if (kq > kf) d[kf * ONNXC_BG_MR] = onnxc_bg_pair(src[2 * kf], 0.0f);
            }
        }
    }
}

void onnxc_bg_pack_b(int trans, const float *B, int64_t ldb, int64_t kc, int64_t nc, uint32_t *restrict dst) {
    onnxc_bg_kernels[onnxc_bg_index()].pack_b(trans, B, ldb, kc, nc, dst);
}

/* -- the blocked product ------------------------------------------------------------------------------ */

/* The K slice length for a product of depth K: at most ONNXC_BG_KC, even, the slices about equal (576 is two
 * slices of 288, not 512 and a short 64 that would pay the load and store of C for little work). */
static inline int64_t onnxc_bg_kc(int64_t K) {
    const int64_t n = (K + ONNXC_BG_KC - 1) / ONNXC_BG_KC, kc = n > 0 ? (K + n - 1) / n : 2;
    return kc + (kc & 1); /* (2 for K == 0: the loops step by it) */
}

typedef struct {
    int64_t M, N, K;
    float alpha, beta;
    const void *A, *B;
    int64_t lda, ldb;
    int fa, fb;
    float *C;
    int64_t ldc;
    const onnxc_sg_epi *epi;
    onnxc_bg_micro_fn micro;
    onnxc_bg_pack_b_fn pack_b;
    int epi_k; /* the micro-kernel applies epi (onnxc_bg_epi_in_kernel) */
    int along_n;
    int64_t per, blocks; /* panels per stripe, panels along the split axis */
    _Atomic int status;
    uint32_t *Ab[ONNXC_POOL_MAX], *Bb[ONNXC_POOL_MAX];
} onnxc_bg_job;

/* The K slice [pc, pc + kc) of B's columns [jc, jc + nc) as packed panels (bps pairs apart). */
static const uint32_t *onnxc_bg_slice_b(const onnxc_bg_job *J, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                                        uint32_t *Bb, int64_t *bps) {
    const int64_t K2 = (J->K + 1) / 2, kq = (kc + 1) / 2;
    if (J->fb == ONNXC_BG_PACKED) {
        *bps = K2 * ONNXC_BG_NR;
        return (const uint32_t *)J->B + (jc / ONNXC_BG_NR) * K2 * ONNXC_BG_NR + (pc / 2) * ONNXC_BG_NR;
    }
    *bps = kq * ONNXC_BG_NR;
    const float *B = (const float *)J->B;
    const int tb = J->fb == ONNXC_SG_TRANS;
    J->pack_b(tb, tb ? B + jc * J->ldb + pc : B + pc * J->ldb + jc, J->ldb, kc, nc, Bb);
    return Bb;
}

/* The K slice [pc, pc + kc) of A's rows [ic, ic + mc) as packed panels (aps pairs apart). */
static const uint32_t *onnxc_bg_slice_a(const onnxc_bg_job *J, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                                        uint32_t *Ab, int64_t *aps) {
    const int64_t K2 = (J->K + 1) / 2;
    if (J->fa == ONNXC_BG_PACKED) {
        *aps = K2 * ONNXC_BG_MR;
        return (const uint32_t *)J->A + (ic / ONNXC_BG_MR) * K2 * ONNXC_BG_MR + (pc / 2) * ONNXC_BG_MR;
    }
    *aps = (kc + 1) / 2 * ONNXC_BG_MR;
    const float *A = (const float *)J->A;
    const int ta = J->fa == ONNXC_SG_TRANS;
    onnxc_bg_pack_a(ta, ta ? A + pc * J->lda + ic : A + ic * J->lda + pc, J->lda, mc, kc, Ab);
    return Ab;
}

/* Rows [m0, m1) x columns [n0, n1) of C (m0 a multiple of 12, n0 of 32). */
static void onnxc_bg_stripe(const onnxc_bg_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1, uint32_t *Ab,
                            uint32_t *Bb) {
    const int64_t K = J->K, MR = ONNXC_BG_MR, NR = ONNXC_BG_NR, KC = onnxc_bg_kc(K);
    for (int64_t jc = n0; jc < n1; jc += ONNXC_BG_NC) {
        const int64_t nc = n1 - jc < ONNXC_BG_NC ? n1 - jc : ONNXC_BG_NC;
        for (int64_t pc = 0; pc == 0 || pc < K; pc += KC) { /* K == 0 still writes beta C */
            const int64_t kc = K - pc < KC ? K - pc : KC, kq = (kc + 1) / 2;
            const float beta = pc == 0 ? J->beta : 1.0f;
            const int last = pc + kc >= K;
            int64_t bps, aps;
            const uint32_t *Bs = onnxc_bg_slice_b(J, jc, nc, pc, kc, Bb, &bps);
            for (int64_t ic = m0; ic < m1; ic += ONNXC_BG_MC) {
                const int64_t mc = m1 - ic < ONNXC_BG_MC ? m1 - ic : ONNXC_BG_MC;
                const uint32_t *As = onnxc_bg_slice_a(J, ic, mc, pc, kc, Ab, &aps);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const int nr = nc - jr < NR ? (int)(nc - jr) : (int)NR;
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int mr = mc - ir < MR ? (int)(mc - ir) : (int)MR;
                        float *c = J->C + (ic + ir) * J->ldc + jc + jr;
                        J->micro(kq, As + (ir / MR) * aps, Bs + (jr / NR) * bps, c, J->ldc, mr, nr, J->alpha, beta,
                                 last && J->epi_k ? J->epi : NULL, ic + ir, jc + jr);
                        if (last && J->epi && !J->epi_k) onnxc_sg_epilogue(J->epi, c, J->ldc, ic + ir, jc + jr, mr, nr);
                    }
                }
            }
        }
    }
}

static void onnxc_bg_task(void *ctx, int64_t chunk, int slot) {
    onnxc_bg_job *J = (onnxc_bg_job *)ctx;
    const int64_t kq = (ONNXC_BG_KC + 1) / 2;
    if (J->fa != ONNXC_BG_PACKED && !J->Ab[slot])
        J->Ab[slot] = (uint32_t *)onnxc_alloc((size_t)(ONNXC_BG_MC * kq) * sizeof(uint32_t));
    if (J->fb != ONNXC_BG_PACKED && !J->Bb[slot])
        J->Bb[slot] = (uint32_t *)onnxc_alloc((size_t)(ONNXC_BG_NC * kq) * sizeof(uint32_t));
    if ((J->fa != ONNXC_BG_PACKED && !J->Ab[slot]) || (J->fb != ONNXC_BG_PACKED && !J->Bb[slot])) {
        atomic_store_explicit(&J->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    const int64_t b0 = chunk * J->per, b1 = b0 + J->per < J->blocks ? b0 + J->per : J->blocks;
    if (J->along_n) {
        const int64_t n0 = b0 * ONNXC_BG_NR, n1 = b1 * ONNXC_BG_NR < J->N ? b1 * ONNXC_BG_NR : J->N;
        onnxc_bg_stripe(J, 0, J->M, n0, n1, J->Ab[slot], J->Bb[slot]);
    } else {
        const int64_t m0 = b0 * ONNXC_BG_MR, m1 = b1 * ONNXC_BG_MR < J->M ? b1 * ONNXC_BG_MR : J->M;
        onnxc_bg_stripe(J, m0, m1, 0, J->N, J->Ab[slot], J->Bb[slot]);
    }
}

int onnxc_bgemm_ex(int threads, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda, int fa,
                   const void *B, int64_t ldb, int fb, float beta, float *C, int64_t ldc, const onnxc_sg_epi *epi) {
    if (M <= 0 || N <= 0) return 0;
    const int k = onnxc_bg_index();
    onnxc_bg_job J = {M, N, K, alpha, beta, A, B, lda, ldb, fa, fb, C, ldc, epi, onnxc_bg_kernels[k].fn,
                      onnxc_bg_kernels[k].pack_b, onnxc_bg_epi_in_kernel(onnxc_bg_kernels[k].level, epi), 0, 0, 0, 0,
                      {NULL}, {NULL}};
    const int nt = (double)M * (double)N * (double)K >= ONNXC_GEMM_PAR_MIN ? threads : 1;
    const int64_t nblk = (N + ONNXC_BG_NR - 1) / ONNXC_BG_NR, mblk = (M + ONNXC_BG_MR - 1) / ONNXC_BG_MR;
    /* split the axis of the operand packed at run time, so that each of its panels is packed once, unless it
     * has too few panels to go round */
    if (fa == ONNXC_BG_PACKED && fb != ONNXC_BG_PACKED) J.along_n = nblk >= 2 * nt || nblk >= mblk;
    else if (fb == ONNXC_BG_PACKED && fa != ONNXC_BG_PACKED) J.along_n = !(mblk >= 2 * nt || mblk >= nblk);
    else J.along_n = nblk >= mblk;
    J.blocks = J.along_n ? nblk : mblk;
    int64_t nch = nt > 1 ? (int64_t)nt * ONNXC_BG_STRIPES : 1;
    if (nch > J.blocks) nch = J.blocks;
    J.per = (J.blocks + nch - 1) / nch;
    onnxc_parallel(nt, (J.blocks + J.per - 1) / J.per, onnxc_bg_task, &J);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) {
        free(J.Ab[i]);
        free(J.Bb[i]);
    }
    return J.status ? ONNXC_ERR_MEMORY : 0;
}

/* -- convolution with B panels built from the padded input ------------------------------------------- */

typedef struct {
    int64_t M, K, XH, XW, OD, OH, OW, SD, SH, OP, tiles, per;
    const uint32_t *Ap;
    const float *xp;
    const int64_t *koff;
    float *Y;
    const onnxc_sg_epi *epi;
    onnxc_bg_micro_fn micro;
    onnxc_bg_conv_panel_fn panel;
    int epi_k; /* the micro-kernel applies epi (onnxc_bg_epi_in_kernel) */
    _Atomic int status;
    uint32_t *bp[ONNXC_POOL_MAX]; /* per slot: a panel of KC / 2 x 32 pairs and a slack row */
} onnxc_bg_rows_job;

static void onnxc_bg_conv_rows_task(void *ctx, int64_t chunk, int slot) {
    onnxc_bg_rows_job *P = (onnxc_bg_rows_job *)ctx;
    const int64_t M = P->M, K = P->K, K2 = (K + 1) / 2, OH = P->OH, OW = P->OW, OP = P->OP, KC = onnxc_bg_kc(K);
    if (!P->bp[slot]) P->bp[slot] = (uint32_t *)onnxc_alloc((size_t)(ONNXC_BG_KC / 2 + 1) * ONNXC_BG_NR * 4);
    uint32_t *bp = P->bp[slot];
    if (!bp) {
        atomic_store_explicit(&P->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    const int64_t t0 = chunk * P->per, t1 = t0 + P->per < P->tiles ? t0 + P->per : P->tiles;
    for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = K - pc < KC ? K - pc : KC;
        const int last = pc + kc >= K;
        for (int64_t t = t0; t < t1; t++) {
            const int64_t j0 = t * ONNXC_BG_NR;
            const int nr = OP - j0 < ONNXC_BG_NR ? (int)(OP - j0) : ONNXC_BG_NR;
            int64_t so[ONNXC_BG_NR]; /* row segments of the tile: source offsets in xp (before koff), columns */
            int dof[ONNXC_BG_NR], ns = 0;
            for (int64_t j = j0; j < j0 + nr; ns++) {
                const int64_t r = j / OW, ow = j % OW, od = r / OH, oh = r % OH;
                so[ns] = (od * P->SD * P->XH + oh * P->SH) * P->XW + ow;
                dof[ns] = (int)(j - j0);
                j += OW - ow;
            }
            P->panel(P->xp, P->koff, pc, kc, so, dof, ns, bp);
            for (int64_t ir = 0; ir < M; ir += ONNXC_BG_MR) {
                const int mr = M - ir < ONNXC_BG_MR ? (int)(M - ir) : ONNXC_BG_MR;
                float *c = P->Y + ir * OP + j0;
                P->micro((kc + 1) / 2, P->Ap + ir * K2 + (pc / 2) * ONNXC_BG_MR, bp, c, OP, mr, nr, 1.0f,
                         pc == 0 ? 0.0f : 1.0f, last && P->epi_k ? P->epi : NULL, ir, j0);
                if (last && P->epi && !P->epi_k) onnxc_sg_epilogue(P->epi, c, OP, ir, j0, mr, nr);
            }
        }
    }
}

int onnxc_bg_conv_rows(int threads, int64_t M, int64_t K, const void *Ap, const float *xp, const int64_t *koff,
                       int64_t XH, int64_t XW, int64_t OD, int64_t OH, int64_t OW, int64_t SD, int64_t SH, float *Y,
                       const onnxc_sg_epi *epi) {
    const int64_t OP = OD * OH * OW, tiles = (OP + ONNXC_BG_NR - 1) / ONNXC_BG_NR;
    if (M <= 0 || tiles <= 0) return 0;
    const int k = onnxc_bg_index();
    onnxc_bg_rows_job P = {M, K, XH, XW, OD, OH, OW, SD, SH, OP, tiles, 0, (const uint32_t *)Ap, xp, koff, Y, epi,
                           onnxc_bg_kernels[k].fn, onnxc_bg_kernels[k].conv_panel,
                           onnxc_bg_epi_in_kernel(onnxc_bg_kernels[k].level, epi), 0, {NULL}};
    const int64_t nch = onnxc_chunks(threads, (double)M * (double)K * (double)OP, ONNXC_GEMM_PAR_MIN);
    const int64_t n = nch < tiles ? nch : tiles;
    P.per = (tiles + n - 1) / n;
    onnxc_parallel(threads, (tiles + P.per - 1) / P.per, onnxc_bg_conv_rows_task, &P);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) free(P.bp[i]);
    return P.status ? ONNXC_ERR_MEMORY : 0;
}
