"""float8 / float4 / float8e8m0 / int4 / uint4 / int2 / uint2: Cast, CastLike and BitCast end to end.

Results are compared bit for bit (NaN patterns included) with onnx.reference, which computes with
ml_dtypes. Where the ONNX spec says more than the reference (float8e8m0 special values, rounding of
non-integral floats to int4/int2) the expected values are written out from the spec. Constant
folding (the numpy twins in passes/shapes/lowp_np.py) must give the same bits as the C kernels.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.ir import DType, ShapeError

from .util import node_model, reference

F8 = {TP.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, TP.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
      TP.FLOAT8E5M2: ml_dtypes.float8_e5m2, TP.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}
MINI = F8 | {TP.FLOAT4E2M1: ml_dtypes.float4_e2m1fn}
INTS = {TP.INT4: ml_dtypes.int4, TP.UINT4: ml_dtypes.uint4, TP.INT2: ml_dtypes.int2, TP.UINT2: ml_dtypes.uint2}
ML = MINI | INTS | {TP.FLOAT8E8M0: ml_dtypes.float8_e8m0fnu, TP.BFLOAT16: ml_dtypes.bfloat16}
NAME = {t: TP.DataType.Name(t).lower() for t in ML}


def all_codes(t: int) -> np.ndarray:
    """Every value of a minifloat type, as an ml_dtypes array."""
    n = 16 if t == TP.FLOAT4E2M1 else 256
    return np.arange(n, dtype=np.uint8).view(ML[t])


def edge_values(dt=np.float32) -> np.ndarray:
    """Specials, every format's max/min/subnormal neighbourhood, ties and out-of-range values."""
    v = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-7, -1e-7, 1e-30, 0.1, -0.3, 1.0, 1.5, 2.5,
         448, 449, 463.9, 464, 465, 479, 480, 500, 1e6, -1e6, 240, 247.9, 248, 249, 256,
         57344, 57345, 61439, 61440, 65504, 6, 5, 7, -7, 0.25, 0.75, 1.25, 2**-9, 2**-10, 3 * 2**-10,
         2**-17, 2**-16, 3 * 2**-17, 2**-15, 2**-7, 2**-8]
    with np.errstate(over="ignore"):  # float16 has no 1e6
        return np.array(v + [-x for x in v[10:]], dtype=dt)


def run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    got = onnxc.compile(model).run(feeds)
    return [got[o.name] for o in model.graph.output]


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal dtype, shape and bits (ml_dtypes sub-byte values compared by value)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{got.dtype} != {want.dtype}"
    assert got.shape == want.shape
    if want.dtype in (np.dtype(t) for t in INTS.values()):
        np.testing.assert_array_equal(got.astype(np.int8), want.astype(np.int8))
    elif want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
    else:
        g, w = got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}")
        bad = np.nonzero(g.reshape(-1) != w.reshape(-1))[0]
        assert bad.size == 0, (f"{bad.size} differ; first at {bad[0]}: got {g.reshape(-1)[bad[0]]:#x}, "
                               f"expected {w.reshape(-1)[bad[0]]:#x}")


def check_cast(x: np.ndarray, opset: int = 25, expected=None, **attrs) -> np.ndarray:
    """Cast at run time and folded (x an initializer); both must equal the reference bit for bit."""
    model = node_model("Cast", {"x": x}, opset=opset, **attrs)
    want = expected if expected is not None else reference(model, {"x": x})[0]
    got = run(model, {"x": x})[0]
    same_bits(got, want)
    folded = node_model("Cast", {"x": x}, opset=opset, const_inputs=("x",), **attrs)
    c = onnxc.compile(folded)
    assert not [n for n in c.ir.graph.nodes if n.op_type == "Cast"], "Cast was not constant-folded"
    same_bits(c.run({})["y0"], want)
    return got


# ------------------------------------------------------------------------------ float -> float8/4

@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src", [np.float32, np.float16, np.float64], ids=["f32", "f16", "f64"])
@pytest.mark.parametrize("to", list(MINI), ids=[NAME[t] for t in MINI])
def test_float_to_minifloat(to, src, saturate):
    x = edge_values(src)
    with np.errstate(all="ignore"):
        check_cast(x, to=to, saturate=saturate)


@pytest.mark.parametrize("to", list(MINI), ids=[NAME[t] for t in MINI])
def test_every_float16_and_random_floats(to):
    """Every float16 bit pattern and random float32 bit patterns, saturating (the default)."""
    rng = np.random.default_rng(0)
    x16 = np.arange(65536, dtype=np.uint16).view(np.float16)
    x32 = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        for x in (x16, x32):
            m = node_model("Cast", {"x": x}, opset=19 if to != TP.FLOAT4E2M1 else 23, to=to)
            same_bits(run(m, {"x": x})[0], reference(m, {"x": x})[0])


