/* onnxc_igemm.c: the implementation of onnxc_igemm.h (compiled once into the runtime library). */
#include "onnxc_igemm.h"
#include "onnxc_igemm_kern.h"
#include "onnxc_isa.h"
#include "onnxc_pool.h"
#include "onnxc_quant.h"

#include <stdatomic.h>

/* The epilogue's rules are the reference's separate roundings: no fused multiply-add. (Not with the
 * optimize pragma of onnxc_gemm_tune.h: GCC 12 then stops vectorizing the epilogue's loops.) The epilogue
 * loops want 512-bit vectors where there are, which GCC's tuning for many targets does not pick. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "no-tree-loop-distribute-patterns")
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#endif

/* -- the micro-kernel of this CPU (onnxc_isa.h) ------------------------------------------------------ */

typedef void (*onnxc_ig_micro_fn)(int au, int plain, int64_t nq, int tail, const uint8_t *a, int64_t lda, int mr,
                                  const uint8_t *b, int32_t *c);

static const struct {
    int level;
    onnxc_ig_micro_fn fn;
} onnxc_ig_kernels[] = { /* best first */
#if ONNXC_ISA_X86
    {ONNXC_ISA_AVX512VNNI, onnxc_ig_micro_avx512vnni},
    {ONNXC_ISA_AVX2, onnxc_ig_micro_avx2},
#endif
    {ONNXC_ISA_PORTABLE, onnxc_ig_micro_portable},
};
enum { ONNXC_IG_NKERN = sizeof onnxc_ig_kernels / sizeof onnxc_ig_kernels[0] };

static _Atomic int onnxc_ig_chosen = -1; /* index into onnxc_ig_kernels, chosen on first use */

/* The best kernel of at most ``level``. */
static int onnxc_ig_pick(int level) {
    for (int i = 0; i < ONNXC_IG_NKERN; i++)
        if (onnxc_ig_kernels[i].level <= level) return i;
    return ONNXC_IG_NKERN - 1;
}

static int onnxc_ig_index(void) {
    int k = atomic_load_explicit(&onnxc_ig_chosen, memory_order_relaxed);
    if (k < 0) {
        k = onnxc_ig_pick(onnxc_isa_best());
        atomic_store_explicit(&onnxc_ig_chosen, k, memory_order_relaxed);
    }
    return k;
}

int onnxc_igemm_use_isa(const char *name) {
    const int level = onnxc_isa_level(name);
    if (level < 0 || level > onnxc_isa_cpu()) return -1;
    atomic_store_explicit(&onnxc_ig_chosen, onnxc_ig_pick(level), memory_order_relaxed);
    return 0;
}

const char *onnxc_igemm_isa(void) { return onnxc_isa_name(onnxc_ig_kernels[onnxc_ig_index()].level); }

#define ONNXC_IG_GA (4 * ONNXC_IG_MR) /* bytes of a packed A group */
#define ONNXC_IG_GB (4 * ONNXC_IG_NR) /* bytes of a packed B group */

/* -- packing ---------------------------------------------------------------------------------------- */

