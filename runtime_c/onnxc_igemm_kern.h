/* onnxc_igemm_kern.h: the 8-bit integer GEMM micro-kernels, one per instruction set, all built into every
 * x86-64 runtime (each function carries its own target attribute) and chosen at run time by the CPU's
 * features (onnxc_isa.h): an artifact built for an older target still runs VNNI where
 * the CPU has it. Included by onnxc_igemm.c only.
 *
 *   void onnxc_ig_micro_<isa>(int au, int plain, int64_t nq, int tail, const uint8_t *a, int64_t lda,
 *                             int mr, const uint8_t *b, int32_t *c);      <isa>: avx512vnni, avx2, portable
 *
 * c[i * 32 + j] = sum_k a(i, k) * b(k, j) for i < mr <= 8 (rows up to the kernel's row block may be written
 * too: c holds 8 x 32 int32), j < 32, over the raw bytes: A's unsigned and B's signed when au, else A's
 * signed and B's unsigned.
 *   b      one packed B panel (onnxc_igemm.h): groups of 32 columns x 4 k, 128 bytes each.
 *   a      plain == 0: one packed A panel (groups of 8 rows x 4 k, 32 bytes), nq = ceil(K / 4), tail = 0;
 *          plain != 0: row 0 of a row-major A (rows lda bytes apart, mr of them valid: the kernel reads row
 *          mr - 1 for the rows past it), nq = K / 4 whole groups read 4 bytes at a time, then the tail
 *          (K % 4 bytes, zero-filled; b's last group) when tail != 0.
 *
 * Kernels (the panel sizes are one layout for every target; each tiles the 8 x 32 tile its own way):
 *   avx512vnni  rows in blocks of 1, 4 or 8 (the smallest that covers mr) x 2 zmm: per group, two B loads
 *               and per row one broadcast of 4 A bytes and two VPDPBUSD (16 zmm accumulators)
 *   avx2        2 rows x 16 columns sub-tiles: B bytes widened to int16 (VPMOVSX/ZXBW), the A quad widened
 *               and broadcast, VPMADDWD + VPADDD into pair sums (k01, k23) per column, added at the end;
 *               exact (VPMADDUBSW would saturate at 2 * 255 * 127)
 *   portable    4-row sub-tiles of int32 loops
 */
#ifndef ONNXC_IGEMM_KERN_H
#define ONNXC_IGEMM_KERN_H
#include "onnxc_igemm.h"

/* 4 bytes at p as one little-endian int32 (the byte order a broadcast keeps). */
static inline int32_t onnxc_ig_ld4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The first n < 4 bytes at p, zero-filled to 4, read without touching the bytes past them. */
static inline int32_t onnxc_ig_ldtail(const uint8_t *p, int n) {
    uint32_t v = 0;
    for (int t = 0; t < n; t++) v |= (uint32_t)p[t] << (8 * t);
    return (int32_t)v;
}

#include "onnxc_isa.h"

#if ONNXC_ISA_X86
#include <immintrin.h>
#define ONNXC_IG_T512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define ONNXC_IG_T256 __attribute__((target("avx2")))

/* R rows (1, 4 or 8) x 32 columns over nq groups; AU: A unsigned; PL: A plain (its tail is
 * onnxc_ig_tail512's). Always inlined with constants. */
static inline __attribute__((always_inline)) ONNXC_IG_T512 void
onnxc_ig_k512(const int R, const int AU, const int PL, int64_t nq, int tail, const uint8_t *restrict a, int64_t lda,
              int mr, const uint8_t *restrict b, int32_t *restrict c) {
    (void)tail;
    __m512i acc[ONNXC_IG_MR][2];
    const uint8_t *ar[ONNXC_IG_MR];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_si512();
        ar[i] = PL ? a + (int64_t)(i < mr ? i : mr - 1) * lda : a + 4 * i;
    }
#define ONNXC_IG_DP(acc, av, bv) ((acc) = AU ? _mm512_dpbusd_epi32((acc), (av), (bv)) : _mm512_dpbusd_epi32((acc), (bv), (av)))
    for (int64_t g = 0; g < nq; g++) {
        const __m512i b0 = _mm512_loadu_si512((const void *)b), b1 = _mm512_loadu_si512((const void *)(b + 64));
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            const __m512i av = _mm512_set1_epi32(onnxc_ig_ld4(PL ? ar[i] + 4 * g : a + 4 * i));
            ONNXC_IG_DP(acc[i][0], av, b0);
            ONNXC_IG_DP(acc[i][1], av, b1);
        }
        if (!PL) a += 4 * ONNXC_IG_MR;
        b += 4 * ONNXC_IG_NR;
    }
