"""A Llama-style decoder of about 1B parameters with random weights, written with onnx.helper in the layout
exporters use for large models: every weight in one external data file beside the .onnx (issue #18).

    python -m benchmarks.big_decoder OUT_DIR [--layers 16] [--hidden 2048] [--ffn 5632] [--vocab 32000]
    python -m benchmarks.big_decoder OUT_DIR --measure      # also: compile time, peak memory, one decoding step

One decoding step: ``input_ids [batch, seq]``, per layer ``past_key_i`` / ``past_value_i``
``[batch, heads, past, head_dim]``; outputs ``logits [batch, seq, vocab]`` and ``present_key_i`` /
``present_value_i``. Each layer: RMSNorm, Q/K/V projections, rotary embedding (opset 23), attention over
past + new keys with a causal mask (Attention, opset 23), output projection, residual, RMSNorm, SwiGLU MLP,
residual. Weights are written to the data file one tensor at a time, so making the model never holds them
all in memory. Nothing here is committed: the files are large.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def build(out: Path, layers: int, hidden: int, ffn: int, vocab: int, heads: int, seed: int = 0) -> Path:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper

    out.mkdir(parents=True, exist_ok=True)
    data_name = "decoder.onnx.data"
    rng = np.random.default_rng(seed)
    inits: list = []
    with open(out / data_name, "wb") as f:
        def weight(name: str, shape: tuple[int, ...], scale: float | None = None) -> str:
            a = rng.standard_normal(shape, dtype=np.float32)
            a *= scale if scale is not None else 1.0 / np.sqrt(shape[0])
            t = onnx.TensorProto(name=name, data_type=TP.FLOAT, dims=list(shape))
            t.data_location = TP.EXTERNAL
            off = f.tell()
            f.write(a.tobytes())
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(a.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            return name

        nodes, d = [], hidden // heads
        small = [helper.make_tensor("ones_h", TP.FLOAT, [hidden], np.ones(hidden, np.float32)),
                 helper.make_tensor("shape_bshd", TP.INT64, [4], [0, 0, heads, d]),
                 helper.make_tensor("shape_bsh", TP.INT64, [3], [0, 0, hidden])]
        cos, sin = _rope_cache(4096, d)
        small += [helper.make_tensor("cos", TP.FLOAT, cos.shape, cos.ravel()),
                  helper.make_tensor("sin", TP.FLOAT, sin.shape, sin.ravel())]
        nodes.append(helper.make_node("Gather", [weight("embed", (vocab, hidden), 0.02), "input_ids"], ["h0"]))
        nodes += _positions()
        ins = [helper.make_tensor_value_info("input_ids", TP.INT64, ["batch", "seq"])]
        outs = [helper.make_tensor_value_info("logits", TP.FLOAT, ["batch", "seq", vocab])]
        x = "h0"
        for i in range(layers):
            ln1 = weight(f"l{i}.ln1", (hidden,), 0.0)
            nodes.append(helper.make_node("Add", [ln1, "ones_h"], [f"l{i}.g1"]))
            nodes.append(helper.make_node("RMSNormalization", [x, f"l{i}.g1"], [f"l{i}.n1"], axis=-1))
            for p in "qkv":
                nodes.append(helper.make_node("MatMul", [f"l{i}.n1", weight(f"l{i}.w{p}", (hidden, hidden))],
                                              [f"l{i}.{p}"]))
                nodes.append(helper.make_node("Reshape", [f"l{i}.{p}", "shape_bshd"], [f"l{i}.{p}4"]))
                nodes.append(helper.make_node("Transpose", [f"l{i}.{p}4"], [f"l{i}.{p}t"], perm=[0, 2, 1, 3]))
            for p in "qk":
                nodes.append(helper.make_node("RotaryEmbedding", [f"l{i}.{p}t", "cos", "sin", "pos"],
                                              [f"l{i}.{p}r"]))
            nodes.append(helper.make_node(
                "Attention", [f"l{i}.qr", f"l{i}.kr", f"l{i}.vt", "", f"past_key_{i}", f"past_value_{i}"],
                [f"l{i}.a", f"present_key_{i}", f"present_value_{i}"], is_causal=1))
            nodes.append(helper.make_node("Transpose", [f"l{i}.a"], [f"l{i}.at"], perm=[0, 2, 1, 3]))
            nodes.append(helper.make_node("Reshape", [f"l{i}.at", "shape_bsh"], [f"l{i}.a3"]))
            nodes.append(helper.make_node("MatMul", [f"l{i}.a3", weight(f"l{i}.wo", (hidden, hidden))], [f"l{i}.o"]))
            nodes.append(helper.make_node("Add", [x, f"l{i}.o"], [f"l{i}.r1"]))
            ln2 = weight(f"l{i}.ln2", (hidden,), 0.0)
            nodes.append(helper.make_node("Add", [ln2, "ones_h"], [f"l{i}.g2"]))
            nodes.append(helper.make_node("RMSNormalization", [f"l{i}.r1", f"l{i}.g2"], [f"l{i}.n2"], axis=-1))
            nodes.append(helper.make_node("MatMul", [f"l{i}.n2", weight(f"l{i}.wg", (hidden, ffn))], [f"l{i}.g"]))
            nodes.append(helper.make_node("MatMul", [f"l{i}.n2", weight(f"l{i}.wu", (hidden, ffn))], [f"l{i}.u"]))
            nodes.append(helper.make_node("Sigmoid", [f"l{i}.g"], [f"l{i}.gs"]))
            nodes.append(helper.make_node("Mul", [f"l{i}.g", f"l{i}.gs"], [f"l{i}.silu"]))
            nodes.append(helper.make_node("Mul", [f"l{i}.silu", f"l{i}.u"], [f"l{i}.m"]))
            nodes.append(helper.make_node("MatMul", [f"l{i}.m", weight(f"l{i}.wd", (ffn, hidden))], [f"l{i}.d"]))
            nodes.append(helper.make_node("Add", [f"l{i}.r1", f"l{i}.d"], [f"l{i}.out"]))
            x = f"l{i}.out"
            for kv in ("key", "value"):
                ins.append(helper.make_tensor_value_info(f"past_{kv}_{i}", TP.FLOAT, ["batch", heads, "past", d]))
                outs.append(helper.make_tensor_value_info(f"present_{kv}_{i}", TP.FLOAT,
                                                          ["batch", heads, "total", d]))
        lnf = weight("lnf", (hidden,), 0.0)
        nodes.append(helper.make_node("Add", [lnf, "ones_h"], ["gf"]))
        nodes.append(helper.make_node("RMSNormalization", [x, "gf"], ["nf"], axis=-1))
        nodes.append(helper.make_node("MatMul", ["nf", weight("lm_head", (hidden, vocab))], ["logits"]))
    graph = helper.make_graph(nodes, "decoder", ins, outs, small + inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    path = out / "decoder.onnx"
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _rope_cache(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / (10000 ** (np.arange(0, d, 2, dtype=np.float64) / d))
    ang = np.outer(np.arange(n, dtype=np.float64), inv)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _positions() -> list:
    """pos [batch, seq] = past + arange(seq), from the shapes of past_key_0 and input_ids."""
    from onnx import helper

    return [helper.make_node("Shape", ["past_key_0"], ["past_len"], start=2, end=3),
            helper.make_node("Shape", ["input_ids"], ["seq_len"], start=1, end=2),
            helper.make_node("Add", ["past_len", "seq_len"], ["end"]),
            helper.make_node("Squeeze", ["past_len"], ["p0"]),
            helper.make_node("Squeeze", ["end"], ["p1"]),
            helper.make_node("Constant", [], ["step"], value_int=1),
            helper.make_node("Range", ["p0", "p1", "step"], ["pos1"]),
            helper.make_node("Unsqueeze", ["pos1", "zero_ax"], ["pos2"]),
            helper.make_node("Shape", ["input_ids"], ["b_len"], start=0, end=1),
            helper.make_node("Concat", ["b_len", "seq_len"], ["bs"], axis=0),
            helper.make_node("Expand", ["pos2", "bs"], ["pos"]),
            helper.make_node("Constant", [], ["zero_ax"], value_ints=[0])]


def measure(path: Path, batch: int = 1, past: int = 128) -> dict:
    """Compile in a child process (its peak RSS is the compile's), then run one decoding step in it."""
    code = f"""
import resource, time, numpy as np, onnxc, onnx
t = time.perf_counter()
cm = onnxc.compile({str(path)!r})
compile_s = time.perf_counter() - t
rss_compile = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
feeds = {{}}
for i in cm.inputs:
    if i.name == "input_ids":
        feeds[i.name] = np.array([[1]] * {batch}, dtype=np.int64)
    else:
        s = [d if isinstance(d, int) else {{"batch": {batch}, "past": {past}}}[str(d)] for d in i.shape]
        feeds[i.name] = np.zeros(s, np.float32)
cm.run(feeds)
t = time.perf_counter()
out = cm.run(feeds)
step_s = time.perf_counter() - t
print(compile_s, rss_compile, step_s, out["logits"].shape, out["present_key_0"].shape)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    compile_s, rss_kb, step_s, *shapes = r.stdout.split(maxsplit=3)
    weights = sum(f.stat().st_size for f in path.parent.iterdir() if f.name.endswith(".data"))
    return {"compile_s": float(compile_s), "peak_compile_mb": int(rss_kb) / 1024, "weights_mb": weights / 2**20,
            "peak_over_weights": int(rss_kb) * 1024 / weights, "step_ms": float(step_s) * 1e3, "shapes": shapes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.big_decoder", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--measure", action="store_true", help="compile it and run one decoding step; print figures")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    path = build(a.out, a.layers, a.hidden, a.ffn, a.vocab, a.heads)
    n = a.vocab * a.hidden * 2 + a.layers * (4 * a.hidden * a.hidden + 3 * a.hidden * a.ffn)
    print(f"wrote {path} ({n / 1e9:.2f}B parameters) in {time.perf_counter() - t:.1f} s; "
          f"this process peaked at {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if a.measure:
        for k, v in measure(path).items():
            print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
