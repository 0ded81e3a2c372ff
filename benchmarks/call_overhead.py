"""Python call overhead: a one-Add model on 1-element float32 tensors, onnxc vs onnxruntime.

Run: ``python -m benchmarks.call_overhead [--rounds 15] [--calls 20000]``. Prints the median time per
call of each engine over interleaved rounds (both single-threaded), and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

import onnxc


def one_add_model():
    g = h.make_graph([h.make_node("Add", ["a", "b"], ["c"])], "add",
                     [h.make_tensor_value_info("a", T.FLOAT, [1]), h.make_tensor_value_info("b", T.FLOAT, [1])],
                     [h.make_tensor_value_info("c", T.FLOAT, [1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def per_call_us(fn, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e6


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args(argv)
    m = one_add_model()
    model = onnxc.compile(m, threads=1)
    a, b = np.ones(1, np.float32), np.ones(1, np.float32)
    feeds = {"a": a, "b": b}
    engines = {"onnxc run(dict)": lambda: model.run(feeds), "onnxc call": lambda: model(a, b)}
    try:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        engines["onnxruntime run"] = lambda: sess.run(None, feeds)
    except ImportError:
        pass
    for fn in engines.values():
        per_call_us(fn, args.calls // 4)  # warm up
    times: dict[str, list[float]] = {k: [] for k in engines}
    for _ in range(args.rounds):
        for k, fn in engines.items():
            times[k].append(per_call_us(fn, args.calls))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:18s} {v:6.2f} us per call (median of {args.rounds} rounds of {args.calls})")
    if "onnxruntime run" in med:
        print(f"ratio onnxc call / onnxruntime: {med['onnxc call'] / med['onnxruntime run']:.2f}")
    return med


if __name__ == "__main__":
    main()
