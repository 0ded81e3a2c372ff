"""Four models for the compile-time benchmark (``benchmarks/compile_time.py``), written with the onnx
helper API the way the PyTorch exporter and paddle2onnx write them: shape arithmetic through
Shape/Gather/Unsqueeze/Concat chains, symbolic dims where real exports have them, seeded random weights.

``model_path(name)`` builds a model on first use into ``benchmarks/.models``; ``make_feeds(name)`` gives
seeded inputs. ``python -m benchmarks.compile_models`` checks each model with onnx.checker and
onnxruntime, and compares onnxc with onnxruntime once.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from benchmarks.models import _G, CACHE, F32

GEN_VERSION = 1
I64 = np.int64


def _vi(name: str, shape: list, dtype: int = F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def _i64(g: _G, v) -> str:
    return g.const(np.array(v, I64), "i64")


def _dims(g: _G, x: str, idx: list[int]) -> list[str]:
    """Shape(x)[i] as 1-element tensors, as torch exports ``x.size(i)``: Shape, Gather, Unsqueeze."""
    shp = g.op("Shape", [x])
    return [g.op("Unsqueeze", [g.op("Gather", [shp, _i64(g, i)], axis=0), _i64(g, [0])]) for i in idx]


def _dense(g: _G, x: str, cin: int, cout: int, std: float = 0.02) -> str:
    y = g.op("MatMul", [x, g.const(g.rng.standard_normal((cin, cout), dtype=np.float32) * np.float32(std), "w")])
    return g.op("Add", [y, g.small((cout,), 0.02)])


def _ln(g: _G, x: str, h: int, eps: float) -> str:
    gamma = g.const(g.rng.uniform(0.9, 1.1, h).astype(np.float32), "gamma")
    return g.op("LayerNormalization", [x, gamma, g.small((h,), 0.02, "beta")], axis=-1, epsilon=eps)


def _gelu(g: _G, x: str) -> str:
    erf = g.op("Erf", [g.op("Div", [x, g.const(np.float32(math.sqrt(2.0)))])])
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, g.const(np.float32(1.0))])]), g.const(np.float32(0.5))])


def _attention(g: _G, q: str, k: str, v: str, scale: float, mask: str | None = None) -> str:
    """softmax(q k^T * scale [+ mask]) v for [batch, heads, seq, d] q/v and k already [batch, heads, d, seq]."""
    s = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(1.0 / scale))])
    return g.op("MatMul", [g.op("Softmax", [g.op("Add", [s, mask]) if mask else s], axis=-1), v])


def bert_small(rng: np.random.Generator, layers: int = 4, h: int = 256, nh: int = 4, ff: int = 1024,
               vocab: int = 8192, maxpos: int = 512) -> onnx.ModelProto:
    """HF BertModel as torch.onnx exports it: sliced position/token-type buffers, a 0/1 mask turned
    additive with finfo.min, heads split and merged with Reshape shapes built from Shape chains."""
    g, dh = _G(rng), h // nh

    def emb(n: int, hint: str) -> str:
        return g.const(rng.standard_normal((n, h), dtype=np.float32) * np.float32(0.5), hint)

    b, s = _dims(g, "input_ids", [0, 1])
    pos_ids = g.op("Slice", [_i64(g, np.arange(maxpos)[None]), _i64(g, [0]), s, _i64(g, [1])])
    tt_ids = g.op("Expand", [g.op("Slice", [_i64(g, np.zeros((1, maxpos))), _i64(g, [0]), s, _i64(g, [1])]),
                             g.op("Concat", [b, s], axis=0)])
    x = g.op("Add", [g.op("Gather", [emb(vocab, "word_emb"), "input_ids"]), g.op("Gather", [emb(2, "tt_emb"), tt_ids])])
    x = _ln(g, g.op("Add", [x, g.op("Gather", [emb(maxpos, "pos_emb"), pos_ids])]), h, 1e-12)
    m = g.op("Cast", [g.op("Unsqueeze", [g.op("Unsqueeze", ["attention_mask", _i64(g, [1])]), _i64(g, [2])])], to=F32)
    mask = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0)), m]), g.const(np.float32(np.finfo(np.float32).min))])
    for _ in range(layers):
        def heads(y: str, perm: list[int]) -> str:
            bb, ss = _dims(g, y, [0, 1])
            return g.op("Transpose", [g.op("Reshape", [y, g.op("Concat", [bb, ss, _i64(g, [nh]), _i64(g, [dh])],
                                                                 axis=0)])], perm=perm)
        q, k, v = (heads(_dense(g, x, h, h), p) for p in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]))
        ctx = g.op("Transpose", [_attention(g, q, k, v, 1 / math.sqrt(dh), mask)], perm=[0, 2, 1, 3])
        bb, ss = _dims(g, ctx, [0, 1])
        ctx = g.op("Reshape", [ctx, g.op("Concat", [bb, ss, _i64(g, [h])], axis=0)])
        x = _ln(g, g.op("Add", [_dense(g, ctx, h, h), x]), h, 1e-12)
        x = _ln(g, g.op("Add", [_dense(g, _gelu(g, _dense(g, x, h, ff)), ff, h), x]), h, 1e-12)
    g.nodes[-1].output[0] = "last_hidden_state"
    return g.model([_vi("input_ids", ["batch", "seq"], TensorProto.INT64),
                    _vi("attention_mask", ["batch", "seq"], TensorProto.INT64)],
                   [_vi("last_hidden_state", ["batch", "seq", h])])


def _conv_bn(g: _G, x: str, cin: int, cout: int, k: int, stride=1, group: int = 1, act: str | None = None) -> str:
    st = list(stride) if isinstance(stride, tuple) else [stride, stride]
    y = g.op("Conv", [x, g.he((cout, cin // group, k, k), cin // group * k * k)], kernel_shape=[k, k], strides=st,
             pads=[k // 2] * 4, group=group)
    bn = [g.const(g.rng.uniform(0.8, 1.2, cout).astype(np.float32), "s"), g.small((cout,)), g.small((cout,)),
          g.const(g.rng.uniform(0.8, 1.2, cout).astype(np.float32), "v")]
    y = g.op("BatchNormalization", [y, *bn], epsilon=1e-5)
    if act == "relu6":
        return g.op("Clip", [y, g.const(np.float32(0.0)), g.const(np.float32(6.0))])
    return g.op(act, [y]) if act else y


MNV2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenetv2(rng: np.random.Generator) -> onnx.ModelProto:
    """torchvision mobilenet_v2 (width 1.0), BatchNormalization kept unfolded, symbolic batch."""
    g = _G(rng)
    x, cin = _conv_bn(g, "input", 3, 32, 3, 2, act="relu6"), 32
    for t, c, n, s in MNV2:
        for i in range(n):
            y = _conv_bn(g, x, cin, cin * t, 1, act="relu6") if t != 1 else x
            y = _conv_bn(g, y, cin * t, cin * t, 3, s if i == 0 else 1, group=cin * t, act="relu6")
            y = _conv_bn(g, y, cin * t, c, 1)
            x, cin = (g.op("Add", [x, y]) if i > 0 and cin == c else y), c
    x = g.op("Flatten", [g.op("GlobalAveragePool", [_conv_bn(g, x, cin, 1280, 1, act="relu6")])], axis=1)
    g.op("Gemm", [x, g.he((1000, 1280), 1280), g.small((1000,))], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([_vi("input", ["batch", 3, 224, 224])], [_vi("logits", ["batch", 1000])])


def vit_tiny(rng: np.random.Generator, layers: int = 12, h: int = 192, nh: int = 3, mlp: int = 768) -> onnx.ModelProto:
    """timm vit_tiny_patch16_224 as torch.onnx exports it: flatten(2)/transpose patch tokens, class token
    expanded to the batch, fused qkv split by Reshape/Transpose/Gather, pre-LN blocks, Gemm head."""
    g, dh = _G(rng), h // nh
    x = g.op("Conv", ["input", g.he((h, 3, 16, 16), 3 * 256), g.small((h,))], kernel_shape=[16, 16], strides=[16, 16])
    flat = g.op("Concat", [g.op("Slice", [g.op("Shape", [x]), _i64(g, [0]), _i64(g, [2])]), _i64(g, [-1])], axis=0)
    x = g.op("Transpose", [g.op("Reshape", [x, flat])], perm=[0, 2, 1])
    (b,) = _dims(g, x, [0])
    cls = g.op("Expand", [g.small((1, 1, h), 0.02, "cls"), g.op("Concat", [b, _i64(g, [1]), _i64(g, [1])], axis=0)])
    x = g.op("Add", [g.op("Concat", [cls, x], axis=1), g.small((1, 197, h), 0.02, "pos_embed")])
    for _ in range(layers):
        bb, nn = _dims(g, x, [0, 1])
        qkv = _dense(g, _ln(g, x, h, 1e-6), h, 3 * h)
        qkv = g.op("Reshape", [qkv, g.op("Concat", [bb, nn, _i64(g, [3]), _i64(g, [nh]), _i64(g, [dh])], axis=0)])
        qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
        q, k, v = (g.op("Gather", [qkv, _i64(g, i)], axis=0) for i in range(3))
        o = _attention(g, q, g.op("Transpose", [k], perm=[0, 1, 3, 2]), v, dh ** -0.5)
        o = g.op("Reshape", [g.op("Transpose", [o], perm=[0, 2, 1, 3]), g.op("Concat", [bb, nn, _i64(g, [h])], axis=0)])
        x = g.op("Add", [x, _dense(g, o, h, h)])
        x = g.op("Add", [x, _dense(g, _gelu(g, _dense(g, _ln(g, x, h, 1e-6), h, mlp)), mlp, h)])
    x = g.op("Gather", [_ln(g, x, h, 1e-6), _i64(g, 0)], axis=1)
    g.op("Gemm", [x, g.const(rng.standard_normal((1000, h), dtype=np.float32) * np.float32(0.1), "head"),
                  g.small((1000,))], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([_vi("input", ["batch", 3, 224, 224])], [_vi("logits", ["batch", 1000])])


# PaddleOCR rec MobileNetV3 small (scale 0.5), trimmed: kernel, expand, out, SE, act, stride
OCR_BLOCKS = [(3, 16, 16, True, "Relu", (2, 1)), (3, 72, 24, False, "Relu", (2, 1)), (3, 88, 24, False, "Relu", 1),
              (5, 96, 40, True, "HardSwish", (2, 1)), (5, 240, 40, True, "HardSwish", 1),
              (5, 240, 48, False, "HardSwish", 1)]


def ocr_rec(rng: np.random.Generator, hidden: int = 96, classes: int = 6625) -> onnx.ModelProto:
    """A PP-OCR CRNN recognizer as paddle2onnx writes it: MobileNetV3 backbone with squeeze-excite,
    MaxPool collapsing the height, Squeeze/Transpose to a sequence, a 2-layer bidirectional LSTM over
    the symbolic width, a 6625-class MatMul+Add head and Softmax."""
    g = _G(rng)
    x, cin = _conv_bn(g, "x", 3, 16, 3, 2, act="HardSwish"), 16
    for k, exp, out, se, act, s in OCR_BLOCKS:
        y = _conv_bn(g, x, cin, exp, 1, act=act)
        y = _conv_bn(g, y, exp, exp, k, s, group=exp, act=act)
        if se:
            z = g.op("Relu", [g.op("Conv", [g.op("GlobalAveragePool", [y]), g.he((exp // 4, exp, 1, 1), exp),
                                            g.small((exp // 4,))])])
            z = g.op("Conv", [z, g.he((exp, exp // 4, 1, 1), exp // 4), g.small((exp,))])
            y = g.op("Mul", [y, g.op("HardSigmoid", [z], alpha=0.2, beta=0.5)])
        y = _conv_bn(g, y, exp, out, 1)
        x, cin = (g.op("Add", [x, y]) if s == 1 and cin == out else y), out
    x = _conv_bn(g, x, cin, 288, 1, act="HardSwish")
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])  # height 3 -> 1, width W/2 -> W/4
    x = g.op("Transpose", [g.op("Squeeze", [x, _i64(g, [2])])], perm=[2, 0, 1])  # [T, batch, C]
    c, sc = 288, 1.0 / math.sqrt(hidden)
    for _ in range(2):
        w = g.const(rng.uniform(-sc, sc, (2, 4 * hidden, c)).astype(np.float32), "W")
        r = g.const(rng.uniform(-sc, sc, (2, 4 * hidden, hidden)).astype(np.float32), "R")
        bias = g.const(rng.uniform(-sc, sc, (2, 8 * hidden)).astype(np.float32), "B")
        y, _h, _c = g.op("LSTM", [x, w, r, bias], n_out=3, hidden_size=hidden, direction="bidirectional")
        x, c = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), _i64(g, [0, 0, -1])]), 2 * hidden
    x = g.op("Transpose", [x], perm=[1, 0, 2])  # [batch, T, 2 * hidden]
    g.op("Softmax", [_dense(g, x, c, classes, 0.3)], axis=2)
    g.nodes[-1].output[0] = "softmax"
    return g.model([_vi("x", ["batch", 3, 48, "width"])], [_vi("softmax", ["batch", "T", classes])], opset=14)


BUILDERS = {"bert_small": bert_small, "mobilenetv2": mobilenetv2, "vit_tiny": vit_tiny, "ocr_rec": ocr_rec}


def make_feeds(name: str, seed: int = 1, batch: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if name == "bert_small":
        mask = np.ones((batch, 128), I64)
        mask[:, 112:] = 0
        return {"input_ids": rng.integers(0, 8192, (batch, 128)).astype(I64), "attention_mask": mask}
    if name == "ocr_rec":
        return {"x": rng.standard_normal((batch, 3, 48, 320), dtype=np.float32)}
    return {"input": rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)}


def model_path(name: str, cache: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """The file of model ``name``, built (seeded) into ``cache`` on first use (atomic write)."""
    root = Path(cache) if cache is not None else CACHE
    path = root / f"ct-{name}-v{GEN_VERSION}-s{seed}.onnx"
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(BUILDERS[name](np.random.default_rng(seed)).SerializeToString())
        os.replace(tmp, path)
    return path


def check(name: str, tol: float = 1e-3) -> str:
    """onnx.checker (full), onnxruntime, and onnxc against onnxruntime on seeded inputs; a one-line verdict."""
    import tempfile

    import onnxruntime as ort

    import onnxc
    from onnxc.bench import max_rel_error

    path = str(model_path(name))
    onnx.checker.check_model(path, full_check=True)
    feeds = make_feeds(name)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    shapes = {k: v.shape for k, v in want.items()}
    try:
        with tempfile.TemporaryDirectory(prefix="onnxc-ct-check-") as cache:
            got = onnxc.compile(path, threads=1, cache_dir=cache).run(feeds)
    except Exception as e:  # noqa: BLE001 - reported, not fixed here
        return f"{name}: ort ok {shapes}; onnxc FAILED: {type(e).__name__}: {str(e).strip()[:400]}"
    err = max_rel_error(got, want)
    return f"{name}: ort ok {shapes}; onnxc max rel err {err:.2e} {'ok' if err <= tol else 'MISMATCH'}"


if __name__ == "__main__":
    import sys

    for n in sys.argv[1:] or BUILDERS:
        print(check(n), flush=True)