/* One packed B group: d[j * 4 + t] = r_t[j] ^ x for j < 32, t < 4. */
static inline void onnxc_ig_quad(uint8_t *restrict d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                                 const uint8_t *r3, uint8_t x) {
#if defined(__AVX2__)
    const __m256i vx = _mm256_set1_epi8((char)x);
    const __m256i q0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r0), vx);
    const __m256i q1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r1), vx);
    const __m256i q2 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r2), vx);
    const __m256i q3 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r3), vx);
    const __m256i t0 = _mm256_unpacklo_epi8(q0, q1), t1 = _mm256_unpackhi_epi8(q0, q1); /* per 128-bit lane */
    const __m256i t2 = _mm256_unpacklo_epi8(q2, q3), t3 = _mm256_unpackhi_epi8(q2, q3);
    const __m256i u0 = _mm256_unpacklo_epi16(t0, t2), u1 = _mm256_unpackhi_epi16(t0, t2); /* columns 0-3|16-19, 4-7|20-23 */
    const __m256i u2 = _mm256_unpacklo_epi16(t1, t3), u3 = _mm256_unpackhi_epi16(t1, t3); /* 8-11|24-27, 12-15|28-31 */
    _mm256_storeu_si256((__m256i *)d, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256((__m256i *)(d + 32), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256((__m256i *)(d + 64), _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256((__m256i *)(d + 96), _mm256_permute2x128_si256(u2, u3, 0x31));
#else
    for (int j = 0; j < ONNXC_IG_NR; j++) {
        d[4 * j] = r0[j] ^ x;
        d[4 * j + 1] = r1[j] ^ x;
        d[4 * j + 2] = r2[j] ^ x;
        d[4 * j + 3] = r3[j] ^ x;
    }
#endif
}

/* Panels of columns [0, nc) of the K x nc B (rows ldb bytes apart), bytes ^ x, full K, no sums. */
static void onnxc_ig_pack_b_panels(const uint8_t *B, int64_t ldb, int64_t K, int64_t nc, uint8_t x,
                                   uint8_t *restrict dst) {
    const int64_t KQ = (K + 3) / 4;
    for (int64_t j0 = 0; j0 < nc; j0 += ONNXC_IG_NR) {
        const int64_t nr = nc - j0 < ONNXC_IG_NR ? nc - j0 : ONNXC_IG_NR;
        for (int64_t g = 0; g < KQ; g++, dst += ONNXC_IG_GB) {
            const uint8_t *r[4];
            uint8_t tmp[4][ONNXC_IG_NR];
            const int full = nr == ONNXC_IG_NR && 4 * g + 4 <= K;
            for (int t = 0; t < 4; t++) {
                const int64_t k = 4 * g + t;
                if (full) {
                    r[t] = B + k * ldb + j0;
                    continue;
                }
                for (int64_t j = 0; j < ONNXC_IG_NR; j++) tmp[t][j] = k < K && j < nr ? B[k * ldb + j0 + j] ^ x : 0;
                r[t] = tmp[t];
            }
            onnxc_ig_quad(dst, r[0], r[1], r[2], r[3], full ? x : 0);
        }
    }
}

/* s[r] = the sum over a packed panel (KQ groups of R rows x 4 bytes) of row r's byte values. */
static void onnxc_ig_panel_sums(const uint8_t *p, int64_t KQ, int R, int u8, int32_t *s) {
    int32_t acc[4 * ONNXC_IG_NR] = {0};
    for (int64_t g = 0; g < KQ; g++, p += 4 * R) {
        if (u8) {
#pragma omp simd
            for (int q = 0; q < 4 * R; q++) acc[q] += p[q];
        } else {
#pragma omp simd
            for (int q = 0; q < 4 * R; q++) acc[q] += (int8_t)p[q];
        }
    }
    for (int r = 0; r < R; r++) s[r] = acc[4 * r] + acc[4 * r + 1] + acc[4 * r + 2] + acc[4 * r + 3];
}

/* Sums of the packed operand with np panels of R rows / columns into s (np * R int32, native order, any
 * alignment). */
static void onnxc_ig_packed_sums(const uint8_t *p, int64_t np, int64_t K, int R, int u8, void *s) {
    const int64_t KQ = (K + 3) / 4;
    int32_t t[ONNXC_IG_NR];
    for (int64_t q = 0; q < np; q++) {
        onnxc_ig_panel_sums(p + q * KQ * 4 * R, KQ, R, u8, t);
        memcpy((uint8_t *)s + q * R * sizeof(int32_t), t, (size_t)R * sizeof(int32_t));
    }
}

void onnxc_ig_pack_a(const void *A, int64_t lda, int a_u8, int64_t M, int64_t K, int to_u8, uint8_t *restrict dst) {
    const uint8_t *src = (const uint8_t *)A, x = a_u8 == to_u8 ? 0 : 0x80;
    const int64_t KQ = (K + 3) / 4, np = (M + ONNXC_IG_MR - 1) / ONNXC_IG_MR;
    uint8_t *d = dst;
    for (int64_t q = 0; q < np; q++)
        for (int64_t g = 0; g < KQ; g++)
            for (int64_t i = 0; i < ONNXC_IG_MR; i++)
                for (int64_t t = 0; t < 4; t++) {
                    const int64_t m = q * ONNXC_IG_MR + i, k = 4 * g + t;
                    *d++ = m < M && k < K ? src[m * lda + k] ^ x : 0;
                }
    onnxc_ig_packed_sums(dst, np, K, ONNXC_IG_MR, to_u8, d);
}

void onnxc_ig_pack_b(const void *B, int64_t ldb, int b_u8, int64_t K, int64_t N, int to_u8, uint8_t *restrict dst) {
    const int64_t np = (N + ONNXC_IG_NR - 1) / ONNXC_IG_NR, panels = np * ((K + 3) / 4) * ONNXC_IG_GB;
    onnxc_ig_pack_b_panels((const uint8_t *)B, ldb, K, N, b_u8 == to_u8 ? 0 : 0x80, dst);
    onnxc_ig_packed_sums(dst, np, K, ONNXC_IG_NR, to_u8, dst + panels);
}

/* s[m] = sum_k A[m][k] of a plain A, bytes read as uint8 (u8) or int8. */
static void onnxc_ig_row_sums(const uint8_t *A, int64_t lda, int64_t M, int64_t K, int u8, int32_t *s) {
    for (int64_t m = 0; m < M; m++) {
        const uint8_t *r = A + m * lda;
        int32_t v = 0;
        if (u8) {
#pragma omp simd reduction(+ : v)
            for (int64_t k = 0; k < K; k++) v += r[k];
        } else {
#pragma omp simd reduction(+ : v)
            for (int64_t k = 0; k < K; k++) v += (int8_t)r[k];
        }
        s[m] = v;
    }
}

/* s[n] = sum_k B[k][n] of a plain B (s zeroed by the caller). */
static void onnxc_ig_col_sums(const uint8_t *B, int64_t ldb, int64_t K, int64_t N, int u8, int32_t *restrict s) {
    for (int64_t k = 0; k < K; k++) {
        const uint8_t *r = B + k * ldb;
        if (u8) {
#pragma omp simd
            for (int64_t n = 0; n < N; n++) s[n] += r[n];
        } else {
#pragma omp simd
            for (int64_t n = 0; n < N; n++) s[n] += (int8_t)r[n];
        }
    }
}

/* -- im2col into packed B panels --------------------------------------------------------------------- */

#define ONNXC_IG_I2C_PANELS 16 /* panels built together: 4 rows of 512 bytes on the stack */

typedef struct {
    const uint8_t *x;
    int64_t ID, IH, IW, OH, OW, KD, KH, KW, SD, SH, SW, DD, DH, DW, PD, PH, PW, KG, KQ, j0, ncol, nblk, kparts;
    uint8_t flip, zraw; /* xor to the packed type; the zero point's raw byte (the padding value) */
    uint8_t *colp;
} onnxc_ig_i2c;

/* A run of columns inside one output row: columns [pos, pos + len) are (od, oh, ow + t). */
typedef struct {
    int pos, len;
    int64_t od, oh, ow;
} onnxc_ig_seg;

/* d[0..n) = s[0..n), n > 0, with fixed-size moves that overlap, touching no byte outside the ranges: runs are
 * short (an output row), where a call to memcpy costs more than the copy. (AVX-512 byte-masked moves measured
 * slower on Zen 4.) */
static inline void onnxc_ig_copy(uint8_t *restrict d, const uint8_t *restrict s, int n) {
    uint64_t u, v;
    if (n >= 32) {
        for (int i = 0; i + 32 < n; i += 32) memcpy(d + i, s + i, 32);
        memcpy(d + n - 32, s + n - 32, 32);
    } else if (n >= 16) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(&u, s, 8);
        memcpy(&v, s + n - 8, 8);
        memcpy(d, &u, 8);
        memcpy(d + n - 8, &v, 8);
    } else {
        for (int i = 0; i < n; i++) d[i] = s[i];
    }
}

/* Row k = (c, kd, kh, kw) of the im2col matrix over the runs seg (nv columns), raw bytes, into d: the zero
 * point everywhere, then the part of each run that reads inside the input. */
static void onnxc_ig_tap_row(const onnxc_ig_i2c *P, uint8_t *restrict d, const onnxc_ig_seg *seg, int ns, int nv,
                             int64_t c, int64_t kd, int64_t kh, int64_t kw) {
    const int64_t dz = kd * P->DD - P->PD, dh = kh * P->DH - P->PH, dw = kw * P->DW - P->PW, SW = P->SW;
    const int64_t IW = P->IW;
    /* output columns ow in [lo, hi) read input column ow * SW + dw inside [0, IW) */
    const int64_t lo = dw >= 0 ? 0 : (-dw + SW - 1) / SW, hi = IW - dw <= 0 ? 0 : (IW - dw + SW - 1) / SW;
    const uint8_t *xc = P->x + c * P->ID * P->IH * IW;
    memset(d, P->zraw, (size_t)nv);
    for (int s = 0; s < ns; s++) {
        const int64_t id = seg[s].od * P->SD + dz, ih = seg[s].oh * P->SH + dh, ow = seg[s].ow;
        if ((uint64_t)id >= (uint64_t)P->ID || (uint64_t)ih >= (uint64_t)P->IH) continue;
        const int len = seg[s].len;
        const int a = lo - ow <= 0 ? 0 : lo - ow >= len ? len : (int)(lo - ow);
        const int b = hi - ow <= a ? a : hi - ow >= len ? len : (int)(hi - ow);
        if (b <= a) continue;
        uint8_t *o = d + seg[s].pos;
        const uint8_t *row = xc + (id * P->IH + ih) * IW + (ow * SW + dw);
        if (SW == 1) {
            onnxc_ig_copy(o + a, row + a, b - a);
        } else if (SW == 2) {
#pragma omp simd
            for (int t = a; t < b; t++) o[t] = row[2 * t];
        } else {
            for (int t = a; t < b; t++) o[t] = row[t * SW];
        }
    }
}

/* Groups [q0, q1) of block blk: panels [blk * 16, blk * 16 + 16) of the chunk, each group of 4 rows built
 * contiguously (raw bytes, padding = the zero point, columns past the chunk and rows past KG = flip, i.e. 0
 * once flipped), then interleaved into the panels with the flip. */
/* A 1x1 convolution at stride 1 without padding: row k of the column matrix is input plane k itself, so the
 * groups of the full panels interleave 4 planes where they are (no rows to fill first: the int8 MobileNetV2 spent
 * a tenth of its time filling them); the last, partial panel goes through copies padded with the flip byte. */
static void onnxc_ig_im2col_planes(const onnxc_ig_i2c *P, int64_t jb, int64_t nv, int64_t q0, int64_t q1,
                                   uint8_t *d) {
    enum { NR = ONNXC_IG_NR };
    const int64_t plane = P->ID * P->IH * P->IW, full = nv / NR, j = P->j0 + jb;
    uint8_t none[NR], tail[4][NR];
    memset(none, P->flip, NR); /* rows past K: 0 once flipped */
    for (int64_t q = q0; q < q1; q++, d += ONNXC_IG_GB) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++) r[t] = 4 * q + t < P->KG ? P->x + (4 * q + t) * plane + j : NULL;
        for (int64_t p = 0; p < full; p++)
            onnxc_ig_quad(d + p * P->KQ * ONNXC_IG_GB, r[0] ? r[0] + p * NR : none, r[1] ? r[1] + p * NR : none,
                          r[2] ? r[2] + p * NR : none, r[3] ? r[3] + p * NR : none, P->flip);
        if (nv > full * NR) {
            for (int t = 0; t < 4; t++) {
                memset(tail[t], P->flip, NR);
                if (r[t]) memcpy(tail[t], r[t] + full * NR, (size_t)(nv - full * NR));
            }
            onnxc_ig_quad(d + full * P->KQ * ONNXC_IG_GB, tail[0], tail[1], tail[2], tail[3], P->flip);
        }
    }
}

