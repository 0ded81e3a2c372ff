"""Helpers for op tests: build a one-node ONNX model, compile it with onnxc, compare with a reference."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        m = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return set()
    return set(m.group(1).split()) if m else set()


def node_model(op_type: str, inputs: dict[str, np.ndarray], n_outputs: int = 1, opset: int = 21,
               domain: str = "", input_shapes: dict[str, list] | None = None, const_inputs: tuple = (),
               **attrs) -> onnx.ModelProto:
    """A model with one node. Inputs named in ``const_inputs`` become initializers.

    ``input_shapes`` overrides the declared shape of graph inputs (use strings for symbolic dims).
    An input given as None is an omitted optional input.
    """
    names = list(inputs)
    node = helper.make_node(op_type, [n if inputs[n] is not None else "" for n in names],
                            [f"y{i}" for i in range(n_outputs)], domain=domain or None, **attrs)
    g_inputs, inits = [], []
    for n in names:
        a = inputs[n]
        if a is None:
            continue
        if n in const_inputs:
            inits.append(onnx.numpy_helper.from_array(a, n))
            continue
        shape = (input_shapes or {}).get(n, list(a.shape))
        g_inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), shape))
    outs = [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.UNDEFINED, None) for i in range(n_outputs)]
    graph = helper.make_graph([node], "t", g_inputs, outs, initializer=inits)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets)


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ReferenceEvaluator(model).run(None, feeds)


def check_node(op_type: str, inputs: dict[str, np.ndarray], n_outputs: int = 1, opset: int = 21,
               rtol: float = 1e-5, atol: float = 1e-6, const_inputs: tuple = (),
               input_shapes: dict | None = None, expected: list[np.ndarray] | None = None, **attrs):
    """Compile a one-node model, run it, and compare every output with onnx.reference (or ``expected``)."""
    model = node_model(op_type, inputs, n_outputs, opset, const_inputs=const_inputs,
                       input_shapes=input_shapes, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in const_inputs}
    want = expected if expected is not None else reference(model, feeds)
    got = onnxc.compile(model).run(feeds)
    for i, w in enumerate(want):
        g = got[f"y{i}"]
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def random_array(rng: np.random.Generator, shape, dt=np.float32) -> np.ndarray:
    """Seeded test data of any numeric dtype or bool: normals for floats, 0..99 for ints."""
    if dt is bool:
        return rng.random(shape) > 0.5
    if np.dtype(dt).kind in "iu":
        return rng.integers(0, 100, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def i64(*v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def check_batches_two_threads(model: onnx.ModelProto, ref: onnx.ModelProto, feeds: dict[str, np.ndarray],
                              batches=(4, 3), marker: str | None = None) -> None:
    """Compile `model` (batch dim symbolic) for 1 and 2 threads and run the first n images of `feeds` for each n in
    `batches` (4: whole images per thread, runtime_c/onnxc_pool.h onnxc_by_image; 3: images shared by the threads):
    output "y" against `ref` (onnx.reference) and, bit for bit, against 1 thread. `marker`: a string the 2-thread
    C must hold (the path under test)."""
    one, two = onnxc.compile(model, threads=1), onnxc.compile(model, threads=2)
    assert "onnxc_by_image(" in two.c_source
    assert marker is None or marker in two.c_source, f"expected {marker!r} in the generated C"
    for n in batches:
        part = {k: v[:n] for k, v in feeds.items()}
        want = ReferenceEvaluator(ref).run(None, part)[0]
        got = two.run(part)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got, one.run(part)["y"])
