"""The optimization pipeline: one function listing the passes in order.

``optimize(model, dump_after=...)`` runs each named step; with ``check=True`` the IR checker runs
after every step, and ``dump_after`` prints the IR after the named steps (or "all").
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from onnxc.ir import Model
from onnxc.ir.checker import check_model

from .base import PassResult
from .eliminate_common_subexpressions import eliminate_common_subexpressions
from .eliminate_dead_code import eliminate_dead_code
from .fold_batchnorm import fold_batchnorm
from .fold_constants import fold_constants
from .fold_weight_dequant import fold_weight_dequant
from .fuse_attention import fuse_attention
from .fuse_depthwise_pointwise import fuse_depthwise_pointwise
from .fuse_elementwise import fuse_elementwise
from .fuse_epilogues import fuse_epilogues
from .infer_shapes import infer_shapes
from .inline_functions import inline_functions
from .lift_captures import lift_captures
from .lower_qdq import lower_qdq
from .merge_bn_affine import merge_affine
from .name_activations import name_activations
from .remove_identities import remove_identities
from .spell_out_batchnorm import spell_out_batchnorm

Step = tuple[str, Callable[[Model], PassResult]]


def steps() -> list[Step]:
    return [
        ("inline_functions", inline_functions),
        ("lift_captures", lift_captures),
        ("eliminate_dead_code", eliminate_dead_code),
        ("lower_qdq", lower_qdq),
        ("infer_shapes", infer_shapes),
        ("fold_constants", fold_constants),
        ("fold_weight_dequant", fold_weight_dequant),
        ("merge_affine", merge_affine),
        ("fold_batchnorm", fold_batchnorm),
        ("eliminate_common_subexpressions", eliminate_common_subexpressions),
        ("remove_identities", remove_identities),
        ("fuse_attention", fuse_attention),
        ("name_activations", name_activations),
        ("fuse_epilogues", fuse_epilogues),
        ("fuse_depthwise_pointwise", fuse_depthwise_pointwise),
        ("spell_out_batchnorm", spell_out_batchnorm),
        ("fuse_elementwise", fuse_elementwise),
        ("eliminate_dead_code", eliminate_dead_code),
    ]


def optimize(model: Model, check: bool = False, dump_after: set[str] | str | None = None,
             out=sys.stderr) -> Model:
    """Run every pass in order and return the optimized model."""
    typed = False
    for name, fn in steps():
        model = fn(model).model
        typed |= name == "infer_shapes"
        if check:
            check_model(model, typed=typed)
        if dump_after and (dump_after == "all" or name in dump_after):
            print(f"--- IR after {name} ---\n{model.graph!r}", file=out)
    return model
