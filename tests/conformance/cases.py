"""The conformance cases: discovery (cheap, no compiling), inputs, references, comparison, time bound.

Node cases come from ``onnx.backend.test.case.node.collect_testcases`` (models and data in memory).
Model cases come from the onnx package's ``backend/test/data``: ``light/*.onnx`` (weights made by
ConstantOfShape, no stored data: compared with onnxruntime on seeded random inputs) and the
``pytorch-converted``, ``pytorch-operator`` and ``simple`` directories (``model.onnx`` plus
``test_data_set_*/{input,output}_*.pb``).
"""

from __future__ import annotations

import atexit
import faulthandler
import functools
import json
import os
import re
import signal
import tempfile
import threading
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

DATA_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data"
MODEL_SUITES = ("light", "pytorch-converted", "pytorch-operator", "simple")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7        # the ONNX backend runner's defaults
LIGHT_RTOL, LIGHT_ATOL = 1e-3, 1e-5            # onnxc vs onnxruntime on the light models

# Per-case limits: a Python-level timeout first (the case fails), then a hard kill of the process
# for hangs inside native code (xdist reports the crash and replaces the worker).
TIMEOUT = float(os.environ.get("ONNXC_CONFORMANCE_TIMEOUT", "300"))
HARD_GRACE = 60.0
# Thread count of compiled models: 1 by default so `-n 2` workers do not oversubscribe the cores.
THREADS = int(os.environ.get("ONNXC_CONFORMANCE_THREADS", "1")) or None


class CaseTimeout(AssertionError):
    """A case exceeded the per-case time limit."""


@dataclass(frozen=True)
class ModelCase:
    name: str
    suite: str          # light | pytorch-converted | pytorch-operator | simple
    path: Path          # the .onnx file (light) or the case directory
    rtol: float
    atol: float


# ----------------------------------------------------------------------------------------- discovery

@functools.lru_cache(maxsize=1)
def node_cases() -> dict:
    """name -> onnx TestCase of every node case (importing the case modules takes a few seconds)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None)}


@functools.lru_cache(maxsize=1)
def model_cases() -> dict[str, ModelCase]:
    """name -> ModelCase of every model case; lists directories only."""
    out: dict[str, ModelCase] = {}
    for suite in MODEL_SUITES:
        root = DATA_DIR / suite
        if suite == "light":
            for f in sorted(root.glob("*.onnx")):
                out[f.stem] = ModelCase(f.stem, suite, f, LIGHT_RTOL, LIGHT_ATOL)
            continue
        for d in sorted(p for p in root.iterdir() if (p / "model.onnx").exists()):
            rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
            if (d / "data.json").exists():
                meta = json.loads((d / "data.json").read_text())
                rtol, atol = meta.get("rtol", rtol), meta.get("atol", atol)
            out[d.name] = ModelCase(d.name, suite, d, rtol, atol)
    return out


# ------------------------------------------------------------------------------------------- values

def runtime_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs a caller feeds: those that are not initializers."""
    inits = {t.name for t in model.graph.initializer} | {t.values.name for t in model.graph.sparse_initializer}
    return [i for i in model.graph.input if i.name not in inits]


def normalize(x):
    """Data-set values as numpy arrays, lists (sequences), dicts (maps) or None (empty optionals)."""
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, (list, tuple)):
        return [normalize(v) for v in x]
    if x is None or isinstance(x, (dict, np.ndarray)):
        return x
    return np.asarray(x)


def read_pb(path: Path, type_proto: onnx.TypeProto | None):
    """Decode a test-data file as the value kind the model declares for it."""
    data = path.read_bytes()
    which = type_proto.WhichOneof("value") if type_proto is not None else None
    if which == "sequence_type":
        msg = onnx.SequenceProto()
        msg.ParseFromString(data)
        return numpy_helper.to_list(msg)
    if which == "optional_type":
        msg = onnx.OptionalProto()
        msg.ParseFromString(data)
        return numpy_helper.to_optional(msg)
    if which == "map_type":
        msg = onnx.MapProto()
        msg.ParseFromString(data)
        return numpy_helper.to_dict(msg)
    return numpy_helper.to_array(onnx.load_tensor_from_string(data))


def _numbered(d: Path, prefix: str) -> list[Path]:
    files = [p for p in d.glob(f"{prefix}_*.pb") if re.fullmatch(rf"{prefix}_\d+\.pb", p.name)]
    return sorted(files, key=lambda p: int(p.stem.split("_")[-1]))


