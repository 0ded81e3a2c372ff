"""Enables the conformance reporter (see plugin.py) whenever this directory's tests are collected."""

from __future__ import annotations

import pytest

from .plugin import ensure_registered


def pytest_configure(config: pytest.Config) -> None:
    ensure_registered(config)
