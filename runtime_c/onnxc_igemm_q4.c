/* onnxc_igemm_q4.c: the im2col of integer convolutions whose input channels come in fours
 * (onnxc_igemm_q4.h), compiled once into the runtime library.
 *
 * A packed B group holds 4 consecutive k of 32 columns, 4 bytes per column. With k ordered (c / 4, kh, kw,
 * c % 4) instead of (c, kh, kw) (the filter packed to match at compile time), the 4 bytes of a column are
 * the same input position in 4 consecutive channels. So the input is first interleaved by fours of channels
 * into words, a zero-point frame around it (onnxc_ig_q4_planes: one pass over the input), and every group of
 * the im2col is then a copy of words: a row of output positions reads consecutive words (every SW-th one),
 * no per-tap rows to fill and interleave (ResNet-18's 3x3 convolutions: a quarter of the int8 model's time
 * went into the byte-wise im2col). */
#include "onnxc_igemm_q4.h"
#include "onnxc_pool.h"

#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef struct {
    const uint8_t *x;
    uint32_t *x4;
    int64_t IH, IW, PH, PW, XH, XW;
    uint32_t flip, zw; /* xor of every word to the packed type; the frame's word (already flipped) */
} onnxc_q4_planes_par;

/* Plane cq: the words of channels 4 cq .. 4 cq + 3, the frame around them. */
static void onnxc_q4_plane(const onnxc_q4_planes_par *P, int64_t cq) {
    const int64_t IP = P->IH * P->IW, XW = P->XW, lead = P->PW < XW ? P->PW : XW;
    int64_t n = XW - lead < P->IW ? XW - lead : P->IW;
    if (n < 0) n = 0;
    const uint8_t *x0 = P->x + 4 * cq * IP, *x1 = x0 + IP, *x2 = x1 + IP, *x3 = x2 + IP;
    uint32_t *o = P->x4 + cq * P->XH * XW;
    const uint32_t flip = P->flip, zw = P->zw;
    for (int64_t r = 0; r < P->XH; r++) {
        uint32_t *restrict orow = o + r * XW;
        const int64_t ih = r - P->PH;
        if (ih < 0 || ih >= P->IH) {
            for (int64_t j = 0; j < XW; j++) orow[j] = zw;
            continue;
        }
        const uint8_t *restrict a = x0 + ih * P->IW, *restrict b = x1 + ih * P->IW;
        const uint8_t *restrict c = x2 + ih * P->IW, *restrict d = x3 + ih * P->IW;
        for (int64_t j = 0; j < lead; j++) orow[j] = zw;
        uint32_t *restrict w = orow + lead;
        for (int64_t t = 0; t < n; t++)
            w[t] = ((uint32_t)a[t] | (uint32_t)b[t] << 8 | (uint32_t)c[t] << 16 | (uint32_t)d[t] << 24) ^ flip;
        for (int64_t j = lead + n; j < XW; j++) orow[j] = zw;
    }
}

static void onnxc_q4_planes_task(void *ctx, int64_t i, int slot) {
    (void)slot;
    onnxc_q4_plane((const onnxc_q4_planes_par *)ctx, i);
}

void onnxc_ig_q4_planes(int threads, const void *x, int x_u8, int32_t x_zp, int to_u8, int64_t Cq, int64_t IH,
                        int64_t IW, int64_t PH, int64_t PW, int64_t XH, int64_t XW, uint32_t *x4) {
    const uint8_t fb = (uint8_t)(x_u8 == to_u8 ? 0 : 0x80), zb = (uint8_t)((uint8_t)x_zp ^ fb);
    const onnxc_q4_planes_par P = {(const uint8_t *)x, x4, IH, IW, PH, PW, XH, XW, fb * 0x01010101u,
                                   zb * 0x01010101u};
    if (onnxc_chunks(threads, (double)(Cq * XH * XW), 1 << 15) <= 1) {
        for (int64_t cq = 0; cq < Cq; cq++) onnxc_q4_plane(&P, cq);
        return;
    }
    onnxc_parallel(threads, Cq, onnxc_q4_planes_task, (void *)&P);
}

