"""Element-type declarations of kernels (``types=`` in codegen/kernels/base.py): one standard reason
for an undeclared type, checked before compiling and again at lowering, on the value ``typed=`` names.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP

import onnxc
from onnxc.codegen.kernels.base import KernelCtx, KernelDef, kernel
from onnxc.codegen.kernels.registry import KERNELS, unsupported_reason
from onnxc.codegen.kernels.typesets import ANY, FLOATS, HALF, describe_types, type_name, type_names
from onnxc.ir import DType, Node, OptionalType, SequenceType, TensorType, UnsupportedOpError, Value

from .util import check_node, node_model


def ir_node(op: str, in_types: list, out_types: list) -> Node:
    ins = [None if t is None else Value(f"i{k}", t) for k, t in enumerate(in_types)]
    return Node(op, ins, [Value(f"o{k}", t) for k, t in enumerate(out_types)])


def test_reason_names_the_type_and_the_supported_ones() -> None:
    kd = KernelDef(("Foo",), "", None, types=FLOATS | HALF)
    assert kd.reason(ir_node("Foo", [TensorType(DType.FLOAT, (2,))], [None])) is None
    assert kd.reason(ir_node("Foo", [TensorType(DType.INT64, (2,))], [None])) == \
        "element type i64 is not supported (supported: float, double, f16, bf16)"
    assert kd.reason(ir_node("Foo", [None], [None])) is None            # absent input: nothing to check
    assert kd.reason(ir_node("Foo", [TensorType(DType.UNDEFINED)], [None])) is not None
    assert KernelDef(("Foo",), "", None).reason(ir_node("Foo", [TensorType(DType.INT8)], [None])) is None


def test_typed_names_another_input_or_an_output_and_unwraps_containers() -> None:
    out = KernelDef(("Foo",), "", None, types={DType.BOOL}, typed="out0")
    n = ir_node("Foo", [TensorType(DType.FLOAT)], [TensorType(DType.INT32)])
    assert "element type i32" in out.reason(n)
    in1 = KernelDef(("Foo",), "", None, types={DType.INT8}, typed="in1")
    assert in1.reason(ir_node("Foo", [TensorType(DType.FLOAT), TensorType(DType.INT8)], [None])) is None
    seq = ir_node("Foo", [SequenceType(OptionalType(TensorType(DType.STRING)))], [None])
    assert "element type string" in KernelDef(("Foo",), "", None, types={DType.FLOAT}).reason(seq)
    with pytest.raises(ValueError):
        kernel("Foo", types=FLOATS, typed="input0")


def test_types_checked_before_accepts_and_again_at_lowering() -> None:
    calls = []

    def accepts(node: Node) -> str | None:
        calls.append(node.op_type)
        return None

    def body(ctx: KernelCtx) -> str:
        return "return 0;"

    key = ("com.example.types", "Foo")
    try:
        kernel("Foo", domain=key[0], types={DType.FLOAT}, accepts=accepts)(body)
        kd = KERNELS[key]
        assert kd.family == "test_kernel_types"
        node = ir_node("Foo", [TensorType(DType.DOUBLE)], [TensorType(DType.DOUBLE)])
        node.domain = key[0]
        assert unsupported_reason(node).startswith("element type double is not supported")
        assert calls == []  # the type failed first
        with pytest.raises(NotImplementedError, match="element type double"):
            kd.fn(KernelCtx(node, [], [], str))
        node.inputs[0].type = TensorType(DType.FLOAT)
        assert unsupported_reason(node) is None and calls == ["Foo"]
    finally:
        KERNELS.pop(key, None)


def test_compact_names() -> None:
    assert type_name(DType.BFLOAT16) == "bf16" and type_name(DType.UINT64) == "u64"
    assert type_name(DType.FLOAT8E4M3FN) == "f8e4m3fn" and type_name(DType.INT4) == "i4"
    assert type_names({DType.BOOL, DType.FLOAT, DType.INT8}) == ["float", "i8", "bool"]
    assert describe_types(ANY) == "any" and describe_types(ANY - {DType.STRING}) == "any except string"
    assert describe_types(FLOATS | {DType.INT8, DType.INT16, DType.INT32, DType.INT64}) == "float, double, i8..i64"


# -- end to end: a model with an undeclared type fails with the standard reason --------------------

@pytest.mark.parametrize("op, dt, attrs", [
    ("Softmax", np.int32, {}),           # float types only
    ("Not", np.float32, {}),             # bool only
    ("BitwiseNot", np.float64, {}),      # integers only
    ("ReduceLogSum", np.int8, {}),       # logs of 8-bit integers: not declared
])
def test_undeclared_type_is_unsupported_with_the_standard_reason(op, dt, attrs) -> None:
    x = np.ones((2, 3), dt)
    model = node_model(op, {"x": x}, **attrs)
    with pytest.raises(UnsupportedOpError) as e:
        onnxc.compile(model)
    name = type_name({np.int32: DType.INT32, np.float32: DType.FLOAT, np.float64: DType.DOUBLE,
                      np.int64: DType.INT64, np.int8: DType.INT8}[dt])
    assert f"element type {name} is not supported (supported: " in str(e.value)
    assert op in str(e.value)


def test_cast_target_type_is_the_declared_one() -> None:
    """Cast declares its target types (typed="out0"): a string target is rejected by types=, a float8
    target compiles."""
    x = np.array([0.5, -3.0, 448.0], np.float32)
    with pytest.raises(UnsupportedOpError, match="element type string is not supported"):
        onnxc.compile(node_model("Cast", {"x": x}, to=TP.STRING))
    onnxc.compile(node_model("Cast", {"x": x}, to=TP.FLOAT8E4M3FN))


# -- declared types beyond the float tests: each one runs ------------------------------------------

def test_view_and_copy_kernels_move_float8_and_int4() -> None:
    """Movement kernels declare float8/int4 (copied as bytes): their results equal numpy's."""
    import ml_dtypes

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(ml_dtypes.float8_e4m3fn)
    got = check_node("Transpose", {"x": x}, perm=[2, 0, 1], expected=[x.transpose(2, 0, 1)])["y0"]
    assert got.dtype == x.dtype
    q = rng.integers(-8, 8, (3, 4)).astype(ml_dtypes.int4)
    idx = np.array([2, -1], np.int64)
    check_node("Gather", {"x": q, "i": idx}, axis=1, expected=[q[:, [2, 3]]])
    check_node("Concat", {"a": q, "b": q[:, :1]}, axis=-1, expected=[np.concatenate([q, q[:, :1]], axis=-1)])


@pytest.mark.parametrize("op", ["Transpose", "Concat", "Gather", "Slice", "Expand"])
def test_movement_declares_strings(op) -> None:
    kd = KERNELS[("", op)]
    assert DType.STRING in kd.types and DType.FLOAT8E4M3FN in kd.types and DType.INT4 in kd.types


def test_pad_does_not_declare_bytes_types() -> None:
    """Pad writes a constant of the element type: only types with C literals are declared."""
    kd = KERNELS[("", "Pad")]
    assert DType.FLOAT8E4M3FN not in kd.types and DType.STRING not in kd.types and DType.BFLOAT16 in kd.types


def test_reduce_mean_keeps_to_wide_integers() -> None:
    """ReduceMean of int32 is exact integer division of the sum; int8 (whose sum wraps) is not declared."""
    x = np.array([[1, 2, 4], [7, -9, 3]], np.int32)
    check_node("ReduceMean", {"x": x, "a": np.array([1], np.int64)}, const_inputs=("a",), opset=18, keepdims=0)
    with pytest.raises(UnsupportedOpError, match="element type i8 is not supported"):
        onnxc.compile(node_model("ReduceMean", {"x": x.astype(np.int8)}, opset=18))
