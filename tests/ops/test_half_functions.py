"""float16 / bfloat16 function ops (Attention, FlexAttention, LinearAttention, CausalConvWithState,
SwiGLU) and Range, against onnx.reference.

The expansions follow the reference's rounding (half MatMul and Softmax round like numpy; the
softmax, linear-attention recurrence and SwiGLU gate run in float32 where the reference does), so
results agree to the last bit in almost every element: the comparisons allow one unit in the last
place (batched bfloat16 products in the reference run float32 BLAS in another summation order).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc

from .util import node_model, reference

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
HALVES = [F16, BF16]
ULP = {F16: 2.0 ** -10, BF16: 2.0 ** -7}  # relative size of one unit in the last place (upper bound)


def _r(rng, shape, dt, scale: float = 1.0) -> np.ndarray:
    return (rng.random(shape) * scale).astype(np.float32).astype(dt)


def _check(op: str, inputs: dict, n_outputs: int = 1, opset: int = 23, domain: str = "", ulps: float = 1.0,
           input_shapes: dict | None = None, **attrs) -> list[np.ndarray]:
    """Run ``op`` on onnxc and the reference; every output within ``ulps`` units in the last place."""
    model = node_model(op, inputs, n_outputs, opset, domain=domain, input_shapes=input_shapes, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    want = reference(model, feeds)
    got = onnxc.compile(model).run({k: v.view(np.uint16) if v.dtype == BF16 else v for k, v in feeds.items()})
    outs = []
    for i, w in enumerate(want):
        w, g = np.asarray(w), np.asarray(got[f"y{i}"])
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape, w.shape)
        rtol = ULP.get(w.dtype, 1e-6) * ulps
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=1e-6,
                                   err_msg=f"output {i}")
        outs.append(g)
    return outs


# -- Attention -----------------------------------------------------------------------------------

def _qkv(rng, dt, b=2, hq=4, hkv=4, sq=3, skv=5, d=8, layout="4d"):
    if layout == "3d":
        return _r(rng, (b, sq, hq * d), dt), _r(rng, (b, skv, hkv * d), dt), _r(rng, (b, skv, hkv * d), dt)
    return _r(rng, (b, hq, sq, d), dt), _r(rng, (b, hkv, skv, d), dt), _r(rng, (b, hkv, skv, d), dt)


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("layout,heads,causal", [("4d", (4, 4), 0), ("4d", (4, 2), 1), ("3d", (6, 2), 1),
                                                 ("3d", (2, 2), 0)])
def test_attention(dt, layout, heads, causal):
    rng = np.random.default_rng(heads[0] + causal)
    q, k, v = _qkv(rng, dt, hq=heads[0], hkv=heads[1], layout=layout)
    attrs = {"q_num_heads": heads[0], "kv_num_heads": heads[1]} if layout == "3d" else {}
    _check("Attention", {"q": q, "k": k, "v": v}, is_causal=causal, **attrs)


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("kind", ["bool", "half"])
def test_attention_masks_and_cache(dt, kind):
    rng = np.random.default_rng(5)
    q, k, v = _qkv(rng, dt, hq=4, hkv=2, sq=2, skv=3)
    pk, pv = _r(rng, (2, 2, 4, 8), dt), _r(rng, (2, 2, 4, 8), dt)
    mask = rng.random((2, 7)) > 0.3 if kind == "bool" else _r(rng, (2, 7), dt, scale=-2.0)
    _check("Attention", {"q": q, "k": k, "v": v, "m": mask, "pk": pk, "pv": pv}, n_outputs=3, is_causal=1)


@pytest.mark.parametrize("dt", HALVES)
def test_attention_external_cache_and_window(dt):
    rng = np.random.default_rng(6)
    q, k, v = _qkv(rng, dt, hq=2, hkv=2, sq=2, skv=6)
    nonpad = np.array([4, 6], np.int64)
    _check("Attention", {"q": q, "k": k, "v": v, "m": None, "pk": None, "pv": None, "n": nonpad}, opset=25,
           is_causal=1, left_window_size=2)


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("precision", [int(TP.FLOAT), int(TP.DOUBLE)])
def test_attention_softmax_precision_and_qk_output(dt, precision):
    rng = np.random.default_rng(7)
    q, k, v = _qkv(rng, dt)
    mask = rng.random((3, 5)) > 0.2
    _check("Attention", {"q": q, "k": k, "v": v, "m": mask}, n_outputs=4, opset=24, softmax_precision=precision,
           qk_matmul_output_mode=3)


def test_attention_softcap_follows_the_function_body():
    """With softcap, the function body stays in float16 while the reference widens to float32 (its
    softcap is a float32 scalar): the results agree to a few units in the last place."""
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng, F16)
    _check("Attention", {"q": q, "k": k, "v": v}, softcap=2.0, ulps=8)


# -- FlexAttention, LinearAttention --------------------------------------------------------------

@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("heads", [(4, 4), (4, 2)])
def test_flex_attention(dt, heads):
    rng = np.random.default_rng(heads[1])
    q, k, v = _qkv(rng, dt, hq=heads[0], hkv=heads[1], sq=4, skv=6, d=16)
    _check("FlexAttention", {"q": q, "k": k, "v": v}, opset=26, domain="ai.onnx.preview")


def test_flex_attention_float16_softmax_on_float_inputs():
    rng = np.random.default_rng(9)
    q, k, v = _qkv(rng, np.float32, sq=4, skv=6)
    _check("FlexAttention", {"q": q, "k": k, "v": v}, opset=26, domain="ai.onnx.preview", ulps=1,
           softmax_precision=int(TP.FLOAT16))


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
@pytest.mark.parametrize("state", ["none", "float", "same"])
def test_linear_attention(dt, rule, state):
    rng = np.random.default_rng(10)
    b, t, hq, hkv, dk = 2, 3, 4, 2, 4
    ins = {"q": _r(rng, (b, t, hq * dk), dt), "k": _r(rng, (b, t, hkv * dk), dt), "v": _r(rng, (b, t, hkv * dk), dt)}
    sdt = {"none": None, "float": np.float32, "same": dt}[state]
    ins["s"] = None if sdt is None else _r(rng, (b, hkv, dk, dk), sdt)
    if rule == "gated_delta":
        ins["g"] = _r(rng, (b, t, hkv), dt, scale=-0.2)
        ins["beta"] = _r(rng, (b, t, hkv), dt)
    _check("LinearAttention", ins, n_outputs=2, opset=27, update_rule=rule, q_num_heads=hq, kv_num_heads=hkv)


# -- CausalConvWithState, SwiGLU -------------------------------------------------------------------

@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("k,past,activation", [(1, False, "none"), (3, True, "silu"), (4, False, "silu")])
def test_causal_conv_with_state(dt, k, past, activation):
    rng = np.random.default_rng(k)
    b, c, length = 2, 3, 5
    ins = {"x": _r(rng, (b, c, length), dt, 2.0), "w": _r(rng, (c, 1, k), dt), "b": None,
           "p": _r(rng, (b, c, k - 1), dt) if past else None}
    _check("CausalConvWithState", ins, n_outputs=2, opset=27, activation=activation,
           input_shapes={"x": ["B", 3, "L"]})


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swiglu(dt, alpha):
    rng = np.random.default_rng(int(alpha))
    a = ((rng.random((4, 6)) - 0.5) * 8).astype(np.float32).astype(dt)
    _check("SwiGLU", {"a": a, "b": _r(rng, (4, 6), dt, 3.0)}, opset=28, alpha=alpha,
           input_shapes={"a": ["N", 6], "b": ["N", 6]})


# -- Range -----------------------------------------------------------------------------------------

def _range_model(dt, values, const: bool, opset: int = 27, **attrs):
    names = ["start", "limit", "delta"]
    arrays = [np.array(x, np.float32).astype(dt) for x in values]
    node = helper.make_node("Range", names, ["y"], **attrs)
    tp = helper.np_dtype_to_tensor_dtype(dt)
    if const:
        inits = [helper.make_tensor(n, tp, [], a.view(np.uint16).tobytes(), raw=True) for n, a in zip(names, arrays)]
        g = helper.make_graph([node], "t", [], [helper.make_tensor_value_info("y", 0, None)], initializer=inits)
    else:
        g = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, tp, []) for n in names],
                              [helper.make_tensor_value_info("y", 0, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), dict(zip(names, arrays))


@pytest.mark.parametrize("dt", HALVES)
@pytest.mark.parametrize("values", [(1, 5, 2), (10, 4, -1.5), (0.1, 3.3, 0.3), (2, 2, 1), (100, 300, 7.25)])
@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize("stash", [None, int(TP.DOUBLE)])
def test_range(dt, values, const, stash):
    model, arrays = _range_model(dt, values, const, **({} if stash is None else {"stash_type": stash}))
    want = np.asarray(reference(model, {} if const else arrays)[0])
    got = np.asarray(onnxc.compile(model).run({} if const else {k: v.view(np.uint16) if dt == BF16 else v
                                                                  for k, v in arrays.items()})["y"])
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_range_invalid_stash_type_and_zero_delta():
    model, _ = _range_model(F16, (0, 4, 1), True, stash_type=int(TP.INT32))
    with pytest.raises(onnxc.ShapeError, match="stash_type"):
        onnxc.compile(model)
    model, arrays = _range_model(BF16, (0, 4, 0), False)
    compiled = onnxc.compile(model)
    with pytest.raises(onnxc.OnnxcError, match="delta must not be zero"):
        compiled.run({k: v.view(np.uint16) for k, v in arrays.items()})
