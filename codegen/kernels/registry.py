"""All kernel families, imported for their registrations; re-exports the lookup functions."""

from __future__ import annotations

from . import (  # noqa: F401
    attention,  # noqa: F401
    cast,
    col2im,  # noqa: F401
    control_flow,
    conv,  # noqa: F401
    conv_dwpw,  # noqa: F401
    deform_conv,  # noqa: F401
    dynamic_quant,  # noqa: F401
    einsum,  # noqa: F401
    elementwise,
    fail,  # noqa: F401
    fused_elementwise,  # noqa: F401
    gather,
    generate,
    gridsample,  # noqa: F401
    image,  # noqa: F401
    linalg,  # noqa: F401
    matmul,  # noqa: F401
    matmul_nbits,  # noqa: F401
    ml,  # noqa: F401
    ml_maps,  # noqa: F401
    movement,
    norm,  # noqa: F401
    placement,  # noqa: F401
    pool,  # noqa: F401
    qlinear,  # noqa: F401
    quant,  # noqa: F401
    random,  # noqa: F401
    recurrent,  # noqa: F401
    reduce,
    reduce_dynamic,
    resize,  # noqa: F401
    roialign,  # noqa: F401
    select,
    sequences,
    signal,  # noqa: F401
    slice_pad,
    softmax,  # noqa: F401
    strings,  # noqa: F401
    svm,  # noqa: F401
    tfidf,  # noqa: F401
    tokenizer,  # noqa: F401
    training,  # noqa: F401
    trees,  # noqa: F401
)
from .base import KERNELS, lookup, lookup_shape_fn, unsupported_reason

__all__ = ["KERNELS", "lookup", "lookup_shape_fn", "unsupported_reason"]
