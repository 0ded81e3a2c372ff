"""Every sample model onnxruntime ships (``onnxruntime/datasets/*.onnx``: today logreg_iris.onnx with
LinearClassifier + Normalizer + ZipMap, mul_1.onnx, sigmoid.onnx) compiles with onnxc and gives
onnxruntime's outputs on random inputs of the declared types and shapes, ZipMap's sequence of maps
included. A symbolic dimension runs with sizes 1 and 4; each model compiles once. A model added to
the folder in a later onnxruntime is picked up by the glob; an input kind this file cannot draw
(sequence, map, optional) fails its test by name rather than being skipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import onnxc

DATASETS = Path(ort.__file__).parent / "datasets"
MODELS = sorted(DATASETS.glob("*.onnx"))
SIZES = (1, 4)  # for symbolic dimensions

_NUMPY = {"float": np.float32, "double": np.float64, "float16": np.float16, "bool": np.bool_,
          "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}


def draw(rng: np.random.Generator, name: str, type_str: str, shape: list, size: int) -> np.ndarray:
    """A random tensor for an input declared as ``type_str`` (onnxruntime's spelling) and ``shape``."""
    if not type_str.startswith("tensor(") or not type_str.endswith(")"):
        pytest.fail(f"input {name!r}: no generator for inputs of type {type_str}")
    elem = type_str[len("tensor("):-1]
    dims = [d if isinstance(d, int) and d >= 0 else size for d in shape]
    if elem == "string":
        return rng.choice(np.array(["a", "b", "cat", "", "é"], dtype=object), dims)
    if elem not in _NUMPY:
        pytest.fail(f"input {name!r}: no generator for tensors of {elem}")
    dt = np.dtype(_NUMPY[elem])
    if dt.kind == "b":
        return rng.random(dims) > 0.5
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -5, 6, dims).astype(dt)
    return (rng.standard_normal(dims) * 2).astype(dt)


def assert_same(got, want, where: str) -> None:
    """onnxc's value equals onnxruntime's: tensors (floats to 1e-5), sequences and maps recursively."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {type(got)} vs a list of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{where}: keys {list(got)} vs {list(want)}"
        for k in want:
            assert_same(np.asarray(got[k]), np.asarray(want[k]), f"{where}[{k!r}]")
    else:
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape, f"{where}: shape {got.shape} vs {want.shape}"
        if want.dtype.kind in "fc":
            assert got.dtype == want.dtype or want.ndim == 0, f"{where}: dtype {got.dtype} vs {want.dtype}"
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
        else:
            assert got.tolist() == want.tolist(), f"{where}: {got.tolist()} vs {want.tolist()}"


def test_the_datasets_folder_has_models():
    assert MODELS, f"no *.onnx in {DATASETS}"
    assert "logreg_iris.onnx" in {p.name for p in MODELS}


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_dataset_model_matches_onnxruntime(path: Path):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    compiled = onnxc.compile(str(path))
    assert [t.name for t in compiled.inputs] == [i.name for i in sess.get_inputs()]
    symbolic = any(not isinstance(d, int) or d < 0 for i in sess.get_inputs() for d in i.shape)
    rng = np.random.default_rng(0)
    for size in SIZES if symbolic else SIZES[-1:]:
        for _ in range(3):
            feeds = {i.name: draw(rng, i.name, i.type, i.shape, size) for i in sess.get_inputs()}
            want = sess.run(None, feeds)
            got = compiled.run(feeds)
            for o, w in zip(sess.get_outputs(), want):
                assert_same(got[o.name], w, f"{path.name} output {o.name!r} (size {size})")
