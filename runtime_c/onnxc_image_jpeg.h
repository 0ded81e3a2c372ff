/* JPEG decoding (ITU-T T.81): baseline, extended-sequential and progressive Huffman coding, 8-bit
 * samples, 1 (gray) or 3 (YCbCr, or RGB per the Adobe/component-id rules of libjpeg) components,
 * any integer sampling ratios, restart intervals.
 *
 * The entropy decoder stores every block's quantized coefficients (as libjpeg's 16-bit JCOEF), so
 * sequential and progressive files share one reconstruction: onnxc_image_jpeg_pix.h. Running out of
 * entropy-coded data (a marker or the end of the file where bits are still needed) is an error here;
 * libjpeg would pad with zeros and warn. Arithmetic coding, lossless, hierarchical, 12-bit and
 * 4-component (CMYK/YCCK) files are rejected with a message. Included by onnxc_image.c only.
 */
#ifndef ONNXC_IMAGE_JPEG_H
#define ONNXC_IMAGE_JPEG_H

#include "onnxc_image_jpeg_pix.h"

/* Zigzag position -> natural (row-major) index, with 16 extra entries as in libjpeg (overruns land on 63). */
static const uint8_t ojpg_natural[80] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,
    6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31,
    39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

typedef struct {
    uint16_t fast[512]; /* 0, or value | length << 8 for codes of <= 9 bits */
    int32_t maxcode[18], valoff[17];
    uint8_t val[256];
    int ok;
} ojpg_huff;

typedef struct {
    int id, h, v, tq;
    int64_t bw, bh;  /* blocks per row / column, padded to whole MCUs */
    int64_t dw, dh;  /* samples actually covered: ceil(W * h / maxh), ceil(H * v / maxv) */
    int16_t *coef;   /* bw * bh * 64 */
    int16_t q[64];   /* quantization table latched at the component's first scan (natural order) */
    int64_t dc;      /* DC predictor */
    int latched, td, ta;
} ojpg_comp;

typedef struct {
    const uint8_t *d;
    size_t n, pos;
    uint64_t buf;  /* MSB first */
    int cnt, fake; /* valid bits; of those, zero bits appended past a marker or the end */
    int overrun;
} ojpg_bits;

typedef struct {
    oimg *im;
    uint16_t qt[4][64];
    int qok[4];
    ojpg_huff dc[4], ac[4];
    ojpg_comp c[4];
    int nc, maxh, maxv, progressive, restart, jfif, adobe, transform, eobrun;
    int64_t w, h, mcux, mcuy;
} ojpg;

static inline void ojpg_fill(ojpg_bits *b) {
    while (b->cnt <= 56) {
        uint32_t byte = 0;
        if (b->fake == 0 && b->pos < b->n && b->d[b->pos] != 0xFF) {
            byte = b->d[b->pos++];
        } else if (b->fake == 0 && b->pos + 1 < b->n && b->d[b->pos] == 0xFF && b->d[b->pos + 1] == 0) {
            byte = 0xFF;
            b->pos += 2;
        } else {
            b->fake += 8; /* a marker or the end: stay there, feed zeros */
        }
        b->buf |= (uint64_t)byte << (56 - b->cnt);
        b->cnt += 8;
    }
}

static inline void ojpg_skip(ojpg_bits *b, int k) {
    if (k > b->cnt - b->fake) b->overrun = 1;
    b->buf <<= k;
    b->cnt -= k;
    if (b->fake > b->cnt) b->fake = b->cnt;
}

static inline int ojpg_get(ojpg_bits *b, int k) {
    if (k == 0) return 0;
    if (b->cnt < k) ojpg_fill(b);
    const int v = (int)(b->buf >> (64 - k));
    ojpg_skip(b, k);
    return v;
}

/* Value of the k-bit magnitude category (T.81 F.2.2.1 EXTEND). */
static inline int ojpg_extend(int v, int k) { return k && v < (1 << (k - 1)) ? v - (1 << k) + 1 : v; }

