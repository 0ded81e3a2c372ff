"""The benchmark model set, built locally with no download into a cache folder (``benchmarks/.models``).

- The nine "light" models shipped in the onnx package (``onnx/backend/test/data/light``): real
  ImageNet architectures whose weights are ``ConstantOfShape`` fills. Every weight is replaced by a
  seeded random initializer of the same shape, chosen by what consumes it (He-normal for Conv/Gemm
  weights, near-one scales and near-zero shifts for BatchNormalization and scale layers), so the
  outputs are meaningful and the constant-fill shortcut cannot flatter either engine.
- Four models written here with the onnx helper API: a MobileNet-style depthwise-separable CNN, a
  BERT-style encoder with symbolic batch/sequence dims, an MLP at batch 1 and a small LSTM.

``model_path(name)`` builds a model on first use (atomic write) and returns its file; ``make_feeds``
gives seeded inputs suited to each model (token ids inside the vocabulary, a 0/1 attention mask).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GEN_VERSION = 1  # bump when a generator changes: cached files carry it in their name
CACHE = Path(__file__).resolve().parent / ".models"
F32 = TensorProto.FLOAT


@dataclass(frozen=True)
class BenchModel:
    """One benchmark model: how to build it and how to make its inputs."""

    name: str
    description: str
    build: Callable[[np.random.Generator], onnx.ModelProto]
    feeds: Callable[[np.random.Generator], dict[str, np.ndarray]]


# ------------------------------------------------------------------------------ light models

LIGHT = {"resnet50": "light_resnet50", "densenet121": "light_densenet121", "inception_v1": "light_inception_v1",
         "inception_v2": "light_inception_v2", "vgg19": "light_vgg19", "alexnet": "light_bvlc_alexnet",
         "zfnet512": "light_zfnet512", "squeezenet": "light_squeezenet", "shufflenet": "light_shufflenet"}
_PASS_THROUGH = {"Unsqueeze", "Reshape", "Squeeze", "Flatten", "Transpose", "Identity"}


def light_dir() -> Path:
    return Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"


def _role(name: str, consumers: dict[str, list[tuple[onnx.NodeProto, int]]]) -> tuple[str, onnx.NodeProto | None]:
    """What a parameter is for, from the first consumer that is not a reshaping op."""
    seen = 0
    while seen < 8:
        uses = consumers.get(name, [])
        if not uses:
            return "unused", None
        node, idx = uses[0]
        if node.op_type in _PASS_THROUGH and idx == 0:
            name, seen = node.output[0], seen + 1
            continue
        if node.op_type in ("Conv", "Gemm", "MatMul"):
            return ("weight" if idx == 1 else "bias"), node
        if node.op_type == "BatchNormalization":
            return ("scale", "shift", "shift", "variance")[idx - 1] if idx >= 1 else "other", node
        if node.op_type == "Mul":
            return "scale", node
        if node.op_type in ("Add", "Sum", "Sub"):
            return "shift", node
        return "other", node
    return "other", None


def _param(shape: list[int], role: str, node: onnx.NodeProto | None, rng: np.random.Generator) -> np.ndarray:
    shape = [int(d) for d in shape]
    n = int(np.prod(shape)) if shape else 1
    if role == "weight":
        if node is not None and node.op_type == "Conv":
            fan_in = n // max(shape[0], 1)
        else:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute) if node is not None else False
            fan_in = n // max(shape[0], 1) if trans_b else shape[0]
        std = math.sqrt(2.0 / max(fan_in, 1))
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)
    if role == "scale":
        return rng.uniform(0.8, 1.2, shape).astype(np.float32)
    if role == "variance":
        return rng.uniform(0.8, 1.2, shape).astype(np.float32)
    if role in ("bias", "shift"):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)).astype(np.float32)
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)).astype(np.float32)


def randomize_light(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    """The light model with its ConstantOfShape fills and float initializers replaced by seeded random
    initializers of the same shapes. IR version 4 is set so the initializers stop being graph inputs
    (in IR 3 they are overridable inputs, which keeps onnxruntime from folding them)."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in g.node:
        for k, x in enumerate(node.input):
            consumers.setdefault(x, []).append((node, k))
    params: dict[str, np.ndarray] = {}
    keep_nodes = []
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]]).tolist()
            role, user = _role(node.output[0], consumers)
            params[node.output[0]] = _param(shape, role, user, rng)
            continue
        keep_nodes.append(node)
    for t in g.initializer:
        if t.data_type == F32 and t.name not in params:
            role, user = _role(t.name, consumers)
            if role != "unused":
                params[t.name] = _param(list(t.dims), role, user, rng)
    used = {x for node in keep_nodes for x in node.input}
    new_inits = [numpy_helper.from_array(a, name) for name, a in params.items() if name in used]
    new_inits += [t for t in g.initializer if t.name not in params and t.name in used]
    init_names = {t.name for t in new_inits} | set(params) | set(inits)
    inputs = [i for i in g.input if i.name not in init_names]
    graph = helper.make_graph(keep_nodes, g.name, inputs, list(g.output), new_inits)
    out = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="onnxc-benchmarks")
    out.ir_version = 4
    onnx.checker.check_model(out)
    return out


