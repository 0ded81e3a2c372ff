"""Compiled models cross process boundaries (issue #19): pickle, deep copy, and multiprocessing with spawn
(the start method of macOS/Windows and of Dask/joblib process workers), for a JIT-compiled model and an AOT
artifact with embedded weights."""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle

import numpy as np
import pytest

import onnxc

EXAMPLE = "onnxc/examples/small_cnn.onnx"


def _feeds(n: int) -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(n).random((n, 1, 28, 28), dtype=np.float32)}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    jit = onnxc.compile(EXAMPLE)
    art = onnxc.load(onnxc.build(EXAMPLE, tmp_path_factory.mktemp("art"), name="cnn"))
    return {"jit": jit, "artifact": art}


@pytest.mark.parametrize("kind", ["jit", "artifact"])
def test_pickle_and_deepcopy_give_the_same_model(models, kind):
    cm = models[kind]
    want = cm.run(_feeds(3))["probabilities"]
    for other in (pickle.loads(pickle.dumps(cm)), copy.deepcopy(cm)):
        assert other.inputs == cm.inputs and other.outputs == cm.outputs and other.about == cm.about
        np.testing.assert_array_equal(other.run(_feeds(3))["probabilities"], want)


def test_spawned_workers_run_a_pickled_model(models):
    cm = models["jit"]
    feeds = [_feeds(n) for n in (1, 2, 5)]
    with mp.get_context("spawn").Pool(2) as pool:
        got = pool.map(_Run(cm), feeds)
    for f, g in zip(feeds, got):
        np.testing.assert_array_equal(g, cm.run(f)["probabilities"])


class _Run:
    """Picklable callable: the model's output for one feed dict (the model travels with it)."""

    def __init__(self, cm):
        self.cm = cm

    def __call__(self, feeds):
        return self.cm.run(feeds)["probabilities"]


def test_unpickling_one_model_again_maps_its_library_once(models):
    """A model unpickled over and over (a task argument) reuses this process's copy of its library instead
    of loading one more copy each time (loaded libraries are never unloaded)."""
    def libs() -> set[str]:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if "onnxc-unpickled-lib-" in line}

    m = models["jit"]
    data = pickle.dumps(m)
    want = m.run(_feeds(2))
    before = libs()
    for _ in range(5):
        got = pickle.loads(data).run(_feeds(2))
        assert all(np.array_equal(got[k], want[k]) for k in want)
    assert len(libs() - before) <= 1, libs() - before
