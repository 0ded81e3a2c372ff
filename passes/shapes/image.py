"""Shape rule of ImageDecoder (opset 20): a 1-D uint8 tensor holding an encoded image -> uint8 [H, W, C].

H and W are known only once the image header is read, so they are run-time dims of the node (the
kernel decodes and reports them, codegen/kernels/image.py); C is 3 for RGB/BGR and 1 for Grayscale.
When the encoded bytes are a compile-time constant, a format the kernel cannot decode is rejected
here as unsupported rather than at run time.
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType, UnsupportedOpError

from .common import fail, runtime_dim, shape_of, tensor_type
from .registry import shape_rule

PIXEL_FORMATS = {"RGB": 3, "BGR": 3, "Grayscale": 1}

# Magic numbers of formats the kernel does not decode (runtime_c/onnxc_image.c names the same ones).
_UNSUPPORTED_MAGIC = (
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG 2000"),
    (b"\xff\x4f\xff\x51", "JPEG 2000"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
)


def unsupported_format(data: bytes) -> str | None:
    """The name of the format of ``data`` when the kernel cannot decode it, else None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WebP"
    for magic, name in _UNSUPPORTED_MAGIC:
        if data.startswith(magic):
            return name
    return None


@shape_rule("ImageDecoder", versions=(20, 10**9))
def _image_decoder(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype != DType.UINT8:
        raise fail(node, f"input 0 must be uint8, got {t.dtype.name.lower()}")
    shape = shape_of(node, 0)
    if len(shape) != 1:
        raise fail(node, f"input 0 must be 1-D (the encoded bytes), got rank {len(shape)}")
    fmt = node.attr("pixel_format", "RGB")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt not in PIXEL_FORMATS:
        raise fail(node, f"pixel_format must be one of {sorted(PIXEL_FORMATS)}, got {fmt!r}")
    v = node.input(0)
    if v.const is not None:
        name = unsupported_format(np.asarray(v.const, dtype=np.uint8).tobytes())
        if name is not None:
            raise UnsupportedOpError(f"{node.describe()}: {name} images are not supported",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
    return [TensorType(DType.UINT8, (runtime_dim(node, 0, 0), runtime_dim(node, 0, 1), PIXEL_FORMATS[fmt]))]
