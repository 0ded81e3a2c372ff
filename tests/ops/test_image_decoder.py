"""ImageDecoder (opset 20): round trips through images encoded here, the conformance inputs, and Pillow.

Without Pillow, PNG (zlib + every filter type, all colour types and bit depths, Adam7), BMP, PNM and
TIFF files are encoded by small writers below and must decode to the exact pixels; with Pillow
(optional), JPEG (baseline/progressive, every chroma subsampling, odd sizes) and Pillow's own PNG/BMP/
TIFF/PNM writers are compared bit-exactly with Pillow's decoding, the reference of onnx.reference.
Corrupt data must raise a clear error; the slow fuzz test runs truncated and bit-flipped files
through the C decoders under AddressSanitizer/UBSan.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxc
from onnxc.codegen.compiler import runtime_dir
from onnxc.codegen.runtime_lib import sources_for
from onnxc.ir import UnsupportedOpError
from onnxc.ir.errors import RuntimeFailure

try:
    import PIL.Image
except ImportError:  # optional: only for the comparisons with Pillow
    PIL = None

FORMATS = ("RGB", "BGR", "Grayscale")
rng = np.random.default_rng(20)


def _model(pixel_format: str, const: np.ndarray | None = None) -> onnx.ModelProto:
    node = helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format=pixel_format)
    out = [helper.make_tensor_value_info("y", onnx.TensorProto.UINT8, None)]
    if const is not None:
        graph = helper.make_graph([node], "t", [], out, initializer=[onnx.numpy_helper.from_array(const, "data")])
    else:
        graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("data", onnx.TensorProto.UINT8, ["N"])],
                                  out)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module")
def decoders() -> dict:
    """One compiled model per pixel format (symbolic input length), reused for every image."""
    return {f: onnxc.compile(_model(f)) for f in FORMATS}


def _decode(decoders: dict, data: bytes, fmt: str) -> np.ndarray:
    return decoders[fmt].run({"data": np.frombuffer(data, np.uint8).copy()})["y"]


def luma(rgb: np.ndarray) -> np.ndarray:
    """Pillow's RGB -> L (ITU-R 601-2 in 16-bit fixed point), as [H, W, 1]."""
    r, g, b = (rgb[..., k].astype(np.int64) for k in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)[..., None]


def _check_all(decoders: dict, data: bytes, rgb: np.ndarray, gray: np.ndarray | None = None) -> None:
    """The three pixel formats of ``data`` against the expected RGB (and grayscale) pixels."""
    np.testing.assert_array_equal(_decode(decoders, data, "RGB"), rgb)
    np.testing.assert_array_equal(_decode(decoders, data, "BGR"), rgb[:, :, ::-1])
    np.testing.assert_array_equal(_decode(decoders, data, "Grayscale"), luma(rgb) if gray is None else gray)


# ------------------------------------------------------------------------------------ small encoders

def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_filter(rows: np.ndarray, bpp: int) -> bytes:
    """Filter each row with type (row index % 5): None, Sub, Up, Average, Paeth."""
    out, prev = [], np.zeros(rows.shape[1], np.int64)
    for y, row in enumerate(rows.astype(np.int64)):
        a = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        c = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        ft = y % 5
        if ft == 4:
            p = a + prev - c
            pa, pb, pc = abs(p - a), abs(p - prev), abs(p - c)
            pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, prev, c))
        else:
            pred = [0 * row, a, prev, (a + prev) // 2][ft]
        out.append(bytes([ft]) + ((row - pred) % 256).astype(np.uint8).tobytes())
        prev = row
    return b"".join(out)


def _pack_bits(samples: np.ndarray, depth: int) -> np.ndarray:
    """Rows of sub-byte samples packed MSB first (padded to whole bytes)."""
    if depth == 8:
        return samples.astype(np.uint8)
    if depth == 16:
        return samples.astype(">u2").view(np.uint8).reshape(samples.shape[0], -1)
    bits = np.unpackbits(samples.astype(np.uint8)[..., None], axis=-1)[..., 8 - depth:]
    return np.packbits(bits.reshape(samples.shape[0], -1), axis=1)


def png(samples: np.ndarray, ctype: int, depth: int = 8, palette: np.ndarray | None = None,
        interlace: bool = False) -> bytes:
    """PNG of samples [H, W, channels] (values < 2**depth)."""
    h, w, nch = samples.shape
    bpp = max(1, nch * depth // 8)
    if interlace:
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(_png_filter(_pack_bits(sub.reshape(sub.shape[0], -1), depth), bpp)
                       for x0, y0, dx, dy in passes if (sub := samples[y0::dy, x0::dx]).size)
    else:
        raw = _png_filter(_pack_bits(samples.reshape(h, -1), depth), bpp)
    chunks = [_png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))]
    if palette is not None:
        chunks.append(_png_chunk(b"PLTE", palette.astype(np.uint8).tobytes()))
    half = len(zc := zlib.compress(raw, 9)) // 2  # two IDAT chunks
    chunks += [_png_chunk(b"IDAT", zc[:half]), _png_chunk(b"IDAT", zc[half:]), _png_chunk(b"IEND", b"")]
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks)


