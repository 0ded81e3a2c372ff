"""The direct convolution (runtime_c/onnxc_conv_direct.h): output channels as the vector lanes, up to 12
positions of a row broadcast from the phase-split padded copy, the filter packed as the GEMM's B operand.

Pinned here: every tile width (1 to 12 positions, rows split evenly), partial channel panels (M not a multiple of
16 or 32), strides, dilations, groups, 1-D, the fused epilogue (bias, residual, activations) in both of its forms,
K in slices with partial sums for few tiles, the panel-first split of large filters, blocks of rows on a wide
input, 2 threads bit for bit against 1, the choice of the path, and the fallback of targets without AVX-512.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnxc

from .test_conv_paths import _conv_model, needs_avx512

DIRECT = "onnxc_dc_conv"  # (onnxc_dc_conv or onnxc_dc_conv_x)


@pytest.fixture(autouse=True)
def _direct_rule(monkeypatch):
    """The rule of codegen/kernels/conv.py (a developer's ONNXC_DIRECT_CONV would change the paths)."""
    monkeypatch.delenv("ONNXC_DIRECT_CONV", raising=False)


def _check(xs, ws, bias=True, residual=False, act=None, act_params=None, x_decl=None, threads=None, flags=None,
           direct=True, **attrs):
    m, ref, feeds = _conv_model(xs, ws, bias, residual, act, act_params, x_decl, attrs)
    cm = onnxc.compile(m, threads=threads, flags=flags)
    assert (DIRECT in cm.c_source) == direct, "direct path expected" if direct else "direct path not expected"
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    got = cm.run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return cm, feeds


@needs_avx512
@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 40, 7, 7], [48, 40, 3, 3], {"pads": [1, 1, 1, 1]}),                  # 7-wide tiles, a 16-channel panel
    ([2, 24, 14, 14], [40, 24, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # 8 lanes of a panel, batch 2
    ([1, 20, 23, 40], [33, 20, 3, 2], {"pads": [1, 0, 1, 2]}),                # 41 = 11 + 10 + 10 + 10, 1 lane
    ([1, 17, 15, 16], [24, 17, 3, 3], {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ([1, 16, 9, 13], [64, 8, 3, 3], {"pads": [1, 1, 1, 1], "group": 2}),
    ([2, 20, 70], [50, 20, 5], {"pads": [2, 2]}),                             # 1-D: one row of 70
    ([1, 12, 17, 19], [40, 12, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ([1, 8, 3, 2], [20, 8, 3, 3], {"pads": [1, 1, 1, 1]}),                     # 2-wide tiles
    ([1, 9, 12, 27], [17, 9, 3, 3], {"pads": [0, 1, 0, 1], "strides": [1, 2]}),  # OW 14: 7 + 7
    ([1, 16, 5, 12], [36, 16, 2, 2], {}),                                     # 11-wide rows, even kernel
    ([1, 7, 6, 30], [20, 7, 5, 5], {"pads": [2, 2, 2, 2]}),                   # 30 = 10 + 10 + 10, 5x5
])
def test_direct_shapes(xs, ws, attrs):
    _check(xs, ws, **attrs)


@needs_avx512
@pytest.mark.parametrize("xs,ws,kw", [
    ([1, 96, 7, 7], [40, 96, 1, 1], {"residual": True, "act": "Relu"}),   # 49 positions as one row: 12 x 4 + 1
    ([2, 64, 14, 14], [72, 64, 1, 1], {"act": "Clip", "act_params": [0.0, 6.0], "threads": 2}),
    ([1, 80, 5, 3], [33, 80, 1, 1], {"bias": False}),
])
def test_direct_pointwise_small_maps(xs, ws, kw):
    _check(xs, ws, **kw)


@needs_avx512
def test_direct_pointwise_not_on_large_maps():
    _check([1, 64, 20, 20], [48, 64, 1, 1], direct=False)


@needs_avx512
@pytest.mark.parametrize("ow", range(1, 13))
def test_direct_every_tile_width(ow):
    _check([1, 8, 4, ow + 2], [24, 8, 3, 3], **{"pads": [1, 0, 1, 0]})


@needs_avx512
@pytest.mark.parametrize("residual,act,params", [
    (True, "Relu", None), (False, "Clip", [0.0, 6.0]), (True, "LeakyRelu", [0.1]), (False, "Sigmoid", None),
    (True, "HardSwish", None), (False, None, None), (True, None, None),
])
def test_direct_epilogue(residual, act, params):
    """Without a residual, bias and activation run on the channel vectors before the transpose; with one, on each
    channel's row after it (40 channels: a partial panel either way)."""
    _check([2, 24, 9, 11], [40, 24, 3, 3], residual=residual, act=act, act_params=params, pads=[1, 1, 1, 1],
           x_decl=["N", 24, 9, 11], threads=2)


@needs_avx512
def test_direct_no_bias_residual():
    _check([1, 24, 6, 6], [36, 24, 3, 3], bias=False, residual=True, act="Relu", pads=[1, 1, 1, 1])


@needs_avx512
@pytest.mark.parametrize("xs,ws", [
    ([1, 96, 6, 6], [48, 96, 3, 3]),     # K = 864 over 6 tiles: slices of 256 taps with partial sums
    ([1, 256, 5, 5], [160, 256, 3, 3]),  # a 1.5 MB filter: threads split the panels first
])
def test_direct_k_slices(xs, ws):
    _check(xs, ws, residual=True, act="Relu", pads=[1, 1, 1, 1])


@needs_avx512
def test_direct_row_blocks():
    """A wide input (51 KB of phase-plane rows per output row): the tiles run in blocks of rows, every panel per
    block."""
    _check([1, 64, 40, 200], [40, 64, 3, 2], pads=[1, 0, 1, 1], act="Relu")


@needs_avx512
@pytest.mark.parametrize("xs,ws,attrs,kw", [
    ([1, 16, 50, 60], [32, 16, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"act": "Sigmoid"}),
    ([2, 12, 30, 52], [40, 12, 3, 3], {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, {"residual": True, "act": "Relu"}),
    ([1, 8, 4, 40], [24, 8, 3, 3], {"pads": [4, 1, 4, 1]}, {"residual": True}),   # rows with no valid tap
    ([1, 8, 9, 40], [20, 8, 5, 5], {"pads": [3, 1, 0, 4], "strides": [1, 2]}, {}),  # asymmetric edges
    ([1, 8, 2, 30], [36, 8, 3, 3], {"pads": [1, 1, 1, 1]}, {"residual": True, "threads": 2}),  # corners only
    ([1, 8, 6, 30], [24, 8, 3, 3], {"pads": [1, 0, 1, 2]}, {"residual": True}),   # right edges only
    ([1, 24, 19, 21], [40, 24, 3, 3], {"strides": [2, 2]}, {"act": "Relu"}),     # narrow, but no padding at all
])
def test_direct_in_place_input(xs, ws, attrs, kw):
    """From ONNXC_DCX_MIN_OW output columns (or with no padding) the input is read where it is: inner tiles at fixed
    offsets, edge columns as column tiles (outputs and residual OW apart), edge rows and corners with the lists of
    their valid taps (these shapes all take that branch of the generated C)."""
    cm, _ = _check(xs, ws, **attrs, **kw)
    assert "onnxc_dc_conv_x(" in cm.c_source


@needs_avx512
@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 32, 42, 44], [48, 32, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # the input read in place
    ([1, 64, 10, 10], [96, 64, 3, 3], {"pads": [1, 1, 1, 1]}),                     # 10 rows over 8 chunks
    ([1, 256, 7, 7], [160, 256, 3, 3], {"pads": [1, 1, 1, 1]}),                    # panels first, K slices
    ([3, 32, 21, 22], [40, 32, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # images shared by 2 threads
])
def test_direct_threads_same_bits(xs, ws, attrs):
    """Each output is one tile's K loop (slices in order) whoever runs it: 2 threads give the bits of 1."""
    m, ref, feeds = _conv_model(xs, ws, True, True, "Relu", None, None, attrs)
    outs = []
    for threads in (1, 2):
        cm = onnxc.compile(m, threads=threads)
        assert DIRECT in cm.c_source
        outs.append(cm.run(feeds)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], ReferenceEvaluator(ref).run(None, feeds)[0], rtol=1e-4, atol=1e-4)


@needs_avx512
@pytest.mark.parametrize("xs,ws,attrs", [
    ([1, 32, 10, 10], [16, 32, 3, 3], {"pads": [1, 1, 1, 1]}),      # 16 output channels: half-empty vectors
    ([1, 3, 40, 40], [32, 3, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # K = 27: a stem
    ([1, 64, 20, 17], [96, 64, 1, 1], {}),                          # pointwise on a larger map
    ([1, 64, 40, 40], [64, 64, 3, 3], {"pads": [1, 1, 1, 1]}),      # Winograd first
    ([1, 16, 21, 21], [40, 16, 3, 3], {"pads": [1, 1, 1, 1], "strides": [3, 3]}),  # stride 3
])
def test_direct_not_taken(xs, ws, attrs):
    _check(xs, ws, direct=False, **attrs)


@needs_avx512
def test_direct_switch_off(monkeypatch):
    monkeypatch.setenv("ONNXC_DIRECT_CONV", "0")
    _check([1, 40, 7, 7], [48, 40, 3, 3], direct=False, pads=[1, 1, 1, 1])


def test_direct_fallback_without_avx512():
    """An x86-64-v3 build (AVX2) runs the transposed GEMM on the same packed filter."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 target flags")
    cm, _ = _check([1, 40, 7, 9], [48, 40, 3, 3], residual=True, act="Relu", pads=[1, 1, 1, 1],
                   flags=("-O2", "-march=x86-64-v3"), direct=True)
    assert "onnxc_sg_conv_small(" in cm.c_source
    assert os.environ.get("ONNXC_DIRECT_CONV") is None
