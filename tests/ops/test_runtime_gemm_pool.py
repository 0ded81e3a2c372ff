"""The integer GEMM (runtime_c/onnxc_quant.c, onnxc_qgemm_s16) and the float16 / bfloat16 GEMM
(runtime_c/onnxc_hgemm.c) on the runtime's pool: at threads=2 and sizes past their thresholds, with
symbolic dims, the same bits as the one-thread build and the reference."""

from __future__ import annotations

import numpy as np

import onnxc

from .test_half_matmul import HALVES, _bits, _emulate, _model, _rand, _run
from .test_quant import assert_same, qmm_inputs
from .util import node_model, reference


def test_qgemm_on_the_pool_symbolic():
    inputs = qmm_inputs(np.uint8, np.int8, np.uint8, (3, 70, 130), (130, 90), col=True)
    model = node_model("QLinearMatMul", inputs, 1, 10, input_shapes={"a": ["B", "M", 130]})
    two, one = onnxc.compile(model, threads=2), onnxc.compile(model, threads=1)
    assert "onnxc_qgemm_s16(" in two.c_source  # (the packing around it belongs to codegen/templates/qmatmul.c.j2)
    rng = np.random.default_rng(5)
    for b, m in ((3, 70), (1, 9), (2, 301)):  # below and past the pool's threshold (1 << 18 multiply-adds)
        feeds = {k: v for k, v in inputs.items() if v is not None}
        feeds["a"] = rng.integers(0, 256, (b, m, 130), dtype=np.uint8)
        got = two.run(feeds)["y0"]
        assert_same(got, reference(model, feeds)[0])
        np.testing.assert_array_equal(got, one.run(feeds)["y0"])


def test_hgemm_on_the_pool_symbolic():
    rng = np.random.default_rng(8)
    for dt in HALVES:
        model = _model("MatMul", {"a": _rand(rng, (1, 8, 200), dt), "b": _rand(rng, (200, 64), dt)},
                       shapes={"a": ["B", "M", 200], "b": [200, "N"]})
        for shape_a, n in (((2, 150, 200), 70), ((1, 3, 200), 5), ((3, 33, 200), 129)):
            a, b = _rand(rng, shape_a, dt), _rand(rng, (200, n), dt)
            got2, c2 = _run(model, {"a": a, "b": b}, threads=2)
            got1, _ = _run(model, {"a": a, "b": b}, threads=1)
            assert "onnxc_hgemm_" in c2.c_source and "omp parallel" not in c2.c_source
            assert np.array_equal(_bits(got2), _bits(got1))
            assert np.array_equal(_bits(got2), _bits(_emulate(a, b)))
