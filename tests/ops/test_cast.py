"""Cast and CastLike between float, double, bool and 8..64-bit integers, across opsets.

In-range conversions are compared with onnx.reference (numpy ``astype``). Float -> integer values
out of range and NaN are undefined in ONNX; onnxc saturates (NaN -> 0) and the tests pin that down
against the numpy twin ``cast_array``, also used by constant folding.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import onnxc
from onnxc.ir import DType, UnsupportedOpError
from onnxc.passes.shapes.cast import cast_array

from .util import check_node, node_model

TYPES = [np.float32, np.float64, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64]
ONNX_TYPE = {np.dtype(t): int(DType.__members__[n]) for t, n in
             [(np.float32, "FLOAT"), (np.float64, "DOUBLE"), (np.bool_, "BOOL"), (np.int8, "INT8"),
              (np.int16, "INT16"), (np.int32, "INT32"), (np.int64, "INT64"), (np.uint8, "UINT8"),
              (np.uint16, "UINT16"), (np.uint32, "UINT32"), (np.uint64, "UINT64")]}


def values(src, dst) -> np.ndarray:
    """Source values whose conversion to ``dst`` is defined by the spec."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.kind == "b":
        return np.array([True, False, True, True, False, False])
    if src.kind == "f":
        v = [0.0, -0.0, 1.0, 2.5, 3.99, 100.75, 0.25, 1e-3]
        if dst.kind != "u":
            v += [-1.0, -2.5, -100.9, -0.75]
        if dst.kind == "f" or dst.kind == "b":
            v += [np.nan, np.inf, -np.inf, 1e30, -1e-30]
        return np.array(v, src)
    info = np.iinfo(src)
    return np.array([0, 1, 2, 100, info.max, info.min, info.max // 3, 7, info.min // 5 + 3], src)


@pytest.mark.parametrize("dst", TYPES, ids=[np.dtype(t).name for t in TYPES])
@pytest.mark.parametrize("src", TYPES, ids=[np.dtype(t).name for t in TYPES])
def test_cast_pairs(src, dst):
    x = values(src, dst)
    with np.errstate(all="ignore"):
        check_node("Cast", {"x": x}, opset=21, to=ONNX_TYPE[np.dtype(dst)])


@pytest.mark.parametrize("dst", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_float_to_int_saturates(src, dst):
    """Out-of-range and NaN inputs (undefined in ONNX) saturate; the fold rule computes the same."""
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 1e19, -1.5, 255.9, -128.9, 65536.5,
                  2.0**63, -2.0**63, 2.0**64, 0.5, -0.5], src)
    want = cast_array(x, DType(ONNX_TYPE[np.dtype(dst)]))
    info = np.iinfo(dst)
    assert want[0] == 0 and want[1] == info.max and want[2] == info.min
    check_node("Cast", {"x": x}, opset=13, to=ONNX_TYPE[np.dtype(dst)], expected=[want])
    model = node_model("Cast", {"x": x}, opset=13, const_inputs=("x",), to=ONNX_TYPE[np.dtype(dst)])
    cm = onnxc.compile(model)
    assert not list(cm.ir.graph.nodes)
    np.testing.assert_array_equal(cm.run({})["y0"], want)


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21, 23, 25])
def test_cast_opsets(opset):
    x = np.array([[1.5, -2.25], [3.0, 0.0]], np.float32)
    check_node("Cast", {"x": x}, opset=opset, to=TensorProto.INT32)
    check_node("Cast", {"x": x}, opset=opset, to=TensorProto.DOUBLE)
    if opset >= 19:
        check_node("Cast", {"x": x}, opset=opset, to=TensorProto.INT64, saturate=0)


def test_cast_opset1_string_to():
    x = np.array([1.5, -2.5, 7.0], np.float32)
    got = onnxc.compile(node_model("Cast", {"x": x}, opset=1, to="INT32")).run({"x": x})["y0"]
    np.testing.assert_array_equal(got, np.array([1, -2, 7], np.int32))
    with pytest.raises(Exception, match="names no element type"):
        onnxc.compile(node_model("Cast", {"x": x}, opset=1, to="NOPE"))


@pytest.mark.parametrize("opset", [15, 19, 21])
@pytest.mark.parametrize("src, dst", [(np.float32, np.int64), (np.int64, np.float32), (np.bool_, np.float64),
                                      (np.int32, np.uint8), (np.float64, np.bool_)])
def test_castlike(opset, src, dst):
    x = values(src, dst)
    check_node("CastLike", {"x": x, "t": np.zeros((1,), dst)}, opset=opset)
    check_node("CastLike", {"x": x, "t": np.zeros((1,), dst)}, opset=opset, const_inputs=("t",))


def test_cast_symbolic_and_same_type():
    x = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
    check_node("Cast", {"x": x}, opset=21, to=TensorProto.INT64, input_shapes={"x": ["N", "M"]})
    check_node("Cast", {"x": x}, opset=21, to=TensorProto.FLOAT, input_shapes={"x": ["N", 4]})
    check_node("Cast", {"x": np.zeros((0, 4), np.float32)}, opset=21, to=TensorProto.UINT8,
               input_shapes={"x": ["N", 4]})


@pytest.mark.parametrize("to", [TensorProto.STRING])  # float8 casts: tests/ops/test_lowp.py
def test_unsupported_targets_are_reported(to):
    with pytest.raises(UnsupportedOpError, match="element type string is not supported"):
        onnxc.compile(node_model("Cast", {"x": np.ones(3, np.float32)}, opset=21, to=to))
