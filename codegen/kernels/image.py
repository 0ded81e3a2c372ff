"""ImageDecoder (opset 20): decode an encoded image (1-D uint8) into uint8 [H, W, C].

The decoders are C in the runtime library: runtime_c/onnxc_image.c and the per-format headers it includes
(BMP, PNM, TIFF, PNG, JPEG; results match Pillow, onnx.reference's decoder); the generated code calls
onnxc_image_decode / onnxc_image_convert (runtime_c/onnxc_image.h). H and W are only known after
decoding, so the kernel allocates its output (``allocates=True``) and reports the dims in the
descriptor; decoding twice (a shape function reading only the header, then the kernel) would gain
nothing for a single output.
"""

from __future__ import annotations

from onnxc.ir import DType, Node

from .base import KernelCtx, kernel

_FORMATS = {"RGB": 0, "BGR": 1, "Grayscale": 2}


def _pixel_format(node: Node) -> str:
    fmt = node.attr("pixel_format", "RGB")
    return fmt.decode() if isinstance(fmt, bytes) else fmt


@kernel("ImageDecoder", allocates=True, types=(DType.UINT8,))
def image_decoder(ctx: KernelCtx) -> str:
    ctx.include("onnxc_image.h")
    x, y = ctx.ins[0], ctx.outs[0]
    fmt = _FORMATS[_pixel_format(ctx.node)]  # validated by the shape rule (passes/shapes/image.py)
    channels = 1 if fmt == 2 else 3
    who = ctx.who
    return "\n".join([
        "oimg im_;",
        f"if (onnxc_image_decode({x.ptr}, (size_t)({x.numel()}), &im_))",
        f"    return onnxc_fail(rt, im_.unsupported ? ONNXC_ERR_UNSUPPORTED : ONNXC_ERR_RUNTIME, \"%s: %s\", {who}, "
        "im_.err);",
        f"out0->rank = 3; out0->dtype = {int(y.dtype)};",
        f"out0->dims[0] = im_.h; out0->dims[1] = im_.w; out0->dims[2] = {channels};",
        f"out0->data = onnxc_alloc((size_t)(im_.h * im_.w * {channels}));",
        "if (!out0->data) { free(im_.px); "
        f"return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {who}); }}",
        f"onnxc_image_convert(&im_, {fmt}, (uint8_t *)out0->data);",
        "free(im_.px);",
        "return 0;",
    ])