static int ojpg_build(ojpg_huff *h, const uint8_t *bits, const uint8_t *vals, int nval) {
    int code = 0, k = 0;
    memset(h->fast, 0, sizeof h->fast);
    memcpy(h->val, vals, (size_t)nval);
    for (int l = 1; l <= 16; l++) {
        h->valoff[l] = k - code;
        for (int i = 0; i < bits[l - 1]; i++, k++, code++) {
            if (code >= (1 << l)) return -1; /* over-subscribed */
            if (l <= 9)
                for (int r = code << (9 - l), e = (code + 1) << (9 - l); r < e; r++) h->fast[r] = (uint16_t)(vals[k] | l << 8);
        }
        h->maxcode[l] = bits[l - 1] ? code - 1 : -1;
        code <<= 1;
    }
    h->maxcode[17] = 0x7FFFFFFF;
    h->ok = 1;
    return 0;
}

static inline int ojpg_decode(ojpg_bits *b, const ojpg_huff *h) {
    if (b->cnt < 16) ojpg_fill(b);
    const uint16_t e = h->fast[b->buf >> 55];
    if (e) {
        ojpg_skip(b, e >> 8);
        return e & 255;
    }
    for (int l = 10; l <= 16; l++) {
        const int code = (int)(b->buf >> (64 - l));
        if (code <= h->maxcode[l]) {
            ojpg_skip(b, l);
            return h->val[h->valoff[l] + code];
        }
    }
    b->overrun = 2; /* no such code */
    return 0;
}

/* Decode one block of a scan into blk (see libjpeg jdhuff.c / jdphuff.c for the four progressive cases). */
static void ojpg_block(ojpg *j, ojpg_bits *b, ojpg_comp *c, int16_t *blk, int ss, int se, int ah, int al) {
    if (!j->progressive) {
        int s = ojpg_decode(b, &j->dc[c->td]);
        if (s > 15) { b->overrun = 2; return; }
        c->dc += ojpg_extend(ojpg_get(b, s), s);
        blk[0] = (int16_t)c->dc;
        for (int k = 1; k < 64; k++) {
            const int rs = ojpg_decode(b, &j->ac[c->ta]);
            const int r = rs >> 4;
            s = rs & 15;
            if (s) {
                k += r;
                blk[ojpg_natural[k]] = (int16_t)ojpg_extend(ojpg_get(b, s), s);
            } else {
                if (r != 15) break;
                k += 15;
            }
        }
        return;
    }
    if (ss == 0) { /* DC scans */
        if (ah == 0) {
            const int s = ojpg_decode(b, &j->dc[c->td]);
            if (s > 15) { b->overrun = 2; return; }
            c->dc += ojpg_extend(ojpg_get(b, s), s);
            blk[0] = (int16_t)((uint32_t)c->dc << al);
        } else if (ojpg_get(b, 1)) {
            blk[0] = (int16_t)(blk[0] | (1 << al));
        }
        return;
    }
    if (ah == 0) { /* AC first pass */
        if (j->eobrun > 0) {
            j->eobrun--;
            return;
        }
        for (int k = ss; k <= se; k++) {
            const int rs = ojpg_decode(b, &j->ac[c->ta]);
            int r = rs >> 4, s = rs & 15;
            if (s) {
                k += r;
                blk[ojpg_natural[k]] = (int16_t)((uint32_t)ojpg_extend(ojpg_get(b, s), s) << al);
            } else if (r == 15) {
                k += 15;
            } else {
                j->eobrun = (1 << r) + ojpg_get(b, r) - 1;
                break;
            }
        }
        return;
    }
    /* AC refinement */
    const int p1 = 1 << al, m1 = -1 * (1 << al);
    int k = ss;
    if (j->eobrun == 0) {
        for (; k <= se; k++) {
            const int rs = ojpg_decode(b, &j->ac[c->ta]);
            int r = rs >> 4, s = rs & 15;
            if (s) {
                s = ojpg_get(b, 1) ? p1 : m1;
            } else if (r != 15) {
                j->eobrun = (1 << r) + ojpg_get(b, r);
                break;
            }
            do {
                int16_t *t = blk + ojpg_natural[k];
                if (*t != 0) {
                    if (ojpg_get(b, 1) && (*t & p1) == 0) *t = (int16_t)(*t >= 0 ? *t + p1 : *t + m1);
                } else if (--r < 0) {
                    break;
                }
                k++;
            } while (k <= se);
            if (s) blk[ojpg_natural[k]] = (int16_t)s;
            if (b->overrun) return;
        }
    }
    if (j->eobrun > 0) {
        for (; k <= se; k++) {
            int16_t *t = blk + ojpg_natural[k];
            if (*t != 0 && ojpg_get(b, 1) && (*t & p1) == 0) *t = (int16_t)(*t >= 0 ? *t + p1 : *t + m1);
        }
        j->eobrun--;
    }
}

