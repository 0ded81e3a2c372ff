"""Python call overhead: a one-Add model on 1-element float32 tensors, onnxc vs onnxruntime.

Run: ``python -m benchmarks.call_overhead [--rounds 15] [--calls 20000] [--breakdown]``. Prints the median
time per call of each engine over interleaved rounds (both single-threaded), and the ratio; with
``--breakdown``, also what the pieces of onnxc's fast path (onnxc/fastpath.py) cost alone.
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


def breakdown(model, a: np.ndarray, calls: int, rounds: int) -> dict[str, float]:
    """Median ns per call of each piece of the fast path on its own, minus an empty call's cost."""
    fast = model._fast
    fast.call((a, a))
    args = fast._tls.b[0]
    ffi = fast.ffi
    fb, ca = ffi._backend.from_buffer, ffi.typeof("char[]")
    desc = fast._tls.b[4]
    shape, dt = a.shape, a.dtype
    nffi = model._native.ffi  # the same call through the six-argument run_into, descriptors made once
    six = (nffi.new("onnxc_tensor[]", 2), nffi.new("onnxc_tensor[]", 1), nffi.new("char[]", 1024))
    keep = [np.empty(shape, dt), nffi.from_buffer(a), nffi.from_buffer(a)]
    for t, p in ((six[0][0], keep[1]), (six[0][1], keep[2]), (six[1][0], nffi.from_buffer(keep[0]))):
        keep.append(p)
        t.data, t.rank = p, a.ndim
        for k, d in enumerate(shape):
            t.dims[k] = d
    pieces = {
        "empty call (subtracted)": lambda: None,
        "C run through cffi, 1 pointer": lambda: fast._run_args(args),
        "C run through cffi, 6 arguments": lambda: model._native.run_into(*six),
        "from_buffer + descriptor store": lambda: setattr(desc, "data", fb(ca, a, False)),
        "np.empty of the output": lambda: np.empty(shape, dt),
        "checks of one input": lambda: type(a) is not np.ndarray or a.dtype is not dt or not a.flags.c_contiguous
        or a.shape != shape,
        "fast path call (2 in, 1 out)": lambda: fast.call((a, a)),
        "model(a, b)": lambda: model(a, a),
        "model.run(dict)": lambda: model.run({"a": a, "b": a}),
    }
    for fn in pieces.values():
        per_call_us(fn, calls // 4)
    times: dict[str, list[float]] = {k: [] for k in pieces}
    for _ in range(rounds):
        for k, fn in pieces.items():
            times[k].append(per_call_us(fn, calls) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.pop("empty call (subtracted)")
    return {k: v - base for k, v in med.items()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--breakdown", action="store_true", help="also time the pieces of the fast path")
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
    if args.breakdown:
        for k, v in breakdown(model, a, args.calls, args.rounds).items():
            print(f"  {k:34s} {v:6.0f} ns")
    return med


if __name__ == "__main__":
    main()