/* d[t] = s[t * SW] for t < n (1 <= n <= 32, SW 1 or 2). */
static inline void onnxc_q4_words(uint32_t *restrict d, const uint32_t *restrict s, int n, int64_t SW) {
#if defined(__AVX512F__)
    if (SW == 1) {
        const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1u);
        _mm512_mask_storeu_epi32(d, m0, _mm512_maskz_loadu_epi32(m0, s));
        if (n > 16) {
            const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : (1u << (n - 16)) - 1u);
            _mm512_mask_storeu_epi32(d + 16, m1, _mm512_maskz_loadu_epi32(m1, s + 16));
        }
        return;
    }
    if (SW == 2) {
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        for (int h = 0; h < n; h += 16) {
            const int k = n - h < 16 ? n - h : 16, span = 2 * k - 1; /* words read: s[2h .. 2h + span) */
            const __mmask16 lo = (__mmask16)(span >= 16 ? 0xffff : (1u << span) - 1u);
            const __mmask16 hi = (__mmask16)(span <= 16 ? 0 : (1u << (span - 16)) - 1u);
            const __m512i a = _mm512_maskz_loadu_epi32(lo, s + 2 * h), b = _mm512_maskz_loadu_epi32(hi, s + 2 * h + 16);
            _mm512_mask_storeu_epi32(d + h, (__mmask16)(k >= 16 ? 0xffff : (1u << k) - 1u),
                                     _mm512_permutex2var_epi32(a, even, b));
        }
        return;
    }
#endif
    for (int t = 0; t < n; t++) d[t] = s[t * SW];
}

typedef struct {
    const uint32_t *x4;
    int64_t Cq, XH, XW, OW, KH, KW, SH, SW, DH, DW, KQ, j0, ncol;
    uint8_t *colp;
} onnxc_q4_i2c_par;

/* Panel p: its columns as runs inside output rows, then every group a copy of words per run. */
static void onnxc_q4_panel(const onnxc_q4_i2c_par *P, int64_t p) {
    enum { NR = ONNXC_IG_NR };
    const int64_t c0 = p * NR, nv = P->ncol - c0 < NR ? P->ncol - c0 : NR, XW = P->XW, plane = P->XH * XW;
    int pos[NR], len[NR], ns = 0;
    int64_t off[NR];
    for (int64_t c = 0; c < nv; ns++) {
        const int64_t j = P->j0 + c0 + c, oh = j / P->OW, ow = j % P->OW;
        const int64_t l = P->OW - ow < nv - c ? P->OW - ow : nv - c;
        pos[ns] = (int)c;
        len[ns] = (int)l;
        off[ns] = oh * P->SH * XW + ow * P->SW;
        c += l;
    }
    uint32_t *d = (uint32_t *)(P->colp + p * P->KQ * 4 * NR);
    const uint32_t *xc = P->x4;
    for (int64_t cq = 0; cq < P->Cq; cq++, xc += plane)
        for (int64_t kh = 0; kh < P->KH; kh++)
            for (int64_t kw = 0; kw < P->KW; kw++, d += NR) {
                const uint32_t *s = xc + kh * P->DH * XW + kw * P->DW;
                for (int k = 0; k < ns; k++) onnxc_q4_words(d + pos[k], s + off[k], len[k], P->SW);
                if (nv < NR) memset(d + nv, 0, (size_t)(NR - nv) * sizeof(uint32_t)); /* columns past the chunk */
            }
}

static void onnxc_q4_i2c_task(void *ctx, int64_t i, int slot) {
    (void)slot;
    onnxc_q4_panel((const onnxc_q4_i2c_par *)ctx, i);
}

void onnxc_ig_im2col_q4(int threads, const uint32_t *x4, int64_t Cq, int64_t XH, int64_t XW, int64_t OW, int64_t KH,
                        int64_t KW, int64_t SH, int64_t SW, int64_t DH, int64_t DW, int64_t j0, int64_t ncol,
                        uint8_t *restrict colp) {
    const int64_t np = (ncol + ONNXC_IG_NR - 1) / ONNXC_IG_NR;
    if (np <= 0) return;
    const onnxc_q4_i2c_par P = {x4, Cq, XH, XW, OW, KH, KW, SH, SW, DH, DW, Cq * KH * KW, j0, ncol, colp};
    if (onnxc_chunks(threads, (double)(Cq * KH * KW) * 4.0 * (double)ncol, 1 << 17) <= 1) {
        for (int64_t p = 0; p < np; p++) onnxc_q4_panel(&P, p);
        return;
    }
    onnxc_parallel(threads, np, onnxc_q4_i2c_task, (void *)&P);
}
