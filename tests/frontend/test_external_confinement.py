"""Every external tensor reference of a model goes through one confined resolver (frontend/external.py):
graph and sparse initializers, node attributes, If/Loop bodies at any depth, model-local functions
(bodies and attribute defaults) and training_info (initialization and algorithm graphs, which onnxc
never decodes). A location that leaves the model's folder (``..``, absolute, a symlink to elsewhere) or
names a FIFO is a ModelError naming the tensor, and the file is never opened; hostile offset/length
entries are ModelErrors naming the field, not MemoryError/ValueError."""

from __future__ import annotations

import builtins
import io
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.frontend import load_model
from onnxc.ir import ModelError

F = TensorProto.FLOAT
W = np.arange(6, dtype=np.float32).reshape(2, 3)


def ext_tensor(name: str, location: str, *, offset: int | None = None, length: int | None = None,
               arr: np.ndarray = W) -> TensorProto:
    """``arr`` as a TensorProto whose data lives in the external file ``location``."""
    t = numpy_helper.from_array(arr, name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length}
    for k, v in entries.items():
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def vi(name: str, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, F, shape)


def _graph(nodes, name="g", inputs=("x",), outputs=("y",), inits=(), sparse=()) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [vi(i, [2, 3]) for i in inputs], [vi(o) for o in outputs],
                             list(inits), sparse_initializer=list(sparse))


def _model(graph: onnx.GraphProto, functions=(), opsets=(("", 17),)) -> onnx.ModelProto:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                             functions=list(functions))


def _const(t: TensorProto, out: str = "c") -> onnx.NodeProto:
    return helper.make_node("Constant", [], [out], value=t)


def _if(then_nodes, then_inits=(), out: str = "y") -> onnx.NodeProto:
    then_g = _graph(then_nodes, "then", inputs=(), outputs=("t",), inits=then_inits)
    else_g = _graph([helper.make_node("Identity", ["x"], ["e"])], "else", inputs=(), outputs=("e",))
    return helper.make_node("If", ["cond"], [out], then_branch=then_g, else_branch=else_g)


def _cond_graph(nodes) -> onnx.GraphProto:
    g = _graph(nodes, inputs=("x",))
    g.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    return g


# Each place builds a model whose one external tensor (made by ``t(name)``) sits at that place; the
# second item is a fragment of the error that names it.
def _initializer(t):
    return _model(_graph([helper.make_node("Add", ["x", "w"], ["y"])], inits=[t("w")])), "initializer 'w'"


def _sparse(t):
    sp = helper.make_sparse_tensor(t("w"), numpy_helper.from_array(np.arange(6, dtype=np.int64), "w_idx"), [2, 3])
    return _model(_graph([helper.make_node("Add", ["x", "w"], ["y"])], sparse=[sp])), "sparse initializer 'w' values"


def _attribute(t):
    return _model(_graph([_const(t("w")), helper.make_node("Add", ["x", "c"], ["y"])])), "attribute 'value' tensor 'w'"


def _if_branch(t):
    then = [helper.make_node("Add", ["x", "w"], ["t"])]
    return _model(_cond_graph([_if(then, [t("w")])])), "attribute 'then_branch': initializer 'w'"


def _nested(t):
    # a Loop body holding an If whose then-branch holds a Constant with the tensor
    inner = _if([_const(t("w"), "k"), helper.make_node("Add", ["x", "k"], ["t"])], out="v")
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]), inner,
                              helper.make_node("Identity", ["v"], ["s"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c_in", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), vi("s")])
    loop = helper.make_node("Loop", ["n", "cond"], ["y"], body=body)
    g = _cond_graph([loop])
    g.input.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    return _model(g), "attribute 'then_branch': node Constant (first output 'k') attribute 'value' tensor 'w'"


def _function(t):
    f = helper.make_function("local", "F", ["a"], ["b"], [_const(t("w")), helper.make_node("Add", ["a", "c"], ["b"])],
                             [helper.make_opsetid("", 17)])
    g = _graph([helper.make_node("F", ["x"], ["y"], domain="local")])
    return _model(g, [f], (("", 17), ("local", 1))), "function local::F: node Constant (first output 'c') attribute 'value' tensor 'w'"


def _function_default(t):
    f = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])],
                             [helper.make_opsetid("", 17)])
    f.attribute_proto.append(helper.make_attribute("w", t("w")))
    g = _graph([helper.make_node("F", ["x"], ["y"], domain="local")])
    return _model(g, [f], (("", 17), ("local", 1))), "function local::F default attribute 'w' tensor 'w'"