static void onnxc_ig_im2col_block(const onnxc_ig_i2c *P, int64_t blk, int64_t q0, int64_t q1) {
    enum { W = ONNXC_IG_I2C_PANELS * ONNXC_IG_NR };
    onnxc_ig_seg seg[W];
    int ns = 0;
    const int64_t jb = blk * W, nv = P->ncol - jb < W ? P->ncol - jb : W, np = (nv + ONNXC_IG_NR - 1) / ONNXC_IG_NR;
    if (P->KD * P->KH * P->KW == 1 && P->SD == 1 && P->SH == 1 && P->SW == 1 && P->PD == 0 && P->PH == 0 &&
        P->PW == 0 && P->ID == 1 && P->OH == P->IH && P->OW == P->IW) {
        onnxc_ig_im2col_planes(P, jb, nv, q0, q1, P->colp + (blk * ONNXC_IG_I2C_PANELS * P->KQ + q0) * ONNXC_IG_GB);
        return;
    }
    const int64_t j = P->j0 + jb, r = j / P->OW;
    int64_t ow = j % P->OW, od = r / P->OH, oh = r % P->OH;
    for (int64_t pos = 0; pos < nv; ns++) {
        const int64_t len = P->OW - ow < nv - pos ? P->OW - ow : nv - pos;
        seg[ns] = (onnxc_ig_seg){(int)pos, (int)len, od, oh, ow};
        pos += len;
        ow = 0;
        if (++oh == P->OH) oh = 0, od++;
    }
    uint8_t rows[4][W] __attribute__((aligned(64)));
    for (int t = 0; t < 4; t++) memset(rows[t] + nv, P->flip, (size_t)(np * ONNXC_IG_NR - nv));
    uint8_t *d = P->colp + (blk * ONNXC_IG_I2C_PANELS * P->KQ + q0) * ONNXC_IG_GB;
    const int64_t k0 = 4 * q0, kk = P->KD * P->KH * P->KW; /* the tap (c, kd, kh, kw) of row k, advanced with k */
    int64_t c = k0 / kk, kd = k0 % kk / (P->KH * P->KW), kh = k0 / P->KW % P->KH, kw = k0 % P->KW;
    for (int64_t q = q0; q < q1; q++, d += ONNXC_IG_GB) {
        for (int t = 0; t < 4; t++) {
            if (4 * q + t >= P->KG) {
                memset(rows[t], P->flip, (size_t)nv);
                continue;
            }
            onnxc_ig_tap_row(P, rows[t], seg, ns, (int)nv, c, kd, kh, kw);
            if (++kw == P->KW) {
                kw = 0;
                if (++kh == P->KH) {
                    kh = 0;
                    if (++kd == P->KD) kd = 0, c++;
                }
            }
        }
        for (int64_t p = 0; p < np; p++)
            onnxc_ig_quad(d + p * P->KQ * ONNXC_IG_GB, rows[0] + p * ONNXC_IG_NR, rows[1] + p * ONNXC_IG_NR,
                          rows[2] + p * ONNXC_IG_NR, rows[3] + p * ONNXC_IG_NR, P->flip);
    }
}