def test_double_rounds_once():
    """A double just above a float8 tie rounds up; through float32 it would hit the tie and go to
    even (ml_dtypes, hence onnx.reference, does that: the spec asks for one rounding of x)."""
    x = np.array([1.0625 + 2.0**-40, -(1.0625 + 2.0**-40), 1.0625], np.float64)  # e4m3fn step 0.125
    want = np.array([1.125, -1.125, 1.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    check_cast(x, to=TP.FLOAT8E4M3FN, expected=want)


# ------------------------------------------------------------------------------ float8/4 -> others

@pytest.mark.parametrize("dst", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE, TP.BFLOAT16, TP.BOOL],
                         ids=["f32", "f16", "f64", "bf16", "bool"])
@pytest.mark.parametrize("src", list(MINI) + [TP.FLOAT8E8M0], ids=[NAME[t] for t in [*MINI, TP.FLOAT8E8M0]])
def test_minifloat_to_float(src, dst):
    check_cast(all_codes(src), to=dst)


@pytest.mark.parametrize("dst", [TP.INT32, TP.INT64, TP.INT8, TP.UINT16])
@pytest.mark.parametrize("src", list(MINI), ids=[NAME[t] for t in MINI])
def test_minifloat_to_int(src, dst):
    """Finite, in-range values (others are undefined in ONNX) truncate toward zero."""
    x = all_codes(src)
    v = x.astype(np.float64)
    info = np.iinfo(helper.tensor_dtype_to_np_dtype(dst))
    check_cast(x[np.isfinite(v) & (v > info.min - 1) & (v < info.max + 1)], to=dst)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dst", list(F8), ids=[NAME[t] for t in F8])
@pytest.mark.parametrize("src", list(MINI), ids=[NAME[t] for t in MINI])
def test_minifloat_to_minifloat(src, dst, saturate):
    with np.errstate(all="ignore"):
        check_cast(all_codes(src), to=dst, saturate=saturate)


def test_minifloat_to_float4():
    for src in F8:
        check_cast(all_codes(src), opset=23, to=TP.FLOAT4E2M1)


def test_integers_to_float8():
    x = np.array([0, 1, -1, 7, 300, 448, 449, 100000, -100000, 2**40], np.int64)
    for to in F8:
        for sat in (1, 0):
            want = check_cast(x.astype(np.float64), to=to, saturate=sat)  # the reference needs floats
            check_cast(x, to=to, saturate=sat, expected=want)


# ------------------------------------------------------------------------------ float8e8m0

@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_e8m0_normal_values(mode, saturate):
    """Normal floats (where the spec and the reference agree): exact, rounding per round_mode."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200),
                        [1.0, 1.5, 1.4999, 2.0**-126, 3 * 2.0**-127, 2.0**127, 1.5 * 2.0**127, 3e38, -4.0, -0.7]])
    x = x.astype(np.float32)
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=saturate, round_mode=mode)
    x16 = x[(np.abs(x) > 1e-4) & (np.abs(x) < 6e4)].astype(np.float16)  # finite in float16 too
    check_cast(x16, opset=24, to=TP.FLOAT8E8M0, saturate=saturate, round_mode=mode)


def test_e8m0_special_values_follow_the_spec_table():
    """NaN -> NaN; saturate: inf and overflow -> E8M0_MAX, 0 and underflow -> E8M0_MIN; otherwise NaN."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1e-40, 2.0**-127, 1.5 * 2.0**127, 1.0], np.float32)
    e8 = ml_dtypes.float8_e8m0fnu
    sat_up = np.array([0xFF, 0xFE, 0xFE, 0x00, 0x00, 0x00, 0xFE, 0x7F], np.uint8).view(e8)
    nosat_nearest = np.array([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFF, 0x7F], np.uint8).view(e8)
    nosat_down = np.array([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFE, 0x7F], np.uint8).view(e8)
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=1, round_mode="up", expected=sat_up)
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=0, round_mode="nearest", expected=nosat_nearest)
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=0, round_mode="down", expected=nosat_down)


def test_e8m0_from_double_overflows():
    x = np.array([2.0**128, 1.5 * 2.0**128, 2.0**-140], np.float64)
    e8 = ml_dtypes.float8_e8m0fnu
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=1, round_mode="down",
               expected=np.array([0xFE, 0xFE, 0x00], np.uint8).view(e8))
    check_cast(x, opset=24, to=TP.FLOAT8E8M0, saturate=0, round_mode="down",
               expected=np.array([0xFF, 0xFF, 0xFF], np.uint8).view(e8))


