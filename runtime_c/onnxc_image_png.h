/* PNG decoding (ISO/IEC 15948): chunks with CRC check, IDAT through zlib, filters None/Sub/Up/Average/
 * Paeth, Adam7 interlacing, gray/RGB/palette/gray+alpha/RGBA at every allowed bit depth.
 *
 * Output channels follow the colour type (gray 1, gray+alpha 2, RGB and palette 3, RGBA 4). Samples
 * of 1/2/4-bit gray are scaled to 0..255 (Pillow's "L;2" etc.); 16-bit samples keep their high byte
 * (Pillow's "RGB;16B"); palette indices are looked up (indices past the palette read black).
 * Included by onnxc_image.c only.
 */
#ifndef ONNXC_IMAGE_PNG_H
#define ONNXC_IMAGE_PNG_H

static void opng_crc_table(uint32_t *t) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
}

static uint32_t opng_crc(const uint32_t *t, const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline int opng_paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Undo the filter of one row in place; prev is the previous unfiltered row (NULL for the first). */
static int opng_unfilter(int type, uint8_t *row, const uint8_t *prev, size_t len, size_t bpp) {
    switch (type) {
    case 0:
        break;
    case 1:
        for (size_t i = bpp; i < len; i++) row[i] = (uint8_t)(row[i] + row[i - bpp]);
        break;
    case 2:
        if (prev)
            for (size_t i = 0; i < len; i++) row[i] = (uint8_t)(row[i] + prev[i]);
        break;
    case 3:
        for (size_t i = 0; i < len; i++) {
            int a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0;
            row[i] = (uint8_t)(row[i] + ((a + b) >> 1));
        }
        break;
    case 4:
        for (size_t i = 0; i < len; i++) {
            int a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0, c = prev && i >= bpp ? prev[i - bpp] : 0;
            row[i] = (uint8_t)(row[i] + opng_paeth(a, b, c));
        }
        break;
    default:
        return -1;
    }
    return 0;
}

/* Expand n pixels of one unfiltered row into dst (och channels per pixel, step pixels apart). */
static void opng_put_row(const uint8_t *row, int64_t n, int ctype, int depth, int nch, const uint8_t *pal,
                         int npal, uint8_t *dst, int64_t step, int och) {
    if (depth < 8) {
        const int mask = (1 << depth) - 1, scale = 255 / mask;
        for (int64_t i = 0; i < n; i++, dst += step * och) {
            const int64_t bit = i * depth;
            const int v = (row[bit >> 3] >> (8 - depth - (int)(bit & 7))) & mask;
            if (ctype == 3) {
                dst[0] = v < npal ? pal[3 * v] : 0;
                dst[1] = v < npal ? pal[3 * v + 1] : 0;
                dst[2] = v < npal ? pal[3 * v + 2] : 0;
            } else {
                dst[0] = (uint8_t)(v * scale);
            }
        }
        return;
    }
    const int bps = depth / 8; /* bytes per sample; the high byte comes first */
    for (int64_t i = 0; i < n; i++, dst += step * och) {
        const uint8_t *s = row + i * nch * bps;
        if (ctype == 3) {
            const int v = s[0];
            dst[0] = v < npal ? pal[3 * v] : 0;
            dst[1] = v < npal ? pal[3 * v + 1] : 0;
            dst[2] = v < npal ? pal[3 * v + 2] : 0;
        } else {
            for (int c = 0; c < nch; c++) dst[c] = s[c * bps];
        }
    }
}

static int oimg_png(const uint8_t *d, size_t n, oimg *im) {
    static const int adam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                    {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    uint32_t crct[256];
    uint8_t pal[768];
    int npal = 0, have_hdr = 0, depth = 0, ctype = 0, interlace = 0, done = 0;
    int64_t w = 0, h = 0;
    uint8_t *idat = NULL, *raw = NULL;
    size_t nidat = 0, pos = 8;
    int r = -1;
    opng_crc_table(crct);
    idat = (uint8_t *)malloc(n);
    if (!idat) return oimg_fail(im, "PNG: out of memory");
    while (!done) {
        if (n - pos < 12) { oimg_fail(im, "PNG: truncated file (no IEND chunk)"); goto out; }
        const uint32_t len = oimg_be32(d + pos);
        const uint8_t *type = d + pos + 4, *body = d + pos + 8;
        if (len > n - pos - 12) { oimg_fail(im, "PNG: truncated chunk %.4s", (const char *)type); goto out; }
        if (opng_crc(crct, type, (size_t)len + 4) != oimg_be32(body + len)) {
            oimg_fail(im, "PNG: CRC mismatch in chunk %.4s", (const char *)type);
            goto out;
        }
        pos += (size_t)len + 12;
        if (memcmp(type, "IHDR", 4) == 0) {
            if (len != 13 || have_hdr) { oimg_fail(im, "PNG: bad IHDR chunk"); goto out; }
            w = oimg_be32(body);
            h = oimg_be32(body + 4);
            depth = body[8];
            ctype = body[9];
            interlace = body[12];
            const int ok = (ctype == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
                           (ctype == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
                           ((ctype == 2 || ctype == 4 || ctype == 6) && (depth == 8 || depth == 16));
            if (!ok) { oimg_fail(im, "PNG: invalid colour type %d with bit depth %d", ctype, depth); goto out; }
            if (body[10] != 0 || body[11] != 0 || interlace > 1) {
                oimg_fail(im, "PNG: unknown compression, filter or interlace method");
                goto out;
            }
            have_hdr = 1;
        } else if (!have_hdr) {
            oimg_fail(im, "PNG: the first chunk is not IHDR");
            goto out;
        } else if (memcmp(type, "PLTE", 4) == 0) {
            if (len % 3 || len > 768) { oimg_fail(im, "PNG: bad PLTE chunk"); goto out; }
            memcpy(pal, body, len);
            npal = (int)(len / 3);
        } else if (memcmp(type, "IDAT", 4) == 0) {
            memcpy(idat + nidat, body, len);
            nidat += len;
        } else if (memcmp(type, "IEND", 4) == 0) {
            done = 1;
        }
    }
    if (ctype == 3 && npal == 0) { oimg_fail(im, "PNG: palette image without PLTE chunk"); goto out; }
    {
        const int nch = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : ctype == 4 ? 2 : 4;
        const int och = ctype == 3 ? 3 : nch;
        const size_t bpp = (size_t)(nch * depth + 7) / 8;
        if (w <= 0 || h <= 0 || w > OIMG_MAX_DIM || h > OIMG_MAX_DIM) {
            oimg_fail(im, "PNG: invalid image size %lldx%lld", (long long)w, (long long)h);
            goto out;
        }
        /* Raw (filtered) size of every pass; the whole image is one pass when not interlaced. */
        const int npass = interlace ? 7 : 1;
        int64_t pw[7], ph[7];
        size_t total = 0, maxrow = 0;
        for (int p = 0; p < npass; p++) {
            const int *a = interlace ? adam7[p] : (const int[4]){0, 0, 1, 1};
            pw[p] = w > a[0] ? (w - a[0] + a[2] - 1) / a[2] : 0;
            ph[p] = h > a[1] ? (h - a[1] + a[3] - 1) / a[3] : 0;
            if (!pw[p] || !ph[p]) continue;
            const size_t rb = (size_t)((pw[p] * nch * depth + 7) / 8);
            total += (size_t)ph[p] * (rb + 1);
            if (rb > maxrow) maxrow = rb;
        }
        if (total / 1100 > nidat + 64) { oimg_fail(im, "PNG: truncated image data"); goto out; }
        if (oimg_alloc(im, w, h, och, "PNG")) goto out;
        raw = (uint8_t *)malloc(total);
        if (!raw) { oimg_fail(im, "PNG: out of memory"); goto out; }
        const char *err = NULL;
        if (oinf_zlib(idat, nidat, raw, total, &err)) { oimg_fail(im, "PNG: image data: %s", err); goto out; }
        uint8_t *rp = raw;
        for (int p = 0; p < npass; p++) {
            if (!pw[p] || !ph[p]) continue;
            const int *a = interlace ? adam7[p] : (const int[4]){0, 0, 1, 1};
            const size_t rb = (size_t)((pw[p] * nch * depth + 7) / 8);
            const uint8_t *prev = NULL;
            for (int64_t y = 0; y < ph[p]; y++, rp += rb + 1) {
                if (opng_unfilter(rp[0], rp + 1, prev, rb, bpp)) {
                    oimg_fail(im, "PNG: invalid filter type %d", rp[0]);
                    goto out;
                }
                prev = rp + 1;
                uint8_t *dst = im->px + ((size_t)(a[1] + y * a[3]) * (size_t)w + (size_t)a[0]) * (size_t)och;
                opng_put_row(rp + 1, pw[p], ctype, depth, nch, pal, npal, dst, a[2], och);
            }
        }
    }
    r = 0;
out:
    free(idat);
    free(raw);
    return r;
}

#endif /* ONNXC_IMAGE_PNG_H */