/* Decode the scan whose header starts at seg (length len); *pos is left after its entropy-coded data. */
static int ojpg_scan(ojpg *j, const uint8_t *d, size_t n, size_t *pos, const uint8_t *seg, size_t len) {
    oimg *im = j->im;
    if (!j->nc) return oimg_fail(im, "JPEG: scan before the frame header");
    const int ns = seg[0];
    if (ns < 1 || ns > 4 || len < (size_t)(4 + 2 * ns)) return oimg_fail(im, "JPEG: bad scan header");
    ojpg_comp *sc[4];
    for (int i = 0; i < ns; i++) {
        const int id = seg[1 + 2 * i];
        sc[i] = NULL;
        for (int k = 0; k < j->nc; k++)
            if (j->c[k].id == id) sc[i] = &j->c[k];
        if (!sc[i]) return oimg_fail(im, "JPEG: scan names unknown component %d", id);
        sc[i]->td = seg[2 + 2 * i] >> 4;
        sc[i]->ta = seg[2 + 2 * i] & 15;
        if (sc[i]->td > 3 || sc[i]->ta > 3) return oimg_fail(im, "JPEG: bad Huffman table selector");
    }
    const int ss = seg[1 + 2 * ns], se = seg[2 + 2 * ns], ah = seg[3 + 2 * ns] >> 4, al = seg[3 + 2 * ns] & 15;
    if (j->progressive) {
        const int bad = ss == 0 ? se != 0 : (se < ss || se > 63 || ns != 1);
        if (bad || (ah != 0 && al != ah - 1) || al > 13) return oimg_fail(im, "JPEG: invalid progressive scan parameters");
    }
    for (int i = 0; i < ns; i++) {
        ojpg_comp *c = sc[i];
        const int need_dc = !j->progressive || (ss == 0 && ah == 0), need_ac = !j->progressive || ss != 0;
        if ((need_dc && !j->dc[c->td].ok) || (need_ac && !j->ac[c->ta].ok))
            return oimg_fail(im, "JPEG: scan uses an undefined Huffman table");
        if (!c->latched) {
            if (!j->qok[c->tq]) return oimg_fail(im, "JPEG: component %d uses an undefined quantization table", c->id);
            for (int k = 0; k < 64; k++) c->q[k] = (int16_t)j->qt[c->tq][k];
            c->latched = 1;
        }
        c->dc = 0;
    }
    /* Interleaved: MCUs of h x v blocks per component; one component: its own blocks, unpadded. */
    const int64_t ux = ns == 1 ? (sc[0]->dw + 7) / 8 : j->mcux, uy = ns == 1 ? (sc[0]->dh + 7) / 8 : j->mcuy;
    ojpg_bits b;
    memset(&b, 0, sizeof b);
    b.d = d;
    b.n = n;
    b.pos = *pos;
    j->eobrun = 0;
    int64_t todo = j->restart;
    for (int64_t my = 0; my < uy; my++)
        for (int64_t mx = 0; mx < ux; mx++) {
            if (j->restart && todo == 0) { /* expect RSTn at a byte boundary */
                b.buf = 0;
                b.cnt = b.fake = 0;
                while (b.pos + 1 < n && d[b.pos] == 0xFF && d[b.pos + 1] == 0xFF) b.pos++;
                if (b.pos + 1 >= n || d[b.pos] != 0xFF || d[b.pos + 1] < 0xD0 || d[b.pos + 1] > 0xD7)
                    return oimg_fail(im, "JPEG: corrupt data (missing restart marker)");
                b.pos += 2;
                for (int i = 0; i < ns; i++) sc[i]->dc = 0;
                j->eobrun = 0;
                todo = j->restart;
            }
            for (int i = 0; i < ns; i++) {
                ojpg_comp *c = sc[i];
                const int bh = ns == 1 ? 1 : c->h, bv = ns == 1 ? 1 : c->v;
                for (int v = 0; v < bv; v++)
                    for (int h = 0; h < bh; h++) {
                        const int64_t bx = ns == 1 ? mx : mx * c->h + h, by = ns == 1 ? my : my * c->v + v;
                        ojpg_block(j, &b, c, c->coef + (size_t)(by * c->bw + bx) * 64, ss, se, ah, al);
                    }
            }
            if (b.overrun)
                return oimg_fail(im, b.overrun == 2 ? "JPEG: corrupt entropy-coded data (invalid Huffman code)"
                                                    : "JPEG: truncated or corrupt entropy-coded data");
            todo--;
        }
    *pos = b.pos;
    return 0;
}