/* Chunk i: block i % nblk, part i / nblk of its groups (parts split K when there are few blocks). */
static void onnxc_ig_im2col_task(void *ctx, int64_t chunk, int slot) {
    (void)slot;
    const onnxc_ig_i2c *P = (const onnxc_ig_i2c *)ctx;
    const int64_t part = chunk / P->nblk;
    onnxc_ig_im2col_block(P, chunk % P->nblk, P->KQ * part / P->kparts, P->KQ * (part + 1) / P->kparts);
}

void onnxc_ig_im2col_packed(int threads, const void *x, int x_u8, int32_t x_zp, int to_u8, int64_t ID, int64_t IH,
                            int64_t IW, int64_t OH, int64_t OW, const int64_t *kdim, const int64_t *stride,
                            const int64_t *dil, const int64_t *pad, int64_t KG, int64_t j0, int64_t ncol,
                            uint8_t *restrict colp) {
    const int64_t W = ONNXC_IG_I2C_PANELS * ONNXC_IG_NR, nblk = (ncol + W - 1) / W;
    if (nblk <= 0) return;
    onnxc_ig_i2c P = {(const uint8_t *)x, ID, IH, IW, OH, OW, kdim[0], kdim[1], kdim[2], stride[0], stride[1],
                      stride[2], dil[0], dil[1], dil[2], pad[0], pad[1], pad[2], KG, (KG + 3) / 4, j0, ncol, nblk,
                      1, (uint8_t)(x_u8 == to_u8 ? 0 : 0x80), (uint8_t)x_zp, colp};
    const int64_t n = onnxc_chunks(threads, (double)KG * (double)ncol, 1 << 17);
    if (n <= 1) {
        for (int64_t b = 0; b < nblk; b++) onnxc_ig_im2col_block(&P, b, 0, P.KQ);
        return;
    }
    P.kparts = (n + nblk - 1) / nblk < P.KQ ? (n + nblk - 1) / nblk : (P.KQ > 0 ? P.KQ : 1);
    onnxc_parallel(threads, nblk * P.kparts, onnxc_ig_im2col_task, &P);
}

