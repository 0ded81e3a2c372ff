"""Static element counts and byte sizes are computed without overflow and checked against the limits of
ir/limits.py (issue #15): a tensor larger than MAX_TENSOR_BYTES or of rank above MAX_RANK is an onnxc
error naming it and its size, never a wrapped size (an arena of 64 bytes for an Expand to [2^31, 2^31])
or a numpy ValueError.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc.ir import ModelError, ShapeError
from onnxc.ir.limits import MAX_RANK, MAX_TENSOR_BYTES, byte_size, element_count

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_counts_are_exact_python_ints() -> None:
    assert element_count([2**32, 2**32]) == 2**64  # numpy int64 would give 0
    assert byte_size(onnxc.ir.DType.FLOAT, [2**31, 2**31]) == 2**64
    assert element_count([]) == 1 and element_count([5, 0, 2**62]) == 0


@pytest.mark.parametrize("dims", [[2**31, 2**31], [2**32, 2**32], [2**33, 2**31, 3]])
def test_expand_to_a_huge_constant_shape_is_a_shape_error(dims) -> None:
    m = _model([helper.make_node("Expand", ["x", "s"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)],
               [numpy_helper.from_array(np.array(dims, np.int64), "s")])
    n = int(np.prod(dims, dtype=object))
    with pytest.raises(ShapeError, match=rf"Expand.*'y'.*{n * 4} bytes.*{MAX_TENSOR_BYTES}"):
        onnxc.compile(m)


def test_expand_to_a_large_valid_shape_still_runs() -> None:
    m = _model([helper.make_node("Expand", ["x", "s"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)],
               [numpy_helper.from_array(np.array([300, 700], np.int64), "s")])
    got = onnxc.compile(m)(np.array([2.5], np.float32))
    np.testing.assert_array_equal(got, np.full((300, 700), 2.5, np.float32))


def _raw_initializer(dims: list[int], raw: bytes) -> onnx.TensorProto:
    t = onnx.TensorProto()
    t.name, t.data_type = "w", FLOAT
    t.dims.extend(dims)
    t.raw_data = raw
    return t


@pytest.mark.parametrize("dims", [[2**32, 2**32], [2**33, 2**31]])
def test_initializer_dims_whose_product_wraps_are_a_model_error(dims) -> None:
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)], [_raw_initializer(dims, b"\0" * 4)])
    with pytest.raises(ModelError, match=rf"initializer 'w'.*{int(np.prod(dims, dtype=object))} elements"):
        onnxc.compile(m)


def test_initializer_with_inconsistent_data_is_still_a_model_error() -> None:
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)], [_raw_initializer([2, 3], b"\0" * 4)])
    with pytest.raises(ModelError, match=r"initializer 'w': 6 elements of type FLOAT need 24 raw_data bytes, found 4"):
        onnxc.compile(m)


def test_sparse_initializer_too_large_to_densify_is_a_model_error() -> None:
    values = numpy_helper.from_array(np.array([1.0], np.float32), "w")
    indices = numpy_helper.from_array(np.array([5], np.int64), "w_idx")
    sp = helper.make_sparse_tensor(values, indices, [2**40, 2**20])
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", FLOAT, None)], sparse_initializer=[sp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"sparse initializer 'w'.*\[1099511627776, 1048576\]"):
        onnxc.compile(m)


def test_graph_input_declared_beyond_the_limit_is_a_model_error() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [2**40, 2**40])],
               [helper.make_tensor_value_info("y", FLOAT, None)])
    with pytest.raises(ModelError, match=r"input 'x'.*\[1099511627776, 1099511627776\].*bytes"):
        onnxc.compile(m)


def test_rank_above_the_limit_is_a_shape_error() -> None:
    dims = [1] * (MAX_RANK + 1)
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)],
               [numpy_helper.from_array(np.array(dims, np.int64), "s")])
    with pytest.raises(ShapeError, match=rf"Reshape.*rank {MAX_RANK + 1}.*{MAX_RANK}"):
        onnxc.compile(m)


def test_rank_at_the_limit_still_runs() -> None:
    dims = [1] * (MAX_RANK - 1) + [3]
    m = _model([helper.make_node("Reshape", ["x", "s"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
               [helper.make_tensor_value_info("x", FLOAT, [3])], [helper.make_tensor_value_info("y", FLOAT, None)],
               [numpy_helper.from_array(np.array(dims, np.int64), "s")])
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(onnxc.compile(m)(x), -x.reshape(dims))


def test_static_plan_beyond_the_limit_is_a_shape_error() -> None:
    """Many buffers, each under the per-tensor limit, all alive at once: the arena would exceed it."""
    from onnxc.codegen.memory_plan import Slot, static_plan
    big = MAX_TENSOR_BYTES // 2
    with pytest.raises(ShapeError, match=r"memory plan.*bytes"):
        static_plan([Slot(i, big, 0, 5) for i in range(4)])


def test_huge_dimension_beside_a_zero_is_refused() -> None:
    """[0, 2^62] holds no bytes, but the C code would still compute with the dim."""
    m = _model([helper.make_node("Expand", ["x", "s"], ["y"])], [helper.make_tensor_value_info("x", FLOAT, [1])],
               [helper.make_tensor_value_info("y", FLOAT, None)],
               [numpy_helper.from_array(np.array([0, 2**62], np.int64), "s")])
    with pytest.raises(ShapeError, match=rf"Expand.*\[0, {2**62}\] has a dimension above the limit"):
        onnxc.compile(m)
