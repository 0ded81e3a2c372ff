"""What a fuzz worker process does with one model: compile it and, when it compiles, run it on random
inputs of the declared shapes. The outcome is a small dict (``check``).

    python -m tests.fuzz.child REPRO.onnx... [--seed S]  # replay saved reproducers in this process

``serve`` is the worker loop of tests/fuzz/pool.py: requests and replies are length-prefixed pickles
on the pipe handed over as fd 1 (the loop moves it aside and points fd 1 at stderr, so C code that
prints cannot corrupt the protocol).
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import signal
import struct
import sys
import traceback
import zlib

import numpy as np

SYMBOL_SIZES = (1, 2, 3)         # values given to symbolic dims
MAX_INPUT_BYTES = 16 << 20       # larger declared inputs are passed as a broadcast view of one element
C_COMPILE_FAILED = ("C compilation failed", "building the onnxc runtime library failed")


def random_input(info, rng: np.random.Generator):
    """A value for the model input ``info`` (onnxc TensorInfo): random data of its declared shape,
    symbolic dims bound to small sizes; [] / None for sequences / optionals."""
    from onnxc.ir import OptionalType, SequenceType

    if not info.is_tensor:
        return [] if isinstance(info.type, SequenceType) else None if isinstance(info.type, OptionalType) else {}
    sizes = {}
    shape = tuple(d if isinstance(d, int) else sizes.setdefault(d, int(rng.choice(SYMBOL_SIZES)))
                  for d in info.shape)
    dt = np.dtype(info.dtype)
    count = 1
    for d in shape:
        count *= max(d, 0)
    if count * max(dt.itemsize, 1) > MAX_INPUT_BYTES:
        return np.broadcast_to(np.ones((), dt) if dt.kind != "O" else np.array("a", object), shape)
    if dt.kind == "f" or dt.kind == "c":
        return (rng.standard_normal(shape) * 2).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 5, shape).astype(dt)
    if dt.kind in "OUS":
        return np.array(["ab", "", "x y"] * (count // 3 + 1), dtype=object)[:count].reshape(shape)
    return np.zeros(shape, dt)


def check(data: bytes, seed: int | None = None) -> dict:
    """Compile ``data`` with onnxc and run it. ``status``: "ok", "clean" (an OnnxcError subclass),
    "internal" (any other exception), "c-compile" (the generated C did not compile) or "harness" (the
    random inputs could not be made: not onnxc's fault); ``compiled``/``ran`` say how far it got."""
    import onnxc

    out = {"status": "ok", "compiled": False, "ran": False, "error": "", "message": "", "trace": ""}
    rng = np.random.default_rng(zlib.crc32(data) if seed is None else seed)
    stage = "compile"
    try:
        if os.environ.get("ONNXC_FUZZ_SELFTEST") == "1" and data[:1] == b"#":
            _selftest(data)
        # half the models are built for two threads: their parallel loops become pool tasks (parfor.py)
        cm = onnxc.compile(data, threads=1 + (zlib.crc32(data) & 1))
        out["compiled"] = True
        stage = "inputs"
        try:
            feeds = {i.name: random_input(i, rng) for i in cm.inputs}
        except (ValueError, TypeError, MemoryError, OverflowError) as e:
            out.update(status="harness", error=type(e).__name__, message=str(e)[:500])
            return out
        stage = "run"
        cm.run(feeds)
        out["ran"] = True
    except onnxc.OnnxcError as e:
        msg = str(e)
        bad_c = isinstance(e, onnxc.CompileError) and msg.startswith(C_COMPILE_FAILED)
        out.update(status="c-compile" if bad_c else "clean", error=type(e).__name__, message=msg[:2000],
                   trace=traceback.format_exc()[-6000:] if bad_c else "")
    except Exception as e:  # noqa: BLE001 - anything else is what the fuzz test looks for
        out.update(status="internal", error=type(e).__name__, message=str(e)[:2000],
                   trace=traceback.format_exc()[-6000:])
    out["stage"] = stage
    return out


def _selftest(data: bytes) -> None:
    """Misbehave on purpose (tests of the pool: tests/fuzz/test_pool.py)."""
    if data == b"#abort":
        os.abort()
    if data == b"#hang":
        import time

        time.sleep(3600)
    if data == b"#exit":
        os._exit(3)
    if data == b"#asan":  # as ASan does with log_path: a report file named for the process, then exit 1
        path = os.environ["ASAN_OPTIONS"].split("log_path=")[1].split(":")[0]
        with open(f"{path}.{os.getpid()}", "w") as f:
            f.write("ERROR: AddressSanitizer: heap-buffer-overflow (selftest)\n")
        os._exit(1)
    if data == b"#raise":
        raise KeyError("selftest")
    if data == b"#ircheck":
        from onnxc.ir.checker import IRCheckError

        raise IRCheckError("value 'v7' has no type")


def limit_resources() -> None:
    """No core files; address space capped (``ONNXC_FUZZ_MEMORY_MB``, default 4096; not under ASan,
    which reserves terabytes of shadow memory)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    mb = int(os.environ.get("ONNXC_FUZZ_MEMORY_MB", "4096"))
    if mb > 0 and "address" not in os.environ.get("ONNXC_SANITIZE", ""):
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))


def _read_exact(f, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def serve() -> None:
    """Answer requests ``(data, seed)`` with ``check``'s dict until stdin closes."""
    import faulthandler

    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the pool asks for the stacks of a hang
    limit_resources()
    import onnxc  # noqa: F401 - imported once, before the first request

    proto_in = sys.stdin.buffer
    proto_out.write(b"R")  # ready
    while True:
        head = _read_exact(proto_in, 8)
        if head is None:
            return
        data, seed = pickle.loads(_read_exact(proto_in, struct.unpack("<Q", head)[0]))
        reply = pickle.dumps(check(data, seed))
        proto_out.write(struct.pack("<Q", len(reply)) + reply)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.child")
    ap.add_argument("models", nargs="*", help="saved reproducers (.onnx) to compile and run here, in order")
    ap.add_argument("--seed", type=int, default=None, help="input seed (default: from the bytes)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve()
        return 0
    if not args.models:
        ap.error("give a model file")
    bad = 0
    for path in args.models:
        with open(path, "rb") as f:
            res = check(f.read(), args.seed)
        print(f"== {path}")
        for k, v in res.items():
            if v not in ("", None):
                print(f"{k}: {v}")
        bad += res["status"] not in ("ok", "clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
