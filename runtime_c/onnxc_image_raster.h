/* BMP and PNM (Netpbm) decoding. Included by onnxc_image.c only.
 *
 * BMP: core (OS/2 v1) and Windows v3-v5 headers; 1/4/8-bit palette (uncompressed, RLE4, RLE8),
 * 16/32-bit BI_RGB and BI_BITFIELDS, 24-bit; bottom-up and top-down rows. Bitfield channels are scaled
 * to 8 bits as v * 255 / max (Pillow's "BGR;15"/"BGR;16" style unpacking).
 * PNM: P1-P6 with any maxval; samples scale like Pillow's PpmDecoder, round(v / maxval * 255) half to
 * even, clamped; P1/P4 bits are 1 = black.
 */
#ifndef ONNXC_IMAGE_RASTER_H
#define ONNXC_IMAGE_RASTER_H

/* ---------------------------------------------------------------------------------------------- BMP */

static inline void obmp_pal(uint8_t *dst, const uint8_t *pal, int npal, int idx) {
    if (idx < npal) {
        dst[0] = pal[3 * idx];
        dst[1] = pal[3 * idx + 1];
        dst[2] = pal[3 * idx + 2];
    } else {
        dst[0] = dst[1] = dst[2] = 0;
    }
}

/* RLE8 (bits 8) / RLE4 (bits 4) into an index plane (rows in file order: bottom-up). */
static int obmp_rle(const uint8_t *s, size_t n, int bits, uint8_t *idx, int64_t w, int64_t h, oimg *im) {
    int64_t x = 0, y = 0;
    size_t i = 0;
    while (y < h) {
        if (n - i < 2) return oimg_fail(im, "BMP: truncated RLE data");
        const int a = s[i], b = s[i + 1];
        i += 2;
        if (a > 0) { /* a run of a pixels */
            for (int k = 0; k < a && x < w; k++, x++)
                idx[y * w + x] = (uint8_t)(bits == 8 ? b : (k & 1 ? b & 15 : b >> 4));
        } else if (b == 0) {
            x = 0;
            y++;
        } else if (b == 1) {
            break;
        } else if (b == 2) {
            if (n - i < 2) return oimg_fail(im, "BMP: truncated RLE data");
            x += s[i];
            y += s[i + 1];
            i += 2;
        } else { /* b literal pixels, padded to 16 bits */
            const size_t bytes = bits == 8 ? (size_t)b : (size_t)(b + 1) / 2;
            if (n - i < bytes) return oimg_fail(im, "BMP: truncated RLE data");
            for (int k = 0; k < b; k++, x++)
                if (x < w && y < h) idx[y * w + x] = (uint8_t)(bits == 8 ? s[i + k] : (k & 1 ? s[i + k / 2] & 15 : s[i + k / 2] >> 4));
            i += (bytes + 1) & ~(size_t)1;
        }
    }
    return 0;
}

/* Shift and width of a channel mask; the channel value is scaled to 0..255. */
static inline uint8_t obmp_field(uint32_t v, uint32_t mask) {
    if (!mask) return 0;
    int sh = 0;
    while (!((mask >> sh) & 1)) sh++;
    const uint32_t m = mask >> sh;
    return (uint8_t)(m == 255 ? (v >> sh) & 255 : ((v >> sh) & m) * 255 / m);
}