/* -- the GEMM --------------------------------------------------------------------------------------- */

/* One call, as handed to the chunks. */
typedef struct {
    int64_t M, N, K, KQ, nq, mc, nc; /* nq groups (and tail bytes) per micro-kernel call; block sizes */
    int tail, a_plain, b_plain, au;
    uint8_t bx; /* a plain B's xor to its packed type */
    const uint8_t *A, *B;
    int64_t lda, ldb;
    /* acc = raw - off[m] - zae[m] * cb[n] - zbe[n] * r1[m] (uint32); NULL: the term is 0 */
    const int32_t *zae, *cb, *off, *zbe, *r1;
    const onnxc_ig_epi *e;
    int along_n;
    int64_t nch, blocks;
    _Atomic int status;
    uint8_t *bb[ONNXC_POOL_MAX]; /* per slot: a packed block of a plain B, made on first use */
} onnxc_ig_job;

/* The output of one compensated row: acc[0..nr) of row m, columns from j0. */
static void onnxc_ig_out_row(const onnxc_ig_epi *e, const int32_t *restrict acc, int64_t m, int64_t j0, int nr) {
    const int64_t o = m * e->ldc + j0;
    const int s8 = e->out_type == ONNXC_IG_OUT_S8;
    const double lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    double r[ONNXC_IG_NR];
    float f[ONNXC_IG_NR];
    if (e->mode == ONNXC_IG_I32) {
        memcpy((int32_t *)e->out + o, acc, (size_t)nr * sizeof(int32_t));
        return;
    }
    if (e->mode == ONNXC_IG_QLINEAR) { /* the reference rule, bit-exact (onnxc_quant.h) */
        int32_t ab[ONNXC_IG_NR];
        int32_t bias = 0;
        if (e->ibias && e->per_n) { /* per-column int32 biases join the accumulators (wrapping) */
            for (int j = 0; j < nr; j++) ab[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)e->ibias[j0 + j]);
            acc = ab;
        } else if (e->ibias) {
            bias = e->ibias[m];
        }
        onnxc_requant_row(acc, nr, bias, e->per_n ? e->mult + j0 : e->mult + m, e->per_n, e->zy, s8,
                          s8 ? (void *)((int8_t *)e->out + o) : (void *)((uint8_t *)e->out + o));
        return;
    } else {
        if (e->per_n) {
            const float *sc = e->scale + j0, *b = e->bias ? e->bias + j0 : NULL;
#pragma omp simd
            for (int j = 0; j < nr; j++) f[j] = (float)acc[j] * sc[j];
            if (b) {
#pragma omp simd
                for (int j = 0; j < nr; j++) f[j] += b[j];
            }
        } else {
            const float sc = e->scale[m];
#pragma omp simd
            for (int j = 0; j < nr; j++) f[j] = (float)acc[j] * sc;
            if (e->bias) {
                const float b = e->bias[m];
#pragma omp simd
                for (int j = 0; j < nr; j++) f[j] += b;
            }
        }
        if (e->act) onnxc_act_row_f(e->act, e->act_a, e->act_b, f, nr);
        if (e->out_type == ONNXC_IG_OUT_F32) {
            memcpy((float *)e->out + o, f, (size_t)nr * sizeof(float));
            return;
        }
        const float ys = e->y_scale, yz = (float)e->y_zp;
#pragma omp simd
        for (int j = 0; j < nr; j++) r[j] = onnxc_qclampf(rintf(f[j] / ys) + yz, (float)lo, (float)hi);
    }
    if (s8) {
        int8_t *y = (int8_t *)e->out + o;
#pragma omp simd
        for (int j = 0; j < nr; j++) y[j] = (int8_t)(int32_t)r[j];
    } else {
        uint8_t *y = (uint8_t *)e->out + o;
#pragma omp simd
        for (int j = 0; j < nr; j++) y[j] = (uint8_t)(int32_t)r[j];
    }
}