def _training_init(t):
    m = _model(_graph([helper.make_node("Relu", ["x"], ["y"])]))
    ti = m.training_info.add()
    ti.initialization.CopyFrom(_graph([], "init", inputs=(), outputs=(), inits=[t("w")]))
    return m, "training_info[0] initialization: tensor 'w'"


def _training_algorithm(t):
    m = _model(_graph([helper.make_node("Relu", ["x"], ["y"])]))
    ti = m.training_info.add()
    ti.algorithm.CopyFrom(_graph([_const(t("w")), helper.make_node("Add", ["x", "c"], ["z"])], "algo",
                                 outputs=("z",)))
    return m, "training_info[0] algorithm: tensor 'w'"


PLACES = {"initializer": _initializer, "sparse": _sparse, "attribute": _attribute, "if_branch": _if_branch,
          "loop_if_nested": _nested, "function": _function, "function_default": _function_default,
          "training_init": _training_init, "training_algorithm": _training_algorithm}
DECODED = {"initializer", "sparse", "attribute", "if_branch", "loop_if_nested", "function", "function_default"}


@pytest.fixture
def tree(tmp_path) -> dict[str, Path]:
    """``model/`` (the model's folder, with ``w.bin``, a FIFO ``pipe`` and ``link`` -> ``outside/``) and
    ``outside/`` with ``secret.bin`` (valid tensor bytes: reading it would succeed) and a FIFO."""
    model, outside = tmp_path / "model", tmp_path / "outside"
    model.mkdir()
    outside.mkdir()
    (model / "w.bin").write_bytes(W.tobytes())
    (outside / "secret.bin").write_bytes(W.tobytes())
    os.mkfifo(outside / "fifo")
    os.mkfifo(model / "pipe")
    os.symlink(outside, model / "link")
    return {"model": model, "outside": outside}