#undef ONNXC_IG_DP
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        _mm512_storeu_si512((void *)(c + i * ONNXC_IG_NR), acc[i][0]);
        _mm512_storeu_si512((void *)(c + i * ONNXC_IG_NR + 16), acc[i][1]);
    }
}

/* c[i][0..32) += the tail group of a plain A (tail bytes of row i at a + i * lda, zero-filled) times b's
 * group, for i < mr. Apart from the kernel's loop: GCC spills its accumulators when both share a function. */
static __attribute__((noinline)) ONNXC_IG_T512 void onnxc_ig_tail512(int au, int tail, const uint8_t *a, int64_t lda, int mr,
                                                       const uint8_t *b, int32_t *c) {
    const __m512i b0 = _mm512_loadu_si512((const void *)b), b1 = _mm512_loadu_si512((const void *)(b + 64));
    for (int i = 0; i < mr; i++, c += ONNXC_IG_NR) {
        const __m512i av = _mm512_set1_epi32(onnxc_ig_ldtail(a + i * lda, tail));
        __m512i c0 = _mm512_loadu_si512((const void *)c), c1 = _mm512_loadu_si512((const void *)(c + 16));
        c0 = au ? _mm512_dpbusd_epi32(c0, av, b0) : _mm512_dpbusd_epi32(c0, b0, av);
        c1 = au ? _mm512_dpbusd_epi32(c1, av, b1) : _mm512_dpbusd_epi32(c1, b1, av);
        _mm512_storeu_si512((void *)c, c0);
        _mm512_storeu_si512((void *)(c + 16), c1);
    }
}

#define ONNXC_IG_ROWS(AU, PL)                                                                \
    do {                                                                                     \
        if (mr > 4) onnxc_ig_k512(8, AU, PL, nq, tail, a, lda, mr, b, c);                    \
        else if (mr > 1) onnxc_ig_k512(4, AU, PL, nq, tail, a, lda, mr, b, c);               \
        else onnxc_ig_k512(1, AU, PL, nq, tail, a, lda, mr, b, c);                           \
        if (PL && tail) onnxc_ig_tail512(AU, tail, a + 4 * nq, lda, mr, b + nq * 4 * ONNXC_IG_NR, c); \
    } while (0)


/* RR rows (1 or 2) x 16 columns; a0 / a1 the rows' first quads, qs bytes between a row's quads; b the
 * panel's first group at the sub-tile's columns; the tail group (PL) read with onnxc_ig_ldtail. */
static inline __attribute__((always_inline)) ONNXC_IG_T256 void onnxc_ig_k256(const int RR, const int AU, const int PL, int64_t nq,
                                                                int tail, const uint8_t *a0, const uint8_t *a1,
                                                                int64_t qs, const uint8_t *restrict b,
                                                                int32_t *restrict c) {
    __m256i acc[2][4];
    for (int r = 0; r < 2; r++)
        for (int v = 0; v < 4; v++) acc[r][v] = _mm256_setzero_si256();
    const int64_t ng = nq + (PL && tail);
    for (int64_t g = 0; g < ng; g++) {
        const int last = PL && g == nq;
        __m256i aw[2];
#pragma GCC unroll 2
        for (int r = 0; r < RR; r++) {
            const uint8_t *ap = (r ? a1 : a0) + g * qs;
            const __m128i q = _mm_cvtsi32_si128(last ? onnxc_ig_ldtail(ap, tail) : onnxc_ig_ld4(ap));
            aw[r] = _mm256_broadcastq_epi64(AU ? _mm_cvtepu8_epi16(q) : _mm_cvtepi8_epi16(q));
        }
        /* one widened B vector live at a time: 8 accumulators, 2 A, 1 B and the products fit 16 registers */
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(b + 16 * v));
            const __m256i bw = AU ? _mm256_cvtepi8_epi16(x) : _mm256_cvtepu8_epi16(x);
#pragma GCC unroll 2
            for (int r = 0; r < RR; r++) acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(aw[r], bw));
        }
        b += 4 * ONNXC_IG_NR;
    }
    for (int r = 0; r < RR; r++) { /* lanes hold (k01, k23) pair sums per column: add them, in column order */
        const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
        const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xD8);
        _mm256_storeu_si256((__m256i *)(c + r * ONNXC_IG_NR), lo);
        _mm256_storeu_si256((__m256i *)(c + r * ONNXC_IG_NR + 8), hi);
    }
}

