"""Audit: every operator onnxc implements, and every one that passes its ONNX node conformance cases,
has a test of its own under tests/ops/ or tests/models/ (beyond the conformance suite's shapes and
types).

The standard function ops onnxc expands also count their tests in tests/passes/test_expansions.py,
which checks each expansion's numbers against onnx.reference on shapes beyond the suite.

"Has a test" means a test module there names the op in a node construction: the op type as the first
argument of a call (``check_node("Op", ...``, ``make_node("Op", ...``, ``b.op("Op", ...``), as
``op_type="Op"``, or in a literal list/tuple/set/dict of op names a test is parametrized over. The
passing cases come from the conformance report (conformance_report.json, written by
tests/conformance/plugin.py); without a report that part is skipped.

Run as a script to print the ops without a test of their own, by kernel family:

    python tests/test_op_coverage.py
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWN_TEST_DIRS = (REPO / "tests" / "ops", REPO / "tests" / "models")
OWN_TEST_FILES = (REPO / "tests" / "passes" / "test_expansions.py",)  # numerics of the expanded function ops

# Ops allowed without a test of their own (each with its reason): none.
UNTESTED_ALLOWED: frozenset[str] = frozenset()


def _names_in_node_constructions(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                out.add(n.args[0].value)
            out |= {kw.value.value for kw in n.keywords
                    if kw.arg == "op_type" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)}
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            out |= {e.value for e in n.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        elif isinstance(n, ast.Dict):
            out |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return out


@lru_cache(maxsize=1)
def ops_with_own_tests() -> frozenset[str]:
    """Op names the test modules under tests/ops and tests/models (and OWN_TEST_FILES) build nodes of."""
    names: set[str] = set()
    files = [f for d in OWN_TEST_DIRS for f in sorted(d.glob("test_*.py"))] + list(OWN_TEST_FILES)
    for f in files:
        names |= _names_in_node_constructions(ast.parse(f.read_text(), str(f)))
    return frozenset(names)


def implemented_ops() -> dict[str, str]:
    """op type -> its kernel family (or "expansion") for every standard-domain op onnxc compiles."""
    from onnxc.codegen.kernels.registry import KERNELS
    from onnxc.passes.expansions import EXPANSIONS

    ops = {op: kd.family for (dom, op), kd in KERNELS.items() if dom in ("", "ai.onnx.ml")}
    ops.update({op: "expansion" for (dom, op) in EXPANSIONS if dom == "" and op not in ops})
    return ops


def conformance_ops() -> dict[str, list[str]]:
    """op type -> the ONNX node cases onnxc compiles (every case not in the conformance suite's
    expected_unsupported.txt, which that suite keeps exact) whose model uses it; ``_expanded`` cases,
    which test a function's body ops, are left out. Computed here, from the onnx package's cases."""
    sys.path.insert(0, str(REPO / "tests"))
    from conformance.cases import node_cases
    from conformance.test_conformance import expected_unsupported

    out: dict[str, list[str]] = {}
    for name, tc in sorted(node_cases().items()):
        if "_expanded" in name or name in expected_unsupported():
            continue
        for node in tc.model.graph.node:
            if node.domain in ("", "ai.onnx"):
                out.setdefault(node.op_type, []).append(name)
    return out


def test_every_implemented_op_has_a_test_of_its_own() -> None:
    missing = sorted(f"{fam}: {op}" for op, fam in implemented_ops().items()
                     if op not in ops_with_own_tests() and op not in UNTESTED_ALLOWED)
    assert not missing, f"ops without a test under tests/ops or tests/models: {missing}"


def test_every_op_of_the_conformance_cases_has_a_test_of_its_own() -> None:
    ops = conformance_ops()
    assert len(ops) > 150, f"only {len(ops)} ops found in the node cases: the case scan is broken"
    missing = sorted(f"{op} (in {cases[0]})" for op, cases in ops.items()
                     if op not in ops_with_own_tests() and op not in UNTESTED_ALLOWED)
    assert not missing, f"ops of conformance cases onnxc compiles, without a test of their own: {missing}"


def test_the_audit_sees_node_constructions() -> None:
    """The scan finds op names in the usual forms, and not in docstrings or comments."""
    src = '''
"""Tests of Foo."""
def test_a():
    check_node("Alpha", {"x": x})  # "Gamma" in a comment
    helper.make_node(op_type="Beta", inputs=[], outputs=[])

@pytest.mark.parametrize("op", ["Delta", "Epsilon"])
def test_b(op):
    """Zeta is only mentioned here."""
'''
    names = _names_in_node_constructions(ast.parse(src))
    assert {"Alpha", "Beta", "Delta", "Epsilon"} <= names
    assert not {"Gamma", "Zeta"} & names
    assert "Add" in ops_with_own_tests() and "Softmax" in ops_with_own_tests()


if __name__ == "__main__":
    by_family: dict[str, list[str]] = {}
    for op, fam in implemented_ops().items():
        if op not in ops_with_own_tests():
            by_family.setdefault(fam, []).append(op)
    for fam, ops in sorted(by_family.items()):
        print(f"{fam}: {', '.join(sorted(ops))}")
    ops = conformance_ops()
    print(f"\n{len(ops)} ops in the node cases onnxc compiles; without a test of their own: "
          f"{sorted(op for op in ops if op not in ops_with_own_tests()) or 'none'}")
