/* JPEG sample reconstruction with libjpeg(-turbo)'s default decompression arithmetic, so results are
 * bit-identical to Pillow: the "islow" integer IDCT (jidctint.c: 13-bit constants, 2 extra bits in the
 * first pass, the 1024-entry wrap-around range limit), "fancy" triangle-filter chroma upsampling for
 * 2:1 ratios (h2v1, h1v2, h2v2 with the 8/7 and 1/2 rounding biases, edge rows replicated) and box
 * replication for other integer ratios, and the 16-bit fixed-point YCbCr -> RGB tables (jdcolor.c).
 * Included by onnxc_image_jpeg.h.
 */
#ifndef ONNXC_IMAGE_JPEG_PIX_H
#define ONNXC_IMAGE_JPEG_PIX_H

/* libjpeg's post-IDCT range limit: index x & 1023 of a table that clamps -128..511 and wraps beyond. */
static inline uint8_t ojpg_limit(int64_t x) {
    const int y = (int)(x & 1023);
    return (uint8_t)(y < 128 ? y + 128 : y < 512 ? 255 : y < 896 ? 0 : y - 896);
}

#define OJ_FIX_0_298631336 2446
#define OJ_FIX_0_390180644 3196
#define OJ_FIX_0_541196100 4433
#define OJ_FIX_0_765366865 6270
#define OJ_FIX_0_899976223 7373
#define OJ_FIX_1_175875602 9633
#define OJ_FIX_1_501321110 12299
#define OJ_FIX_1_847759065 15137
#define OJ_FIX_1_961570560 16069
#define OJ_FIX_2_053119869 16819
#define OJ_FIX_2_562915447 20995
#define OJ_FIX_3_072711026 25172

/* One 1-D pass of the islow IDCT over in[0], in[s], ..., in[7s]: the even and odd parts. */
#define OJ_IDCT_1D(i0, i1, i2, i3, i4, i5, i6, i7)                                                 \
    int64_t z2 = (i2), z3 = (i6);                                                                  \
    int64_t z1 = (z2 + z3) * OJ_FIX_0_541196100;                                                   \
    int64_t t2 = z1 - z3 * OJ_FIX_1_847759065, t3 = z1 + z2 * OJ_FIX_0_765366865;                  \
    int64_t t0 = ((int64_t)(i0) + (i4)) * 8192, t1 = ((int64_t)(i0) - (i4)) * 8192;               \
    const int64_t e10 = t0 + t3, e13 = t0 - t3, e11 = t1 + t2, e12 = t1 - t2;                      \
    t0 = (i7); t1 = (i5); t2 = (i3); t3 = (i1);                                                    \
    z1 = t0 + t3; z2 = t1 + t2; z3 = t0 + t2;                                                      \
    int64_t z4 = t1 + t3, z5 = (z3 + z4) * OJ_FIX_1_175875602;                                     \
    t0 *= OJ_FIX_0_298631336; t1 *= OJ_FIX_2_053119869; t2 *= OJ_FIX_3_072711026; t3 *= OJ_FIX_1_501321110; \
    z1 *= -OJ_FIX_0_899976223; z2 *= -OJ_FIX_2_562915447; z3 *= -OJ_FIX_1_961570560; z4 *= -OJ_FIX_0_390180644; \
    z3 += z5; z4 += z5;                                                                            \
    t0 += z1 + z3; t1 += z2 + z4; t2 += z2 + z3; t3 += z1 + z4;

