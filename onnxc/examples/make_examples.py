"""Regenerate the bundled example model (needs the `onnx` test extra): python -m onnxc.examples.make_examples

small_cnn.onnx: a digit-classifier-shaped CNN with a symbolic batch dimension "N" and seeded random
weights: Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def small_cnn():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])],
        initializer=[w("w1", 8, 1, 3, 3), w("b1", 8), w("w2", 16, 8, 3, 3), w("b2", 16), w("w3", 10, 16),
                     w("b3", 10)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxc-example")
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    import onnx

    out = Path(__file__).with_name("small_cnn.onnx")
    onnx.save(small_cnn(), out)
    print(f"wrote {out}")
