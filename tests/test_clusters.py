"""Compiled models on process pools and clusters (issue #19): a pickled model in multiprocessing pools
started with spawn and with forkserver, in joblib's loky workers, and on a real Dask cluster of two process
workers (``LocalCluster``), plus an AOT artifact that Dask workers load themselves. Results must equal the
in-process run. The Dask test mirrors the README's "Beyond one machine" snippet."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

import onnxc

EXAMPLE = "onnxc/examples/small_cnn.onnx"
_loaded: dict[str, onnxc.CompiledModel] = {}  # per worker process: artifacts it has opened


def score(part: np.ndarray, model: onnxc.CompiledModel) -> np.ndarray:
    """The class probabilities of a batch of images (the README's function)."""
    return model(part)


def score_artifact(part: np.ndarray, path: str) -> np.ndarray:
    """``score`` with the AOT artifact at ``path``, opened once per worker process (no C compiler)."""
    if path not in _loaded:
        _loaded[path] = onnxc.load(path)
    return _loaded[path](part)


@pytest.fixture(scope="module")
def model():
    return onnxc.compile(EXAMPLE, threads=1)


@pytest.fixture(scope="module")
def batch():
    return np.random.default_rng(19).random((96, 1, 28, 28), dtype=np.float32)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_pool(model, batch, method):
    parts = np.array_split(batch, 4)
    with mp.get_context(method).Pool(2) as pool:
        got = pool.starmap(score, [(p, model) for p in parts])
    np.testing.assert_array_equal(np.concatenate(got), model(batch))


def test_joblib_loky(model, batch):
    joblib = pytest.importorskip("joblib")
    Parallel, delayed = joblib.Parallel, joblib.delayed
    parts = np.array_split(batch, 4)
    got = Parallel(n_jobs=2, backend="loky")(delayed(score)(p, model) for p in parts)
    np.testing.assert_array_equal(np.concatenate(got), model(batch))


def test_dask_local_cluster(model, batch, tmp_path):
    """Two process workers, one thread each: the pickled model scattered to every worker and mapped over
    chunks (client.map, as in the README), and mapped over the blocks of a dask array (map_blocks); an AOT
    artifact opened by the workers themselves."""
    da = pytest.importorskip("dask.array")
    from dask.distributed import Client, LocalCluster

    want = model(batch)
    art = str(onnxc.build(EXAMPLE, tmp_path / "art", name="cnn"))
    cluster = client = None
    try:
        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                               local_directory=str(tmp_path / "dask"), silence_logs=40)
        client = Client(cluster)
        on_workers = client.scatter(model, broadcast=True, hash=False)  # sent once to every worker
        parts = np.array_split(batch, 6)
        got = client.gather(client.map(score, parts, model=on_workers))
        np.testing.assert_array_equal(np.concatenate(got), want)
        pids = set(client.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids
        images = da.from_array(batch, chunks=(16, 1, 28, 28))
        probs = images.map_blocks(score, model=model, drop_axis=[2, 3], chunks=(16, 10), dtype=np.float32)
        np.testing.assert_array_equal(probs.compute(), want)
        got = client.gather(client.map(score_artifact, parts, path=art))
        np.testing.assert_array_equal(np.concatenate(got), want)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def test_unpickled_model_pickles_again(model, batch):
    """Dask moves a model from worker to worker (and pickles a task's arguments again): an unpickled model,
    whose library file is gone, pickles again."""
    import pickle

    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(model))))
    np.testing.assert_array_equal(again(batch), model(batch))