static inline __attribute__((always_inline)) ONNXC_IG_T256 void onnxc_ig_k256_tile(const int AU, const int PL, int64_t nq, int tail,
                                                                     const uint8_t *a, int64_t lda, int mr,
                                                                     const uint8_t *b, int32_t *c) {
    const int64_t qs = PL ? 4 : 4 * ONNXC_IG_MR;
    for (int i = 0; i < mr; i += 2) {
        const uint8_t *a0 = PL ? a + i * lda : a + 4 * i;
        const uint8_t *a1 = PL ? a0 + (i + 1 < mr ? lda : 0) : a0 + 4;
        for (int h = 0; h < 2; h++) {
            if (i + 1 < mr) onnxc_ig_k256(2, AU, PL, nq, tail, a0, a1, qs, b + 64 * h, c + i * ONNXC_IG_NR + 16 * h);
            else onnxc_ig_k256(1, AU, PL, nq, tail, a0, a1, qs, b + 64 * h, c + i * ONNXC_IG_NR + 16 * h);
        }
    }
}
#define ONNXC_IG_ROWS256(AU, PL) onnxc_ig_k256_tile(AU, PL, nq, tail, a, lda, mr, b, c)
#endif /* x86 */

/* 4-row sub-tiles; AU: A unsigned (B signed), else the reverse. */
static inline __attribute__((always_inline)) void onnxc_ig_kport(const int AU, const int PL, int64_t nq, int tail,
                                                                 const uint8_t *a, int64_t lda, int mr,
                                                                 const uint8_t *restrict b, int32_t *restrict c) {
    const int64_t ng = nq + (PL && tail);
    for (int i0 = 0; i0 < mr; i0 += 4) {
        const int n = mr - i0 < 4 ? mr - i0 : 4;
        int32_t acc[4][ONNXC_IG_NR] = {{0}};
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *bg = b + g * 4 * ONNXC_IG_NR;
            const int nk = PL && g == nq ? tail : 4;
            for (int i = 0; i < n; i++) {
                const uint8_t *ap = PL ? a + (i0 + i) * lda + 4 * g : a + g * 4 * ONNXC_IG_MR + 4 * (i0 + i);
                int32_t av[4] = {0, 0, 0, 0};
                for (int t = 0; t < nk; t++) av[t] = AU ? (int32_t)ap[t] : (int32_t)(int8_t)ap[t];
                for (int j = 0; j < ONNXC_IG_NR; j++) {
                    const uint8_t *bj = bg + 4 * j;
                    acc[i][j] += AU ? av[0] * (int8_t)bj[0] + av[1] * (int8_t)bj[1] + av[2] * (int8_t)bj[2] +
                                          av[3] * (int8_t)bj[3]
                                    : av[0] * bj[0] + av[1] * bj[1] + av[2] * bj[2] + av[3] * bj[3];
                }
            }
        }
        for (int i = 0; i < n; i++) memcpy(c + (i0 + i) * ONNXC_IG_NR, acc[i], sizeof acc[i]);
    }
}
#define ONNXC_IG_ROWSPORT(AU, PL) onnxc_ig_kport(AU, PL, nq, tail, a, lda, mr, b, c)

/* One micro-kernel per instruction set: the four (A unsigned?, A plain?) cases with constants. */
#define ONNXC_IG_MICRO(NAME, TARGET, ROWS)                                                                 \
    static TARGET void NAME(int au, int plain, int64_t nq, int tail, const uint8_t *a, int64_t lda, int mr,  \
                            const uint8_t *b, int32_t *c) {                                                   \
        if (au) {                                                                                            \
            if (plain) ROWS(1, 1);                                                                           \
            else ROWS(1, 0);                                                                                 \
        } else {                                                                                             \
            if (plain) ROWS(0, 1);                                                                           \
            else ROWS(0, 0);                                                                                 \
        }                                                                                                    \
    }
#if ONNXC_ISA_X86
ONNXC_IG_MICRO(onnxc_ig_micro_avx512vnni, ONNXC_IG_T512, ONNXC_IG_ROWS)
ONNXC_IG_MICRO(onnxc_ig_micro_avx2, ONNXC_IG_T256, ONNXC_IG_ROWS256)
#endif
ONNXC_IG_MICRO(onnxc_ig_micro_portable, , ONNXC_IG_ROWSPORT)
#undef ONNXC_IG_MICRO

#endif /* ONNXC_IGEMM_KERN_H */