/* Compensation and epilogue of the mr x nr tile t (raw sums, rows 32 apart) at (i0, j0) of C. */
static void onnxc_ig_epilogue(const onnxc_ig_job *J, int32_t *t, int64_t i0, int64_t j0, int mr, int nr) {
    const onnxc_ig_epi *e = J->e;
    const int tile = e->mode == ONNXC_IG_QLINEAR && !e->per_n;
    if (tile && !J->zae && !J->zbe) { /* a convolution's: the row offsets join the biases, no pass over t */
        int32_t b[ONNXC_IG_MR];
        /* raw sums (padding bytes 0) are below K * 255 * 255 in magnitude: with the biases, narrow when that
         * bound stays below 2^24 (then the float path needs no test for wide accumulators) */
        double most = (double)J->K * 65025.0;
        for (int i = 0; i < mr; i++) {
            b[i] = (int32_t)((uint32_t)(e->ibias ? e->ibias[i0 + i] : 0) - (uint32_t)(J->off ? J->off[i0 + i] : 0));
            const double bound = (double)J->K * 65025.0 + fabs((double)b[i]); /* (a compare: fmax is a libm call) */
            most = bound > most ? bound : most;
        }
        onnxc_requant_tile(t, ONNXC_IG_NR, mr, nr, b, e->mult + i0, e->zy, e->out_type == ONNXC_IG_OUT_S8,
                           (uint8_t *)e->out + i0 * e->ldc + j0, e->ldc, most < 16777216.0);
        return;
    }
    for (int i = 0; i < mr; i++) {
        const int64_t m = i0 + i;
        uint32_t *restrict v = (uint32_t *)t + i * ONNXC_IG_NR;
        if (J->off) {
            const uint32_t o = (uint32_t)J->off[m];
#pragma omp simd
            for (int j = 0; j < ONNXC_IG_NR; j++) v[j] -= o;
        }
        if (J->zae && J->zae[m]) {
            const uint32_t za = (uint32_t)J->zae[m];
            const uint32_t *cb = (const uint32_t *)J->cb + j0;
#pragma omp simd
            for (int j = 0; j < ONNXC_IG_NR; j++) v[j] -= za * cb[j];
        }
        if (J->zbe) {
            const uint32_t r1 = (uint32_t)J->r1[m];
            const uint32_t *zb = (const uint32_t *)J->zbe + j0;
#pragma omp simd
            for (int j = 0; j < ONNXC_IG_NR; j++) v[j] -= zb[j] * r1;
        }
        if (!tile) onnxc_ig_out_row(J->e, (const int32_t *)v, m, j0, nr);
    }
    if (tile) /* per-row parameters (a convolution's channels): the whole tile in one requantizing call */
        onnxc_requant_tile(t, ONNXC_IG_NR, mr, nr, e->ibias ? e->ibias + i0 : NULL, e->mult + i0, e->zy,
                           e->out_type == ONNXC_IG_OUT_S8, (uint8_t *)e->out + i0 * e->ldc + j0, e->ldc, 0);
}

/* Rows [m0, m1) x columns [n0, n1) of C (m0 a multiple of 8, n0 of 32); bb: the block buffer of a plain B.
 * Inside a block the micro-kernel walks along the rows of C (one A micro-panel in L1, the B panels of the
 * block from L2), so the output is 8 sequential streams the hardware prefetcher follows; walking down the
 * columns instead (B panel in L1) measured 10-30% slower where the output is large against K. */
