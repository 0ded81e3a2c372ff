/* TIFF decoding (TIFF 6.0 baseline plus common extensions), first image of the file.
 *
 * Strips or tiles, chunky or planar; uncompressed, PackBits, LZW (new style) and Deflate (zlib),
 * horizontal-differencing predictor; bilevel/gray (BlackIsZero, WhiteIsZero) at 1/2/4/8/16 bits,
 * palette at 1/2/4/8 bits, RGB at 8/16 bits; one extra sample (alpha) is kept, further ones dropped.
 * Like Pillow: 2/4-bit gray scales to 0..255, 16-bit samples keep their high byte, colormap entries
 * keep their high byte. Included by onnxc_image.c only.
 */
#ifndef ONNXC_IMAGE_TIFF_H
#define ONNXC_IMAGE_TIFF_H

typedef struct {
    const uint8_t *d;
    size_t n;
    int le;
} otif;

static inline uint32_t otif_u16(const otif *t, const uint8_t *p) { return t->le ? oimg_le16(p) : oimg_be16(p); }
static inline uint32_t otif_u32(const otif *t, const uint8_t *p) { return t->le ? oimg_le32(p) : oimg_be32(p); }

/* Element k of a tag's value (BYTE, SHORT or LONG); -1 when out of range. */
static int64_t otif_val(const otif *t, const uint8_t *e, uint32_t k) {
    const uint32_t type = otif_u16(t, e + 2), count = otif_u32(t, e + 4);
    const int size = type == 1 ? 1 : type == 3 ? 2 : type == 4 ? 4 : 0;
    if (!size || k >= count) return -1;
    const uint8_t *p = e + 8;
    if ((uint64_t)count * (uint64_t)size > 4) {
        const uint32_t off = otif_u32(t, e + 8);
        if (off > t->n || (uint64_t)count * (uint64_t)size > t->n - off) return -1;
        p = t->d + off;
    }
    p += (size_t)k * (size_t)size;
    return size == 1 ? p[0] : size == 2 ? otif_u16(t, p) : otif_u32(t, p);
}

static int otif_packbits(const uint8_t *s, size_t n, uint8_t *o, size_t cap) {
    size_t i = 0, k = 0;
    while (k < cap && i < n) {
        const int c = (int8_t)s[i++];
        if (c >= 0) {
            size_t len = (size_t)c + 1;
            if (n - i < len) return -1;
            if (len > cap - k) len = cap - k;
            memcpy(o + k, s + i, len);
            k += len;
            i += (size_t)c + 1;
        } else if (c != -128) {
            if (i >= n) return -1;
            size_t len = (size_t)(1 - c);
            if (len > cap - k) len = cap - k;
            memset(o + k, s[i++], len);
            k += len;
        }
    }
    return k < cap ? -1 : 0;
}

/* TIFF LZW: MSB-first codes of 9..12 bits, Clear 256, EOI 257, width grows one code early. */
static int otif_lzw(const uint8_t *s, size_t n, uint8_t *o, size_t cap) {
    uint16_t prefix[4096];
    uint8_t suffix[4096], first[4096];
    uint16_t len[4096];
    size_t k = 0, ip = 0;
    uint32_t acc = 0;
    int nb = 0, next = 258, width = 9, old = -1;
    if (n >= 2 && s[0] == 0 && (s[1] & 1)) return -2; /* old-style (LSB-first) LZW */
    for (int i = 0; i < 256; i++) {
        prefix[i] = 0xFFFF;
        suffix[i] = first[i] = (uint8_t)i;
        len[i] = 1;
    }
    while (k < cap) {
        while (nb < width && ip < n) {
            acc = acc << 8 | s[ip++];
            nb += 8;
        }
        if (nb < width) break;
        nb -= width;
        const int code = (int)((acc >> nb) & ((1u << width) - 1));
        if (code == 256) {
            next = 258;
            width = 9;
            old = -1;
            continue;
        }
        if (code == 257) break;
        int emit;
        if (old < 0) {
            if (code > 255) return -1;
            emit = code;
        } else if (code < next) {
            emit = code;
            if (next < 4096) {
                prefix[next] = (uint16_t)old;
                suffix[next] = first[code];
                first[next] = first[old];
                len[next] = (uint16_t)(len[old] + 1);
                next++;
            }
        } else if (code == next && next < 4096) {
            prefix[next] = (uint16_t)old;
            suffix[next] = first[old];
            first[next] = first[old];
            len[next] = (uint16_t)(len[old] + 1);
            emit = next++;
        } else {
            return -1;
        }
        /* write the string of code `emit` backwards, clipped to the buffer */
        const size_t l = len[emit];
        for (int c = emit, j = (int)l - 1; j >= 0; c = prefix[c], j--)
            if (k + (size_t)j < cap) o[k + (size_t)j] = suffix[c];
        k += l;
        old = emit;
        if (next + 1 >= (1 << width) && width < 12) width++;
    }
    return k < cap ? -1 : 0;
}

