"""QuantizeLinear / DequantizeLinear / MatMulInteger / QLinearMatMul / ConvInteger / QLinearConv against
onnx.reference (or numpy where the reference departs from the spec): granularities, symbolic dims,
saturation and rounding edges, zero points, empty tensors, low-precision element types, folding."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import onnxc

from .util import node_model, reference

RNG = np.random.default_rng(7)
F8 = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "e5m2": ml_dtypes.float8_e5m2,
      "e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "e2m1": ml_dtypes.float4_e2m1fn}
LOWP_INTS = {"int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4, "int2": ml_dtypes.int2, "uint2": ml_dtypes.uint2}


def run(op: str, inputs: dict, opset: int = 25, const_inputs: tuple = (), input_shapes: dict | None = None,
        expected: list | None = None, **attrs) -> tuple[list, list, onnxc.CompiledModel]:
    """Compile and run a one-node model; returns (onnxc outputs, reference outputs, compiled model)."""
    model = node_model(op, inputs, 1, opset, const_inputs=const_inputs, input_shapes=input_shapes, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in const_inputs}
    want = expected if expected is not None else reference(model, feeds)
    compiled = onnxc.compile(model)
    got = compiled.run(feeds)
    return [got["y0"]], want, compiled


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal shapes and values; float8/float4 compared bit for bit, sub-byte ints by value."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype in [np.dtype(t) for t in F8.values()]:
        assert got.dtype == want.dtype or got.dtype == np.uint8
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    elif want.dtype in [np.dtype(t) for t in LOWP_INTS.values()]:
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))
    else:
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))


def check(op: str, inputs: dict, **kw) -> onnxc.CompiledModel:
    got, want, compiled = run(op, inputs, **kw)
    for g, w in zip(got, want):
        assert_same(g, w)
    return compiled


def f32(*shape) -> np.ndarray:
    return (RNG.standard_normal(shape) * 40).astype(np.float32)


# -- QuantizeLinear -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.uint16, np.int16, *LOWP_INTS.values()])
def test_quantize_integer_types(dt):
    info = ml_dtypes.iinfo(dt)
    span = float(info.max - info.min)
    x = np.concatenate([f32(40) * np.float32(span / 80), np.float32([4 * span, -4 * span, 0.25, 0.75, -1.25])])
    zp = np.array(info.min + (info.max - info.min) // 3, dt)
    check("QuantizeLinear", {"x": x, "s": np.float32(0.5), "z": zp})


def test_quantize_round_half_even_and_saturation():
    x = np.float32([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 126.5, 127.5, 200, -128.5, -129, np.inf, -np.inf])
    check("QuantizeLinear", {"x": x[:-2], "s": np.float32(1.0), "z": np.int8(0)}, opset=13)
    # +-inf saturate (the reference's int32 conversion overflows there)
    want = np.array([0, 2, 2, 4, 0, -2, -2, 126, 127, 127, -128, -128, 127, -128], np.int8)
    got, _, _ = run("QuantizeLinear", {"x": x, "s": np.float32(1.0), "z": np.int8(0)}, opset=13, expected=[want])
    np.testing.assert_array_equal(got[0], want)
    # NaN saturates to the low end (as the reference does on x86)
    got, _, _ = run("QuantizeLinear", {"x": np.float32([np.nan, 1]), "s": np.float32(1)}, opset=10,
                    expected=[np.uint8([0, 1])])
    np.testing.assert_array_equal(got[0], [0, 1])


@pytest.mark.parametrize("scale", [0.02, 1.3e36, 3e-38])
def test_quantize_near_half_a_step(scale):
    """Values under half a step go to the zero point without dividing them (their quotient would be subnormal:
    the slow path of the divider, with a masked-attention activation's scale near 1e36); the values around the
    cut and the special ones as the reference."""
    s = np.float32(scale)
    h = np.float32(s / 2)
    x = np.float32([0, -0.0, h, -h, np.nextafter(h, 0), np.nextafter(h, np.inf), -np.nextafter(h, np.inf), s * 0.49,
                    s * 1.5, 1e-40, -1e-40, min(scale * 300, 1e38), np.nan])
    check("QuantizeLinear", {"x": x, "s": s, "z": np.int8(3)})
    check("QuantizeLinear", {"x": x, "s": s, "z": np.uint8(128)})


@pytest.mark.parametrize("axis", [1, -1, -3])
def test_quantize_per_axis_symbolic(axis):
    x = f32(2, 3, 4, 5)
    n = x.shape[axis]
    s = (RNG.random(n) + 0.1).astype(np.float32)
    z = RNG.integers(-20, 20, n).astype(np.int8)
    check("QuantizeLinear", {"x": x, "s": s, "z": z}, opset=21, axis=axis, input_shapes={"x": ["N", 3, 4, 5]})


@pytest.mark.parametrize("shape,axis,block", [((2, 8, 3), 1, 4), ((2, 7, 3), 1, 3), ((3, 10), -1, 4)])
def test_quantize_blocked_symbolic(shape, axis, block):
    x = f32(*shape)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    s = (RNG.random(sshape) + 0.1).astype(np.float32)
    z = RNG.integers(0, 50, sshape).astype(np.uint8)
    sym = {"x": ["N", *shape[1:]], "s": ["N", *sshape[1:]], "z": ["N", *sshape[1:]]}
    check("QuantizeLinear", {"x": x, "s": s, "z": z}, opset=21, axis=axis, block_size=block, input_shapes=sym)


def test_quantize_blocked_mismatch_fails_at_run_time():
    x, s = f32(2, 8), np.ones((2, 3), np.float32)
    model = node_model("QuantizeLinear", {"x": x, "s": s}, 1, 21, input_shapes={"x": [2, "K"], "s": [2, "B"]},
                       axis=1, block_size=4)
    with pytest.raises(onnxc.OnnxcError, match="scale/zero point shape"):
        onnxc.compile(model).run({"x": x, "s": s})


def test_quantize_output_dtype_and_empty():
    check("QuantizeLinear", {"x": f32(3, 4), "s": np.float32(0.25)}, opset=21, output_dtype=3)  # int8
    check("QuantizeLinear", {"x": np.zeros((0, 4), np.float32), "s": np.float32(2), "z": np.uint8(3)})
    check("QuantizeLinear", {"x": np.zeros((2, 0), np.float32), "s": np.ones(0, np.float32),
                             "z": np.zeros(0, np.int8)}, axis=1)


@pytest.mark.parametrize("xt,st", [(np.float16, np.float16), (np.float32, np.float16), (np.float16, np.float32),
                                   (np.int32, np.float32)])
def test_quantize_mixed_precision(xt, st):
    x = (f32(50) * 3).astype(xt) if xt != np.int32 else RNG.integers(-3000, 3000, 50).astype(np.int32)
    check("QuantizeLinear", {"x": x, "s": np.array(0.37, st), "z": np.int16(5)}, opset=23)


def test_quantize_precision_attribute():
    x = f32(64)
    check("QuantizeLinear", {"x": x, "s": np.float32(0.3), "z": np.int8(1)}, opset=23, precision=10)


@pytest.mark.parametrize("name", list(F8))
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_float8(name, saturate):
    if name == "e2m1" and not saturate:
        pytest.skip("saturate does not apply to float4")
    x = np.concatenate([f32(30), np.float32([1e6, -1e6, 0.0, -0.0, 0.01, np.inf])])
    zp = np.zeros((), F8[name])
    check("QuantizeLinear", {"x": x, "s": np.float32(2.0), "z": zp}, saturate=saturate)


def test_quantize_bfloat16_scale_per_axis():
    x = f32(4, 3).astype(ml_dtypes.bfloat16)
    s = np.array([0.3, 0.7, 1.1], ml_dtypes.bfloat16)
    check("QuantizeLinear", {"x": x, "s": s, "z": np.uint8([1, 2, 3])}, opset=21, axis=-1)


# -- DequantizeLinear -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.uint16, np.int16, np.int32, *LOWP_INTS.values()])
def test_dequantize_integer_types(dt):
    info = ml_dtypes.iinfo(dt)
    x = RNG.integers(info.min, int(info.max) + 1, (3, 5)).astype(dt)
    zp = np.array(info.min // 2 + info.max // 3, dt)
    check("DequantizeLinear", {"x": x, "s": np.float32(0.37), "z": zp})


@pytest.mark.parametrize("axis", [0, -1])
def test_dequantize_per_axis_negative_axis_symbolic(axis):
    x = RNG.integers(0, 256, (6, 4)).astype(np.uint8)
    n = x.shape[axis]
    s, z = (RNG.random(n) + 0.1).astype(np.float32), RNG.integers(0, 256, n).astype(np.uint8)
    check("DequantizeLinear", {"x": x, "s": s, "z": z}, opset=19, axis=axis, input_shapes={"x": ["N", 4]}
          if axis else {"x": [6, "W"]})


def test_dequantize_blocked_symbolic_and_output_dtype():
    x = RNG.integers(-128, 128, (2, 3, 10)).astype(np.int8)
    s = (RNG.random((2, 3, 4)) + 0.1).astype(np.float32)
    z = RNG.integers(-5, 5, (2, 3, 4)).astype(np.int8)
    sym = {"x": ["B", "S", 10], "s": ["B", "S", 4], "z": ["B", "S", 4]}
    check("DequantizeLinear", {"x": x, "s": s, "z": z}, opset=23, axis=2, block_size=3, input_shapes=sym,
          output_dtype=10)


@pytest.mark.parametrize("st", [np.float16, ml_dtypes.bfloat16])
def test_dequantize_half_scales(st):
    x = RNG.integers(-128, 128, (5, 7)).astype(np.int8)
    check("DequantizeLinear", {"x": x, "s": np.array([0.013], st), "z": np.int8([-3])}, opset=21)


@pytest.mark.parametrize("name", list(F8))
def test_dequantize_float8(name):
    x = np.arange(16 if name == "e2m1" else 256).astype(np.uint8).view(F8[name])  # every code
    got, want, _ = run("DequantizeLinear", {"x": x, "s": np.float32(0.5)})
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    np.testing.assert_array_equal(np.nan_to_num(got[0]), np.nan_to_num(want[0]))


def test_dequantize_empty():
    check("DequantizeLinear", {"x": np.zeros((0, 3), np.uint8), "s": np.float32(2), "z": np.uint8(1)})


def test_dequantize_constant_weights_fold():
    w = RNG.integers(-128, 128, (8, 4)).astype(np.int8)
    s = (RNG.random(8) + 0.01).astype(np.float32)
    z = RNG.integers(-3, 3, 8).astype(np.int8)
    model = node_model("DequantizeLinear", {"w": w, "s": s, "z": z}, 1, 21, const_inputs=("w", "s", "z"), axis=0)
    compiled = onnxc.compile(model)
    assert not any(n.op_type == "DequantizeLinear" for n in compiled.ir.graph.nodes)  # folded
    np.testing.assert_array_equal(compiled.run({})["y0"], reference(model, {})[0])


def test_quantize_constant_fold_matches_kernel():
    x = np.concatenate([f32(40), np.float32([0.5, 1.5, -2.5, 1e6])])
    inputs = {"x": x, "s": np.float32(0.5), "z": np.int8(3)}
    folded = check("QuantizeLinear", inputs, const_inputs=("x", "s", "z"))
    assert not any(n.op_type == "QuantizeLinear" for n in folded.ir.graph.nodes)
    kernel, _, _ = run("QuantizeLinear", inputs)
    np.testing.assert_array_equal(folded.run({})["y0"], kernel[0])


FOLD_CASES = [
    ("QuantizeLinear", lambda: {"x": f32(4, 6), "s": np.float32([0.5, 1, 2, 3]), "z": np.int8([0, 1, -1, 5])},
     {"axis": 0}),
    ("QuantizeLinear", lambda: {"x": np.float32([1e6, -1e6, np.inf, np.nan, 0.3, -0.0]), "s": np.float32(0.7),
                                "z": np.zeros((), ml_dtypes.float8_e4m3fn)}, {"saturate": 0}),
    ("QuantizeLinear", lambda: {"x": np.float32([1e6, -1e6, np.inf, 0.3, -0.0, 700]), "s": np.float32(0.7),
                                "z": np.zeros((), ml_dtypes.float8_e5m2)}, {}),
    ("QuantizeLinear", lambda: {"x": f32(9), "s": np.float32(7.0), "z": np.zeros((), ml_dtypes.float4_e2m1fn)}, {}),
    ("QuantizeLinear", lambda: {"x": f32(9).astype(np.float16), "s": np.float16(0.3), "z": np.uint8(9)}, {}),
    ("QuantizeLinear", lambda: {"x": f32(9), "s": np.float32(0.3), "z": np.int16(9)}, {"precision": 16}),
    ("QuantizeLinear", lambda: {"x": RNG.integers(-999, 999, 9).astype(np.int32), "s": np.float32(0.3),
                                "z": np.zeros((), ml_dtypes.int4)}, {}),
    ("QuantizeLinear", lambda: {"x": f32(2, 5), "s": np.float32([[0.5, 2], [1, 3]]), "z": np.uint8([[1, 2], [3, 4]])},
     {"axis": 1, "block_size": 3}),
    ("DequantizeLinear", lambda: {"x": RNG.integers(-2**31, 2**31 - 1, 9).astype(np.int32), "s": np.float16(0.01),
                                  "z": np.int32(77777)}, {}),
    ("DequantizeLinear", lambda: {"x": np.arange(256).astype(np.uint8).view(ml_dtypes.float8_e4m3fnuz),
                                  "s": np.float32(3.0)}, {"output_dtype": 16}),
    ("DequantizeLinear", lambda: {"x": RNG.integers(-8, 8, (3, 4)).astype(ml_dtypes.int4),
                                  "s": np.array([0.1, 0.2, 0.3], ml_dtypes.bfloat16),
                                  "z": np.array([1, 0, -1], ml_dtypes.int4)}, {"axis": 0}),
]


@pytest.mark.parametrize("case", range(len(FOLD_CASES)))
def test_fold_matches_kernel(case):
    """The numpy fold rule and the C kernel agree bit for bit (specials, precisions, low-precision types)."""
    op, make, attrs = FOLD_CASES[case]
    inputs = make()
    folded, _, cf = run(op, inputs, const_inputs=tuple(inputs), expected=[None], **attrs)
    assert not any(n.op_type == op for n in cf.ir.graph.nodes)
    kernel, _, ck = run(op, inputs, expected=[None], **attrs)
    assert any(n.op_type == op for n in ck.ir.graph.nodes)
    g, k = np.asarray(folded[0]), np.asarray(kernel[0])
    assert g.dtype == k.dtype and g.shape == k.shape
    np.testing.assert_array_equal(g.view(np.uint8), k.view(np.uint8))


# -- MatMulInteger / QLinearMatMul ------------------------------------------------------------------------

def q8(dt, *shape) -> np.ndarray:
    info = np.iinfo(dt)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dt)


MM_SHAPES = [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (4, 3)), ((2, 3, 4), (4,)), ((0, 4), (4, 2)),
             ((2, 0), (0, 3))]


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("sa,sb", MM_SHAPES)
def test_matmul_integer(ta, tb, sa, sb):
    check("MatMulInteger", {"A": q8(ta, *sa), "B": q8(tb, *sb), "za": q8(ta), "zb": q8(tb)}, opset=10)


def test_matmul_integer_per_row_and_column_symbolic():
    a, b = q8(np.uint8, 2, 3, 5), q8(np.int8, 2, 5, 4)
    za, zb = q8(np.uint8, 2, 3, 1), q8(np.int8, 4)
    check("MatMulInteger", {"A": a, "B": b, "za": za, "zb": zb}, opset=10,
          input_shapes={"A": ["B", "M", 5], "B": ["B", 5, 4], "za": ["B", "M", 1]})
    # an [M] vector is per row (the spec; the reference would broadcast it along K)
    a, za = q8(np.int8, 3, 3), q8(np.int8, 3)
    want = (a.astype(np.int32) - za[:, None]) @ (b[0].astype(np.int32)[:3] - zb)
    check("MatMulInteger", {"A": a, "B": b[0][:3].copy(), "za": za, "zb": zb}, opset=10,
          expected=[want.astype(np.int32)])


def test_matmul_integer_without_zero_points_and_constant_b():
    a, b = q8(np.int8, 2, 7, 9), q8(np.int8, 9, 3)
    check("MatMulInteger", {"A": a, "B": b}, opset=10, const_inputs=("B",), input_shapes={"A": ["N", 7, 9]})


def qmm_inputs(ta, tb, ty, sa, sb, scale_t=np.float32, col=False, row=False):
    a, b = q8(ta, *sa), q8(tb, *sb)
    m, n = (sa[-2] if len(sa) > 1 else 1), sb[-1]
    a_s = (RNG.random((m, 1) if row else ()) * 0.01 + 0.001).astype(scale_t)
    a_z = q8(ta, *((m, 1) if row else ()))
    b_s = (RNG.random(n if col else ()) * 0.01 + 0.001).astype(scale_t)
    b_z = q8(tb, *((n,) if col else ()))
    return {"a": a, "as": a_s, "az": a_z, "b": b, "bs": b_s, "bz": b_z, "ys": np.array(0.02, scale_t),
            "yz": q8(ty)}


@pytest.mark.parametrize("ta,tb,ty", [(np.uint8, np.uint8, np.uint8), (np.int8, np.uint8, np.int8),
                                      (np.uint8, np.int8, np.int8)])
@pytest.mark.parametrize("sa,sb", MM_SHAPES[:5])
def test_qlinear_matmul(ta, tb, ty, sa, sb):
    check("QLinearMatMul", qmm_inputs(ta, tb, ty, sa, sb), opset=10)


@pytest.mark.parametrize("scale_t", [np.float32, np.float16])
def test_qlinear_matmul_per_row_per_column_symbolic(scale_t):
    inputs = qmm_inputs(np.uint8, np.int8, np.uint8, (2, 6, 8), (8, 5), scale_t, col=True, row=True)
    check("QLinearMatMul", inputs, opset=21, input_shapes={"a": ["N", 6, 8]})


def test_qlinear_matmul_bfloat16_scales_saturate():
    inputs = qmm_inputs(np.int8, np.int8, np.int8, (4, 16), (16, 3), ml_dtypes.bfloat16, col=True)
    inputs["ys"] = np.array(0.0001, ml_dtypes.bfloat16)  # most outputs saturate
    check("QLinearMatMul", inputs, opset=21)


# -- ConvInteger / QLinearConv ----------------------------------------------------------------------------

CONV_CASES = [
    ((1, 2, 7, 7), (3, 2, 3, 3), {}),
    ((2, 4, 6, 5), (4, 2, 3, 2), {"group": 2, "pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 3, 9, 8), (6, 1, 3, 3), {"group": 3, "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10), (2, 2, 3), {"strides": [3], "pads": [2, 2]}),
    ((1, 1, 4, 5, 5), (2, 1, 2, 3, 3), {"pads": [0, 1, 1, 1, 1, 1]}),
    ((1, 2, 5, 5), (4, 2, 1, 1), {}),
]


@pytest.mark.parametrize("tx,tw", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_integer(tx, tw, case):
    xs, ws, attrs = CONV_CASES[case]
    check("ConvInteger", {"x": q8(tx, *xs), "w": q8(tw, *ws), "xz": q8(tx), "wz": q8(tw)}, opset=10,
          input_shapes={"x": ["N", *xs[1:]]}, **attrs)


def test_conv_integer_per_channel_zero_point_constant_weights():
    x, w = q8(np.uint8, 2, 3, 6, 6), q8(np.int8, 4, 3, 3, 3)
    check("ConvInteger", {"x": x, "w": w, "xz": np.uint8(128), "wz": q8(np.int8, 4)}, opset=10,
          const_inputs=("w", "wz"), pads=[1, 1, 1, 1])
    check("ConvInteger", {"x": x, "w": w}, opset=10)


def qconv_inputs(tx, tw, ty, xs, ws, per_channel: bool, bias: bool):
    m = ws[0]
    ch = (m,) if per_channel else ()
    return {"x": q8(tx, *xs), "xs": np.float32(0.02), "xz": q8(tx), "w": q8(tw, *ws),
            "ws": (RNG.random(ch) * 0.02 + 0.001).astype(np.float32), "wz": q8(tw, *ch),
            "ys": np.float32(0.05), "yz": q8(ty),
            "b": RNG.integers(-5000, 5000, m).astype(np.int32) if bias else None}


@pytest.mark.parametrize("tx,tw,ty", [(np.uint8, np.uint8, np.uint8), (np.int8, np.int8, np.int8),
                                      (np.uint8, np.int8, np.int8)])
@pytest.mark.parametrize("case", [0, 1, 2, 5])
@pytest.mark.parametrize("per_channel,bias", [(False, False), (True, True)])
def test_qlinear_conv(tx, tw, ty, case, per_channel, bias):
    xs, ws, attrs = CONV_CASES[case]
    check("QLinearConv", qconv_inputs(tx, tw, ty, xs, ws, per_channel, bias), opset=10, **attrs)


def test_qlinear_conv_1d_3d_symbolic():
    for case in (3, 4):
        xs, ws, attrs = CONV_CASES[case]
        check("QLinearConv", qconv_inputs(np.uint8, np.uint8, np.uint8, xs, ws, False, True), opset=10,
              input_shapes={"x": ["N", *xs[1:]]}, **attrs)


THREADED = [  # large enough for the runtime's pool (PAR_WORK_MIN = 1 << 18 work units per loop)
    ("QLinearMatMul", lambda: qmm_inputs(np.uint8, np.int8, np.uint8, (2, 300, 512), (512, 300), col=True, row=True),
     {}, {"a": ["N", 300, 512]}),
    ("MatMulInteger", lambda: {"A": q8(np.uint8, 2, 300, 512), "B": q8(np.int8, 512, 300), "za": q8(np.uint8),
                               "zb": q8(np.int8, 300)}, {}, {"A": ["N", 300, 512]}),
    ("QLinearConv", lambda: qconv_inputs(np.uint8, np.int8, np.int8, (1, 16, 48, 48), (32, 16, 3, 3), True, True),
     {"pads": [1, 1, 1, 1]}, {"x": ["N", 16, 48, 48]}),  # long dot products: transposed columns, GEMM
    ("QLinearConv", lambda: qconv_inputs(np.uint8, np.uint8, np.uint8, (1, 4, 192, 192), (8, 1, 3, 3), False, True),
     {"pads": [1, 1, 1, 1], "group": 4}, {"x": ["N", 4, 192, 192]}),  # short ones (KG < DOT_MIN_K): a sweep per tap
    ("ConvInteger", lambda: {"x": q8(np.uint8, 1, 16, 48, 48), "w": q8(np.int8, 32, 16, 3, 3), "xz": q8(np.uint8),
                             "wz": q8(np.int8)}, {"pads": [1, 1, 1, 1]}, {"x": ["N", 16, 48, 48]}),
    ("ConvInteger", lambda: {"x": q8(np.int8, 1, 4, 192, 192), "w": q8(np.int8, 8, 1, 3, 3)},
     {"pads": [1, 1, 1, 1], "group": 4}, {"x": ["N", 4, 192, 192]}),
    ("QuantizeLinear", lambda: {"x": f32(8, 300, 128), "s": np.full(300, 0.3, np.float32), "z": q8(np.int8, 300)},
     {"axis": 1}, {"x": ["N", 300, 128]}),
    ("QuantizeLinear", lambda: {"x": f32(1, 600, 512), "s": np.float32(0.3), "z": np.uint8(7)}, {},
     {"x": ["N", 600, "W"]}),
    ("QuantizeLinear", lambda: {"x": f32(64, 4096), "s": RNG.random((64, 128)).astype(np.float32) + 0.1},
     {"axis": 1, "block_size": 32}, {"x": ["N", 4096], "s": ["N", 128]}),
    ("DequantizeLinear", lambda: {"x": q8(np.int8, 1, 600, 512), "s": np.float32(0.3), "z": np.int8(-3)}, {},
     {"x": ["N", 600, 512]}),
    ("DequantizeLinear", lambda: {"x": q8(np.uint8, 4, 256, 300), "s": np.full(256, 0.2, np.float32),
                                  "z": q8(np.uint8, 256)}, {"axis": 1}, {"x": [4, "C", 300], "s": ["C"], "z": ["C"]}),
]


@pytest.mark.parametrize("case", range(len(THREADED)))
@pytest.mark.parametrize("symbolic", [False, True])
def test_threaded_kernels_match_reference(case, symbolic):
    """The runtime's pool paths (im2col rows, output channels, integer GEMM operand preparation and
    requantization, Q/DQ rows and blocks) give the reference results and, bit for bit, the 1-thread ones."""
    op, make, attrs, shapes = THREADED[case]
    inputs = make()
    opset = 21 if op in ("QuantizeLinear", "DequantizeLinear") else 10
    model = node_model(op, inputs, 1, opset, input_shapes=shapes if symbolic else None, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    one, two = onnxc.compile(model, threads=1), onnxc.compile(model, threads=2)
    assert "onnxc_parallel(" in two.c_source and "omp parallel" not in two.c_source
    got = two.run(feeds)["y0"]
    assert_same(got, reference(model, feeds)[0])
    assert_same(got, one.run(feeds)["y0"])


@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32), "s": np.ones(4, np.float32)}, {"axis": 1},
     "per-axis scale has 4 elements"),
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32), "s": np.float32(1), "z": np.int8(0)},
     {"output_dtype": 2}, "differs from the zero point type"),
    ("QuantizeLinear", {"x": np.zeros((4, 8), np.float32), "s": np.ones((4, 3), np.float32)},
     {"axis": 1, "block_size": 4}, "blocked scale shape"),
    ("DequantizeLinear", {"x": np.zeros(3, np.int8), "s": np.float32(1), "z": np.uint8(0)}, {},
     "zero point type"),
    ("MatMulInteger", {"A": np.zeros((2, 3), np.uint8), "B": np.zeros((3, 4), np.uint8),
                       "za": np.zeros(5, np.uint8)}, {}, "neither per-tensor nor per-row"),
    ("ConvInteger", {"x": np.zeros((1, 3, 5, 5), np.uint8), "w": np.zeros((2, 2, 3, 3), np.uint8)}, {},
     r"x axis 1 \(channels\) is 3"),
])
def test_invalid_models_name_the_node(op, inputs, attrs, match):
    model = node_model(op, inputs, 1, 21, **attrs)
    with pytest.raises(onnxc.OnnxcError, match=match) as e:
        onnxc.compile(model)
    assert op in str(e.value)


def test_qlinear_matmul_float8_is_unsupported():
    f8 = ml_dtypes.float8_e4m3fn
    inputs = {"a": np.ones((2, 2), f8), "as": np.float32(1), "az": np.zeros((), f8), "b": np.ones((2, 2), f8),
              "bs": np.float32(1), "bz": np.zeros((), f8), "ys": np.float32(1), "yz": np.zeros((), f8)}
    with pytest.raises(onnxc.UnsupportedOpError, match="element type f8e4m3fn is not supported"):
        onnxc.compile(node_model("QLinearMatMul", inputs, 1, 21))


def test_float8e8m0_and_int32_scales():
    s = np.array([0.25, 4, 1], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    check("DequantizeLinear", {"x": q8(np.int8, 3, 4), "s": s, "z": q8(np.int8, 3)}, opset=24, axis=0,
          output_dtype=1)
    check("QuantizeLinear", {"x": f32(3, 4), "s": s, "z": q8(np.int8, 3)}, opset=24, axis=0)
    check("QuantizeLinear", {"x": f32(3, 4) * 100, "s": np.int32(7), "z": q8(np.int8)}, opset=23)