def data_sets(case: ModelCase, model: onnx.ModelProto) -> list[tuple[list, list]]:
    """(inputs, expected outputs) of every ``test_data_set_*`` directory of a model case."""
    ins, outs = runtime_inputs(model), list(model.graph.output)
    sets = []
    for d in sorted(case.path.glob("test_data_set_*"), key=lambda p: int(p.name.rsplit("_", 1)[-1])):
        xs = [read_pb(p, ins[i].type if i < len(ins) else None) for i, p in enumerate(_numbered(d, "input"))]
        ys = [read_pb(p, outs[i].type if i < len(outs) else None) for i, p in enumerate(_numbered(d, "output"))]
        sets.append((xs, ys))
    return sets


def random_feeds(model: onnx.ModelProto, seed_text: str) -> dict[str, np.ndarray]:
    """Seeded random data for every runtime input (symbolic dims become 1)."""
    rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
    feeds = {}
    for vi in runtime_inputs(model):
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype.kind == "f":
            a = rng.random(shape).astype(dtype)
        elif dtype.kind in "iu":
            a = rng.integers(0, 10, shape).astype(dtype)
        elif dtype.kind == "b":
            a = rng.random(shape) < 0.5
        else:
            raise NotImplementedError(f"random data of element type {dtype} for input {vi.name!r}")
        feeds[vi.name] = a
    return feeds


def expose_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """The light models' weights are all one constant, so every class gets the same logit and the
    final Softmax outputs exactly 1/1000 whatever the network computed. Also output each final
    Softmax's input, which does depend on every layer (padding, strides, pooling)."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    extra = [producer[o.name].input[0] for o in g.output
             if o.name in producer and producer[o.name].op_type == "Softmax"]
    if not extra:
        return model
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi for vi in inferred.graph.value_info}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for name in extra:
        vi = types.get(name) or onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        out.graph.output.append(vi)
    return out


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The reference outputs of a light model, single-threaded so parallel workers do not compete."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # no warnings about unused initializers
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# --------------------------------------------------------------------------------------- comparison

def _desc(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}"


def _item(x):
    return x.item() if isinstance(x, np.generic) else x


def assert_same(what: str, got, want, rtol: float, atol: float) -> None:
    """Exact for ints/bools/strings, allclose (equal_nan) for floats; dtype and shape must match."""
    if want is None:
        assert got is None, f"{what}: expected an empty optional, got {type(got).__name__}"
        return
    if isinstance(want, list):
        assert isinstance(got, (list, tuple)), f"{what}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(want), f"{what}: sequence length {len(got)}, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(f"{what}[{i}]", g, w, rtol, atol)
        return
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{what}: expected a map, got {type(got).__name__}"
        assert sorted(got) == sorted(want), f"{what}: map keys {sorted(got)}, expected {sorted(want)}"
        for k in want:
            assert_same(f"{what}[{k!r}]", got[k], want[k], rtol, atol)
        return
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), f"{what}: expected an array, got {type(got).__name__}"
    if want.dtype.kind in "OUS":
        assert got.dtype.kind in "OUS", f"{what}: expected strings, got {_desc(got)}"
    else:
        assert got.dtype == want.dtype, f"{what}: got {_desc(got)}, expected {_desc(want)}"
    assert got.shape == want.shape, f"{what}: got {_desc(got)}, expected {_desc(want)}"
    if want.dtype.kind in "OUS":
        g, w = got.astype(str), want.astype(str)
    elif want.dtype.kind in "biu":
        g, w = got, want
    elif want.dtype.kind in "fc":
        g, w = got, want
    else:  # ml_dtypes element types (bfloat16, float8, int4, ...): compare their values
        g, w = got.astype(np.float64), want.astype(np.float64)
    if g.dtype.kind in "fc":
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        ok = g == w
    if np.all(ok):
        return
    bad = np.argwhere(~np.asarray(ok))
    first = tuple(int(i) for i in bad[0])
    msg = f"{what}: {len(bad)}/{w.size} elements differ"
    if g.dtype.kind in "fc":
        with np.errstate(all="ignore"):
            err = np.abs(g.astype(np.complex128 if g.dtype.kind == "c" else np.float64) - w)
        msg += f" beyond rtol={rtol:g} atol={atol:g} (max abs error {np.max(err[~np.asarray(ok)]):.3g})"
    msg += f"; first at {first}: got {_item(g[first])!r}, expected {_item(w[first])!r}"
    if g.dtype.kind in "fc":
        try:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            msg += "\n" + str(e).strip()
    raise AssertionError(msg)


def compare_outputs(got: dict, want: list, names: list[str], rtol: float, atol: float) -> None:
    """Compare onnxc's outputs (name -> value, in model order) with expected values by position."""
    assert list(got) == names, f"output names {list(got)}, expected {names}"
    assert len(want) == len(names), f"{len(want)} expected values for {len(names)} outputs"
    for name, w in zip(names, want):
        assert_same(f"output {name!r}", got[name], normalize(w), rtol, atol)