static void onnxc_ig_stripe(const onnxc_ig_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1, uint8_t *bb) {
    const int64_t pa = J->KQ * ONNXC_IG_GA, pb = J->KQ * ONNXC_IG_GB; /* bytes of an A / B panel */
    const onnxc_ig_micro_fn micro = onnxc_ig_kernels[onnxc_ig_index()].fn;
    int32_t t[ONNXC_IG_MR * ONNXC_IG_NR] __attribute__((aligned(64)));
    for (int64_t jc = n0; jc < n1; jc += J->nc) {
        const int64_t nc = n1 - jc < J->nc ? n1 - jc : J->nc;
        const uint8_t *Bs = bb;
        if (J->b_plain) onnxc_ig_pack_b_panels(J->B + jc, J->ldb, J->K, nc, J->bx, bb);
        else Bs = J->B + jc / ONNXC_IG_NR * pb;
        for (int64_t ic = m0; ic < m1; ic += J->mc) {
            const int64_t ie = m1 - ic < J->mc ? m1 : ic + J->mc;
            for (int64_t i = ic; i < ie; i += ONNXC_IG_MR) {
                const int mr = ie - i < ONNXC_IG_MR ? (int)(ie - i) : ONNXC_IG_MR;
                const uint8_t *a = J->a_plain ? J->A + i * J->lda : J->A + i / ONNXC_IG_MR * pa;
                for (int64_t jr = 0; jr < nc; jr += ONNXC_IG_NR) {
                    const int nr = nc - jr < ONNXC_IG_NR ? (int)(nc - jr) : ONNXC_IG_NR;
                    micro(J->au, J->a_plain, J->nq, J->tail, a, J->lda, mr, Bs + jr / ONNXC_IG_NR * pb, t);
                    onnxc_ig_epilogue(J, t, i, jc + jr, mr, nr);
                }
            }
        }
    }
}

/* Chunk s: panels [s * blocks / nch, (s + 1) * blocks / nch) along N or M. */
static void onnxc_ig_task(void *ctx, int64_t s, int slot) {
    onnxc_ig_job *J = (onnxc_ig_job *)ctx;
    const int64_t unit = J->along_n ? ONNXC_IG_NR : ONNXC_IG_MR, lim = J->along_n ? J->N : J->M;
    const int64_t lo = s * J->blocks / J->nch * unit, hi0 = (s + 1) * J->blocks / J->nch * unit;
    const int64_t hi = hi0 < lim ? hi0 : lim;
    if (lo >= hi) return;
    if (J->b_plain && !J->bb[slot])
        J->bb[slot] = (uint8_t *)onnxc_alloc((size_t)(J->nc / ONNXC_IG_NR * J->KQ * ONNXC_IG_GB));
    if (J->b_plain && !J->bb[slot]) {
        atomic_store_explicit(&J->status, ONNXC_ERR_MEMORY, memory_order_relaxed);
        return;
    }
    if (J->along_n) onnxc_ig_stripe(J, 0, J->M, lo, hi, J->bb[slot]);
    else onnxc_ig_stripe(J, lo, hi, 0, J->N, J->bb[slot]);
}

static int onnxc_ig_bad_opd(const onnxc_ig_opd *X, int64_t rows, int64_t cols) {
    if (!X || X->form < ONNXC_IG_PLAIN || X->form > ONNXC_IG_PACKED_HOT) return 1;
    if (rows * cols > 0 && !X->data) return 1;
    return X->form == ONNXC_IG_PLAIN && rows > 1 && X->ld < cols;
}

static int onnxc_ig_bad_epi(const onnxc_ig_epi *e) {
    if (!e || !e->out) return 1;
    switch (e->mode) {
    case ONNXC_IG_I32: return e->out_type != ONNXC_IG_OUT_I32;
    case ONNXC_IG_QLINEAR: return !e->mult || (e->out_type != ONNXC_IG_OUT_U8 && e->out_type != ONNXC_IG_OUT_S8);
    case ONNXC_IG_DEQUANT:
        return !e->scale || (e->out_type != ONNXC_IG_OUT_F32 && e->out_type != ONNXC_IG_OUT_U8 &&
                             e->out_type != ONNXC_IG_OUT_S8);
    default: return 1;
    }
}

/* The zero points moved to the packed byte types into z[0..n) (d: the move); whether one is nonzero, and
 * whether all are equal (*same). */
static int onnxc_ig_zero_points(const onnxc_ig_opd *X, int64_t n, int32_t d, int32_t *z, int *same) {
    int any = 0;
    *same = 1;
    for (int64_t i = 0; i < n; i++) {
        z[i] = (X->zp ? X->zp[X->zp_per ? i : 0] : 0) + d;
        any |= z[i] != 0;
        *same &= z[i] == z[0];
    }
    return any;
}

/* Row sums of A (s: ceil(M / 8) * 8 entries) or column sums of B (ceil(N / 32) * 32), in the packed types. */
static void onnxc_ig_sums(const onnxc_ig_opd *X, int is_b, int64_t rows, int64_t K, int pu8, int32_t d,
                          int32_t *s) {
    const int R = is_b ? ONNXC_IG_NR : ONNXC_IG_MR;
    const int64_t np = (rows + R - 1) / R, KQ = (K + 3) / 4;
    const uint8_t *p = (const uint8_t *)X->data;
    if (X->form == ONNXC_IG_PACKED) {
        memcpy(s, p + np * KQ * 4 * R, (size_t)(np * R) * sizeof(int32_t));
    } else if (X->form == ONNXC_IG_PACKED_HOT) {
        onnxc_ig_packed_sums(p, np, K, R, pu8, s);
    } else if (!is_b) {
        onnxc_ig_row_sums(p, X->ld, rows, K, pu8, s);
    } else {
        onnxc_ig_col_sums(p, X->ld, K, rows, !!X->u8, s);
        for (int64_t n = 0; n < rows; n++) s[n] = (int32_t)((uint32_t)s[n] + (uint32_t)K * (uint32_t)d);
    }
}