/* Dequantize and inverse-transform one block into out (row stride `stride`). */
static void ojpg_idct(const int16_t *coef, const int16_t *q, uint8_t *out, size_t stride) {
    int64_t ws[64];
    for (int c = 0; c < 8; c++) { /* columns; results keep 2 extra bits (PASS1_BITS) */
        const int16_t *in = coef + c;
        const int16_t *qq = q + c;
#define DQ(k) ((int64_t)in[8 * (k)] * qq[8 * (k)])
        OJ_IDCT_1D(DQ(0), DQ(1), DQ(2), DQ(3), DQ(4), DQ(5), DQ(6), DQ(7))
#undef DQ
#define DS(x) (((x) + (1 << 10)) >> 11)
        ws[c] = DS(e10 + t3);
        ws[56 + c] = DS(e10 - t3);
        ws[8 + c] = DS(e11 + t2);
        ws[48 + c] = DS(e11 - t2);
        ws[16 + c] = DS(e12 + t1);
        ws[40 + c] = DS(e12 - t1);
        ws[24 + c] = DS(e13 + t0);
        ws[32 + c] = DS(e13 - t0);
#undef DS
    }
    for (int r = 0; r < 8; r++) { /* rows: descale by 13 + 2 + 3 bits, then range-limit */
        const int64_t *w = ws + 8 * r;
        uint8_t *o = out + (size_t)r * stride;
        OJ_IDCT_1D(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
#define DS(x) ojpg_limit(((x) + (1 << 17)) >> 18)
        o[0] = DS(e10 + t3);
        o[7] = DS(e10 - t3);
        o[1] = DS(e11 + t2);
        o[6] = DS(e11 - t2);
        o[2] = DS(e12 + t1);
        o[5] = DS(e12 - t1);
        o[3] = DS(e13 + t0);
        o[4] = DS(e13 - t0);
#undef DS
    }
}

/* Upsample a dw x dh plane (row stride istride) by integer factors hr, vr into out (row stride
 * ostride = dw * hr, dh * vr rows), choosing the method libjpeg-turbo chooses with fancy upsampling. */
static void ojpg_upsample(const uint8_t *in, size_t istride, int64_t dw, int64_t dh, int hr, int vr, uint8_t *out) {
    const size_t os = (size_t)(dw * hr);
    if (hr == 1 && vr == 1) {
        for (int64_t y = 0; y < dh; y++) memcpy(out + (size_t)y * os, in + (size_t)y * istride, (size_t)dw);
        return;
    }
    if (hr == 2 && vr == 1 && dw > 2) { /* h2v1 fancy */
        for (int64_t y = 0; y < dh; y++) {
            const uint8_t *s = in + (size_t)y * istride;
            uint8_t *o = out + (size_t)y * os;
            o[0] = s[0];
            o[1] = (uint8_t)((s[0] * 3 + s[1] + 2) >> 2);
            for (int64_t x = 1; x < dw - 1; x++) {
                const int v = s[x] * 3;
                o[2 * x] = (uint8_t)((v + s[x - 1] + 1) >> 2);
                o[2 * x + 1] = (uint8_t)((v + s[x + 1] + 2) >> 2);
            }
            o[2 * dw - 2] = (uint8_t)((s[dw - 1] * 3 + s[dw - 2] + 1) >> 2);
            o[2 * dw - 1] = s[dw - 1];
        }
        return;
    }
    if (hr == 1 && vr == 2) { /* h1v2 fancy */
        for (int64_t y = 0; y < dh; y++) {
            const uint8_t *s = in + (size_t)y * istride;
            const uint8_t *up = in + (size_t)(y > 0 ? y - 1 : 0) * istride;
            const uint8_t *dn = in + (size_t)(y + 1 < dh ? y + 1 : dh - 1) * istride;
            uint8_t *o0 = out + (size_t)(2 * y) * os, *o1 = o0 + os;
            for (int64_t x = 0; x < dw; x++) {
                o0[x] = (uint8_t)((s[x] * 3 + up[x] + 1) >> 2);
                o1[x] = (uint8_t)((s[x] * 3 + dn[x] + 2) >> 2);
            }
        }
        return;
    }
    if (hr == 2 && vr == 2 && dw > 2) { /* h2v2 fancy */
        for (int64_t y = 0; y < dh; y++) {
            const uint8_t *s = in + (size_t)y * istride;
            for (int v = 0; v < 2; v++) {
                const int64_t ny = v == 0 ? (y > 0 ? y - 1 : 0) : (y + 1 < dh ? y + 1 : dh - 1);
                const uint8_t *t = in + (size_t)ny * istride;
                uint8_t *o = out + (size_t)(2 * y + v) * os;
                int last, cur = s[0] * 3 + t[0], next = s[1] * 3 + t[1];
                o[0] = (uint8_t)((cur * 4 + 8) >> 4);
                o[1] = (uint8_t)((cur * 3 + next + 7) >> 4);
                last = cur;
                cur = next;
                for (int64_t x = 1; x < dw - 1; x++) {
                    next = s[x + 1] * 3 + t[x + 1];
                    o[2 * x] = (uint8_t)((cur * 3 + last + 8) >> 4);
                    o[2 * x + 1] = (uint8_t)((cur * 3 + next + 7) >> 4);
                    last = cur;
                    cur = next;
                }
                o[2 * dw - 2] = (uint8_t)((cur * 3 + last + 8) >> 4);
                o[2 * dw - 1] = (uint8_t)((cur * 4 + 7) >> 4);
            }
        }
        return;
    }
    for (int64_t y = 0; y < dh; y++) { /* box: replicate each sample hr x vr times */
        const uint8_t *s = in + (size_t)y * istride;
        uint8_t *o = out + (size_t)(y * vr) * os;
        for (int64_t x = 0; x < dw; x++)
            for (int k = 0; k < hr; k++) o[x * hr + k] = s[x];
        for (int k = 1; k < vr; k++) memcpy(o + (size_t)k * os, o, os);
    }
}

static inline uint8_t ojpg_clamp(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* YCbCr -> RGB with jdcolor.c's tables (SCALEBITS 16). y, cb, cr: planes with row strides ys, cs, rs. */
static void ojpg_ycc_rgb(const uint8_t *y, size_t ys, const uint8_t *cb, size_t cs, const uint8_t *cr, size_t rs,
                         int64_t w, int64_t h, uint8_t *out) {
    int cr_r[256], cb_b[256];
    int64_t cr_g[256], cb_g[256];
    for (int i = 0; i < 256; i++) {
        const int64_t x = i - 128;
        cr_r[i] = (int)((91881 * x + 32768) >> 16);  /* FIX(1.40200) */
        cb_b[i] = (int)((116130 * x + 32768) >> 16); /* FIX(1.77200) */
        cr_g[i] = -46802 * x;                        /* -FIX(0.71414) */
        cb_g[i] = -22554 * x + 32768;                /* -FIX(0.34414), plus ONE_HALF */
    }
    for (int64_t r = 0; r < h; r++) {
        const uint8_t *py = y + (size_t)r * ys, *pb = cb + (size_t)r * cs, *pr = cr + (size_t)r * rs;
        uint8_t *o = out + (size_t)(r * w) * 3;
        for (int64_t x = 0; x < w; x++, o += 3) {
            const int Y = py[x], B = pb[x], R = pr[x];
            o[0] = ojpg_clamp(Y + cr_r[R]);
            o[1] = ojpg_clamp(Y + (int)((cb_g[B] + cr_g[R]) >> 16));
            o[2] = ojpg_clamp(Y + cb_b[B]);
        }
    }
}

#endif /* ONNXC_IMAGE_JPEG_PIX_H */