_TO_CLASSIFIER = {"Relu", "GlobalAveragePool", "AveragePool", "Reshape", "Flatten", "Dropout", "Identity"}


def calibrate_logits(model: onnx.ModelProto, feeds: dict[str, np.ndarray], target_std: float = 2.5) -> None:
    """Rescale the classifier (the Conv/Gemm feeding the final Softmax) so the logits have standard
    deviation ``target_std`` on ``feeds``: random deep nets otherwise end in a one-hot or a uniform
    softmax, and a saturated output hides numerical differences. Runs the model once with onnxruntime."""
    import onnxruntime as ort

    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    soft = [n for n in g.node if n.op_type == "Softmax"]
    if not soft:
        return
    logits = soft[-1].input[0]
    node = producer.get(logits)
    while node is not None and node.op_type in _TO_CLASSIFIER:
        node = producer.get(node.input[0])
    if node is None or node.op_type not in ("Conv", "Gemm"):
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(helper.make_tensor_value_info(logits, F32, None))
    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    z = sess.run([logits], feeds)[0]
    std = float(np.std(z))
    if not np.isfinite(std) or std == 0.0:
        return
    c = np.float32(target_std / std)
    params = set(node.input[1:])
    for i, t in enumerate(g.initializer):
        if t.name in params:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * c, t.name))


def _light(file: str, input_name: str) -> Callable[[np.random.Generator], onnx.ModelProto]:
    def build(rng: np.random.Generator) -> onnx.ModelProto:
        m = randomize_light(onnx.load(str(light_dir() / f"{file}.onnx")), rng)
        calibrate_logits(m, _image_feeds(input_name)(np.random.default_rng(1234)))
        return m

    return build


def _image_feeds(name: str) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {name: rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}


# --------------------------------------------------------------------------- helper-built models