static int oimg_tiff(const uint8_t *d, size_t n, oimg *im) {
    otif t = {d, n, d[0] == 'I'};
    if (n < 8) return oimg_fail(im, "TIFF: truncated header");
    const uint32_t ifd = otif_u32(&t, d + 4);
    if (ifd > n - 2) return oimg_fail(im, "TIFF: bad IFD offset");
    const uint32_t ne = otif_u16(&t, d + ifd);
    if ((size_t)ne * 12 > n - ifd - 2) return oimg_fail(im, "TIFF: truncated IFD");
    const uint8_t *tags[400] = {NULL};
    for (uint32_t i = 0; i < ne; i++) {
        const uint8_t *e = d + ifd + 2 + 12 * (size_t)i;
        const uint32_t tag = otif_u16(&t, e);
        if (tag < 400) tags[tag] = e;
    }
#define OTIF(tag, k, dflt) (tags[tag] ? otif_val(&t, tags[tag], k) : (int64_t)(dflt))
    const int64_t w = OTIF(256, 0, -1), h = OTIF(257, 0, -1), spp = OTIF(277, 0, 1), bits = OTIF(258, 0, 1);
    const int64_t comp = OTIF(259, 0, 1), photo = OTIF(262, 0, -1), planar = OTIF(284, 0, 1), pred = OTIF(317, 0, 1);
    const int64_t fmt = OTIF(339, 0, 1), fill = OTIF(266, 0, 1);
    if (w < 0 || h < 0 || photo < 0) return oimg_fail(im, "TIFF: missing ImageWidth, ImageLength or PhotometricInterpretation");
    for (int64_t s = 1; s < spp; s++)
        if (OTIF(258, (uint32_t)s, bits) != bits) return oimg_unsupported(im, "TIFF: samples of different bit depths are not supported");
    const int gray = photo == 0 || photo == 1;
    const int ok = spp >= 1 && spp <= 8 && fmt == 1 && fill == 1 && (planar == 1 || planar == 2) &&
                   ((gray && (bits == 1 || bits == 2 || bits == 4 || bits == 8 || bits == 16)) ||
                    (photo == 2 && spp >= 3 && (bits == 8 || bits == 16)) ||
                    (photo == 3 && spp == 1 && bits >= 1 && bits <= 8 && (bits & (bits - 1)) == 0));
    if (!ok)
        return oimg_fail(im, "TIFF: unsupported layout (photometric %lld, %lld samples of %lld bits, format %lld, planar %lld)",
                         (long long)photo, (long long)spp, (long long)bits, (long long)fmt, (long long)planar);
    if (comp != 1 && comp != 5 && comp != 8 && comp != 32946 && comp != 32773)
        return oimg_fail(im, "TIFF: unsupported compression %lld", (long long)comp);
    if (pred != 1 && pred != 2) return oimg_fail(im, "TIFF: unsupported predictor %lld", (long long)pred);
    const int tiled = tags[322] != NULL;
    const int64_t bw = tiled ? OTIF(322, 0, 0) : w;
    int64_t bh = tiled ? OTIF(323, 0, 0) : OTIF(278, 0, h);
    if (bh > h) bh = h;
    if (bw <= 0 || bh <= 0) return oimg_fail(im, "TIFF: bad strip or tile size");
    const int och = gray ? (spp >= 2 ? 2 : 1) : photo == 3 ? 3 : (spp >= 4 ? 4 : 3);
    if (w > OIMG_MAX_DIM || h > OIMG_MAX_DIM || (w * h) / 4096 * spp * bits / 8 > (int64_t)n)
        return oimg_fail(im, "TIFF: image size %lldx%lld does not fit the file", (long long)w, (long long)h);
    if (oimg_alloc(im, w, h, och, "TIFF")) return -1;
    if (bw > OIMG_MAX_DIM || bh > OIMG_MAX_DIM) return oimg_fail(im, "TIFF: strip or tile too large");
    const int64_t nps = planar == 2 ? spp : 1, sps = planar == 2 ? 1 : spp; /* planes, samples per block pixel */
    const size_t rowb = (size_t)((bw * sps * bits + 7) / 8), blockb = rowb * (size_t)bh;
    const int64_t across = (w + bw - 1) / bw, down = (h + bh - 1) / bh;
    const uint8_t *offs = tags[tiled ? 324 : 273], *cnts = tags[tiled ? 325 : 279];
    if (!offs) return oimg_fail(im, "TIFF: missing strip or tile offsets");
    uint16_t *smp = (uint16_t *)malloc((size_t)(w * h * spp) * sizeof(uint16_t));
    uint8_t *buf = (uint8_t *)malloc(blockb ? blockb : 1);
    int r = 0;
    if (!smp || !buf) r = oimg_fail(im, "TIFF: out of memory");
    for (int64_t p = 0; r == 0 && p < nps; p++)
        for (int64_t by = 0; r == 0 && by < down; by++)
            for (int64_t bx = 0; r == 0 && bx < across; bx++) {
                const uint32_t b = (uint32_t)((p * down + by) * across + bx);
                const int64_t off = otif_val(&t, offs, b);
                int64_t cnt = cnts ? otif_val(&t, cnts, b) : (int64_t)blockb;
                if (off < 0 || cnt < 0 || (size_t)off > n) { r = oimg_fail(im, "TIFF: missing or bad offset of block %u", b); break; }
                if ((size_t)cnt > n - (size_t)off) cnt = (int64_t)(n - (size_t)off);
                const uint8_t *src = d + off;
                /* rows of this block inside the image; strips at the bottom may be short */
                const int64_t rows = tiled ? bh : (h - by * bh < bh ? h - by * bh : bh);
                const size_t need = rowb * (size_t)rows;
                const char *err = "corrupt data";
                int z = 0;
                if (comp == 1) {
                    if ((size_t)cnt < need) z = -1, err = "truncated data";
                    else memcpy(buf, src, need);
                } else if (comp == 32773) {
                    z = otif_packbits(src, (size_t)cnt, buf, need);
                } else if (comp == 5) {
                    z = otif_lzw(src, (size_t)cnt, buf, need);
                    if (z == -2) err = "old-style LZW is not supported";
                } else {
                    z = oinf_zlib(src, (size_t)cnt, buf, need, &err);
                }
                if (z) { r = oimg_fail(im, "TIFF: block %u: %s", b, err); break; }
                for (int64_t y = 0; y < rows; y++) {
                    uint8_t *row = buf + (size_t)y * rowb;
                    if (pred == 2 && bits == 8) {
                        for (int64_t i = sps; i < bw * sps; i++) row[i] = (uint8_t)(row[i] + row[i - sps]);
                    } else if (pred == 2 && bits == 16) {
                        for (int64_t i = sps; i < bw * sps; i++) {
                            const uint32_t v = otif_u16(&t, row + 2 * i) + otif_u16(&t, row + 2 * (i - sps));
                            row[2 * i + (t.le ? 0 : 1)] = (uint8_t)v;
                            row[2 * i + (t.le ? 1 : 0)] = (uint8_t)(v >> 8);
                        }
                    }
                    const int64_t iy = by * bh + y;
                    if (iy >= h) break;
                    for (int64_t x = 0; x < bw && bx * bw + x < w; x++)
                        for (int64_t s = 0; s < sps; s++) {
                            const int64_t j = x * sps + s;
                            uint32_t v;
                            if (bits == 16) v = otif_u16(&t, row + 2 * j) >> 8;
                            else if (bits == 8) v = row[j];
                            else v = (row[(j * bits) >> 3] >> (8 - bits - (int)((j * bits) & 7))) & ((1u << bits) - 1);
                            smp[((iy * w) + bx * bw + x) * spp + (planar == 2 ? p : s)] = (uint16_t)v;
                        }
                }
            }
    if (r == 0) {
        const size_t npx = (size_t)(w * h);
        uint8_t pal[768] = {0};
        if (photo == 3 && tags[320]) /* colormap: all reds, then greens, then blues, 16 bits each */
            for (uint32_t c = 0; c < 3; c++)
                for (uint32_t k = 0; k < (1u << bits); k++) {
                    const int64_t v = otif_val(&t, tags[320], c * (1u << bits) + k);
                    pal[3 * k + c] = v < 0 ? 0 : (uint8_t)(v >> 8);
                }
        for (size_t i = 0; i < npx; i++) {
            const uint16_t *s = smp + i * (size_t)spp;
            uint8_t *o = im->px + i * (size_t)och;
            if (photo == 3) {
                memcpy(o, pal + 3 * s[0], 3);
            } else if (gray) {
                uint32_t v = bits >= 8 ? s[0] : s[0] * (255u / ((1u << bits) - 1));
                o[0] = (uint8_t)(photo == 0 ? 255 - v : v);
                if (och == 2) o[1] = (uint8_t)(bits >= 8 ? s[1] : s[1] * (255u / ((1u << bits) - 1)));
            } else {
                for (int c = 0; c < och; c++) o[c] = (uint8_t)s[c];
            }
        }
    }
    free(smp);
    free(buf);
    return r;
#undef OTIF
}

#endif /* ONNXC_IMAGE_TIFF_H */
