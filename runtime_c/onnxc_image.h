/* ImageDecoder: decode an encoded image file held in memory into 8-bit RGB, BGR or grayscale pixels.
 *
 * Formats (each decoder in its own header, written from the format specifications):
 *   BMP, PNM (P1-P6), TIFF (baseline strips/tiles, none/PackBits/LZW/Deflate)  onnxc_image_raster.h, onnxc_image_tiff.h
 *   PNG (zlib inflate, all filters, Adam7, 1-16 bit, palette)                   onnxc_image_png.h, onnxc_image_inflate.h
 *   JPEG (baseline, extended and progressive Huffman)                          onnxc_image_jpeg.h, onnxc_image_jpeg_pix.h
 * The results match Pillow (the reference of onnx.reference): JPEG reproduces libjpeg-turbo's default
 * arithmetic (islow IDCT, fancy chroma upsampling, fixed-point YCbCr tables) and grayscale output uses
 * Pillow's fixed-point ITU-R 601-2 luma. Every read is bounds-checked: corrupt or truncated data ends
 * in an error message, never an out-of-bounds access.
 *
 * A decoder fills an oimg: pixels of 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels; palette
 * images are expanded to RGB(A) by the decoder. oimg_convert then writes the requested pixel format.
 */
#ifndef ONNXC_IMAGE_H
#define ONNXC_IMAGE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest image accepted (pixels); a corrupt header must not make us allocate gigabytes. */
#define OIMG_MAX_PIXELS ((int64_t)1 << 28)
#define OIMG_MAX_DIM ((int64_t)1 << 20)

typedef struct oimg {
    uint8_t *px;  /* h * w * ch bytes, row-major, malloc'd */
    int64_t h, w;
    int ch;       /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    char err[200];
    int unsupported; /* set when the data is valid but uses a format feature onnxc does not decode */
} oimg;

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

/* Decode by magic number. Returns 0, or -1 with im->err set (im->px freed). */
static int oimg_decode(const uint8_t *d, size_t n, oimg *im) {
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

/* Write im as pixel format fmt (0 RGB, 1 BGR, 2 Grayscale) into out (h * w * (fmt == 2 ? 1 : 3) bytes),
 * converting like Pillow's convert("RGB") / convert("L"): alpha is dropped, gray is replicated. */
static void oimg_convert(const oimg *im, int fmt, uint8_t *out) {
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

#endif /* ONNXC_IMAGE_H */
