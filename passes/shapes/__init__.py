"""Per-op shape/type and fold rules, grouped by op family; importing this registers them all."""

from . import (  # noqa: F401
    cast,
    control_flow,
    conv,  # noqa: F401
    elementwise,
    indexing,
    matmul,  # noqa: F401
    movement,
    norm,  # noqa: F401
    pool,  # noqa: F401
    reduce,
    select,
    sequences,
    shape_ops,
)
