"""Per-op shape/type and fold rules, grouped by op family; importing this registers them all."""

from . import (  # noqa: F401
    cast,
    contrib,  # noqa: F401
    control_flow,
    conv,  # noqa: F401
    dynamic_quant,  # noqa: F401
    einsum,  # noqa: F401
    elementwise,
    fused,  # noqa: F401
    image,  # noqa: F401
    indexing,
    matmul,  # noqa: F401
    misc_nn,  # noqa: F401
    ml,  # noqa: F401
    ml_maps,  # noqa: F401
    ml_svm,  # noqa: F401
    movement,
    norm,  # noqa: F401
    pool,  # noqa: F401
    quant,  # noqa: F401
    random,  # noqa: F401
    recurrent,  # noqa: F401
    reduce,
    resize,  # noqa: F401
    select,
    sequences,
    shape_ops,
    signal,  # noqa: F401
    strings,  # noqa: F401
    training,  # noqa: F401
)