static int ojpg_frame(ojpg *j, int marker, const uint8_t *s, size_t len, size_t remaining) {
    oimg *im = j->im;
    if (j->nc) return oimg_fail(im, "JPEG: more than one frame header");
    if (len < 6) return oimg_fail(im, "JPEG: bad frame header");
    if (s[0] != 8) return oimg_unsupported(im, "JPEG: %d-bit samples are not supported", s[0]);
    j->h = oimg_be16(s + 1);
    j->w = oimg_be16(s + 3);
    const int nc = s[5];
    if (j->h == 0) return oimg_unsupported(im, "JPEG: images whose height is set by a DNL marker are not supported");
    if ((nc != 1 && nc != 3 && nc != 4) || len < (size_t)(6 + 3 * nc)) return oimg_fail(im, "JPEG: bad frame header");
    if (nc == 4) return oimg_unsupported(im, "JPEG: 4-component (CMYK/YCCK) images are not supported");
    j->progressive = marker == 0xC2;
    j->maxh = j->maxv = 1;
    for (int i = 0; i < nc; i++) {
        ojpg_comp *c = &j->c[i];
        c->id = s[6 + 3 * i];
        c->h = s[7 + 3 * i] >> 4;
        c->v = s[7 + 3 * i] & 15;
        c->tq = s[8 + 3 * i];
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq > 3) return oimg_fail(im, "JPEG: bad component parameters");
        if (c->h > j->maxh) j->maxh = c->h;
        if (c->v > j->maxv) j->maxv = c->v;
    }
    if (j->w == 0) return oimg_fail(im, "JPEG: invalid image width 0");
    j->mcux = (j->w + 8 * j->maxh - 1) / (8 * j->maxh);
    j->mcuy = (j->h + 8 * j->maxv - 1) / (8 * j->maxv);
    for (int i = 0; i < nc; i++) {
        ojpg_comp *c = &j->c[i];
        if (j->maxh % c->h || j->maxv % c->v) return oimg_unsupported(im, "JPEG: non-integral sampling ratios are not supported");
        c->bw = j->mcux * c->h;
        c->bh = j->mcuy * c->v;
        c->dw = (j->w * c->h + j->maxh - 1) / j->maxh;
        c->dh = (j->h * c->v + j->maxv - 1) / j->maxv;
    }
    /* Every block takes at least 2 bits (1 in a progressive DC scan): reject sizes the file cannot hold. */
    const int64_t blocks = ((j->c[0].dw + 7) / 8) * ((j->c[0].dh + 7) / 8);
    if (blocks / (j->progressive ? 8 : 4) > (int64_t)remaining + 64) return oimg_fail(im, "JPEG: truncated file");
    if (oimg_alloc(im, j->w, j->h, nc == 1 ? 1 : 3, "JPEG")) return -1;
    for (int i = 0; i < nc; i++) {
        j->c[i].coef = (int16_t *)calloc((size_t)(j->c[i].bw * j->c[i].bh) * 64, sizeof(int16_t));
        if (!j->c[i].coef) return oimg_fail(im, "JPEG: out of memory");
    }
    j->nc = nc;
    return 0;
}

