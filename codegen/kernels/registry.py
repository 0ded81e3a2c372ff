"""All kernel families, imported for their registrations; re-exports the lookup functions."""

from __future__ import annotations

from . import elementwise  # noqa: F401
from .base import KERNELS, lookup, unsupported_reason

__all__ = ["KERNELS", "lookup", "unsupported_reason"]