def bmp(rgb: np.ndarray, bits: int = 24, top_down: bool = False, palette: np.ndarray | None = None,
        index: np.ndarray | None = None) -> bytes:
    """BMP with a BITMAPINFOHEADER: 24/32-bit BGR, or 1/4/8-bit ``index`` into ``palette``."""
    h, w = rgb.shape[:2]
    stride = (w * bits + 31) // 32 * 4
    rows = []
    for y in range(h):
        if bits == 24:
            line = rgb[y, :, ::-1].tobytes()
        elif bits == 32:
            line = np.concatenate([rgb[y, :, ::-1], np.full((w, 1), 7, np.uint8)], 1).tobytes()
        else:
            line = _pack_bits(index[y:y + 1], bits).tobytes()
        rows.append(line.ljust(stride, b"\0"))
    if not top_down:
        rows.reverse()
    pal = b"" if palette is None else np.concatenate([palette[:, ::-1], np.zeros((len(palette), 1), np.uint8)],
                                                     1).astype(np.uint8).tobytes()
    off = 54 + len(pal)
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, bits, 0, stride * h, 2835, 2835,
                       0 if palette is None else len(palette), 0)
    return b"BM" + struct.pack("<IHHI", off + stride * h, 0, 0, off) + info + pal + b"".join(rows)


def tiff_rgb(rgb: np.ndarray, rows_per_strip: int, packbits: bool = False) -> bytes:
    """Little-endian baseline TIFF, RGB strips, uncompressed or PackBits (literal runs only)."""
    h, w, c = rgb.shape
    strips = []
    for y in range(0, h, rows_per_strip):
        raw = rgb[y:y + rows_per_strip].tobytes()
        if packbits:
            raw = b"".join(bytes([len(raw[i:i + 128]) - 1]) + raw[i:i + 128] for i in range(0, len(raw), 128))
        strips.append(raw)
    data = b"".join(strips)
    n_tags = 10
    ifd_at = 8 + len(data)
    extra_at = ifd_at + 2 + 12 * n_tags + 4
    offs = [8 + sum(len(s) for s in strips[:k]) for k in range(len(strips))]
    extra = struct.pack("<3H", 8, 8, 8) + struct.pack(f"<{len(strips)}I", *offs) + \
        struct.pack(f"<{len(strips)}I", *[len(s) for s in strips])

    def tag(t, typ, n, v):
        return struct.pack("<HHII", t, typ, n, v)

    tags = [tag(256, 4, 1, w), tag(257, 4, 1, h), tag(258, 3, 3, extra_at), tag(259, 3, 1, 32773 if packbits else 1),
            tag(262, 3, 1, 2), tag(273, 4, len(strips), extra_at + 6 if len(strips) > 1 else offs[0]),
            tag(277, 3, 1, c), tag(278, 4, 1, rows_per_strip),
            tag(279, 4, len(strips), extra_at + 6 + 4 * len(strips) if len(strips) > 1 else len(strips[0])),
            tag(284, 3, 1, 1)]
    return (b"II*\0" + struct.pack("<I", ifd_at) + data + struct.pack("<H", n_tags) + b"".join(tags)
            + b"\0\0\0\0" + extra)


# ------------------------------------------------------------------------------------------- tests

CONFORMANCE = ("bmp", "pnm", "tiff", "png", "jpeg")


@pytest.mark.parametrize("kind", CONFORMANCE)
def test_conformance_inputs(decoders, kind):
    """The ONNX test-suite images (frozen data) in all three pixel formats."""
    from onnx.backend.test.case.node import _image_decoder_data as frozen

    case = getattr(frozen, f"image_decoder_decode_{kind}_rgb")
    data, rgb = np.asarray(case.data, np.uint8).tobytes(), np.asarray(case.output, np.uint8)
    gray = np.asarray(frozen.image_decoder_decode_jpeg_grayscale.output, np.uint8) if kind == "jpeg" else None
    _check_all(decoders, data, rgb, gray)


