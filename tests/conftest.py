"""Test session setup: one compile cache shared by all tests and xdist workers of a run."""

from __future__ import annotations

import os
import tempfile

if "ONNXC_CACHE_DIR" not in os.environ:
    os.environ["ONNXC_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "onnxc-test-cache")

# every compile in the tests runs the IR checker after each pass
os.environ.setdefault("ONNXC_CHECK_IR", "1")

# the conformance suite's reporting (summary line + JSON report) for runs from the repo root
pytest_plugins = ["conformance.plugin"]


def pytest_collection_modifyitems(config, items) -> None:
    """Tests of modules named ``test_hostile*.py`` carry the ``hostile`` marker (the sanitizer slice,
    tests/sanitize.py, runs every hostile test)."""
    import pytest

    for item in items:
        if item.path.name.startswith("test_hostile"):
            item.add_marker(pytest.mark.hostile)
