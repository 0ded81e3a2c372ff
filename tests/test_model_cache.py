"""The model cache (codegen/model_cache.py): a second compile of the same model and options loads the
stored artifact without parsing the model; any change of bytes or options misses; bad entries are
rebuilt; concurrent processes are safe; the weights are held once, in aligned memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import api
from onnxc.codegen import artifact, model_cache
from onnxc.codegen import cache as c_cache
from onnxc.codegen.native import NativeModel, as_aligned
from onnxc.ir import DType, TensorType
from onnxc.ir.dims import dmax, dmin, floordiv, mod, sym


def affine_model(scale: float = 2.0, n: int = 64) -> onnx.ModelProto:
    """y = relu(x @ W + b) with x [N, n]; the weights make the blob non-trivial."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((n, n)) * scale).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {"x": x})[0]


X = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)


@pytest.fixture
def saved(tmp_path) -> Path:
    path = tmp_path / "affine.onnx"
    onnx.save(affine_model(), path)
    return path


def _entry(cache: Path) -> Path:
    (entry,) = [p for p in (cache / "models").glob("??/*") if p.is_dir()]
    return entry


def _counts() -> dict:
    return dict(c_cache.stats)


def _delta(before: dict) -> dict:
    return {k: c_cache.stats[k] - before[k] for k in before}


