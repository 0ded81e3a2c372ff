/* onnxc_image.c: the image decoders of onnxc_image.h (compiled once into the runtime library): the shared
 * helpers below, then the per-format decoders of the internal headers onnxc_image_*.h (included only
 * here), then the dispatch by magic number and the pixel-format conversion. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxc_image.h"

/* Largest image accepted (pixels); a corrupt header must not make us allocate gigabytes. */
#define OIMG_MAX_PIXELS ((int64_t)1 << 28)
#define OIMG_MAX_DIM ((int64_t)1 << 20)

static int oimg_fail(oimg *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A supported-features failure: like oimg_fail, and the op reports ONNXC_ERR_UNSUPPORTED. */
#define oimg_unsupported(im, ...) ((im)->unsupported = 1, oimg_fail((im), __VA_ARGS__))
static int oimg_fail(oimg *im, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->err, sizeof im->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* Check the size and allocate im->px (zeroed). */
static int oimg_alloc(oimg *im, int64_t w, int64_t h, int ch, const char *fmt) {
    if (w <= 0 || h <= 0) return oimg_fail(im, "%s: invalid image size %lldx%lld", fmt, (long long)w, (long long)h);
    if (w > OIMG_MAX_DIM || h > OIMG_MAX_DIM || w * h > OIMG_MAX_PIXELS)
        return oimg_fail(im, "%s: image size %lldx%lld is too large", fmt, (long long)w, (long long)h);
    im->w = w;
    im->h = h;
    im->ch = ch;
    im->px = (uint8_t *)calloc((size_t)(w * h * ch), 1);
    if (!im->px) return oimg_fail(im, "%s: out of memory", fmt);
    return 0;
}

static inline uint32_t oimg_be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t oimg_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint32_t oimg_le16(const uint8_t *p) { return (uint32_t)p[1] << 8 | p[0]; }
static inline uint32_t oimg_le32(const uint8_t *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Pillow's RGB -> L: ITU-R 601-2 luma in 16-bit fixed point (Convert.c, L24). */
static inline uint8_t oimg_luma(uint32_t r, uint32_t g, uint32_t b) {
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

#include "onnxc_image_inflate.h"
#include "onnxc_image_png.h"
#include "onnxc_image_raster.h"
#include "onnxc_image_tiff.h"
#include "onnxc_image_jpeg.h"

/* See onnxc_image.h. */
int onnxc_image_decode(const uint8_t *d, size_t n, oimg *im) {
    int r;
    memset(im, 0, sizeof *im);
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) r = oimg_png(d, n, im);
    else if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) r = oimg_jpeg(d, n, im);
    else if (n >= 2 && d[0] == 'B' && d[1] == 'M') r = oimg_bmp(d, n, im);
    else if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') r = oimg_pnm(d, n, im);
    else if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0)) r = oimg_tiff(d, n, im);
    else if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        r = oimg_unsupported(im, "WebP images are not supported");
    else if ((n >= 12 && memcmp(d, "\0\0\0\x0cjP  \r\n\x87\n", 12) == 0) || (n >= 4 && memcmp(d, "\xff\x4f\xff\x51", 4) == 0))
        r = oimg_unsupported(im, "JPEG 2000 images are not supported");
    else if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        r = oimg_unsupported(im, "GIF images are not supported");
    else r = oimg_fail(im, "unrecognized image format (%zu bytes)", n);
    if (r) {
        free(im->px);
        im->px = NULL;
    }
    return r;
}

/* See onnxc_image.h. */
void onnxc_image_convert(const oimg *im, int fmt, uint8_t *out) {
    const size_t npx = (size_t)(im->w * im->h);
    const uint8_t *s = im->px;
    const int ch = im->ch;
    if (fmt == 2) {
        if (ch <= 2) {
            for (size_t i = 0; i < npx; i++) out[i] = s[i * ch];
        } else {
            for (size_t i = 0; i < npx; i++, s += ch) out[i] = oimg_luma(s[0], s[1], s[2]);
        }
        return;
    }
    const int ri = fmt == 1 ? 2 : 0, bi = fmt == 1 ? 0 : 2;
    for (size_t i = 0; i < npx; i++, s += ch, out += 3) {
        if (ch <= 2) {
            out[0] = out[1] = out[2] = s[0];
        } else {
            out[ri] = s[0];
            out[1] = s[1];
            out[bi] = s[2];
        }
    }
}