@pytest.mark.parametrize("h,w", [(1, 1), (3, 5), (8, 8), (13, 7), (33, 64)])
@pytest.mark.parametrize("interlace", [False, True])
def test_png_colour_types(decoders, h, w, interlace):
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    g = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
    a = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
    _check_all(decoders, png(rgb, 2, interlace=interlace), rgb)
    _check_all(decoders, png(np.concatenate([rgb, a], 2), 6, interlace=interlace), rgb)
    _check_all(decoders, png(g, 0, interlace=interlace), np.repeat(g, 3, 2), g)
    _check_all(decoders, png(np.concatenate([g, a], 2), 4, interlace=interlace), np.repeat(g, 3, 2), g)
    wide = rng.integers(0, 65536, (h, w, 3))  # 16-bit: the high byte of each sample
    _check_all(decoders, png(wide, 2, 16, interlace=interlace), (wide >> 8).astype(np.uint8))
    for depth in (1, 2, 4):
        s = rng.integers(0, 1 << depth, (h, w, 1))
        gray = (s * (255 // ((1 << depth) - 1))).astype(np.uint8)
        _check_all(decoders, png(s, 0, depth, interlace=interlace), np.repeat(gray, 3, 2), gray)
        pal = rng.integers(0, 256, (1 << depth, 3), dtype=np.uint8)
        _check_all(decoders, png(s, 3, depth, palette=pal, interlace=interlace), pal[s[..., 0]])


@pytest.mark.parametrize("h,w", [(1, 1), (2, 3), (5, 9), (16, 31)])
def test_bmp_layouts(decoders, h, w):
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    _check_all(decoders, bmp(rgb), rgb)
    _check_all(decoders, bmp(rgb, top_down=True), rgb)
    _check_all(decoders, bmp(rgb, bits=32), rgb)
    for bits in (1, 4, 8):
        pal = rng.integers(0, 256, (1 << bits, 3), dtype=np.uint8)
        idx = rng.integers(0, 1 << bits, (h, w))
        _check_all(decoders, bmp(rgb, bits, palette=pal, index=idx), pal[idx])


@pytest.mark.parametrize("h,w", [(1, 1), (4, 7), (19, 10)])
def test_pnm_variants(decoders, h, w):
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    g = rgb[..., :1]
    hdr = f"# a comment\n{w} {h}\n".encode()
    _check_all(decoders, b"P6\n" + hdr + b"255\n" + rgb.tobytes(), rgb)
    _check_all(decoders, b"P5 " + hdr + b"255\n" + g.tobytes(), np.repeat(g, 3, 2), g)
    ascii_rgb = " ".join(map(str, rgb.reshape(-1))).encode()
    _check_all(decoders, b"P3\n" + hdr + b"255\n" + ascii_rgb + b"\n", rgb)
    # maxval 1000 (16-bit samples): round(v / 1000 * 255), clamped
    v = rng.integers(0, 1001, (h, w, 3))
    want = np.minimum(255, np.round(v / 1000 * 255)).astype(np.uint8)
    _check_all(decoders, b"P6\n" + hdr + b"1000\n" + v.astype(">u2").tobytes(), want)
    bits = rng.integers(0, 2, (h, w))  # P1/P4: 1 is black
    white = np.where(bits == 1, 0, 255).astype(np.uint8)[..., None]
    p4 = np.packbits(bits.astype(np.uint8), axis=1).tobytes()
    _check_all(decoders, b"P4\n" + hdr + p4, np.repeat(white, 3, 2), white)
    _check_all(decoders, b"P1\n" + hdr + " ".join(map(str, bits.reshape(-1))).encode(), np.repeat(white, 3, 2), white)


@pytest.mark.parametrize("h,w,rps", [(1, 1, 1), (7, 5, 3), (20, 33, 20), (9, 4, 100)])
def test_tiff_strips(decoders, h, w, rps):
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    _check_all(decoders, tiff_rgb(rgb, rps), rgb)
    _check_all(decoders, tiff_rgb(rgb, rps, packbits=True), rgb)


def _pil_bytes(img, fmt: str, **kw) -> bytes:
    b = io.BytesIO()
    img.save(b, format=fmt, **kw)
    return b.getvalue()


def _pil_expected(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    img = PIL.Image.open(io.BytesIO(data))
    return np.array(img.convert("RGB")), np.array(img.convert("L"))[..., None]


def _textured(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(7 * x + 3 * y) % 256, (2 * x + 9 * y) % 256, (x * y) % 256], -1)
    return np.clip(base + rng.integers(-40, 40, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.mark.skipif(PIL is None, reason="needs Pillow")
@pytest.mark.parametrize("h,w", [(1, 1), (7, 5), (16, 16), (17, 33), (50, 3)])
def test_jpeg_matches_pillow(decoders, h, w):
    """libjpeg-turbo's arithmetic (islow IDCT, fancy upsampling, YCbCr tables) bit for bit."""
    img = PIL.Image.fromarray(_textured(h, w))
    files = [_pil_bytes(img, "JPEG", quality=q, subsampling=s) for q in (40, 95) for s in (0, 1, 2)]
    files += [_pil_bytes(img, "JPEG", quality=85, subsampling=2, progressive=True),
              _pil_bytes(img, "JPEG", quality=85, subsampling=1, restart_marker_blocks=2),
              _pil_bytes(img.convert("L"), "JPEG", quality=70),
              _pil_bytes(img.convert("L"), "JPEG", quality=70, progressive=True)]
    for data in files:
        _check_all(decoders, data, *_pil_expected(data))


@pytest.mark.skipif(PIL is None, reason="needs Pillow")
@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "1"])
def test_pillow_writers(decoders, mode):
    img = PIL.Image.fromarray(_textured(23, 17))
    img = img.convert(mode) if mode != "P" else img.convert("P", palette=PIL.Image.Palette.ADAPTIVE, colors=13)
    files = [_pil_bytes(img, "PNG", optimize=True)]
    files += [_pil_bytes(img, "TIFF", compression=c) for c in ("raw", "packbits", "tiff_lzw", "tiff_adobe_deflate")]
    if mode in ("RGB", "L", "P", "1"):
        files.append(_pil_bytes(img, "BMP"))
    if mode in ("RGB", "L", "1"):
        files.append(_pil_bytes(img, "PPM"))
    for data in files:
        _check_all(decoders, data, *_pil_expected(data))


BAD = [
    (b"", "unrecognized image format"),
    (b"GIF89a" + bytes(20), "GIF images are not supported"),
    (b"RIFF\x10\0\0\0WEBPVP8 " + bytes(8), "WebP images are not supported"),
    (b"\0\0\0\x0cjP  \r\n\x87\n" + bytes(8), "JPEG 2000 images are not supported"),
    (b"P6\n4 4\n255\n" + bytes(10), "PNM: truncated pixel data"),
    (b"BM" + bytes(10), "BMP: truncated header"),
]


@pytest.mark.parametrize("data,message", BAD)
def test_bad_data_fails_clearly(decoders, data, message):
    # formats onnxc does not decode are "unsupported at run time"; broken data is a run-time failure
    expected = UnsupportedOpError if "images are not supported" in message else RuntimeFailure
    with pytest.raises(expected, match=message):
        _decode(decoders, data, "RGB")


def test_truncated_and_corrupt_files(decoders):
    from onnx.backend.test.case.node import _image_decoder_data as frozen

    for kind in CONFORMANCE:
        data = np.asarray(getattr(frozen, f"image_decoder_decode_{kind}_rgb").data, np.uint8).tobytes()
        with pytest.raises(RuntimeFailure, match=r"ImageDecoder .*(truncated|CRC|no image data|corrupt)"):
            _decode(decoders, data[: len(data) * 2 // 3], "RGB")
    good = png(rng.integers(0, 256, (4, 4, 3)), 2)
    bad = bytearray(good)
    bad[43] ^= 0x10  # inside IDAT: the chunk CRC no longer matches
    with pytest.raises(RuntimeFailure, match="PNG: CRC mismatch in chunk IDAT"):
        _decode(decoders, bytes(bad), "RGB")


def test_constant_unsupported_format_is_rejected_at_compile_time():
    webp = np.frombuffer(b"RIFF\x10\0\0\0WEBPVP8 " + bytes(8), np.uint8).copy()
    with pytest.raises(UnsupportedOpError, match="WebP images are not supported"):
        onnxc.compile(_model("RGB", const=webp))


def test_constant_input_and_static_length():
    """A constant (initializer) image decodes at run time; a graph input of static length works too."""
    rgb = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    data = np.frombuffer(png(rgb, 2), np.uint8).copy()
    np.testing.assert_array_equal(onnxc.compile(_model("BGR", const=data)).run({})["y"], rgb[:, :, ::-1])
    m = _model("Grayscale")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = len(data)
    np.testing.assert_array_equal(onnxc.compile(m).run({"data": data})["y"], luma(rgb))


def test_invalid_pixel_format_is_a_shape_error():
    with pytest.raises(onnxc.ir.ShapeError, match="pixel_format"):
        onnxc.compile(_model("CMYK"))


# -------------------------------------------------------------------------------------------- fuzz

FUZZ_MAIN = r"""
#include "onnxc_image.h"
/* stdin: records of [u32 length][bytes]; decodes each to all three pixel formats. */
int main(void) {
    uint32_t n; long ok = 0, bad = 0;
    while (fread(&n, 4, 1, stdin) == 1) {
        uint8_t *d = (uint8_t *)malloc(n ? n : 1);  /* exactly n bytes: ASan sees any over-read */
        if (n && fread(d, 1, n, stdin) != n) return 2;
        oimg im;
        if (onnxc_image_decode(d, n, &im)) {
            if (!im.err[0]) { printf("empty error message\n"); return 3; }
            bad++;
        } else {
            uint8_t *o = (uint8_t *)malloc((size_t)(im.w * im.h * 3));
            for (int f = 0; f < 3; f++) onnxc_image_convert(&im, f, o);
            free(o); free(im.px); ok++;
        }
        free(d);
    }
    printf("decoded %ld rejected %ld\n", ok, bad);
    return 0;
}
"""


def _fuzz_seeds() -> list[bytes]:
    from onnx.backend.test.case.node import _image_decoder_data as frozen

    seeds = [np.asarray(getattr(frozen, f"image_decoder_decode_{k}_rgb").data, np.uint8).tobytes() for k in CONFORMANCE]
    s = rng.integers(0, 16, (9, 11, 1))
    seeds += [png(s, 3, 4, palette=rng.integers(0, 256, (16, 3)), interlace=True), png(s, 0, 4),
              bmp(np.zeros((5, 7, 3), np.uint8), 4, palette=rng.integers(0, 256, (16, 3)), index=s[:5, :7, 0]),
              tiff_rgb(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8), 4, packbits=True)]
    if PIL is not None:
        img = PIL.Image.fromarray(_textured(19, 21))
        seeds += [_pil_bytes(img, "JPEG", progressive=True, subsampling=2),
                  _pil_bytes(img, "JPEG", restart_marker_blocks=1, subsampling=1),
                  _pil_bytes(img, "TIFF", compression="tiff_lzw"), _pil_bytes(img, "TIFF", compression="tiff_adobe_deflate")]
    return seeds


def _mutants(seed: bytes, r: np.random.Generator) -> list[bytes]:
    out = [seed[:k] for k in sorted({int(x) for x in np.linspace(0, len(seed) - 1, 60)})]
    for _ in range(300):
        b = bytearray(seed)
        for pos in r.integers(0, len(b), r.integers(1, 4)):
            b[pos] ^= 1 << int(r.integers(0, 8)) if r.random() < 0.7 else int(r.integers(1, 256))
        out.append(bytes(b))
    return out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_fuzz_decoders_under_sanitizers():
    """Truncated and bit-flipped images: every one decodes or fails with a message, never a bad access."""
    r = np.random.default_rng(5)
    cases = [m for s in _fuzz_seeds() for m in _mutants(s, r)]
    blob = b"".join(struct.pack("<I", len(c)) + c for c in cases)
    with tempfile.TemporaryDirectory() as d:
        Path(d, "main.c").write_text(FUZZ_MAIN)
        exe = Path(d, "fuzz")
        subprocess.run(["gcc", "-std=gnu11", "-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                        "-fno-sanitize-recover=all", "-I", str(runtime_dir()), "-o", str(exe), str(Path(d, "main.c")),
                        *map(str, sources_for(FUZZ_MAIN))],
                       check=True, capture_output=True, text=True)
        res = subprocess.run([str(exe)], input=blob, capture_output=True, timeout=600,
                             env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1"})
    out = res.stdout.decode() + res.stderr.decode()
    assert res.returncode == 0, out[-3000:]
    ok, bad = (int(x) for x in out.split()[1::2][:2])
    assert ok + bad == len(cases) and bad > 0 and ok > 0