def test_hit_does_not_parse_and_gives_identical_outputs(saved, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cold = onnxc.compile(saved, threads=1, cache_dir=cache)
    want = cold(X)
    np.testing.assert_allclose(want, reference(onnx.load(saved), X), rtol=1e-5, atol=1e-5)

    def no_parse(*args, **kwargs):
        raise AssertionError("the model was parsed on a cache hit")

    import onnxc.frontend as frontend
    import onnxc.frontend.loader as loader

    with monkeypatch.context() as mp:
        mp.setattr(frontend, "load_model", no_parse)
        mp.setattr(loader, "read_source", no_parse)
        mp.setenv("ONNXC_FAIL_ON_COMPILE", "1")
        before = _counts()
        hot = onnxc.compile(saved, threads=1, cache_dir=cache)
        assert _delta(before) == {"hits": 1, "misses": 0, "model_hits": 1, "model_misses": 0}
        assert hot.timings["model_cache_hit"] == 1.0
        assert np.array_equal(hot(X), want)
        assert hot._fast is not None, "the fast call path is set up from the manifest"
        assert hot.c_source == cold.c_source  # read from the entry, no parse
    # IR and Program are computed again on demand, equal to the cold compile's
    assert [n.op_type for n in hot.ir.graph.nodes] == [n.op_type for n in cold.ir.graph.nodes]
    assert bytes(hot.program.weights) == bytes(cold.program.weights)
    assert [(i.name, i.type) for i in hot.inputs] == [(i.name, i.type) for i in cold.inputs]
    assert [(o.name, o.type) for o in hot.outputs] == [(o.name, o.type) for o in cold.outputs]


def test_bytes_and_protobuf_inputs_hit(tmp_path):
    cache = tmp_path / "cache"
    proto = affine_model()
    onnxc.compile(proto, threads=1, cache_dir=cache)
    before = _counts()
    assert np.array_equal(onnxc.compile(proto.SerializeToString(deterministic=True), threads=1, cache_dir=cache)(X),
                          onnxc.compile(proto, threads=1, cache_dir=cache)(X))
    assert _delta(before)["model_hits"] == 2


def test_touched_file_still_hits_and_changed_bytes_miss(saved, tmp_path):
    cache = tmp_path / "cache"
    onnxc.compile(saved, threads=1, cache_dir=cache)
    os.utime(saved, ns=(1, 1))  # new stat, same bytes: the content decides
    before = _counts()
    onnxc.compile(saved, threads=1, cache_dir=cache)
    assert _delta(before)["model_hits"] == 1
    changed = affine_model(scale=3.0)
    onnx.save(changed, saved)
    before = _counts()
    m = onnxc.compile(saved, threads=1, cache_dir=cache)
    assert _delta(before)["model_misses"] == 1
    np.testing.assert_allclose(m(X), reference(changed, X), rtol=1e-5, atol=1e-4)


def test_option_changes_miss(saved, tmp_path):
    cache = tmp_path / "cache"
    onnxc.compile(saved, threads=1, cache_dir=cache)
    before = _counts()
    m2 = onnxc.compile(saved, threads=2, cache_dir=cache)
    assert _delta(before)["model_misses"] == 1
    np.testing.assert_allclose(m2(X), reference(onnx.load(saved), X), rtol=1e-5, atol=1e-5)
    root = c_cache.cache_dir(cache)
    cfg = api.compiler_config()
    base = api._model_key(str(saved), root, 1, cfg, False)[1]
    variants = [api._model_key(str(saved), root, 2, cfg, False)[1],
                api._model_key(str(saved), root, 1, cfg, True)[1],
                api._model_key(str(saved), root, 1, api.compiler_config(flags=("-O2",)), False)[1],
                api._model_key(str(saved), root, 1, api.compiler_config(cc=cfg.cc + " -DX=1"), False)[1]]
    assert base == api._model_key(str(saved), root, 1, cfg, False)[1]
    assert len({base, *variants}) == 5


def test_code_digest_is_part_of_the_key(monkeypatch):
    k = model_cache.model_key("0" * 64, {"threads": 1})
    monkeypatch.setattr(model_cache, "code_digest", lambda: "another onnxc")
    assert model_cache.model_key("0" * 64, {"threads": 1}) != k


@pytest.mark.parametrize("damage", ["weights_bits", "weights_size", "library", "manifest", "manifest_keys",
                                    "source", "no_library"])
def test_corrupted_entry_is_rebuilt(saved, tmp_path, damage):
    cache = tmp_path / "cache"
    want = onnxc.compile(saved, threads=1, cache_dir=cache)(X)
    entry = _entry(cache)
    w = entry / "model.weights"
    if damage == "weights_bits":
        data = bytearray(w.read_bytes())
        data[len(data) // 2] ^= 0x40
        w.write_bytes(bytes(data))
    elif damage == "weights_size":
        w.write_bytes(w.read_bytes()[:-3])
    elif damage == "library":
        so = entry / "model.so"
        data = so.read_bytes()
        so.unlink()  # (a hard link to the C cache's library: replace it, do not write through it)
        so.write_bytes(data[: len(data) // 2])
    elif damage == "manifest":
        (entry / "onnxc.json").write_text("{ not json")
    elif damage == "manifest_keys":
        j = json.loads((entry / "onnxc.json").read_text())
        del j["outputs"]
        (entry / "onnxc.json").write_text(json.dumps(j))
    elif damage == "source":
        (entry / "model.c").unlink()
    else:
        (entry / "model.so").unlink()
    before = _counts()
    m = onnxc.compile(saved, threads=1, cache_dir=cache)
    assert _delta(before)["model_misses"] == 1
    assert np.array_equal(m(X), want)
    before = _counts()
    assert np.array_equal(onnxc.compile(saved, threads=1, cache_dir=cache)(X), want)
    assert _delta(before)["model_hits"] == 1, "the rebuilt entry is good"
    assert not [p for p in (cache / "models").glob("??/.*")], "no temporary or discarded folders are left"


def test_external_data_changes_miss(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    path = d / "ext.onnx"
    model = affine_model()
    want = reference(model, X)  # (saving moves the tensors of ``model`` out to the file)
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    cache = tmp_path / "cache"
    m = onnxc.compile(path, threads=1, cache_dir=cache)
    np.testing.assert_allclose(m(X), want, rtol=1e-5, atol=1e-5)
    assert json.loads((_entry(cache) / "onnxc.json").read_text())["jit"]["external"][0]["location"] == "ext.bin"
    before = _counts()
    onnxc.compile(path, threads=1, cache_dir=cache)
    assert _delta(before)["model_hits"] == 1
    changed = affine_model(scale=-1.0)
    want = reference(changed, X)
    onnx.save(changed, tmp_path / "other.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.bin", size_threshold=0)
    (d / "ext.bin").write_bytes((tmp_path / "ext.bin").read_bytes())  # same .onnx bytes, other data
    assert (tmp_path / "other.onnx").read_bytes() == path.read_bytes()
    before = _counts()
    m = onnxc.compile(path, threads=1, cache_dir=cache)
    assert _delta(before)["model_misses"] == 1
    np.testing.assert_allclose(m(X), want, rtol=1e-5, atol=1e-5)


def test_exact_symbolic_output_dims_survive_a_hit(tmp_path):
    nodes = [helper.make_node("Concat", ["x", "x"], ["y"], axis=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    cache = tmp_path / "cache"
    cold = onnxc.compile(model, cache_dir=cache)
    hot = onnxc.compile(model, cache_dir=cache)
    assert hot.timings.get("model_cache_hit") == 1.0
    assert hot.outputs[0].type == cold.outputs[0].type and hot.outputs[0].shape == ("2*N", 3)
    assert hot._fast is not None
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(hot(x), np.concatenate([x, x]))


def test_concurrent_processes_are_safe(saved, tmp_path):
    cache = tmp_path / "cache"
    np.save(tmp_path / "x.npy", X)
    script = textwrap.dedent(f"""
        import numpy as np, onnxc
        from onnxc.codegen import cache
        m = onnxc.compile({str(saved)!r}, threads=1)
        np.save({str(tmp_path)!r} + "/out%d.npy" % __import__("os").getpid(), m(np.load({str(tmp_path / 'x.npy')!r})))
        print(cache.stats["model_hits"])
    """)
    env = dict(os.environ, ONNXC_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    outs = [np.load(f) for f in tmp_path.glob("out*.npy")]
    assert len(outs) == 4 and all(np.array_equal(o, outs[0]) for o in outs)
    env["ONNXC_FAIL_ON_COMPILE"] = "1"
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1"]
    assert len([p for p in (cache / "models").glob("??/*")]) == 1, "one entry, no leftovers"


def test_weights_are_held_once_in_aligned_memory(saved, tmp_path):
    m, program, _, _ = api.lower_model(str(saved), 1)
    blob = np.frombuffer(program.weights, np.uint8)
    assert blob.ctypes.data % 64 == 0 and blob.size > 64 * 64 * 4
    del m
    cold = onnxc.compile(saved, threads=1, cache_dir=tmp_path / "cache")
    native = NativeModel(cold._native.path, program.weights, [DType.FLOAT], 1)
    assert np.shares_memory(native._weights, blob), "an aligned blob is used in place"
    assert as_aligned(b"").size == 64 and as_aligned(bytes(100)).ctypes.data % 64 == 0
    hot = onnxc.compile(saved, threads=1, cache_dir=tmp_path / "cache")
    assert hot._native._weights.ctypes.data % 64 == 0 and hot._native._weights.base is not None


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 8 * 1000 - 1, 8 * 1000, 8 * 1000 + 5, 123457])
def test_block_checksum_and_weights_reader(tmp_path, monkeypatch, n):
    monkeypatch.setattr(artifact, "_CHECK_WORDS", 1000)  # many blocks
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    words = np.frombuffer(data + b"\0" * (-n % 8), "<u8").astype(object)
    want = (n + sum(int(w) * (2 * i + 1) for i, w in enumerate(words))) % 2**64
    assert artifact.checksum(data) == want
    f = tmp_path / "w.bin"
    f.write_bytes(data)
    got = artifact.read_weights(f, n, want)
    assert got.tobytes() == data and (n == 0 or got.ctypes.data % 64 == 0)
    with pytest.raises(onnxc.ModelError, match="checksum"):
        artifact.read_weights(f, n, want ^ 1)
    with pytest.raises(onnxc.ModelError, match="checksum"):
        artifact.read_weights(f, n + 1, want)


def test_dims_round_trip_through_json():
    n, m = sym("N"), sym("M")
    dims = [3, n, 2 * n + 1, n * m - 4, floordiv(n, 3), mod(n + m, 5), dmin(n, m), dmax(n, 7) * 2, n * n]
    for d in dims:
        back = artifact.dim_from_json(json.loads(json.dumps(artifact.dim_json(d))))
        assert back == d, (d, back)
    t = TensorType(DType.FLOAT, (n, 2 * n))
    assert artifact.type_from_json(artifact.type_json(t)) == t
    old = {"tensor": 1, "shape": ["N", 3]}  # manifests written before the exact dims
    assert artifact.type_from_json(old) == TensorType(DType.FLOAT, (n, 3))


def test_failed_compile_stores_nothing(saved, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ONNXC_FAIL_ON_COMPILE", "1")
    with pytest.raises(onnxc.CompileError, match="ONNXC_FAIL_ON_COMPILE"):
        onnxc.compile(saved, threads=1, cache_dir=cache)
    assert not [p for p in (cache / "models").glob("??/*")] + [p for p in (cache / "models").glob("??/.*")]


def test_same_bytes_in_another_folder_use_their_own_external_data(tmp_path):
    models = {}
    for sub, scale in (("a", 1.0), ("b", -2.0)):
        d = tmp_path / sub
        d.mkdir()
        model = affine_model(scale=scale)
        models[sub] = reference(model, X)
        onnx.save(model, d / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                  size_threshold=0)
    assert (tmp_path / "a" / "m.onnx").read_bytes() == (tmp_path / "b" / "m.onnx").read_bytes()
    cache = tmp_path / "cache"
    for sub in ("a", "b", "a"):
        m = onnxc.compile(tmp_path / sub / "m.onnx", threads=1, cache_dir=cache)
        np.testing.assert_allclose(m(X), models[sub], rtol=1e-5, atol=1e-5)
    data = (tmp_path / "a" / "m.onnx").read_bytes()  # bytes cannot locate external data: no hit, the error
    with pytest.raises(onnxc.ModelError, match="external"):
        onnxc.compile(data, threads=1, cache_dir=cache)


def test_codegen_switches_are_part_of_the_key(monkeypatch):
    from onnxc.codegen import model_cache

    monkeypatch.delenv("ONNXC_WINOGRAD", raising=False)
    base = model_cache.model_key("d" * 64, {"threads": 1})
    monkeypatch.setenv("ONNXC_WINOGRAD", "0")
    assert model_cache.model_key("d" * 64, {"threads": 1}) != base


# -- size bound (codegen/cache_prune.py) ----------------------------------------------------------------------


def _age(path: Path, seconds: float) -> None:
    t = path.stat().st_mtime - seconds
    os.utime(path, (t, t))


def test_prune_removes_least_recently_used_first(tmp_path):
    """Three models compiled into one cache and a bound of a third of its size: the least recently used
    entries go first, down to PRUNE_TO of the bound, and what is left still hits."""
    from onnxc.codegen import cache_prune

    cache = tmp_path / "c"
    paths = []
    for i, scale in enumerate((1.0, 2.0, 3.0)):
        p = tmp_path / f"m{i}.onnx"
        onnx.save(affine_model(scale), p)
        onnxc.compile(p, cache_dir=cache).run({"x": X})
        paths.append(p)
    entries = sorted(p for p in (cache / "models").glob("??/*") if p.is_dir())
    libs = sorted(cache.glob("??/*.so"))
    assert len(entries) == 3 and libs  # the weights are data: the three share their library
    total = sum(sum(f.stat().st_size for f in e.iterdir()) for e in entries) + \
        sum(f.stat().st_size + f.with_suffix(".c").stat().st_size for f in libs)
    # entry ages: 3 h, 2 h, 1 h unused (in listing order); libraries 4 h; then a bound of a third of the total
    for e, hours in zip(entries, (3, 2, 1)):
        _age(e / "onnxc.json", 3600 * hours)
    for lib in libs:  # (a hit marks a library's integrity record, lib.so.sum)
        _age(lib.with_name(lib.name + ".sum"), 4 * 3600)
    assert cache_prune.prune(cache, limit=total // 3, force=True) > 0
    assert not libs[0].exists() and not entries[0].exists()  # oldest first
    assert entries[-1].exists()  # removal stops once the rest fits under PRUNE_TO of the bound
    assert not any(p.name.startswith(".") for p in (cache / "models").glob("??/*"))
    assert (cache / cache_prune.STAMP).exists()
    # the models whose entries are left still hit, the others compile again and give the same results
    left = sum(e.exists() for e in entries)
    before = _counts()
    for p in paths:
        onnxc.compile(p, cache_dir=cache).run({"x": X})
    assert _delta(before)["model_hits"] == left


def test_prune_keeps_recent_entries_and_respects_the_interval(tmp_path, monkeypatch):
    from onnxc.codegen import cache_prune

    cache = tmp_path / "c"
    onnxc.compile(affine_model(), cache_dir=cache).run({"x": X})
    assert cache_prune.prune(cache, limit=1, force=True) == 0  # everything is younger than MIN_AGE_S
    for f in list(cache.glob("??/*.so.sum")) + list((cache / "models").glob("??/*/onnxc.json")):
        _age(f, 2 * cache_prune.MIN_AGE_S)
    assert cache_prune.prune(cache, limit=1) == 0  # a walk just ran (the stamp is fresh)
    assert cache_prune.prune(cache, limit=1, force=True) > 0
    assert not list(cache.glob("??/*.so*")) and not [p for p in (cache / "models").glob("??/*") if p.is_dir()]
    # the next compile rebuilds and hits again
    onnxc.compile(affine_model(), cache_dir=cache).run({"x": X})
    monkeypatch.setenv("ONNXC_FAIL_ON_COMPILE", "1")
    onnxc.compile(affine_model(), cache_dir=cache).run({"x": X})


def test_a_hit_marks_the_entry_used(saved, tmp_path):
    cache = tmp_path / "c"
    onnxc.compile(saved, cache_dir=cache)
    manifest = _entry(cache) / "onnxc.json"
    _age(manifest, 3600)
    before = manifest.stat().st_mtime
    onnxc.compile(saved, cache_dir=cache)
    assert manifest.stat().st_mtime > before + 3000


@pytest.mark.parametrize("raw,mb", [("", 4096), ("0", 0), ("12.5", 12.5), ("lots", 4096)])
def test_cache_bound_from_the_environment(monkeypatch, raw, mb):
    from onnxc.codegen import cache_prune

    monkeypatch.setenv("ONNXC_CACHE_MAX_MB", raw)
    assert cache_prune.max_bytes() == int(mb * (1 << 20))


def test_prune_removes_runtime_folders_unused_for_long(tmp_path):
    """Runtime folders (objects + precompiled header of one compiler and flags) do not count toward the
    size bound; a walk removes those unused for RUNTIME_MAX_AGE_S and keeps the others."""
    from onnxc.codegen import cache_prune

    old, recent = tmp_path / "runtime" / "aaaa", tmp_path / "runtime" / "bbbb"
    for d in (old, recent):
        d.mkdir(parents=True)
        (d / "onnxc_sgemm.o").write_bytes(b"\0" * 1000)
    _age(old, cache_prune.RUNTIME_MAX_AGE_S + 3600)
    _age(recent, 3600)
    cache_prune.prune(tmp_path, limit=1 << 30, force=True)
    assert not old.exists() and recent.exists()
    assert not any(p.name.startswith(".") for p in (tmp_path / "runtime").iterdir())
