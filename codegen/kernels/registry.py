"""All kernel families, imported for their registrations; re-exports the lookup functions."""

from __future__ import annotations

from . import (  # noqa: F401
    cast,
    control_flow,
    conv,  # noqa: F401
    elementwise,
    gather,
    generate,
    matmul,  # noqa: F401
    movement,
    norm,  # noqa: F401
    pool,  # noqa: F401
    reduce,
    reduce_dynamic,
    select,
    sequences,
    slice_pad,
    softmax,  # noqa: F401
)
from .base import KERNELS, lookup, lookup_shape_fn, unsupported_reason

__all__ = ["KERNELS", "lookup", "lookup_shape_fn", "unsupported_reason"]