@pytest.fixture
def opened(monkeypatch, tree) -> list[str]:
    """Paths opened while the test runs; opening anything in ``outside/`` or the FIFO in the model's
    folder fails the test (and does not block)."""
    forbidden = (str(tree["outside"].resolve()) + os.sep, str((tree["model"] / "pipe").resolve()))
    seen: list[str] = []

    def spy(real):
        def wrapper(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                p = os.path.realpath(os.fsdecode(file))
                seen.append(p)
                if p.startswith(forbidden[0]) or p == forbidden[1]:
                    raise AssertionError(f"{p} was opened")
            return real(file, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    monkeypatch.setattr(io, "open", spy(io.open))
    monkeypatch.setattr(os, "open", spy(os.open))
    return seen


def _escapes(tree) -> dict[str, tuple[str, str]]:
    return {"dotdot": ("../outside/secret.bin", "escapes the model's directory"),
            "absolute": (str(tree["outside"] / "secret.bin"), "is an absolute path"),
            "symlink": ("link/secret.bin", "outside the model's directory"),
            "symlink_fifo": ("link/fifo", "outside the model's directory"),
            "fifo": ("pipe", "is not a regular file")}


@pytest.mark.parametrize("escape", ["dotdot", "absolute", "symlink", "symlink_fifo", "fifo"])
@pytest.mark.parametrize("place", sorted(PLACES))
def test_reference_outside_the_folder_is_refused_unopened(tree, opened, place, escape):
    location, message = _escapes(tree)[escape]
    mp, where = PLACES[place](lambda name: ext_tensor(name, location))
    path = tree["model"] / "m.onnx"
    onnx.save(mp, path)
    with pytest.raises(ModelError, match=rf"{re.escape(where)}: external data location .*{message}"):
        load_model(path)
    assert not [p for p in opened if p.startswith(str(tree["outside"].resolve()))]


@pytest.mark.parametrize("place", sorted(PLACES))
def test_reference_inside_the_folder_loads(tree, opened, place):
    mp, _ = PLACES[place](lambda name: ext_tensor(name, "w.bin"))
    onnx.save(mp, tree["model"] / "m.onnx")
    m = load_model(tree["model"] / "m.onnx")
    data = str((tree["model"] / "w.bin").resolve())
    if place in DECODED:
        assert data in opened and m.data_files == [data]
    else:  # training_info is not compiled: its data is checked for confinement, never read
        assert data not in opened and m.data_files == []
    if place == "initializer":
        np.testing.assert_array_equal(m.graph.initializers["w"].const, W)


def test_training_info_from_bytes_is_refused_without_a_folder():
    mp, _ = _training_init(lambda name: ext_tensor(name, "../../../../etc/passwd"))
    with pytest.raises(ModelError, match=r"training_info\[0\] initialization: .*'w'.*escapes the model's directory"):
        load_model(mp.SerializeToString())
    ok, _ = _training_init(lambda name: ext_tensor(name, "w.bin"))
    assert load_model(ok.SerializeToString()).data_files == []  # not read, so no folder is needed


def test_compile_by_path_never_opens_training_data_outside(tree, opened, tmp_path):
    """The case of the issue: compiling by path opened ../../../../etc/passwd and the model cache's
    manifest recorded its size and sha256."""
    deep = tree["model"] / "a" / "b"
    deep.mkdir(parents=True)
    up = "../" * len(deep.resolve().parts[1:])
    mp, _ = _training_init(lambda name: ext_tensor(name, up + str(tree["outside"] / "secret.bin").lstrip("/")))
    onnx.save(mp, deep / "m.onnx")
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match=r"training_info\[0\] initialization: .*'w'.*escapes the model's directory"):
        onnxc.compile(deep / "m.onnx", threads=1, cache_dir=cache)
    assert not list(cache.glob("models/??/*/onnxc.json"))


def test_nul_in_location(tree, tmp_path):
    """Before: ValueError ('embedded null byte') when compiling by path."""
    for place in ("initializer", "function", "training_init"):
        mp, where = PLACES[place](lambda name: ext_tensor(name, "w.bin\0../../etc/passwd"))
        onnx.save(mp, tree["model"] / "m.onnx")
        message = rf"{re.escape(where)}: external data location .*contains a NUL character"
        with pytest.raises(ModelError, match=message):
            load_model(tree["model"] / "m.onnx")
        with pytest.raises(ModelError, match=message):
            onnxc.compile(tree["model"] / "m.onnx", threads=1, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("field, entries, message", [
    ("length", {"length": 2**62}, r"length 4611686018427387904 .*runs past the end of 'w.bin' \(24 bytes\)"),
    ("length", {"length": 2**64 + 24}, r"length 18446744073709551640 .*runs past the end"),
    ("offset", {"offset": 2**62}, r"offset 4611686018427387904 is past the end of 'w.bin' \(24 bytes\)"),
    ("offset", {"offset": 2**62, "length": 2**62}, r"offset 4611686018427387904 is past the end"),
    ("offset", {"offset": 8, "length": 24}, r"length 24 at offset 8 runs past the end"),
    ("length", {"length": -1}, r"length -1 is negative"),
    ("length", {"length": "1e3"}, r"length '1e3' is not an integer"),
    ("length", {"length": 12}, r"the tensor needs 24 bytes, but the external data length is 12"),
])
def test_hostile_offset_and_length(tree, field, entries, message):
    mp, _ = _initializer(lambda name: ext_tensor(name, "w.bin", **entries))
    onnx.save(mp, tree["model"] / "m.onnx")
    with pytest.raises(ModelError, match=rf"initializer 'w': (external data )?{message}"):
        load_model(tree["model"] / "m.onnx")


def test_file_larger_than_the_tensor_is_not_read_whole(tree, opened, monkeypatch):
    """Without a length, the data runs to the end of the file: a tensor of 6 floats pointing at a huge
    file is refused from its size, before any byte is read."""
    big = tree["model"] / "big.bin"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # sparse: 1 TiB
    mp, _ = _initializer(lambda name: ext_tensor(name, "big.bin"))
    onnx.save(mp, tree["model"] / "m.onnx")
    with pytest.raises(ModelError, match=r"initializer 'w': the tensor needs 24 bytes, but 'big.bin' holds 1099511627776 bytes "):
        load_model(tree["model"] / "m.onnx")
    mp, _ = _initializer(lambda name: ext_tensor(name, "big.bin", offset=(1 << 40) - 24))
    onnx.save(mp, tree["model"] / "m.onnx")
    np.testing.assert_array_equal(load_model(tree["model"] / "m.onnx").graph.initializers["w"].const, 0 * W)
