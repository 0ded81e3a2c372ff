"""Per-op shape/type and fold rules, grouped by op family; importing this registers them all."""

from . import elementwise  # noqa: F401