def test_invalid_round_mode_names_the_node():
    m = node_model("Cast", {"x": np.ones(3, np.float32)}, opset=24, to=TP.FLOAT8E8M0, round_mode="sideways")
    with pytest.raises(ShapeError, match="round_mode"):
        onnxc.compile(m)


# ------------------------------------------------------------------------------ int4/uint4/int2/uint2

@pytest.mark.parametrize("to", list(INTS), ids=[NAME[t] for t in INTS])
def test_integers_to_subbyte_wrap(to):
    x = np.array([-200, -9, -8, -3, -2, -1, 0, 1, 2, 3, 7, 8, 15, 16, 17, 200, 2**40 + 5], np.int64)
    check_cast(x, to=to)
    check_cast(x.astype(np.int8), to=to)
    check_cast(x.astype(np.uint16), to=to)
    check_cast(np.array([True, False]), to=to)


@pytest.mark.parametrize("to", list(INTS), ids=[NAME[t] for t in INTS])
def test_integral_floats_to_subbyte(to):
    x = np.arange(-9, 17).astype(np.float32)
    check_cast(x, to=to)
    check_cast(x.astype(np.float16), to=to)


@pytest.mark.parametrize("to", list(INTS), ids=[NAME[t] for t in INTS])
def test_fractional_floats_round_half_to_even(to):
    """The ONNX int4/int2 notes: round to nearest even, then keep the low bits; NaN/inf -> 0."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 7.5, 15.5, np.nan, np.inf, -np.inf], np.float64)
    r = np.rint(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)).astype(np.int64)
    bits = 4 if to in (TP.INT4, TP.UINT4) else 2
    low = r & ((1 << bits) - 1)
    if to in (TP.INT4, TP.INT2):
        low = (low ^ (1 << (bits - 1))) - (1 << (bits - 1))
    want = low.astype(INTS[to])
    with np.errstate(all="ignore"):
        check_cast(x, to=to, expected=want)
        check_cast(x.astype(np.float32), to=to, expected=want)


@pytest.mark.parametrize("dst", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE, TP.INT8, TP.UINT8, TP.INT64, TP.UINT32, TP.BOOL,
                                 TP.INT4, TP.UINT4, TP.INT2, TP.UINT2, TP.FLOAT8E4M3FN])
@pytest.mark.parametrize("src", list(INTS), ids=[NAME[t] for t in INTS])
def test_subbyte_to_others(src, dst):
    x = np.arange(-8, 16).astype(INTS[src])
    want = None
    if dst in INTS:  # ml_dtypes does not convert between its sub-byte types: keep the low bits
        want = x.astype(np.int64).astype(INTS[dst])
    check_cast(x, to=dst, expected=want)


# ------------------------------------------------------------------------------ CastLike, shapes, API

def test_castlike_saturate_and_symbolic_dims():
    x = np.array([[1e6, -1e6, np.inf], [0.3, np.nan, -0.0]], np.float32)
    like = np.zeros(1, ml_dtypes.float8_e4m3fn)
    for sat in (1, 0):
        m = node_model("CastLike", {"x": x, "like": like}, opset=25, saturate=sat,
                       input_shapes={"x": ["N", 3], "like": [1]})
        c = onnxc.compile(m)
        for rows in (x, x[:1], x[:0]):
            same_bits(c.run({"x": rows, "like": like})["y0"], reference(m, {"x": rows, "like": like})[0])


def test_symbolic_and_empty_inputs():
    m = node_model("Cast", {"x": np.zeros((2, 3), np.float32)}, opset=25, to=TP.FLOAT8E5M2,
                   input_shapes={"x": ["N", "M"]})
    c = onnxc.compile(m)
    for shape in [(4, 5), (0, 3), (1, 1)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 1e4
        same_bits(c.run({"x": x})["y0"], reference(m, {"x": x})[0])


def test_api_accepts_and_returns_ml_dtypes():
    """Every low-precision type round-trips through a graph input and output (Identity)."""
    for t, ml in ML.items():
        x = (all_codes(t) if t in MINI or t == TP.FLOAT8E8M0 else
             np.arange(-8, 16).astype(ml) if t in INTS else np.array([1.5, -2.0], ml))
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "t",
                              [helper.make_tensor_value_info("x", t, list(x.shape))],
                              [helper.make_tensor_value_info("y", t, list(x.shape))])
        c = onnxc.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)]))
        same_bits(c.run({"x": x})["y"], x)
        assert c.inputs[0].elem_type == DType(t)


def test_api_without_ml_dtypes_returns_storage(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails as if not installed
    x = np.array([1.0, -3.0, 500.0], np.float32)
    c = onnxc.compile(node_model("Cast", {"x": x}, opset=25, to=TP.FLOAT8E4M3FN))
    got = c.run({"x": x})["y0"]
    assert got.dtype == np.uint8 and got.tolist() == [0x38, 0xC4, 0x7E]
    c = onnxc.compile(node_model("Cast", {"x": x}, opset=25, to=TP.INT4))
    got = c.run({"x": x})["y0"]
    assert got.dtype == np.int8 and got.tolist() == [1, -3, 4]  # 500 = 0x1F4: low bits 4


# ------------------------------------------------------------------------------ BitCast

BITCASTS = [
    (np.array([1.0, -2.5, np.nan, -0.0], np.float32), TP.INT32),
    (np.array([[1, -1], [2**31 - 1, -(2**31)]], np.int32), TP.UINT32),
    (np.array([1.0, -2.5], np.float64), TP.INT64),
    (np.array([3, 2**63 - 1], np.int64), TP.UINT64),
    (np.array([1.5, -2.0, np.inf], np.float16), TP.BFLOAT16),
    (np.array([1.5, -2.0, np.inf], np.float16), TP.INT16),
    (np.array([1, 65535, 32768], np.uint16), TP.FLOAT16),
    (np.array([-1, -128, 127, 0], np.int8), TP.UINT8),
    (np.array([True, False, True]), TP.UINT8),
    (np.array([True, False, True]), TP.FLOAT8E4M3FN),
    (np.arange(256, dtype=np.uint8), TP.FLOAT8E5M2),
    (all_codes(TP.FLOAT8E4M3FN), TP.INT8),
    (all_codes(TP.FLOAT8E8M0), TP.FLOAT8E4M3FNUZ),
    (np.array(2.0, np.float32), TP.INT32),
    (np.zeros((0, 3), np.float32), TP.UINT32),
]


@pytest.mark.parametrize("case", range(len(BITCASTS)))
def test_bitcast_same_width(case):
    x, to = BITCASTS[case]
    m = node_model("BitCast", {"x": x}, opset=26, to=to)
    same_bits(run(m, {"x": x})[0], reference(m, {"x": x})[0])
    folded = node_model("BitCast", {"x": x}, opset=26, to=to, const_inputs=("x",))
    same_bits(onnxc.compile(folded).run({})["y0"], reference(m, {"x": x})[0])


@pytest.mark.parametrize("src,to", [(TP.INT4, TP.UINT4), (TP.UINT4, TP.INT4), (TP.INT4, TP.FLOAT4E2M1),
                                    (TP.FLOAT4E2M1, TP.INT4), (TP.FLOAT4E2M1, TP.UINT4), (TP.INT2, TP.UINT2),
                                    (TP.UINT2, TP.INT2)])
def test_bitcast_subbyte(src, to):
    bits = np.arange(16 if src in (TP.INT4, TP.UINT4, TP.FLOAT4E2M1) else 4, dtype=np.uint8)
    x = bits.view(ML[src]) if src == TP.FLOAT4E2M1 else bits.view(ML[src]).astype(ML[src])
    want = bits.view(ML[to]) if to == TP.FLOAT4E2M1 else bits.view(ML[to]).astype(ML[to])
    for const in ((), ("x",)):
        m = node_model("BitCast", {"x": x}, opset=26, to=to, const_inputs=const)
        same_bits(onnxc.compile(m).run({} if const else {"x": x})["y0"], want)


def test_bitcast_to_bool_normalizes_and_symbolic_dims():
    x = np.array([[0, 1, 2], [255, 0, 7]], np.uint8)
    m = node_model("BitCast", {"x": x}, opset=26, to=TP.BOOL, input_shapes={"x": ["N", 3]})
    c = onnxc.compile(m)
    np.testing.assert_array_equal(c.run({"x": x})["y0"], x != 0)
    assert c.run({"x": x[:0]})["y0"].shape == (0, 3)
    folded = node_model("BitCast", {"x": x}, opset=26, to=TP.BOOL, const_inputs=("x",))
    np.testing.assert_array_equal(onnxc.compile(folded).run({})["y0"], x != 0)


@pytest.mark.parametrize("src,to", [(np.float32, TP.INT16), (np.int8, TP.INT4), (np.float64, TP.FLOAT),
                                    (np.uint8, TP.STRING)])
def test_bitcast_width_mismatch_names_the_node(src, to):
    m = node_model("BitCast", {"x": np.zeros(4, src)}, opset=26, to=to)
    with pytest.raises(ShapeError, match="BitCast"):
        onnxc.compile(m)


def test_float6_targets_are_reported_unsupported():
    m = node_model("Cast", {"x": np.ones(3, np.float32)}, opset=25, to=27)  # Cast-28's FLOAT6E2M3
    with pytest.raises(onnxc.UnsupportedOpError, match="float6e2m3"):
        onnxc.compile(m)