class _G:
    """A small graph builder: fresh names, seeded initializers, node list."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.nodes, self.inits, self.k = rng, [], [], 0

    def name(self, hint: str) -> str:
        self.k += 1
        return f"{hint}_{self.k}"

    def const(self, a: np.ndarray, hint: str = "c") -> str:
        n = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(a), n))
        return n

    def he(self, shape: tuple[int, ...], fan_in: int, hint: str = "w") -> str:
        a = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))
        return self.const(a.astype(np.float32), hint)

    def small(self, shape: tuple[int, ...], scale: float = 0.05, hint: str = "b") -> str:
        return self.const((self.rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)), hint)

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs: list, outputs: list, opset: int = 17) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "bench", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxc-benchmarks")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def mobilenet(rng: np.random.Generator) -> onnx.ModelProto:
    """A MobileNet-v1-style CNN: a strided 3x3 stem and 10 depthwise-separable blocks, each conv
    followed by BatchNormalization and ReLU6 (Clip 0..6), global pooling and a 1000-way classifier."""
    g = _G(rng)
    lo, hi = g.const(np.float32(0.0), "zero"), g.const(np.float32(6.0), "six")

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, group: int = 1) -> str:
        w = g.he((cout, cin // group, k, k), cin // group * k * k)
        y = g.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
        bn = [g.const(rng.uniform(0.8, 1.2, cout).astype(np.float32), "s"), g.small((cout,)),
              g.small((cout,)), g.const(rng.uniform(0.8, 1.2, cout).astype(np.float32), "v")]
        y = g.op("BatchNormalization", [y, *bn], epsilon=1e-5)
        return g.op("Clip", [y, lo, hi])

    x = conv_bn("input", 3, 32, 3, 2)
    cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2),
           (512, 512, 1), (512, 512, 1), (512, 1024, 2), (1024, 1024, 1)]
    for cin, cout, s in cfg:
        x = conv_bn(x, cin, cin, 3, s, group=cin)
        x = conv_bn(x, cin, cout, 1, 1)
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    g.op("Gemm", [x, g.he((1000, 1024), 1024), g.small((1000,))], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([helper.make_tensor_value_info("input", F32, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("logits", F32, [1, 1000])])


BERT_VOCAB, BERT_HIDDEN, BERT_HEADS, BERT_LAYERS, BERT_FF, BERT_MAXPOS = 8192, 768, 12, 4, 3072, 512


def bert(rng: np.random.Generator) -> onnx.ModelProto:
    """A BERT-style encoder as exporters write it: token + position embeddings (positions from
    Shape/Gather/Range), an additive attention mask from a 0/1 mask, 4 layers of 12-head attention
    (MatMul-Softmax-MatMul), LayerNormalization and an Erf-form GELU; symbolic batch and seq dims."""
    g = _G(rng)
    h, nh, dh = BERT_HIDDEN, BERT_HEADS, BERT_HIDDEN // BERT_HEADS
    i64 = np.int64

    def ln(x: str) -> str:
        return g.op("LayerNormalization", [x, g.const(np.ones(h, np.float32), "gamma"),
                                           g.const(np.zeros(h, np.float32), "beta")], axis=-1, epsilon=1e-12)

    def dense(x: str, cin: int, cout: int) -> str:
        y = g.op("MatMul", [x, g.const((rng.standard_normal((cin, cout), dtype=np.float32) * 0.02), "w")])
        return g.op("Add", [y, g.small((cout,), 0.02)])

    tok = g.op("Gather", [g.const((rng.standard_normal((BERT_VOCAB, h), dtype=np.float32) * 0.5), "word_emb"),
                          "input_ids"], axis=0)
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(np.array(1, i64), "one")], axis=0)
    pos_ids = g.op("Range", [g.const(np.array(0, i64), "zero"), seq, g.const(np.array(1, i64), "step")])
    pos = g.op("Gather", [g.const((rng.standard_normal((BERT_MAXPOS, h), dtype=np.float32) * 0.5), "pos_emb"),
                          pos_ids], axis=0)
    x = ln(g.op("Add", [tok, pos]))
    m = g.op("Cast", ["attention_mask"], to=F32)
    m = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0)), m]), g.const(np.float32(-10000.0))])
    mask = g.op("Unsqueeze", [m, g.const(np.array([1, 2], i64), "axes")])  # [batch, 1, 1, seq]
    split_shape = g.const(np.array([0, 0, nh, dh], i64), "split_shape")
    merge_shape = g.const(np.array([0, 0, h], i64), "merge_shape")
    for _ in range(BERT_LAYERS):
        q = g.op("Transpose", [g.op("Reshape", [dense(x, h, h), split_shape])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [dense(x, h, h), split_shape])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [dense(x, h, h), split_shape])], perm=[0, 2, 1, 3])
        s = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(math.sqrt(dh)))])
        p = g.op("Softmax", [g.op("Add", [s, mask])], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape])
        x = ln(g.op("Add", [dense(ctx, h, h), x]))
        f = dense(x, h, BERT_FF)
        erf = g.op("Erf", [g.op("Div", [f, g.const(np.float32(math.sqrt(2.0)))])])
        f = g.op("Mul", [g.op("Mul", [f, g.op("Add", [erf, g.const(np.float32(1.0))])]), g.const(np.float32(0.5))])
        x = ln(g.op("Add", [dense(f, BERT_FF, h), x]))
    g.nodes[-1].output[0] = "last_hidden_state"
    return g.model([helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
                    helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
                   [helper.make_tensor_value_info("last_hidden_state", F32, ["batch", "seq", h])])


def bert_feeds(rng: np.random.Generator, batch: int = 1, seq: int = 128) -> dict[str, np.ndarray]:
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - seq // 8:] = 0  # padded tail
    return {"input_ids": rng.integers(0, BERT_VOCAB, (batch, seq)).astype(np.int64), "attention_mask": mask}


def mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """784-1024-1024-10 Gemm+Relu at batch 1: latency-bound matrix-vector products."""
    g = _G(rng)
    x, sizes = "input", [784, 1024, 1024, 10]
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        x = g.op("Gemm", [x, g.he((b, a), a), g.small((b,))], transB=1)
        if i < len(sizes) - 2:
            x = g.op("Relu", [x])
    g.nodes[-1].output[0] = "logits"
    return g.model([helper.make_tensor_value_info("input", F32, [1, 784])],
                   [helper.make_tensor_value_info("logits", F32, [1, 10])])


LSTM_SEQ, LSTM_IN, LSTM_HIDDEN = 32, 64, 128


def lstm(rng: np.random.Generator) -> onnx.ModelProto:
    """One forward LSTM layer (seq 32, batch 1, input 64, hidden 128) and a Gemm on the last state."""
    g = _G(rng)
    hs, n_in = LSTM_HIDDEN, LSTM_IN
    scale = 1.0 / math.sqrt(hs)
    w = g.const(rng.uniform(-scale, scale, (1, 4 * hs, n_in)).astype(np.float32), "W")
    r = g.const(rng.uniform(-scale, scale, (1, 4 * hs, hs)).astype(np.float32), "R")
    b = g.const(rng.uniform(-scale, scale, (1, 8 * hs)).astype(np.float32), "B")
    _y, y_h, _c = g.op("LSTM", ["input", w, r, b], n_out=3, hidden_size=hs)
    last = g.op("Squeeze", [y_h, g.const(np.array([0], np.int64), "axes")])
    g.op("Gemm", [last, g.he((10, hs), hs), g.small((10,))], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([helper.make_tensor_value_info("input", F32, [LSTM_SEQ, 1, LSTM_IN])],
                   [helper.make_tensor_value_info("logits", F32, [1, 10])])


def _normal(name: str, shape: tuple[int, ...]) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {name: rng.standard_normal(shape, dtype=np.float32)}


_LIGHT_INPUT = {"resnet50": "gpu_0/data_0", "shufflenet": "gpu_0/data_0", "zfnet512": "gpu_0/data_0"}

MODELS: dict[str, BenchModel] = {
    **{name: BenchModel(name, f"{file}.onnx from the onnx package, random He-initialized weights",
                        _light(file, _LIGHT_INPUT.get(name, "data_0")), _image_feeds(_LIGHT_INPUT.get(name, "data_0")))
       for name, file in LIGHT.items()},
    "mobilenet": BenchModel("mobilenet", "MobileNet-style depthwise-separable CNN, 224x224, BN + ReLU6",
                            mobilenet, _normal("input", (1, 3, 224, 224))),
    "bert": BenchModel("bert", "BERT-style encoder: 4 layers, hidden 768, 12 heads, seq 128", bert, bert_feeds),
    "mlp": BenchModel("mlp", "MLP 784-1024-1024-10, batch 1", mlp, _normal("input", (1, 784))),
    "lstm": BenchModel("lstm", "LSTM seq 32, input 64, hidden 128 + Gemm", lstm,
                       _normal("input", (LSTM_SEQ, 1, LSTM_IN))),
}


def model_path(name: str, cache: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """The file of benchmark model ``name``, built (seeded) into ``cache`` on first use."""
    if name not in MODELS:
        raise KeyError(f"unknown benchmark model {name!r}; known: {', '.join(MODELS)}")
    root = Path(cache) if cache is not None else CACHE
    path = root / f"{name}-v{GEN_VERSION}-s{seed}.onnx"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    proto = MODELS[name].build(np.random.default_rng(seed))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, path)
    return path


def make_feeds(name: str, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded inputs for benchmark model ``name``."""
    return MODELS[name].feeds(np.random.default_rng(seed))


if __name__ == "__main__":
    import sys

    for n in sys.argv[1:] or MODELS:
        print(n, model_path(n))