static int oimg_bmp(const uint8_t *d, size_t n, oimg *im) {
    if (n < 26) return oimg_fail(im, "BMP: truncated header");
    const uint32_t off = oimg_le32(d + 10), hs = oimg_le32(d + 14);
    int64_t w, h;
    int bits, comp = 0, pal_entry = 4;
    uint32_t nclr = 0, masks[4] = {0, 0, 0, 0};
    if (hs == 12) {
        w = oimg_le16(d + 18);
        h = (int16_t)oimg_le16(d + 20);
        bits = (int)oimg_le16(d + 24);
        pal_entry = 3;
    } else if (hs >= 40 && hs <= 124) {
        if (n < 14 + (size_t)hs) return oimg_fail(im, "BMP: truncated header");
        w = (int32_t)oimg_le32(d + 18);
        h = (int32_t)oimg_le32(d + 22);
        bits = (int)oimg_le16(d + 28);
        comp = (int)oimg_le32(d + 30);
        nclr = oimg_le32(d + 46);
        if (comp == 3 || comp == 6) {
            const int nm = comp == 6 ? 4 : 3;
            const size_t at = 14 + (hs >= 52 ? 40 : (size_t)hs);
            if (n < at + 4 * (size_t)nm) return oimg_fail(im, "BMP: truncated bitfield masks");
            for (int k = 0; k < nm; k++) masks[k] = oimg_le32(d + at + 4 * k);
            if (hs >= 56) masks[3] = oimg_le32(d + 14 + 52);
        }
    } else {
        return oimg_fail(im, "BMP: unsupported header size %u", hs);
    }
    const int topdown = h < 0;
    if (topdown) h = -h;
    if ((comp == 1 && bits != 8) || (comp == 2 && bits != 4) || ((comp == 3 || comp == 6) && bits != 16 && bits != 32) ||
        (comp > 3 && comp != 6))
        return oimg_fail(im, "BMP: unsupported compression %d with %d bits per pixel", comp, bits);
    if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32)
        return oimg_fail(im, "BMP: unsupported bit depth %d", bits);
    /* Palette: after the headers (and the masks of a v3 header). */
    uint8_t pal[768];
    int npal = 0;
    if (bits <= 8) {
        const size_t at = 14 + (size_t)hs;
        uint32_t want = nclr ? nclr : 1u << bits;
        if (want > 256) want = 256;
        if (at > n || off > n || off < at) return oimg_fail(im, "BMP: bad palette offset");
        size_t avail = (off - at) / (size_t)pal_entry;
        npal = (int)(want < avail ? want : avail);
        for (int k = 0; k < npal; k++) {
            const uint8_t *p = d + at + (size_t)k * (size_t)pal_entry;
            pal[3 * k] = p[2];
            pal[3 * k + 1] = p[1];
            pal[3 * k + 2] = p[0];
        }
    }
    if (comp == 0 && bits == 16) {
        masks[0] = 0x7C00;
        masks[1] = 0x03E0;
        masks[2] = 0x001F;
    }
    const int alpha = bits == 32 && (comp == 3 || comp == 6) && masks[3] != 0;
    if (off > n) return oimg_fail(im, "BMP: pixel data offset past the end of the file");
    if (w <= 0 || w > OIMG_MAX_DIM) return oimg_fail(im, "BMP: invalid image width %lld", (long long)w);
    const uint8_t *src = d + off;
    const size_t avail = n - off;
    const size_t stride = (size_t)((w * bits + 31) / 32) * 4;
    if (comp != 1 && comp != 2 && avail / stride < (size_t)h) return oimg_fail(im, "BMP: truncated pixel data");
    if (oimg_alloc(im, w, h, alpha ? 4 : 3, "BMP")) return -1;
    const int och = im->ch;
    if (comp == 1 || comp == 2) {
        uint8_t *idx = (uint8_t *)calloc((size_t)(w * h), 1);
        if (!idx) return oimg_fail(im, "BMP: out of memory");
        int r = obmp_rle(src, avail, bits, idx, w, h, im);
        for (int64_t y = 0; r == 0 && y < h; y++) {
            const uint8_t *row = idx + (topdown ? y : h - 1 - y) * w;
            for (int64_t x = 0; x < w; x++) obmp_pal(im->px + (y * w + x) * 3, pal, npal, row[x]);
        }
        free(idx);
        return r;
    }
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *row = src + (size_t)(topdown ? y : h - 1 - y) * stride;
        uint8_t *o = im->px + (size_t)(y * w) * (size_t)och;
        for (int64_t x = 0; x < w; x++, o += och) {
            if (bits <= 8) {
                const int64_t bit = x * bits;
                obmp_pal(o, pal, npal, (row[bit >> 3] >> (8 - bits - (int)(bit & 7))) & ((1 << bits) - 1));
            } else if (bits == 24) {
                o[0] = row[3 * x + 2];
                o[1] = row[3 * x + 1];
                o[2] = row[3 * x];
            } else if (bits == 32 && comp == 0) {
                o[0] = row[4 * x + 2];
                o[1] = row[4 * x + 1];
                o[2] = row[4 * x];
            } else {
                const uint32_t v = bits == 16 ? oimg_le16(row + 2 * x) : oimg_le32(row + 4 * x);
                for (int c = 0; c < och; c++) o[c] = obmp_field(v, masks[c]);
            }
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- PNM */

/* Next header integer: skips whitespace and # comments. -1 when none. */
static int64_t opnm_int(const uint8_t *d, size_t n, size_t *pos) {
    size_t i = *pos;
    for (;;) {
        while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r' || d[i] == '\v' || d[i] == '\f')) i++;
        if (i < n && d[i] == '#') {
            while (i < n && d[i] != '\n' && d[i] != '\r') i++;
            continue;
        }
        break;
    }
    if (i >= n || d[i] < '0' || d[i] > '9') return -1;
    int64_t v = 0;
    while (i < n && d[i] >= '0' && d[i] <= '9') {
        v = v * 10 + (d[i++] - '0');
        if (v > 0x7FFFFFFF) return -1;
    }
    *pos = i;
    return v;
}

/* round(v / maxval * 255), half to even, clamped to 255. */
static inline uint8_t opnm_scale(uint32_t v, uint32_t maxval) {
    if (maxval == 255) return (uint8_t)(v > 255 ? 255 : v);
    if (v >= maxval) return 255;
    const uint64_t num = (uint64_t)v * 255;
    uint64_t q = num / maxval;
    const uint64_t r2 = 2 * (num % maxval);
    if (r2 > maxval || (r2 == maxval && (q & 1))) q++;
    return (uint8_t)q;
}

static int oimg_pnm(const uint8_t *d, size_t n, oimg *im) {
    const int kind = d[1] - '0';
    size_t pos = 2;
    const int64_t w = opnm_int(d, n, &pos), h = opnm_int(d, n, &pos);
    const int bitmap = kind == 1 || kind == 4;
    const int64_t maxval = bitmap ? 1 : opnm_int(d, n, &pos);
    if (w < 0 || h < 0 || maxval < 0) return oimg_fail(im, "PNM: truncated or malformed header");
    if (maxval < 1 || maxval > 65535) return oimg_fail(im, "PNM: invalid maxval %lld", (long long)maxval);
    const int ch = kind == 3 || kind == 6 ? 3 : 1;
    if (w > OIMG_MAX_DIM || h > OIMG_MAX_DIM) return oimg_fail(im, "PNM: image size %lldx%lld is too large", (long long)w, (long long)h);
    const size_t count = (size_t)(w * h * ch);
    const size_t least = kind == 4 ? (size_t)((w + 7) / 8 * h) : kind >= 5 ? count * (maxval > 255 ? 2 : 1) : count;
    if (least > n - pos) return oimg_fail(im, "PNM: truncated pixel data");
    if (oimg_alloc(im, w, h, ch, "PNM")) return -1;
    if (kind >= 4) {
        if (pos >= n) return oimg_fail(im, "PNM: truncated pixel data");
        pos++; /* the single whitespace byte after the header */
        const uint8_t *s = d + pos;
        const size_t avail = n - pos;
        if (kind == 4) {
            const size_t stride = (size_t)(w + 7) / 8;
            if (avail / stride < (size_t)h) return oimg_fail(im, "PNM: truncated pixel data");
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++)
                    im->px[y * w + x] = (s[(size_t)y * stride + (size_t)(x >> 3)] >> (7 - (x & 7))) & 1 ? 0 : 255;
            return 0;
        }
        const size_t bps = maxval > 255 ? 2 : 1;
        if (avail / bps < count) return oimg_fail(im, "PNM: truncated pixel data");
        for (size_t i = 0; i < count; i++)
            im->px[i] = opnm_scale(bps == 2 ? oimg_be16(s + 2 * i) : s[i], (uint32_t)maxval);
        return 0;
    }
    for (size_t i = 0; i < count; i++) { /* plain (ASCII) formats */
        int64_t v;
        if (kind == 1) { /* digits need no separators */
            while (pos < n && (d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r' || d[pos] == '#')) {
                if (d[pos] == '#')
                    while (pos < n && d[pos] != '\n') pos++;
                else
                    pos++;
            }
            if (pos >= n || (d[pos] != '0' && d[pos] != '1')) return oimg_fail(im, "PNM: truncated or malformed pixel data");
            v = d[pos++] - '0';
            im->px[i] = v ? 0 : 255;
            continue;
        }
        v = opnm_int(d, n, &pos);
        if (v < 0) return oimg_fail(im, "PNM: truncated or malformed pixel data");
        if (v > maxval) return oimg_fail(im, "PNM: sample %lld exceeds maxval %lld", (long long)v, (long long)maxval);
        im->px[i] = opnm_scale((uint32_t)v, (uint32_t)maxval);
    }
    return 0;
}

#endif /* ONNXC_IMAGE_RASTER_H */