/* Dequantize + IDCT every component, upsample, convert colour into im->px. */
static int ojpg_finish(ojpg *j) {
    oimg *im = j->im;
    uint8_t *plane[4] = {NULL}, *full[4] = {NULL};
    size_t fs[4] = {0};
    int r = 0;
    for (int i = 0; i < j->nc && r == 0; i++) {
        ojpg_comp *c = &j->c[i];
        const size_t ps = (size_t)(c->bw * 8);
        const int hr = j->maxh / c->h, vr = j->maxv / c->v;
        plane[i] = (uint8_t *)malloc(ps * (size_t)(c->bh * 8));
        fs[i] = (size_t)(c->dw * hr);
        full[i] = (uint8_t *)malloc(fs[i] * (size_t)(c->dh * vr));
        if (!plane[i] || !full[i]) {
            r = oimg_fail(im, "JPEG: out of memory");
            break;
        }
        if (!c->latched) memset(c->q, 0, sizeof c->q); /* never scanned: all coefficients are zero */
        int16_t qn[64];
        for (int k = 0; k < 64; k++) qn[ojpg_natural[k]] = c->q[k];
        for (int64_t by = 0; by < c->bh; by++)
            for (int64_t bx = 0; bx < c->bw; bx++)
                ojpg_idct(c->coef + (size_t)(by * c->bw + bx) * 64, qn, plane[i] + (size_t)(by * 8) * ps + (size_t)(bx * 8), ps);
        ojpg_upsample(plane[i], ps, c->dw, c->dh, hr, vr, full[i]);
    }
    if (r == 0) {
        if (j->nc == 1) {
            for (int64_t y = 0; y < j->h; y++) memcpy(im->px + (size_t)(y * j->w), full[0] + (size_t)y * fs[0], (size_t)j->w);
        } else {
            /* libjpeg's colour-space guess: JFIF -> YCbCr; Adobe transform 0 -> RGB; ids 'R','G','B' -> RGB */
            const int rgb = !j->jfif && ((j->adobe && j->transform == 0) ||
                                         (!j->adobe && j->c[0].id == 'R' && j->c[1].id == 'G' && j->c[2].id == 'B'));
            if (rgb) {
                for (int64_t y = 0; y < j->h; y++)
                    for (int64_t x = 0; x < j->w; x++)
                        for (int k = 0; k < 3; k++) im->px[(size_t)(y * j->w + x) * 3 + k] = full[k][(size_t)y * fs[k] + (size_t)x];
            } else {
                ojpg_ycc_rgb(full[0], fs[0], full[1], fs[1], full[2], fs[2], j->w, j->h, im->px);
            }
        }
    }
    for (int i = 0; i < 4; i++) {
        free(plane[i]);
        free(full[i]);
    }
    return r;
}

