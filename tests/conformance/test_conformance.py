"""Every ONNX backend test case of the pinned onnx package, compiled and run with onnxc.

A case whose compile raises ``onnxc.UnsupportedOpError`` is an expected failure (xfail with the
reason) when expected_unsupported.txt lists it, a failure otherwise; any other exception or a mismatch
is a failure. Collection compiles nothing. Results go to
``conformance_report.json`` (see plugin.py). Run: ``pytest tests/conformance -n 2``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import onnx
import pytest

import onnxc

from .cases import (
    THREADS,
    bounded,
    check_random_outputs,
    compare_outputs,
    data_sets,
    expose_logits,
    is_seeded,
    model_cases,
    node_cases,
    normalize,
    onnxruntime_outputs,
    random_feeds,
    random_nodes,
    reference_outputs,
    runtime_inputs,
)
from .plugin import one_line

pytestmark = pytest.mark.conformance


EXPECTED_UNSUPPORTED = Path(__file__).with_name("expected_unsupported.txt")


@lru_cache(maxsize=1)
def expected_unsupported() -> dict[str, str]:
    """case name -> why onnxc does not support it, from expected_unsupported.txt (``name  # reason`` lines)."""
    out = {}
    for line in EXPECTED_UNSUPPORTED.read_text().splitlines():
        name, _, why = line.partition("#")
        if name.strip():
            out[name.strip()] = why.strip()
    return out


def compile_or_xfail(source, request: pytest.FixtureRequest, name: str) -> onnxc.CompiledModel:
    """Compile with onnxc. An UnsupportedOpError is an expected failure only for the cases listed in
    expected_unsupported.txt; anywhere else it fails the case (a lowering that gave up, or a regression)."""
    try:
        compiled = onnxc.compile(source, threads=THREADS)
    except onnxc.UnsupportedOpError as e:
        ops = sorted({"::".join(str(p) for p in op[:2]) if isinstance(op, tuple) else str(op) for op in e.ops})
        request.node.user_properties.append(("unsupported_ops", ops))
        lines = [re.sub(r"; used by .*$", "", line) for line in str(e).splitlines()]
        reason = one_line(chr(10).join(lines))
        unsupported(name, f"unsupported: {reason}")
    return compiled


def unsupported(name: str, reason: str) -> None:
    """An expected failure when expected_unsupported.txt lists the case, else a failure."""
    if name not in expected_unsupported():
        pytest.fail(f"{reason} (not listed in {EXPECTED_UNSUPPORTED.name}: a lowering gave up, or a regression)")
    pytest.xfail(reason)


def passed(name: str) -> None:
    """The case passed: it must not be listed as unsupported, so the list stays exact."""
    if name in expected_unsupported():
        pytest.fail(f"passes now: remove it from {EXPECTED_UNSUPPORTED.name} (listed: {expected_unsupported()[name]!r})")


def run_and_compare(compiled: onnxc.CompiledModel, model: onnx.ModelProto, inputs: list, outputs: list,
                    rtol: float, atol: float) -> None:
    names = [i.name for i in runtime_inputs(model)]
    feeds = dict(zip(names, (normalize(x) for x in inputs)))
    got = compiled.run(feeds)
    compare_outputs(got, outputs, [o.name for o in model.graph.output], rtol, atol)


RANDOM_UNSEEDED = "random output without seed: checked value-independently (shape, dtype, range)"
RANDOM_OTHER_DRAWS = ("seeded random output: equal to onnx.reference's draws for the seed, but the expected values "
                      "come from another generator state: checked value-independently (shape, dtype, range)")


def run_random_case(compiled: onnxc.CompiledModel, case) -> None:
    """A case with random outputs, which the spec defines only in distribution. Every data set gets the
    value-independent checks. Values are compared only when every random node is seeded: onnxc must
    then reproduce onnx.reference's draws (the same generator, numpy's RandomState(seed)), and
    the expected data as well unless those were drawn from another generator state. Unseeded cases and
    cases whose expected data no seeded draw reproduces end as expected failures saying so."""
    model = case.model
    seeded = all(is_seeded(n) for n in random_nodes(model))
    names = [i.name for i in runtime_inputs(model)]
    out_names = [o.name for o in model.graph.output]
    other_draws = False
    for inputs, outputs in case.data_sets:
        feeds = dict(zip(names, (normalize(x) for x in inputs)))
        got = compiled.run(feeds)
        check_random_outputs(got, outputs, model, feeds)
        if not seeded:
            continue
        compare_outputs(got, reference_outputs(model, feeds), out_names, case.rtol, case.atol)
        try:
            compare_outputs(got, outputs, out_names, case.rtol, case.atol)
        except AssertionError:
            other_draws = True
    if not seeded:
        pytest.xfail(RANDOM_UNSEEDED)
    if other_draws:
        pytest.xfail(RANDOM_OTHER_DRAWS)


# Model cases first: the light models are the slowest, so xdist spreads them early.
@pytest.mark.parametrize("name", list(model_cases()))
def test_model_case(name: str, request: pytest.FixtureRequest) -> None:
    case = model_cases()[name]
    with bounded(name):
        if case.suite == "light":
            model = expose_logits(onnx.load(str(case.path)))
            compiled = compile_or_xfail(model, request, name)
            feeds = random_feeds(model, name)
            try:
                want = onnxruntime_outputs(model, feeds)
            except Exception as e:  # the reference failing is a harness problem; say so
                raise AssertionError(f"onnxruntime (the reference) failed: {one_line(str(e))}") from e
            run_and_compare(compiled, model, [feeds[i.name] for i in runtime_inputs(model)], want,
                            case.rtol, case.atol)
            passed(name)
            return
        path = case.path / "model.onnx"
        model = onnx.load(str(path))
        compiled = compile_or_xfail(str(path), request, name)
        for inputs, outputs in data_sets(case, model):
            run_and_compare(compiled, model, inputs, outputs, case.rtol, case.atol)
        passed(name)


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_node_case(name: str, request: pytest.FixtureRequest) -> None:
    case = node_cases()[name]
    with bounded(name):
        compiled = compile_or_xfail(case.model, request, name)
        if random_nodes(case.model):
            run_random_case(compiled, case)
            return
        for inputs, outputs in case.data_sets:
            try:
                run_and_compare(compiled, case.model, inputs, outputs, case.rtol, case.atol)
            except onnxc.UnsupportedOpError as e:  # valid data using a feature not implemented (ImageDecoder formats)
                request.node.user_properties.append(("unsupported_ops", [f"{n.op_type} (run time)"
                                                                         for n in case.model.graph.node]))
                unsupported(name, one_line(str(e)))
        passed(name)