int onnxc_igemm(int threads, int64_t M, int64_t N, int64_t K, const onnxc_ig_opd *A, const onnxc_ig_opd *B,
                const onnxc_ig_epi *e) {
    if (M < 0 || N < 0 || K < 0 || onnxc_ig_bad_opd(A, M, K) || onnxc_ig_bad_opd(B, K, N) || onnxc_ig_bad_epi(e))
        return ONNXC_ERR_INPUT;
    if (M == 0 || N == 0) return 0;
    const int a_u8 = A->form == ONNXC_IG_PLAIN ? !!A->u8 : !!A->packed_u8;
    const int b_u8 = B->form == ONNXC_IG_PLAIN ? !a_u8 : !!B->packed_u8;
    if (a_u8 == b_u8) return ONNXC_ERR_INPUT; /* two packed operands of one byte type */
    const int32_t da = a_u8 == !!A->u8 ? 0 : A->u8 ? -128 : 128, db = b_u8 == !!B->u8 ? 0 : B->u8 ? -128 : 128;
    const int64_t Mp = (M + ONNXC_IG_MR - 1) / ONNXC_IG_MR * ONNXC_IG_MR;
    const int64_t Np = (N + ONNXC_IG_NR - 1) / ONNXC_IG_NR * ONNXC_IG_NR;
    int32_t *scr = (int32_t *)calloc((size_t)(3 * Mp + 2 * Np), sizeof(int32_t));
    if (!scr) return ONNXC_ERR_MEMORY;
    int32_t *zae = scr, *r1 = scr + Mp, *off = scr + 2 * Mp, *zbe = scr + 3 * Mp, *cb = zbe + Np;
    int same_a, same_b;
    const int any_za = onnxc_ig_zero_points(A, M, da, zae, &same_a);
    const int any_zb = onnxc_ig_zero_points(B, N, db, zbe, &same_b);
    if (any_zb) { /* r1[m] = rowsum_a[m] - K za[m]; with one zb, off[m] = zb r1[m] */
        onnxc_ig_sums(A, 0, M, K, a_u8, 0, r1);
        for (int64_t m = 0; m < M; m++) {
            r1[m] = (int32_t)((uint32_t)r1[m] - (uint32_t)K * (uint32_t)zae[m]);
            off[m] = (int32_t)((uint32_t)zbe[0] * (uint32_t)r1[m]);
        }
    }
    if (any_za) onnxc_ig_sums(B, 1, N, K, b_u8, db, cb);
    onnxc_ig_job J = {M, N, K, (K + 3) / 4, 0, 0, 0, 0, A->form == ONNXC_IG_PLAIN, B->form == ONNXC_IG_PLAIN,
                      a_u8, (uint8_t)(db ? 0x80 : 0), (const uint8_t *)A->data, (const uint8_t *)B->data, A->ld,
                      B->ld, any_za ? zae : NULL, cb, any_zb && same_b ? off : NULL, any_zb && !same_b ? zbe : NULL,
                      r1, e, 0, 1, 1, 0, {NULL}};
    J.nq = J.a_plain ? K / 4 : J.KQ;
    J.tail = J.a_plain ? (int)(K % 4) : 0;
    const int64_t kb = J.KQ > 0 ? J.KQ * 4 : 4;
    J.mc = ONNXC_IG_L2A / kb / ONNXC_IG_MR * ONNXC_IG_MR;
    J.mc = J.mc < ONNXC_IG_MR ? ONNXC_IG_MR : J.mc;
    J.nc = ONNXC_IG_BBLOCK / kb / ONNXC_IG_NR * ONNXC_IG_NR;
    J.nc = J.nc < ONNXC_IG_NR ? ONNXC_IG_NR : J.nc > Np ? Np : J.nc;
    const int64_t nblk = Np / ONNXC_IG_NR, mblk = Mp / ONNXC_IG_MR;
    J.along_n = nblk >= mblk;
    J.blocks = J.along_n ? nblk : mblk;
    J.nch = onnxc_chunks(threads, (double)M * (double)N * (double)K, ONNXC_IG_GRAIN);
    J.nch = J.nch < J.blocks ? J.nch : J.blocks;
    if (J.nch > 1) onnxc_parallel(threads, J.nch, onnxc_ig_task, &J);
    else onnxc_ig_task(&J, 0, 0);
    for (int i = 0; i < ONNXC_POOL_MAX; i++) free(J.bb[i]);
    free(scr);
    return J.status;
}

