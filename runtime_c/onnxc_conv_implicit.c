/* onnxc_conv_implicit.c: the implementation of onnxc_conv_implicit.h (compiled once into the runtime
 * library): the AVX-512 tile kernel and the driver onnxc_ci_conv. Empty without AVX-512. */
#include "onnxc_conv_implicit.h"
#include "onnxc_sgemm_kern.h"
#include "onnxc_pool.h"
#include "onnxc_cut.h"

#if ONNXC_CI_AVAILABLE
/* The valid lanes (mask m) of v stored contiguously at y, and their inverse: the register forms of compress and
 * expand with a plain masked store / load, because the memory forms are microcoded on some CPUs (AMD Zen 4:
 * a compress store costs over a hundred cycles) and the partial tiles of every 3x3 map row pay it. */
static inline __attribute__((always_inline)) void onnxc_ci_compress(float *y, __mmask16 m, __m512 v) {
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << __builtin_popcount(m)) - 1u), _mm512_maskz_compress_ps(m, v));
}

static inline __attribute__((always_inline)) __m512 onnxc_ci_expand(__mmask16 m, const float *y) {
    return _mm512_maskz_expand_ps(m, _mm512_maskz_loadu_ps((__mmask16)((1u << __builtin_popcount(m)) - 1u), y));
}

/* R rows (4, 8 or 12) of one tile: 32 virtual positions starting at xb (= xp + v0), B row p at
 * xb + koff[p]. y: output row 0 at the tile's first valid position (ldy floats between rows); m0 / m1
 * the valid lanes (full: all 32, stored plainly); add: accumulate onto y (a later K slice); e: the
 * epilogue applied in registers (its rows start at ei; its residual at column yp of Y). */
static inline __attribute__((always_inline)) void onnxc_ci_k512(const int R, int64_t kc, const float *restrict a,
                                                                const float *xb, const int64_t *koff, float *y,
                                                                int64_t ldy, int mr, __mmask16 m0, __mmask16 m1,
                                                                int full, int add, const onnxc_sg_epi *e, int64_t ei,
                                                                int64_t yp, const int lfull, __mmask16 l0, __mmask16 l1) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        /* the next tile's output lines (for writing): its 12 rows are streams far apart the hardware
         * prefetcher does not follow, and Y is usually not in cache */
        if (i < mr) {
            __builtin_prefetch(y + i * ldy + 32, 1, 3);
            __builtin_prefetch(y + i * ldy + 48, 1, 3);
        }
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++) {
        const float *b = xb + koff[p], *bn = xb + koff[p + ONNXC_CI_PF];
        /* the last tile of an unpadded input (pointwise) loads only its lanes below VP: nothing past the input */
        const __m512 b0 = lfull ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(l0, b);
        const __m512 b1 = lfull ? _mm512_loadu_ps(b + 16) : _mm512_maskz_loadu_ps(l1, b + 16);
        _mm_prefetch((const char *)(a + 16 * ONNXC_SG_MR), _MM_HINT_T0);
        _mm_prefetch((const char *)bn, _MM_HINT_T0);
        _mm_prefetch((const char *)(bn + 31), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
        a += ONNXC_SG_MR;
    }
    const int n0 = __builtin_popcount(m0);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        if (i >= mr) break;
        float *yi = y + i * ldy;
        __m512 x0 = acc[i][0], x1 = acc[i][1];
        if (add) {
            x0 = _mm512_add_ps(x0, full ? _mm512_loadu_ps(yi) : onnxc_ci_expand(m0, yi));
            x1 = _mm512_add_ps(x1, full ? _mm512_loadu_ps(yi + 16) : onnxc_ci_expand(m1, yi + n0));
        }
        if (e) {
            if (e->bias) {
                const __m512 bv = _mm512_set1_ps(e->bias[ei + i]);
                x0 = _mm512_add_ps(x0, bv);
                x1 = _mm512_add_ps(x1, bv);
            }
            if (e->res) {
                const float *r = e->res + (ei + i) * e->ldr + yp;
                x0 = _mm512_add_ps(x0, full ? _mm512_loadu_ps(r) : onnxc_ci_expand(m0, r));
                x1 = _mm512_add_ps(x1, full ? _mm512_loadu_ps(r + 16) : onnxc_ci_expand(m1, r + n0));
            }
            x0 = onnxc_sg_act512(e->act, e->a, e->b, x0);
            x1 = onnxc_sg_act512(e->act, e->a, e->b, x1);
        }
        if (full) {
            _mm512_storeu_ps(yi, x0);
            _mm512_storeu_ps(yi + 16, x1);
        } else {
            onnxc_ci_compress(yi, m0, x0);
            onnxc_ci_compress(yi + n0, m1, x1);
        }
    }
}

/* A part of a tile's output channels reads the tile's B rows again, from wherever the input is: often the other
 * core's cache, which wrote that half of the map (onnxc_cut.h `copy`, in output channels' worth of GEMM). Without
 * it, equal spans favoured two halves of the channels over whole tiles, and both threads read all of the input
 * (144 -> 24 pointwise at 56 x 56 after a 2-thread elementwise op: no faster on 2 threads than on 1). */
#define ONNXC_CI_PART_COST 1.0

typedef struct {
    int64_t M, K, XWs, OH, OW, OP, VP, ldy;
    onnxc_cut cut;
    const float *Ap, *xp;
    const int64_t *koff;
    float *Y;
    const onnxc_sg_epi *epi;
} onnxc_ci_par;

/* A chunk of tiles and output channels (onnxc_cut.h), all K slices (so the slices of an output add up in the
 * same order whoever runs them). */