static int ojpg_markers(ojpg *j, const uint8_t *d, size_t n) {
    oimg *im = j->im;
    size_t pos = 2;
    int scans = 0;
    for (;;) {
        while (pos < n && d[pos] != 0xFF) pos++; /* tolerate garbage between segments */
        while (pos + 1 < n && d[pos + 1] == 0xFF) pos++;
        if (pos + 1 >= n) {
            if (scans) return 0; /* no EOI: accept what the scans gave (libjpeg warns) */
            return oimg_fail(im, "JPEG: truncated file (no image data)");
        }
        const int m = d[pos + 1];
        pos += 2;
        if (m == 0xD9) return scans ? 0 : oimg_fail(im, "JPEG: no image data before EOI");
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
        if (pos + 2 > n) return oimg_fail(im, "JPEG: truncated marker segment");
        const size_t len = oimg_be16(d + pos);
        if (len < 2 || len > n - pos) return oimg_fail(im, "JPEG: truncated marker segment");
        const uint8_t *s = d + pos + 2;
        const size_t sl = len - 2;
        pos += len;
        if (m == 0xC0 || m == 0xC1 || m == 0xC2) {
            if (ojpg_frame(j, m, s, sl, n - pos)) return -1;
        } else if ((m >= 0xC3 && m <= 0xCF) && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            return oimg_unsupported(im, "JPEG: %s JPEG is not supported",
                             m >= 0xC9 ? "arithmetic-coded" : m == 0xC3 || m == 0xC7 ? "lossless" : "hierarchical");
        } else if (m == 0xC4) {
            size_t i = 0;
            while (i < sl) {
                if (sl - i < 17) return oimg_fail(im, "JPEG: bad Huffman table");
                const int tc = s[i] >> 4, th = s[i] & 15;
                int total = 0;
                for (int k = 0; k < 16; k++) total += s[i + 1 + k];
                if (tc > 1 || th > 3 || total > 256 || sl - i - 17 < (size_t)total) return oimg_fail(im, "JPEG: bad Huffman table");
                if (ojpg_build(tc ? &j->ac[th] : &j->dc[th], s + i + 1, s + i + 17, total)) return oimg_fail(im, "JPEG: bad Huffman table");
                i += 17 + (size_t)total;
            }
        } else if (m == 0xDB) {
            size_t i = 0;
            while (i < sl) {
                const int pq = s[i] >> 4, tq = s[i] & 15;
                if (pq > 1 || tq > 3 || sl - i - 1 < (size_t)(64 << pq)) return oimg_fail(im, "JPEG: bad quantization table");
                for (int k = 0; k < 64; k++) j->qt[tq][k] = (uint16_t)(pq ? oimg_be16(s + i + 1 + 2 * k) : s[i + 1 + k]);
                j->qok[tq] = 1;
                i += 1 + (size_t)(64 << pq);
            }
        } else if (m == 0xDD) {
            if (sl < 2) return oimg_fail(im, "JPEG: bad restart interval");
            j->restart = (int)oimg_be16(s);
        } else if (m == 0xDA) {
            if (ojpg_scan(j, d, n, &pos, s, sl)) return -1;
            scans++;
        } else if (m == 0xE0 && sl >= 5 && memcmp(s, "JFIF", 5) == 0) {
            j->jfif = 1;
        } else if (m == 0xEE && sl >= 12 && memcmp(s, "Adobe", 5) == 0) {
            j->adobe = 1;
            j->transform = s[11];
        } else if (m == 0xDC) {
            return oimg_unsupported(im, "JPEG: DNL markers are not supported");
        }
    }
}

static int oimg_jpeg(const uint8_t *d, size_t n, oimg *im) {
    ojpg *j = (ojpg *)calloc(1, sizeof(ojpg));
    if (!j) return oimg_fail(im, "JPEG: out of memory");
    j->im = im;
    int r = ojpg_markers(j, d, n);
    if (r == 0) r = ojpg_finish(j);
    for (int i = 0; i < 4; i++) free(j->c[i].coef);
    free(j);
    return r;
}

#endif /* ONNXC_IMAGE_JPEG_H */