# ------------------------------------------------------------------------------------- time bound

_hang_log = None


def _hang_file():
    """A per-process log naming the running case; faulthandler writes stacks here before a hard kill."""
    global _hang_log
    if _hang_log is None:
        path = Path(tempfile.gettempdir()) / f"onnxc-conformance-hang-{os.getpid()}.log"
        _hang_log = open(path, "w")  # noqa: SIM115 - lives as long as the process
        atexit.register(lambda: (_hang_log.close(), path.unlink(missing_ok=True)))
    return _hang_log


@contextmanager
def bounded(name: str, seconds: float = TIMEOUT) -> Iterator[None]:
    """Fail the case after ``seconds`` (SIGALRM, when on the main thread); if native code does not
    return, dump all stacks to the hang log and end the process ``HARD_GRACE`` seconds later."""
    log = _hang_file()
    log.seek(0)
    log.truncate()
    log.write(f"running {name}\n")
    log.flush()
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    old = None
    if alarm:
        def on_alarm(signum, frame):
            raise CaseTimeout(f"{name}: exceeded the per-case time limit of {seconds:g} s "
                              "(ONNXC_CONFORMANCE_TIMEOUT)")

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + HARD_GRACE, exit=True, file=log)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------------------------ random outputs

# Ops whose outputs the spec defines only in distribution: the generator is the implementation's.
RANDOM_OPS = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike"})


def random_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Nodes of the main graph that draw random values: the random generators, and Dropout given a
    training_mode input (random masks when it is true at run time)."""
    return [n for n in model.graph.node if n.domain in ("", "ai.onnx") and (
        n.op_type in RANDOM_OPS or n.op_type == "Dropout" and len(n.input) > 2 and n.input[2])]


def is_seeded(node: onnx.NodeProto) -> bool:
    return any(a.name == "seed" for a in node.attribute)


def _support(node: onnx.NodeProto, feeds: dict) -> tuple[float, float, bool] | None:
    """(low, high, integral) bounds a random node's first output must satisfy whatever was drawn, or
    None when the spec bounds it no further than shape and type (normals, Dropout)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Bernoulli":
        return 0.0, 1.0, True
    if node.op_type in ("RandomUniform", "RandomUniformLike"):
        return float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0)), False
    if node.op_type == "Multinomial":
        x = feeds.get(node.input[0])
        return 0.0, float(x.shape[1] - 1) if x is not None else float("inf"), True
    return None


def check_random_outputs(got: dict, want: list, model: onnx.ModelProto, feeds: dict) -> None:
    """Value-independent checks of a case with random outputs: every output has the expected dtype and
    shape; outputs of a random node lie in the support the spec gives its distribution; outputs
    computed from random values lie within the range of the expected values (integral where those
    are). Raises AssertionError naming the output."""
    names = [o.name for o in model.graph.output]
    assert list(got) == names, f"output names {list(got)}, expected {names}"
    producer = {o: n for n in model.graph.node for o in n.output}
    for name, w in zip(names, want):
        w = np.asarray(normalize(w))
        g = got[name]
        what = f"output {name!r}"
        assert isinstance(g, np.ndarray), f"{what}: expected an array, got {type(g).__name__}"
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: got {_desc(g)}, expected {_desc(w)}"
        if g.size == 0 or g.dtype.kind == "b":
            continue
        gv, wv = g.astype(np.float64), w.astype(np.float64)
        node = producer.get(name)
        bounds = _support(node, feeds) if node is not None and node.op_type in RANDOM_OPS else None
        if node is not None and node.op_type in RANDOM_OPS and bounds is None:
            assert np.all(np.isfinite(gv)), f"{what}: non-finite random values"
            continue
        if bounds is None:
            bounds = (float(np.nanmin(wv)), float(np.nanmax(wv)), bool(np.all(wv[~np.isnan(wv)] % 1 == 0)))
        lo, hi, integral = bounds
        assert not np.any(np.isnan(gv)), f"{what}: NaN among the random values"
        assert np.all((gv >= lo) & (gv <= hi)), \
            f"{what}: values in [{gv.min():g}, {gv.max():g}], outside the support [{lo:g}, {hi:g}]"
        if integral:
            assert np.all(gv % 1 == 0), f"{what}: non-integral values where only integers can occur"


def reference_outputs(model: onnx.ModelProto, feeds: dict) -> list:
    """onnx.reference's outputs: for seeded random nodes, numpy ``RandomState(seed)`` draws."""
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)
