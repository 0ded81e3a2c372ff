/* ImageDecoder: decode an encoded image file held in memory into 8-bit RGB, BGR or grayscale pixels.
 *
 * Formats (each decoder in its own internal header, written from the format specifications):
 *   BMP, PNM (P1-P6), TIFF (baseline strips/tiles, none/PackBits/LZW/Deflate)  onnxc_image_raster.h, onnxc_image_tiff.h
 *   PNG (zlib inflate, all filters, Adam7, 1-16 bit, palette)                   onnxc_image_png.h, onnxc_image_inflate.h
 *   JPEG (baseline, extended and progressive Huffman)                          onnxc_image_jpeg.h, onnxc_image_jpeg_pix.h
 * The results match Pillow (the reference of onnx.reference): JPEG reproduces libjpeg-turbo's default
 * arithmetic (islow IDCT, fancy chroma upsampling, fixed-point YCbCr tables) and grayscale output uses
 * Pillow's fixed-point ITU-R 601-2 luma. Every read is bounds-checked: corrupt or truncated data ends
 * in an error message, never an out-of-bounds access.
 *
 * A decoder fills an oimg: pixels of 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels; palette
 * images are expanded to RGB(A) by the decoder. onnxc_image_convert then writes the requested pixel format.
 *
 * This header is the interface (the oimg type and two functions); the decoders are implemented in
 * onnxc_image.c, compiled once into the runtime library, which alone includes the per-format headers.
 */
#ifndef ONNXC_IMAGE_H
#define ONNXC_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "onnxc.h"

typedef struct oimg {
    uint8_t *px;  /* h * w * ch bytes, row-major, malloc'd */
    int64_t h, w;
    int ch;       /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    char err[200];
    int unsupported; /* set when the data is valid but uses a format feature onnxc does not decode */
} oimg;

/* Decode the n bytes at d by magic number. Returns 0, or -1 with im->err set (and im->unsupported for
 * a valid file using a feature onnxc does not decode; im->px freed). On success the caller frees im->px.
 * Images over 2^28 pixels or 2^20 on a side are rejected (OIMG_MAX_PIXELS, OIMG_MAX_DIM in onnxc_image.c). */
ONNXC_RT_API int onnxc_image_decode(const uint8_t *d, size_t n, oimg *im);

/* Write im as pixel format fmt (0 RGB, 1 BGR, 2 Grayscale) into out (h * w * (fmt == 2 ? 1 : 3) bytes),
 * converting like Pillow's convert("RGB") / convert("L"): alpha is dropped, gray is replicated. */
ONNXC_RT_API void onnxc_image_convert(const oimg *im, int fmt, uint8_t *out);

#endif /* ONNXC_IMAGE_H */