static void onnxc_ci_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_ci_par *P = (const onnxc_ci_par *)ctx;
    const int64_t NR = ONNXC_SG_NR, K = P->K, XWs = P->XWs, OW = P->OW, VP = P->VP, ldy = P->ldy;
    const float *Ap = P->Ap, *xp = P->xp;
    const int64_t *koff = P->koff;
    float *Y = P->Y;
    const onnxc_sg_epi *epi = P->epi, *ek = onnxc_sg_epi_in_kernel(epi) ? epi : NULL;
    int64_t t0, t1, r0, r1; /* tiles and output channels */
    onnxc_cut_item(&P->cut, chunk, &t0, &t1, &r0, &r1);
    for (int64_t pc = 0; pc < K; pc += ONNXC_SG_KC) {
        const int64_t kc = K - pc < ONNXC_SG_KC ? K - pc : ONNXC_SG_KC;
        const int last = pc + kc >= K;
        for (int64_t t = t0; t < t1; t++) {
        const int64_t v0 = t * NR;
        /* valid lanes: virtual positions below VP whose column is below OW */
        uint32_t valid = 0;
        int64_t oh = v0 / XWs, ow = v0 % XWs;
        for (int l = 0; l < (int)NR && v0 + l < VP; l++) {
            if (ow < OW) valid |= 1u << l;
            if (++ow == XWs) {
                ow = 0;
                oh++;
            }
        }
        if (!valid) continue;
        const int f = __builtin_ctz(valid); /* first valid lane: its output position */
        const int64_t yp = (v0 + f) / XWs * OW + (v0 + f) % XWs;
        const int full = valid == 0xFFFFFFFFu; /* then the 32 outputs are consecutive */
        const __mmask16 m0 = (__mmask16)(valid & 0xFFFF), m1 = (__mmask16)(valid >> 16);
        const int nvalid = __builtin_popcount(valid);
        const float *xb = xp + v0;
        const int lfull = v0 + NR <= VP;
        const uint32_t lanes = lfull ? 0xFFFFFFFFu : (1u << (VP - v0)) - 1u;
        const __mmask16 l0 = (__mmask16)(lanes & 0xFFFF), l1 = (__mmask16)(lanes >> 16);
        for (int64_t ir = r0; ir < r1; ir += ONNXC_SG_MR) {
            const int mr = r1 - ir < ONNXC_SG_MR ? (int)(r1 - ir) : (int)ONNXC_SG_MR;
            const float *a = Ap + ir * K + pc * ONNXC_SG_MR;
            float *y = Y + ir * ldy + yp;
            const onnxc_sg_epi *e = last ? ek : NULL;
            if (lfull) {
                if (mr > 8) onnxc_ci_k512(12, kc, a, xb, koff + pc, y, ldy, mr, m0, m1, full, pc > 0, e, ir, yp, 1, l0, l1);
                else if (mr > 4) onnxc_ci_k512(8, kc, a, xb, koff + pc, y, ldy, mr, m0, m1, full, pc > 0, e, ir, yp, 1, l0, l1);
                else onnxc_ci_k512(4, kc, a, xb, koff + pc, y, ldy, mr, m0, m1, full, pc > 0, e, ir, yp, 1, l0, l1);
            } else {
                onnxc_ci_k512(12, kc, a, xb, koff + pc, y, ldy, mr, m0, m1, full, pc > 0, e, ir, yp, 0, l0, l1);
            }
            if (last && epi && !ek) onnxc_sg_epilogue(epi, y, ldy, ir, yp, mr, nvalid);
        }
        }
    }
}

int onnxc_ci_conv(int threads, int64_t M, int64_t K, const float *Ap, const float *xp, const int64_t *koff,
                  int64_t XWs, int64_t OH, int64_t OW, float *Y, const onnxc_sg_epi *epi) {
    return onnxc_ci_conv_ld(threads, M, K, Ap, xp, koff, XWs, OH, OW, Y, OH * OW, epi);
}

int onnxc_ci_conv_ld(int threads, int64_t M, int64_t K, const float *Ap, const float *xp, const int64_t *koff,
                     int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    const int64_t NR = ONNXC_SG_NR, OP = OH * OW, VP = OH * XWs, tiles = (VP + NR - 1) / NR;
    if (M <= 0 || OP <= 0) return 0;
    const int64_t n = onnxc_chunks(threads, (double)M * (double)K * (double)OP, ONNXC_GEMM_PAR_MIN);
    const onnxc_cut cut = onnxc_cut_plan(threads, n, tiles, VP - (tiles - 1) * NR, M, K, ONNXC_CI_PART_COST);
    onnxc_ci_par P = {M, K, XWs, OH, OW, OP, VP, ldy, cut, Ap, xp, koff, Y, epi};
    onnxc_parallel(threads, P.cut.items, onnxc_ci_task, &P);
    return 0;
}

#else
int onnxc_ci_conv(int threads, int64_t M, int64_t K, const float *Ap, const float *xp, const int64_t *koff,
                  int64_t XWs, int64_t OH, int64_t OW, float *Y, const onnxc_sg_epi *epi) {
    (void)threads, (void)M, (void)K, (void)Ap, (void)xp, (void)koff, (void)XWs, (void)OH, (void)OW, (void)Y, (void)epi;
    return ONNXC_ERR_RUNTIME;
}

int onnxc_ci_conv_ld(int threads, int64_t M, int64_t K, const float *Ap, const float *xp, const int64_t *koff,
                     int64_t XWs, int64_t OH, int64_t OW, float *Y, int64_t ldy, const onnxc_sg_epi *epi) {
    (void)ldy;
    return onnxc_ci_conv(threads, M, K, Ap, xp, koff, XWs, OH, OW, Y, epi);
}
#endif /* ONNXC_CI_AVAILABLE */
