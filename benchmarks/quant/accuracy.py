"""How far one engine's outputs of a quantized model are from another's, in quantization steps.

A quantized model's outputs may legitimately differ between two correct engines by a rounding step
(a value that lands on .5 before requantizing, a float sum in another order before a
DynamicQuantizeLinear), and a step early in a deep network can grow by the end. So deviations are
measured in units of the output's own quantization step:

- an 8-bit (or other integer) output: the step is 1, the deviation is the largest integer difference;
- a float output made by a DequantizeLinear whose scale is an initializer: the step is that scale
  (the smallest one, when per channel);
- any other float output: the step an 8-bit quantization of the reference output's range would have,
  (max - min) / 255.

``deviation`` also gives the max abs and max rel error (relative to the largest |reference|, as
``onnxc.bench.max_rel_error``). ``top1_agreement`` compares the arg-max classes of two runs.
"""

from __future__ import annotations

import os

import numpy as np

INF = float("inf")


def output_steps(model: str | os.PathLike) -> dict[str, float | None]:
    """Per graph output: the scale of the DequantizeLinear that makes it (smallest, per channel), 1.0
    for an integer output, None when neither (the step then comes from the reference's range)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(model), load_external_data=False)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    steps: dict[str, float | None] = {}
    for out in g.output:
        elem = out.type.tensor_type.elem_type
        if elem in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16,
                    onnx.TensorProto.UINT16, onnx.TensorProto.INT32):
            steps[out.name] = 1.0
            continue
        n = producer.get(out.name)
        scale = None
        if n is not None and n.op_type == "DequantizeLinear" and len(n.input) > 1 and n.input[1] in inits:
            s = numpy_helper.to_array(inits[n.input[1]]).astype(np.float64)
            scale = float(np.min(np.abs(s))) if s.size and np.all(s != 0) else None
        steps[out.name] = scale
    return steps


def _step(want: np.ndarray, given: float | None) -> float | None:
    if given is not None:
        return given
    if want.dtype.kind in "iub":
        return 1.0
    finite = want[np.isfinite(want)]
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    return span / 255.0 if span > 0 else None


def deviation(got: dict[str, np.ndarray], want: dict[str, np.ndarray],
              steps: dict[str, float | None] | None = None) -> dict[str, float]:
    """The worst output's ``steps`` (max |got - want| / its step), ``max_abs`` and ``max_rel``;
    inf everywhere when an output is missing, of another shape, or NaN where the other is not."""
    worst = {"steps": 0.0, "max_abs": 0.0, "max_rel": 0.0}
    bad = {"steps": INF, "max_abs": INF, "max_rel": INF}
    for name, w in want.items():
        a = got.get(name)
        if a is None or np.shape(a) != np.shape(w):
            return bad
        a64, w64 = np.asarray(a, np.float64), np.asarray(w, np.float64)
        if w64.size == 0:
            continue
        if not np.array_equal(np.isnan(a64), np.isnan(w64)):
            return bad
        ok = ~np.isnan(w64)
        if not ok.any():
            continue
        diff = float(np.max(np.abs(a64[ok] - w64[ok])))
        scale = float(np.max(np.abs(w64[ok])))
        step = _step(np.asarray(w)[ok], (steps or {}).get(name))
        n_steps = diff / step if step else (0.0 if diff == 0 else INF)
        worst = {"steps": max(worst["steps"], n_steps), "max_abs": max(worst["max_abs"], diff),
                 "max_rel": max(worst["max_rel"], diff / scale if scale > 0 else diff)}
    return worst


def top1_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """The fraction of rows of two [N, classes] logit arrays whose arg-max class is the same."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim < 2:
        raise ValueError(f"top-1 agreement needs two [N, classes] arrays of one shape, got {a.shape} and {b.shape}")
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
